// Gradient rules of the elementwise, linear-algebra, data-movement, reduction and loss ops (see rules.h).
// Where an input's gradient is the incoming gradient unchanged (add without broadcasting, bias_add's x, a
// one-input concat), the rule hands back that value itself instead of a copy: nothing is computed or stored
// twice, and autodiff.h notes that such a gradient keeps the name it already had.
#include <numeric>

#include <fmt/format.h>

#include "lms/autodiff/grad_context.h"
#include "lms/autodiff/rules.h"

namespace lms::autodiff {

namespace {

int normalize_axis(int64_t axis, int rank) { return static_cast<int>(axis < 0 ? axis + rank : axis); }

// sum_to(g, shape of input i), or g itself when g already has that shape (no broadcasting happened).
ValueId reduce_to_input(GradContext& c, size_t i, ValueId g) {
  if (!g.valid() || c.b.type(g).shape == c.in_type(i).shape) return g;  // invalid: the builder failed
  return c.emit(Op::sum_to, {g}, attrs({{"shape", c.in_type(i).shape}}), c.name(i));
}

// perm swapping the last two of `rank` dimensions.
IntList swap_last_two(int rank) {
  IntList perm(static_cast<size_t>(rank));
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[rank - 1], perm[rank - 2]);
  return perm;
}

}  // namespace

namespace {
// dx = `grad`(dy, y) for a unary op whose derivative is a function of its output: relu (y > 0), sigmoid
// (y(1-y)), tanh (1-y^2), sqrt (1/(2y)), reciprocal (-y^2) and exp (y: a plain `mul`, no op of its own).
Result<void> grad_from_output(GradContext& c, Op grad) {
  if (c.needs(0)) c.set_grad(0, c.emit(grad, {c.dy(), c.outputs[0]}, {}, c.name(0)));
  return {};
}
// dx = `grad`(dy, x) for a unary op whose gradient op reads its input.
Result<void> grad_from_input(GradContext& c, Op grad) {
  if (c.needs(0)) c.set_grad(0, c.emit(grad, {c.dy(), c.inputs[0]}, {}, c.name(0)));
  return {};
}
}  // namespace

Result<void> grad_relu(GradContext& c) { return grad_from_output(c, Op::relu_grad); }

// gelu_grad carries the forward's approximation only when it is not the default, as the forward does.
Result<void> grad_gelu(GradContext& c) {
  if (!c.needs(0)) return {};
  const std::string approximate = c.call().s("approximate");
  Attributes a = approximate == "none" ? Attributes{} : attrs({{"approximate", approximate}});
  c.set_grad(0, c.emit(Op::gelu_grad, {c.dy(), c.inputs[0]}, std::move(a), c.name(0)));
  return {};
}

// silu_grad reads x: the forward keeps nothing but its input (x * sigmoid(x) written out keeps sigmoid(x) too).
Result<void> grad_silu(GradContext& c) { return grad_from_input(c, Op::silu_grad); }
Result<void> grad_hardswish(GradContext& c) { return grad_from_input(c, Op::hardswish_grad); }

Result<void> grad_sigmoid(GradContext& c) { return grad_from_output(c, Op::sigmoid_grad); }
Result<void> grad_tanh(GradContext& c) { return grad_from_output(c, Op::tanh_grad); }
Result<void> grad_sqrt(GradContext& c) { return grad_from_output(c, Op::sqrt_grad); }
Result<void> grad_reciprocal(GradContext& c) { return grad_from_output(c, Op::reciprocal_grad); }
Result<void> grad_exp(GradContext& c) { return grad_from_output(c, Op::mul); }
// log_grad reads x: dy / x, divided as PyTorch does (dy * reciprocal(x) would round twice).
Result<void> grad_log(GradContext& c) { return grad_from_input(c, Op::log_grad); }
Result<void> grad_softplus(GradContext& c) { return grad_from_input(c, Op::softplus_grad); }

// clamp_grad reads x (y cannot tell a clamped element from one exactly at a bound) with the forward's bounds.
Result<void> grad_clamp(GradContext& c) {
  if (c.needs(0)) c.set_grad(0, c.emit(Op::clamp_grad, {c.dy(), c.inputs[0]}, c.attrs, c.name(0)));
  return {};
}

// dropout's gradient is dropout of dy with the same key, p and seed: the same mask, regenerated, and the same
// scale. Nothing of the forward is kept for it (the key is persistent state).
Result<void> grad_dropout(GradContext& c) {
  if (c.needs(0)) c.set_grad(0, c.emit(Op::dropout, {c.dy(), c.inputs[1]}, c.attrs, c.name(0)));
  return {};
}

Result<void> grad_add(GradContext& c) {
  for (size_t i = 0; i < 2; ++i)
    if (c.needs(i)) c.set_grad(i, reduce_to_input(c, i, c.dy()));
  return {};
}

// d(a*b)/da = dy*b, summed down to a's shape when a was broadcast (and the same for b).
Result<void> grad_mul(GradContext& c) {
  for (size_t i = 0; i < 2; ++i) {
    if (!c.needs(i)) continue;
    bool broadcast = c.in_type(i).shape != c.out_type().shape;
    ValueId full = c.emit(Op::mul, {c.dy(), c.inputs[1 - i]}, {}, broadcast ? c.name(i, "full") : c.name(i));
    c.set_grad(i, reduce_to_input(c, i, full));
  }
  return {};
}

Result<void> grad_scale(GradContext& c) {
  if (c.needs(0)) c.set_grad(0, c.emit(Op::scale, {c.dy()}, attrs({{"factor", c.call().f("factor")}}), c.name(0)));
  return {};
}

// x + bias along `axis`: x's gradient is dy; the bias's is dy summed over every other axis.
Result<void> grad_bias_add(GradContext& c) {
  if (c.needs(0)) c.set_grad(0, c.dy());
  if (c.needs(1)) {
    int rank = c.in_type(0).rank();
    int axis = normalize_axis(c.call().i("axis"), rank);
    if (rank == 1) {
      c.set_grad(1, c.dy());
    } else {
      IntList axes;
      for (int d = 0; d < rank; ++d)
        if (d != axis) axes.push_back(d);
      c.set_grad(1, c.emit(Op::reduce_sum, {c.dy()}, attrs({{"axes", axes}}), c.name(1)));
    }
  }
  return {};
}

// C = A'B' with A' = transpose_a ? A^T : A (and B' likewise); dA' = G B'^T and dB' = A'^T G, each folded into
// one matmul by choosing its transpose flags. A rank-2 b shared by a batched a gets dB summed over the batch:
// a and G are flattened to [batch*M, .] so that the sum is the matmul's own reduction, and dA' is then one
// matmul of the flattened G too. dB comes first: it is usually the last reader of A (a saved activation), so
// A's buffer is free before dA's is needed (docs/autodiff.md "Order").
Result<void> grad_matmul(GradContext& c) {
  OpCall call = c.call();
  const bool ta = call.b("transpose_a"), tb = call.b("transpose_b");
  const int rank_a = c.in_type(0).rank();
  const bool shared_b = rank_a > 2 && c.in_type(1).rank() == 2;
  const ValueId a = c.inputs[0], b = c.inputs[1], g = c.dy();
  auto matmul = [&](ValueId x, ValueId y, bool tx, bool ty, std::string name) {
    return c.emit(Op::matmul, {x, y}, attrs({{"transpose_a", tx}, {"transpose_b", ty}}), std::move(name));
  };
  auto reshape = [&](ValueId x, Shape shape, std::string name) {
    return c.emit(Op::reshape, {x}, attrs({{"shape", std::move(shape)}}), std::move(name));
  };
  const Shape& as = c.in_type(0).shape;
  int64_t rows = 1;
  for (int d = 0; d < rank_a - 2; ++d) rows *= as[d];
  const int64_t m = ta ? as[rank_a - 1] : as[rank_a - 2], k = ta ? as[rank_a - 2] : as[rank_a - 1];
  const int64_t n = c.out_type().shape.back();
  ValueId g_flat = shared_b ? reshape(g, {rows * m, n}, c.name(1, "dy_flat")) : ValueId{};
  if (c.needs(1)) {
    if (!shared_b) {
      c.set_grad(1, tb ? matmul(g, a, true, ta, c.name(1))     // dB = G^T A'
                       : matmul(a, g, !ta, false, c.name(1)));  // dB = A'^T G
    } else {
      ValueId a_rows = a;
      if (ta) a_rows = c.emit(Op::transpose, {a}, attrs({{"perm", swap_last_two(rank_a)}}), c.name(1, "a_t"));
      ValueId a_flat = reshape(a_rows, {rows * m, k}, c.name(1, "a_flat"));
      c.set_grad(1, tb ? matmul(g_flat, a_flat, true, false, c.name(1))     // [N, K]
                       : matmul(a_flat, g_flat, true, false, c.name(1)));  // [K, N]
    }
  }
  if (c.needs(0)) {
    if (!shared_b) {
      c.set_grad(0, ta ? matmul(b, g, tb, true, c.name(0))        // dA = B' G^T
                       : matmul(g, b, false, !tb, c.name(0)));  // dA = G B'^T
    } else {
      Shape a_rows_shape = as;  // dA' = G B'^T as [batch*M, K], viewed as A' (then transposed back to A)
      a_rows_shape[rank_a - 2] = m;
      a_rows_shape[rank_a - 1] = k;
      ValueId t = matmul(g_flat, b, false, !tb, c.name(0, "flat"));
      if (!ta) {
        c.set_grad(0, reshape(t, a_rows_shape, c.name(0)));
      } else {
        t = reshape(t, a_rows_shape, c.name(0, "t"));
        c.set_grad(0, c.emit(Op::transpose, {t}, attrs({{"perm", swap_last_two(rank_a)}}), c.name(0)));
      }
    }
  }
  return {};
}

Result<void> grad_reshape(GradContext& c) {
  if (c.needs(0)) c.set_grad(0, c.emit(Op::reshape, {c.dy()}, attrs({{"shape", c.in_type(0).shape}}), c.name(0)));
  return {};
}

// broadcast_to and sum_to are each other's gradient (an imported Expand reaches autodiff as broadcast_to).
Result<void> grad_broadcast_to(GradContext& c) {
  if (c.needs(0)) c.set_grad(0, reduce_to_input(c, 0, c.dy()));
  return {};
}

Result<void> grad_sum_to(GradContext& c) {
  if (!c.needs(0)) return {};
  const Shape& x = c.in_type(0).shape;
  c.set_grad(0, c.b.type(c.dy()).shape == x ? c.dy()
                                            : c.emit(Op::broadcast_to, {c.dy()}, attrs({{"shape", x}}), c.name(0)));
  return {};
}

Result<void> grad_transpose(GradContext& c) {
  if (!c.needs(0)) return {};
  IntList perm = c.call().ints("perm"), inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  c.set_grad(0, c.emit(Op::transpose, {c.dy()}, attrs({{"perm", inverse}}), c.name(0)));
  return {};
}

// Each input's gradient is its slab of dy.
Result<void> grad_concat(GradContext& c) {
  const int axis = normalize_axis(c.call().i("axis"), c.out_type().rank());
  int64_t start = 0;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const int64_t end = start + c.in_type(i).shape[axis];
    if (c.needs(i)) {
      if (c.inputs.size() == 1)
        c.set_grad(i, c.dy());
      else
        c.set_grad(i, c.emit(Op::slice, {c.dy()},
                             attrs({{"axis", int64_t{axis}}, {"start", start}, {"end", end}}), c.name(i)));
    }
    start = end;
  }
  return {};
}

Result<void> grad_slice(GradContext& c) {
  if (!c.needs(0)) return {};
  OpCall call = c.call();
  const int axis = normalize_axis(call.i("axis"), c.in_type(0).rank());
  Attributes a = attrs({{"axis", int64_t{axis}},
                        {"start", call.i("start")},
                        {"end", call.i("end")},
                        {"dim", c.in_type(0).shape[axis]}});
  c.set_grad(0, c.emit(Op::slice_grad, {c.dy()}, std::move(a), c.name(0)));
  return {};
}

// softmax_grad needs only y: masked (causal) entries have y = 0 and so get no gradient.
Result<void> grad_softmax(GradContext& c) {
  if (c.needs(0))
    c.set_grad(0, c.emit(Op::softmax_grad, {c.dy(), c.outputs[0]}, attrs({{"axis", c.call().i("axis")}}), c.name(0)));
  return {};
}

// Only the table has a gradient; ids are integers.
Result<void> grad_embedding(GradContext& c) {
  if (c.needs(0))
    c.set_grad(0, c.emit(Op::embedding_grad, {c.dy(), c.inputs[1]}, attrs({{"vocab", c.in_type(0).shape[0]}}),
                         c.name(0)));
  return {};
}

// dy, reshaped to x's rank with the reduced axes as 1 (unless keepdims already did), scaled by 1/count for
// mean (on the small tensor, before broadcasting), then broadcast back to x's shape.
Result<void> grad_reduce(GradContext& c) {
  if (!c.needs(0)) return {};
  OpCall call = c.call();
  const Shape& x = c.in_type(0).shape;
  IntList axes = call.ints("axes");
  std::vector<bool> reduced(x.size(), axes.empty());
  for (int64_t a : axes) reduced[static_cast<size_t>(normalize_axis(a, static_cast<int>(x.size())))] = true;
  Shape kept = x;
  int64_t count = 1;
  for (size_t d = 0; d < x.size(); ++d)
    if (reduced[d]) {
      count *= x[d];
      kept[d] = 1;
    }
  ValueId g = c.dy();
  if (c.op == Op::mean) {
    if (count == 0) return fail("mean of {} averages over no elements", to_string(c.in_type(0)));
    g = c.emit(Op::scale, {g}, attrs({{"factor", 1.0 / static_cast<double>(count)}}), c.name(0, "scaled"));
  }
  if (g.valid() && c.b.type(g).shape != kept) g = c.emit(Op::reshape, {g}, attrs({{"shape", kept}}), c.name(0, "kept"));
  c.set_grad(0, kept == x ? g : c.emit(Op::broadcast_to, {g}, attrs({{"shape", x}}), c.name(0)));
  return {};
}

// Labels are integers and get no gradient.
Result<void> grad_cross_entropy(GradContext& c) {
  if (c.needs(0))
    c.set_grad(0, c.emit(Op::cross_entropy_grad, {c.dy(), c.inputs[0], c.inputs[1]}, {}, c.name(0)));
  return {};
}

}  // namespace lms::autodiff
