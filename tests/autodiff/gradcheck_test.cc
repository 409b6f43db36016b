// Finite-difference checks of every gradient rule. Each case is one op with input shapes and attributes,
// turned into a tiny f64 graph  inputs -> op -> mul(., r) -> reduce_sum -> loss  with a fixed random r (so
// every output element has a different weight). build_gradient_graph gives the analytic gradient of every
// floating-point input; the reference interpreter computes it, and central differences of the forward graph
// (step kEps in each element) must agree within the case's tolerance. Several shapes per op cover strides,
// padding, dilation, groups, broadcasting, transposes, keepdims and odd sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lms/autodiff/autodiff.h"
#include "lms/backends/reference/interpreter.h"
#include "lms/ir/builder.h"
#include "lms/ir/printer.h"
#include "lms/support/random.h"

namespace lms {
namespace {

constexpr double kEps = 1e-6;       // central-difference step
constexpr double kRelTol = 1e-6;    // default tolerance, relative to the larger magnitude...
constexpr double kAbsTol = 1e-8;    // ...plus this, for gradients near zero (the differences' rounding is ~1e-10)

// One input of the op under test.
struct In {
  Shape shape;
  enum Kind { Float, Ids, Positive } kind = Float;  // Ids: integers in [0, bound); Positive: floats in [0.5, 1.5)
  int64_t bound = 0;
  int same_as = -1;  // >= 0: the op reads that earlier input again (fan-out)
};
In f(Shape s) { return In{std::move(s)}; }
In ids(Shape s, int64_t bound) { return In{std::move(s), In::Ids, bound}; }
In pos(Shape s) { return In{std::move(s), In::Positive}; }
In same(int index) { return In{{}, In::Float, 0, index}; }

struct Case {
  std::string label;
  Op op;
  std::vector<In> inputs;
  Attributes attrs = {};
  double rel_tol = kRelTol;
};

// gtest prints a failing case by its label.
void PrintTo(const Case& c, std::ostream* os) { *os << c.label; }

Attributes A(std::initializer_list<std::pair<std::string, Attribute>> list) { return attrs(list); }
Attribute L(IntList v) { return Attribute{std::move(v)}; }
Attribute I(int64_t v) { return Attribute{v}; }
Attribute B(bool v) { return Attribute{v}; }

Attributes conv(IntList stride, IntList pad, IntList dilation, int64_t groups) {
  return A({{"stride", L(stride)}, {"pad", L(pad)}, {"dilation", L(dilation)}, {"groups", I(groups)}});
}
Attributes convt(IntList stride, IntList pad, IntList output_pad, IntList dilation, int64_t groups) {
  Attributes a = conv(stride, pad, dilation, groups);
  a.set("output_pad", L(output_pad));
  return a;
}

std::vector<Case> cases() {
  return {
      {"conv1d stride pad", Op::conv1d, {f({2, 3, 7}), f({4, 3, 3})}, conv({2}, {1}, {1}, 1)},
      {"conv1d dilation groups", Op::conv1d, {f({1, 4, 9}), f({6, 2, 2})}, conv({1}, {2}, {3}, 2)},
      {"conv2d same", Op::conv2d, {f({2, 3, 6, 5}), f({4, 3, 3, 3})}, conv({1, 1}, {1, 1}, {1, 1}, 1)},
      {"conv2d mixed", Op::conv2d, {f({1, 4, 7, 6}), f({4, 2, 3, 2})}, conv({2, 3}, {1, 0}, {1, 2}, 2)},
      {"conv2d depthwise", Op::conv2d, {f({1, 3, 5, 5}), f({3, 1, 3, 3})}, conv({2, 2}, {1, 1}, {1, 1}, 3)},
      {"conv2d defaults", Op::conv2d, {f({1, 2, 4, 3}), f({3, 2, 1, 2})}},
      {"conv3d mixed", Op::conv3d, {f({1, 2, 4, 5, 4}), f({3, 2, 2, 3, 2})}, conv({1, 2, 1}, {1, 1, 0}, {1, 1, 2}, 1)},
      {"conv3d groups", Op::conv3d, {f({1, 4, 3, 3, 3}), f({2, 2, 2, 2, 2})}, conv({1, 1, 1}, {0, 0, 0}, {1, 1, 1}, 2)},
      {"conv_transpose1d output_pad", Op::conv_transpose1d, {f({2, 3, 4}), f({3, 2, 3})},
       convt({2}, {1}, {1}, {1}, 1)},
      {"conv_transpose2d groups dilation", Op::conv_transpose2d, {f({1, 4, 3, 3}), f({4, 3, 2, 3})},
       convt({2, 1}, {0, 1}, {0, 0}, {1, 2}, 2)},
      {"conv_transpose3d stride", Op::conv_transpose3d, {f({1, 2, 2, 3, 2}), f({2, 3, 2, 2, 2})},
       convt({2, 2, 2}, {0, 0, 0}, {0, 1, 0}, {1, 1, 1}, 1)},
      {"max_pool1d", Op::max_pool1d, {f({2, 3, 7})}, A({{"kernel", L({3})}, {"stride", L({2})}, {"pad", L({1})}})},
      {"max_pool2d padded", Op::max_pool2d, {f({1, 2, 6, 5})},
       A({{"kernel", L({3, 2})}, {"stride", L({2, 1})}, {"pad", L({1, 1})}})},
      {"max_pool2d defaults", Op::max_pool2d, {f({1, 1, 4, 5})}, A({{"kernel", L({2, 2})}})},
      {"max_pool3d", Op::max_pool3d, {f({1, 2, 4, 4, 3})},
       A({{"kernel", L({2, 2, 2})}, {"stride", L({1, 2, 1})}, {"pad", L({1, 0, 1})}})},
      {"avg_pool1d include pad", Op::avg_pool1d, {f({1, 2, 6})},
       A({{"kernel", L({3})}, {"stride", L({2})}, {"pad", L({1})}})},
      {"avg_pool2d exclude pad", Op::avg_pool2d, {f({2, 2, 5, 5})},
       A({{"kernel", L({3, 3})}, {"stride", L({2, 2})}, {"pad", L({1, 1})}, {"count_include_pad", B(false)}})},
      {"avg_pool3d", Op::avg_pool3d, {f({1, 1, 4, 4, 4})}, A({{"kernel", L({2, 2, 2})}})},
      {"max_pool2d ceil", Op::max_pool2d, {f({1, 2, 6, 5})},
       A({{"kernel", L({3, 3})}, {"stride", L({2, 2})}, {"ceil_mode", B(true)}})},
      {"avg_pool2d ceil include pad", Op::avg_pool2d, {f({1, 2, 6, 5})},
       A({{"kernel", L({3, 3})}, {"stride", L({2, 2})}, {"pad", L({1, 1})}, {"ceil_mode", B(true)}})},
      {"avg_pool1d ceil exclude pad", Op::avg_pool1d, {f({2, 1, 6})},
       A({{"kernel", L({3})}, {"stride", L({2})}, {"pad", L({1})}, {"ceil_mode", B(true)},
          {"count_include_pad", B(false)}})},
      {"global_avg_pool 1d", Op::global_avg_pool, {f({2, 3, 4})}},
      {"global_avg_pool 2d", Op::global_avg_pool, {f({2, 3, 4, 5})}},
      {"global_avg_pool 3d", Op::global_avg_pool, {f({1, 2, 2, 3, 2})}},
      {"batch_norm rank 2", Op::batch_norm, {f({4, 3}), f({3}), f({3})}},
      {"batch_norm 2d", Op::batch_norm, {f({2, 3, 4, 5}), f({3}), f({3})}},
      {"batch_norm 3d", Op::batch_norm, {f({2, 2, 3, 2, 2}), f({2}), f({2})}, A({{"eps", Attribute{1e-3}}})},
      {"layer_norm", Op::layer_norm, {f({5, 6}), f({6}), f({6})}},
      {"layer_norm rank 3", Op::layer_norm, {f({2, 3, 8}), f({8}), f({8})}},
      {"relu", Op::relu, {f({3, 7})}},
      {"gelu", Op::gelu, {f({3, 7})}},
      {"gelu tanh", Op::gelu, {f({3, 7})}, A({{"approximate", Attribute{std::string("tanh")}}})},
      {"silu", Op::silu, {f({3, 7})}},
      {"hardswish", Op::hardswish, {f({3, 7})}},
      {"sigmoid", Op::sigmoid, {f({3, 7})}},
      {"tanh", Op::tanh, {f({3, 7})}},
      {"sqrt", Op::sqrt, {pos({3, 7})}},
      {"reciprocal", Op::reciprocal, {pos({3, 7})}},
      {"exp", Op::exp, {f({3, 7})}},
      {"log", Op::log, {pos({3, 7})}},
      {"softplus", Op::softplus, {f({3, 7})}},
      {"clamp", Op::clamp, {f({3, 7})}, A({{"min", Attribute{-0.5}}, {"max", Attribute{0.3}}})},
      {"dropout", Op::dropout, {f({4, 9}), ids({}, 1000000)}, A({{"p", Attribute{0.4}}, {"seed", I(3)}})},
      {"add same shape", Op::add, {f({4}), f({4})}},
      {"add broadcast", Op::add, {f({2, 3}), f({3})}},
      {"add broadcast both", Op::add, {f({2, 1, 4}), f({3, 1})}},
      {"mul same shape", Op::mul, {f({2, 3}), f({2, 3})}},
      {"mul broadcast both", Op::mul, {f({3, 1}), f({1, 4})}},
      {"mul by scalar", Op::mul, {f({}), f({2, 3})}},
      {"mul fan-out", Op::mul, {f({3, 4}), same(0)}},
      {"scale", Op::scale, {f({3, 4})}, A({{"factor", Attribute{-1.5}}})},
      {"bias_add channels", Op::bias_add, {f({2, 3, 4}), f({3})}},
      {"bias_add last", Op::bias_add, {f({2, 5}), f({5})}, A({{"axis", I(-1)}})},
      {"bias_add rank 1", Op::bias_add, {f({4}), f({4})}, A({{"axis", I(0)}})},
      {"matmul", Op::matmul, {f({3, 4}), f({4, 5})}},
      {"matmul ta", Op::matmul, {f({4, 3}), f({4, 5})}, A({{"transpose_a", B(true)}})},
      {"matmul tb", Op::matmul, {f({3, 4}), f({5, 4})}, A({{"transpose_b", B(true)}})},
      {"matmul ta tb", Op::matmul, {f({4, 3}), f({5, 4})}, A({{"transpose_a", B(true)}, {"transpose_b", B(true)}})},
      {"matmul batched", Op::matmul, {f({2, 3, 4}), f({2, 4, 5})}},
      {"matmul batched ta tb", Op::matmul, {f({2, 4, 3}), f({2, 5, 4})},
       A({{"transpose_a", B(true)}, {"transpose_b", B(true)}})},
      {"matmul rank 4", Op::matmul, {f({2, 2, 3, 4}), f({2, 2, 3, 4})}, A({{"transpose_b", B(true)}})},
      {"matmul shared b", Op::matmul, {f({2, 3, 4}), f({4, 5})}},
      {"matmul shared b tb", Op::matmul, {f({2, 3, 4}), f({5, 4})}, A({{"transpose_b", B(true)}})},
      {"matmul shared b ta", Op::matmul, {f({2, 4, 3}), f({4, 5})}, A({{"transpose_a", B(true)}})},
      {"matmul shared b ta tb rank 4", Op::matmul, {f({2, 2, 4, 3}), f({5, 4})},
       A({{"transpose_a", B(true)}, {"transpose_b", B(true)}})},
      {"reshape", Op::reshape, {f({2, 3, 4})}, A({{"shape", L({6, -1})}})},
      {"transpose", Op::transpose, {f({2, 3, 4})}, A({{"perm", L({2, 0, 1})}})},
      {"concat two", Op::concat, {f({2, 3}), f({2, 4})}, A({{"axis", I(1)}})},
      {"concat three", Op::concat, {f({1, 3}), f({2, 3}), f({3, 3})}, A({{"axis", I(0)}})},
      {"concat one", Op::concat, {f({2, 3})}, A({{"axis", I(-1)}})},
      {"concat fan-out", Op::concat, {f({2, 2}), same(0)}, A({{"axis", I(-1)}})},
      {"slice", Op::slice, {f({4, 6})}, A({{"axis", I(1)}, {"start", I(1)}, {"end", I(4)}})},
      {"slice negative axis", Op::slice, {f({3, 2, 5})}, A({{"axis", I(-3)}, {"start", I(2)}, {"end", I(3)}})},
      {"softmax last", Op::softmax, {f({3, 5})}},
      {"softmax axis 0", Op::softmax, {f({4, 3})}, A({{"axis", I(0)}})},
      {"softmax causal", Op::softmax, {f({2, 3, 4})}, A({{"causal", B(true)}})},
      {"embedding", Op::embedding, {f({7, 4}), ids({2, 3}, 7)}},
      {"mean all", Op::mean, {f({3, 4})}},
      {"mean axis", Op::mean, {f({3, 4, 2})}, A({{"axes", L({1})}})},
      {"mean keepdims", Op::mean, {f({3, 4, 2})}, A({{"axes", L({0, 2})}, {"keepdims", B(true)}})},
      {"mean last keepdims", Op::mean, {f({2, 5})}, A({{"axes", L({-1})}, {"keepdims", B(true)}})},
      {"reduce_sum all keepdims", Op::reduce_sum, {f({2, 3})}, A({{"keepdims", B(true)}})},
      {"reduce_sum axes", Op::reduce_sum, {f({2, 3, 4})}, A({{"axes", L({1, 2})}})},
      {"broadcast_to", Op::broadcast_to, {f({3, 1, 2})}, A({{"shape", L({2, 3, 4, 2})}})},
      {"broadcast_to same", Op::broadcast_to, {f({2, 3})}, A({{"shape", L({2, 3})}})},
      {"sum_to", Op::sum_to, {f({2, 3, 4, 2})}, A({{"shape", L({3, 1, 2})}})},
      {"cross_entropy", Op::cross_entropy, {f({4, 5}), ids({4}, 5)}},
      {"cross_entropy 1d spatial", Op::cross_entropy, {f({2, 3, 4}), ids({2, 4}, 3)}},
      {"cross_entropy 2d spatial", Op::cross_entropy, {f({2, 3, 2, 2}), ids({2, 2, 2}, 3)}},
  };
}

// A uniform value in [-1, 1) from a key and an index (portable: see support/random.h).
double uniform(uint64_t key, int64_t i) {
  constexpr double kTwoPowMinus53 = 1.0 / 9007199254740992.0;
  double u = static_cast<double>(mix64(key + static_cast<uint64_t>(i + 1) * kSplitMixGamma) >> 11) * kTwoPowMinus53;
  return 2 * u - 1;
}

HostTensor random_tensor(TensorType t, uint64_t key, int64_t int_bound) {
  HostTensor h(std::move(t));
  for (int64_t i = 0; i < h.type.num_elements(); ++i) {
    double u = uniform(key, i);
    h.set(i, int_bound > 0 ? std::floor((u + 1) / 2 * static_cast<double>(int_bound)) : u);
  }
  return h;
}

struct Built {
  Graph forward;                         // inputs -> op -> mul(., r) -> reduce_sum: [loss]
  std::vector<std::string> float_inputs;  // the inputs to differentiate
  std::map<std::string, HostTensor> feeds;
};

Result<Built> build(const Case& c) {
  Built out;
  Builder b(out.forward);
  const uint64_t key = fnv1a64(c.label);
  std::vector<ValueId> ins;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const In& in = c.inputs[i];
    if (in.same_as >= 0) {
      ins.push_back(ins[static_cast<size_t>(in.same_as)]);
      continue;
    }
    std::string name = fmt::format("in{}", i);
    TensorType t{in.kind == In::Ids ? DType::i64 : DType::f64, in.shape};
    ins.push_back(in.kind == In::Ids ? b.input(t, name) : b.param(t, name));
    HostTensor feed = random_tensor(t, derive_key(key, i), in.kind == In::Ids ? in.bound : 0);
    if (in.kind == In::Positive)
      for (int64_t k = 0; k < feed.type.num_elements(); ++k) feed.set(k, 1 + feed.get(k) / 2);
    out.feeds.emplace(name, std::move(feed));
    if (in.kind != In::Ids) out.float_inputs.push_back(name);
  }
  std::vector<ValueId> ys = b.add(c.op, ins, c.attrs, "y");
  if (!b.ok()) return std::unexpected(*b.error());
  const TensorType y_type = b.type(ys[0]);
  ValueId r = b.param(y_type, "r");
  out.feeds.emplace("r", random_tensor(y_type, derive_key(key, c.inputs.size()), 0));
  ValueId loss = b.op(Op::reduce_sum, {b.op(Op::mul, {ys[0], r}, {}, "weighted")}, {}, "loss");
  if (!b.ok()) return std::unexpected(*b.error());
  out.forward.set_outputs({loss});
  return out;
}

Result<double> loss_at(const Graph& forward, const std::map<std::string, HostTensor>& feeds) {
  auto values = LMS_TRY(interpret(forward, feeds));
  return values[forward.outputs().front().v].get(0);
}

class GradCheck : public ::testing::TestWithParam<Case> {};

TEST_P(GradCheck, MatchesCentralDifferences) {
  const Case& c = GetParam();
  auto built = build(c);
  ASSERT_TRUE(built.has_value()) << built.error().str();
  auto grad_graph = build_gradient_graph(built->forward, built->float_inputs);
  ASSERT_TRUE(grad_graph.has_value()) << grad_graph.error().str();
  auto values = interpret(*grad_graph, built->feeds);
  ASSERT_TRUE(values.has_value()) << values.error().str() << "\n" << print_graph(*grad_graph);
  const std::vector<ValueId>& outs = grad_graph->outputs();
  ASSERT_EQ(outs.size(), built->float_inputs.size() + 1);
  for (size_t k = 0; k < built->float_inputs.size(); ++k) {
    const std::string& name = built->float_inputs[k];
    const HostTensor& analytic = (*values)[outs[k + 1].v];
    ASSERT_EQ(analytic.type, built->feeds.at(name).type) << name;
    int failures = 0;
    for (int64_t i = 0; i < analytic.type.num_elements(); ++i) {
      std::map<std::string, HostTensor> feeds = built->feeds;
      const double x = feeds.at(name).get(i);
      feeds.at(name).set(i, x + kEps);
      auto plus = loss_at(built->forward, feeds);
      feeds.at(name).set(i, x - kEps);
      auto minus = loss_at(built->forward, feeds);
      ASSERT_TRUE(plus.has_value() && minus.has_value()) << (plus ? minus.error().str() : plus.error().str());
      const double numeric = (*plus - *minus) / (2 * kEps);
      const double a = analytic.get(i);
      const double tol = kAbsTol + c.rel_tol * std::max(std::abs(a), std::abs(numeric));
      if (std::abs(a - numeric) > tol && ++failures <= 3)
        ADD_FAILURE() << c.label << ": d(loss)/d(" << name << ")[" << i << "] is " << a << " by autodiff, "
                      << numeric << " by central differences (difference " << std::abs(a - numeric) << ", tolerance "
                      << tol << ")";
    }
    EXPECT_EQ(failures, 0) << c.label << ": " << failures << " mismatched elements of d(loss)/d(" << name << ")\n"
                           << print_graph(*grad_graph);
  }
}

// Every differentiable op has at least one case (so a new op with a gradient rule needs one here).
TEST(GradCheckCoverage, EveryRuleHasACase) {
  std::vector<bool> covered(kNumOps, false);
  for (const Case& c : cases()) covered[static_cast<size_t>(c.op)] = true;
  for (const OpDef& d : all_op_defs())
    EXPECT_TRUE(d.grad == nullptr || covered[static_cast<size_t>(d.op)]) << "no gradient check for " << d.name;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string n = info.param.label;
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Ops, GradCheck, ::testing::ValuesIn(cases()), case_name);

}  // namespace
}  // namespace lms
