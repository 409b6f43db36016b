// Reductions for the cpu backend (dnnl_util.h), as OWN LOOPS: mean and reduce_sum over a set of axes, sum_to
// (the gradient of broadcasting: sum down to a shape that broadcasts to x) and global_avg_pool (the mean over
// the spatial dimensions of x[N, C, *sp]). Not dnnl::reduction: on plain layouts oneDNN 2.6 runs its `ref:any`
// implementation (seen in DNNL_VERBOSE), which is slower than one pass here, and it sums in f32 in its own
// order. These loops are the reference's algorithm: one pass over x in row-major order adding each element into
// the double accumulator of its output element (a scratch buffer of the workspace), then one rounding, so they
// are bit-identical to the reference backend. Every reduction is "x's dimensions, some kept and some reduced";
// runs of adjacent dimensions of the same kind are merged first (the same bytes, the same order), so the loop
// nest is [outer kept, reduced, inner kept] at most in the common cases and the innermost loop is contiguous.
// Declined (reference kernel): non-f32 (integer sums) and empty inputs.
#include <algorithm>
#include <vector>

#include "lms/backends/cpu/dnnl_util.h"
#include "lms/ops/op.h"

namespace lms::cpu {

namespace {

// x's dimensions and which are reduced, merged into runs (size-1 dimensions join either kind).
struct Reduction {
  Dims src, dst;
};

Reduction merge_runs(const Shape& x, const std::vector<bool>& reduced) {
  Reduction r;
  int last = -1;  // kind of the current run: 1 reduced, 0 kept, -1 none yet
  for (size_t d = 0; d < x.size(); ++d) {
    if (x[d] == 1) continue;  // contributes nothing to either side
    const int kind = reduced[d] ? 1 : 0;
    if (kind == last) {
      r.src.back() *= x[d];
      if (!kind) r.dst.back() *= x[d];
    } else {
      r.src.push_back(x[d]);
      r.dst.push_back(kind ? 1 : x[d]);
      last = kind;
    }
  }
  if (r.src.empty()) r.src = r.dst = {1};
  return r;
}

// How an output element is finished from its double sum (the reference's exact expressions): a sum as is, a
// mean times 1/count, global_avg_pool divided by count.
enum class Finish { sum, times_inverse, divide };

// acc[out offset] += x[i] over x's row-major elements (merged dims `src`, output strides `ostr`, 0 where
// reduced); then y = finish(acc).
void reduce_loop(const Dims& src, const std::vector<int64_t>& ostr, const float* x, double* acc, int64_t n_out,
                 float* y, Finish finish, double count) {
  std::fill(acc, acc + n_out, 0.0);
  const size_t rank = src.size();
  const int64_t inner = src[rank - 1], step = ostr[rank - 1];
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < rank; ++d) rows *= src[d];
  std::vector<int64_t> index(rank, 0);
  int64_t base = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * inner;
    if (step == 0) {  // the innermost run is reduced into one element, in order
      double s = acc[base];
      for (int64_t i = 0; i < inner; ++i) s += static_cast<double>(xr[i]);
      acc[base] = s;
    } else {  // kept: a contiguous row of accumulators
      double* ar = acc + base;
      for (int64_t i = 0; i < inner; ++i) ar[i] += static_cast<double>(xr[i]);
    }
    next_row(index, src, ostr, base);
  }
  const double inverse = 1 / count;
  for (int64_t i = 0; i < n_out; ++i) {
    switch (finish) {
      case Finish::sum: y[i] = static_cast<float>(acc[i]); break;
      case Finish::times_inverse: y[i] = static_cast<float>(acc[i] * inverse); break;
      case Finish::divide: y[i] = static_cast<float>(acc[i] / count); break;
    }
  }
}

KernelPtr reduction(DnnlContext& ctx, const KernelCall& call, const Reduction& r, Finish finish) {
  auto k = std::make_unique<CpuKernel>(ctx);
  const int64_t n = call.inputs[0].type->num_elements(), n_out = call.outputs[0].type->num_elements();
  std::vector<int64_t> ostr = row_major_strides(r.dst);
  for (size_t d = 0; d < r.dst.size(); ++d)
    if (r.dst[d] != r.src[d]) ostr[d] = 0;
  const int acc = k->add_scratch(n_out * static_cast<int64_t>(sizeof(double)));
  const float* x = in_f32(call, 0);
  float* y = out_f32(call, 0);
  const auto count = static_cast<double>(n / n_out);
  CpuKernel* kp = k.get();
  k->add_loop([=, src = r.src]() -> Result<void> {
    reduce_loop(src, ostr, x, reinterpret_cast<double*>(kp->scratch(acc)), n_out, y, finish, count);
    return {};
  });
  return k;
}

// mean / reduce_sum: the `axes` attribute (empty: all), checked like the reference.
std::optional<std::vector<bool>> axes_of(const KernelCall& call, const Shape& x) {
  IntList axes = call.attrs->get_ints("axes", {});
  const auto rank = static_cast<int64_t>(x.size());
  std::vector<bool> reduced(x.size(), axes.empty());
  for (int64_t a : axes) {
    const int64_t r = a < 0 ? a + rank : a;
    if (r < 0 || r >= rank || reduced[static_cast<size_t>(r)]) return std::nullopt;
    reduced[static_cast<size_t>(r)] = true;
  }
  return reduced;
}

}  // namespace

Result<KernelPtr> build_reduce(DnnlContext& ctx, const KernelCall& call) {
  if (!all_f32(call) || call.inputs.size() != 1 || call.outputs.size() != 1) return KernelPtr();
  const Shape& x = in_shape(call, 0);
  const int64_t n = call.inputs[0].type->num_elements(), n_out = call.outputs[0].type->num_elements();
  if (n == 0 || n_out == 0) return KernelPtr();
  std::vector<bool> reduced;
  Finish finish = Finish::sum;
  switch (call.op) {
    case Op::mean:
    case Op::reduce_sum: {
      auto axes = axes_of(call, x);
      if (!axes) return KernelPtr();
      reduced = std::move(*axes);
      if (call.op == Op::mean) finish = Finish::times_inverse;
      break;
    }
    case Op::global_avg_pool:
      if (x.size() < 3 || out_shape(call, 0) != Shape{x[0], x[1]}) return KernelPtr();
      reduced.assign(x.size(), true);
      reduced[0] = reduced[1] = false;
      finish = Finish::divide;
      break;
    case Op::sum_to: {
      const Shape& to = out_shape(call, 0);
      if (to.size() > x.size()) return KernelPtr();
      const size_t lead = x.size() - to.size();
      reduced.assign(x.size(), true);
      for (size_t d = lead; d < x.size(); ++d) {
        if (to[d - lead] == x[d]) reduced[d] = false;
        else if (to[d - lead] != 1) return KernelPtr();  // does not broadcast: the reference reports it
      }
      break;
    }
    default: return KernelPtr();
  }
  // The output holds exactly the kept elements (whatever keepdims chose for the shape).
  int64_t kept = 1;
  for (size_t d = 0; d < x.size(); ++d)
    if (!reduced[d]) kept *= x[d];
  if (kept != n_out) return KernelPtr();
  return reduction(ctx, call, merge_runs(x, reduced), finish);
}

}  // namespace lms::cpu
