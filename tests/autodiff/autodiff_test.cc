// Structure of gradient graphs (autodiff.h): the seed, accumulation of fan-out in consumer order, naming,
// which nodes get differentiated, the rules' choices for broadcasting and matmul transposes, zero gradients,
// and the errors. Numerical correctness of every rule is gradcheck_test.cc's job.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "lms/autodiff/autodiff.h"
#include "lms/backends/reference/interpreter.h"
#include "lms/ir/parser.h"
#include "lms/ir/printer.h"
#include "lms/ir/verifier.h"

namespace lms {
namespace {

Graph parse(std::string_view text) {
  auto g = parse_graph(text);
  EXPECT_TRUE(g.has_value()) << g.error().str();
  return g ? *g : Graph{};
}

Graph grad_graph(std::string_view text, std::vector<std::string> wrt) {
  auto g = build_gradient_graph(parse(text), wrt);
  EXPECT_TRUE(g.has_value()) << g.error().str();
  return g ? *g : Graph{};
}

const Node& producer(const Graph& g, std::string_view value) {
  auto v = g.find_value(value);
  EXPECT_TRUE(v.has_value()) << "no value %" << value << " in\n" << print_graph(g);
  static const Node kNone;
  return v ? g.node(g.value(*v).producer) : kNone;
}

std::string name_of(const Graph& g, ValueId v) { return g.value(v).name; }

int count_op(const Graph& g, Op op) {
  int n = 0;
  for (NodeId id : g.node_ids()) n += g.node(id).op == op ? 1 : 0;
  return n;
}

constexpr std::string_view kFanOut = R"(graph g {
  %x = input() : f32[4]
  %w = param() : f32[4]
  %a = mul(%x, %w) : f32[4]
  %b = relu(%w) : f32[4]
  %y = add(%a, %b) : f32[4]
  %loss = reduce_sum(%y) : f32[]
  return %loss
})";

TEST(Autodiff, SeedOutputsAndCategories) {
  Graph g = grad_graph(kFanOut, {"w"});
  ASSERT_EQ(g.outputs().size(), 2u);
  EXPECT_EQ(name_of(g, g.outputs()[0]), "loss");
  EXPECT_EQ(name_of(g, g.outputs()[1]), "w.grad");
  const Node& seed = producer(g, "loss.grad");
  EXPECT_EQ(seed.op, Op::constant);
  EXPECT_EQ(seed.attrs.get_float("value", 0), 1.0);
  EXPECT_EQ(g.value(*g.find_value("loss.grad")).type, (TensorType{DType::f32, {}}));
  Graph forward = parse(kFanOut);
  for (NodeId n : g.node_ids())
    EXPECT_EQ(g.node(n).category, n.v < forward.num_nodes() ? Category::fwd : Category::bwd) << print_node(g, n);
  EXPECT_TRUE(verify(g).has_value());
}

TEST(Autodiff, FanOutIsSummedAsItArrives) {
  Graph g = grad_graph(kFanOut, {"w"});
  // %w feeds %a (mul, node 2) and %b (relu, node 3): two contributions, summed by one add in the order the
  // backward pass makes them, relu's first.
  const Node& sum = producer(g, "w.grad");
  ASSERT_EQ(sum.op, Op::add);
  ASSERT_EQ(sum.inputs.size(), 2u);
  EXPECT_EQ(g.node(g.value(sum.inputs[0]).producer).op, Op::relu_grad);
  EXPECT_EQ(g.node(g.value(sum.inputs[1]).producer).op, Op::mul);
  // Contributions are numbered by their reader's position.
  EXPECT_EQ(name_of(g, sum.inputs[0]), "w.grad.2");
  EXPECT_EQ(name_of(g, sum.inputs[1]), "w.grad.1");
  EXPECT_EQ(count_op(g, Op::add), 2);  // the forward add and the accumulation
  // %x is an input not asked for: nothing computes its gradient.
  EXPECT_FALSE(g.find_value("x.grad").has_value());
  // Three uses give a chain of two adds, the last one named "<v>.grad".
  Graph three = grad_graph(R"(graph g {
    %w = param() : f32[3]
    %a = relu(%w) : f32[3]
    %b = scale(%w) {factor = 2.0} : f32[3]
    %c = mul(%a, %w) : f32[3]
    %d = add(%b, %c) : f32[3]
    %loss = mean(%d) : f32[]
    return %loss
  })", {"w"});
  const Node& last = producer(three, "w.grad");
  ASSERT_EQ(last.op, Op::add);
  EXPECT_EQ(name_of(three, last.inputs[0]), "w.grad.acc");
  EXPECT_EQ(producer(three, "w.grad.acc").op, Op::add);
  // Each contribution is added to the running sum before the next is made: of %w's contributions and partial
  // sums, no more than two are ever waiting for their reader.
  std::vector<ValueId> made;
  for (NodeId n : three.node_ids()) {
    for (ValueId out : three.node(n).outputs)
      if (three.value(out).name.starts_with("w.grad.")) made.push_back(out);
    int waiting = 0;
    for (ValueId v : made)
      waiting += std::any_of(three.value(v).consumers.begin(), three.value(v).consumers.end(),
                             [&](NodeId c) { return c > n; });
    EXPECT_LE(waiting, 2) << print_node(three, n);
  }
}

TEST(Autodiff, DeterministicText) {
  std::string once = print_graph(grad_graph(kFanOut, {"w", "x"}));
  EXPECT_EQ(once, print_graph(grad_graph(kFanOut, {"w", "x"})));
  auto parsed = parse_graph(once);
  ASSERT_TRUE(parsed.has_value()) << parsed.error().str();
  EXPECT_EQ(print_graph(*parsed), once);
}

// A value read only by slices that tile an axis (a fused qkv split into q, k and v) gets the concat of their
// gradients, in range order whatever the readers' order; slices that leave a gap, overlap, or cut different axes
// keep the zero-padded slice_grad per reader and the sum.
TEST(Autodiff, SlicesTilingAnAxisGetTheConcatOfTheirGradients) {
  constexpr std::string_view kTiled = R"(graph g {
    %w = param() : f32[2,5]
    %a = input() : f32[2,3]
    %b = input() : f32[2,2]
    %hi = slice(%w) {axis = -1, start = 3, end = 5} : f32[2,2]
    %lo = slice(%w) {axis = 1, start = 0, end = 3} : f32[2,3]
    %p = mul(%lo, %a) : f32[2,3]
    %q = mul(%hi, %b) : f32[2,2]
    %sp = reduce_sum(%p) : f32[]
    %sq = reduce_sum(%q) : f32[]
    %loss = add(%sp, %sq) : f32[]
    return %loss
  })";
  Graph g = grad_graph(kTiled, {"w"});
  const Node& grad = producer(g, "w.grad");
  ASSERT_EQ(grad.op, Op::concat) << print_graph(g);
  EXPECT_EQ(grad.attrs.get_int("axis", -1), 1);
  ASSERT_EQ(grad.inputs.size(), 2u);
  EXPECT_EQ(name_of(g, grad.inputs[0]), "lo.grad");
  EXPECT_EQ(name_of(g, grad.inputs[1]), "hi.grad");
  EXPECT_EQ(count_op(g, Op::slice_grad), 0);
  // d(loss)/dw is a beside b, element for element.
  std::map<std::string, HostTensor> feeds;
  HostTensor w(TensorType{DType::f32, {2, 5}}), a(TensorType{DType::f32, {2, 3}}), b(TensorType{DType::f32, {2, 2}});
  for (int64_t i = 0; i < 10; ++i) w.set(i, 0.5 * static_cast<double>(i));
  for (int64_t i = 0; i < 6; ++i) a.set(i, 1.0 + static_cast<double>(i));
  for (int64_t i = 0; i < 4; ++i) b.set(i, -1.0 - static_cast<double>(i));
  feeds.emplace("w", w);
  feeds.emplace("a", a);
  feeds.emplace("b", b);
  auto values = interpret(g, feeds);
  ASSERT_TRUE(values.has_value()) << values.error().str();
  const HostTensor& dw = (*values)[g.outputs()[1].v];
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t c = 0; c < 5; ++c)
      EXPECT_EQ(dw.get(r * 5 + c), c < 3 ? a.get(r * 3 + c) : b.get(r * 2 + c - 3)) << r << "," << c;

  // An overlap ([0, 3) and [2, 5)), a gap ([0, 3) and [4, 5)), and two axes.
  for (const char* second : {"{axis = 1, start = 2, end = 5} : f32[2,3]", "{axis = 1, start = 4, end = 5} : f32[2,1]",
                             "{axis = 0, start = 0, end = 1} : f32[1,5]"}) {
    Graph padded = grad_graph(fmt::format(R"(graph g {{
      %w = param() : f32[2,5]
      %lo = slice(%w) {{axis = 1, start = 0, end = 3}} : f32[2,3]
      %hi = slice(%w) {}
      %sp = reduce_sum(%lo) : f32[]
      %sq = reduce_sum(%hi) : f32[]
      %loss = add(%sp, %sq) : f32[]
      return %loss
    }})", second), {"w"});
    EXPECT_EQ(producer(padded, "w.grad").op, Op::add) << second;
    EXPECT_EQ(count_op(padded, Op::slice_grad), 2) << second;
  }
}

TEST(Autodiff, BroadcastingSumsBackAndPassThroughKeepsTheValue) {
  Graph g = grad_graph(R"(graph g {
    %x = input() : f32[2,3]
    %b = param() : f32[3]
    %y = add(%x, %b) : f32[2,3]
    %loss = reduce_sum(%y) : f32[]
    return %loss
  })", {"x", "b"});
  const Node& db = producer(g, "b.grad");
  EXPECT_EQ(db.op, Op::sum_to);
  EXPECT_EQ(db.attrs.get_ints("shape", {}), (IntList{3}));
  // x was not broadcast: its gradient is dy itself, the broadcast of the seed.
  ValueId dx = g.outputs()[1];
  EXPECT_EQ(g.node(g.value(dx).producer).op, Op::broadcast_to);
  EXPECT_EQ(db.inputs[0], dx);
}

// The matmul rule folds each transpose into the gradient matmul's flags.
struct MatmulCase {
  bool ta, tb;
  const char* a_type;
  const char* b_type;
  bool da_ta, da_tb;  // expected flags of the matmul computing dA
  bool db_ta, db_tb;  // and of dB
  bool da_swaps;      // dA's operands are (b, dy) instead of (dy, b)
  bool db_swaps;      // dB's operands are (dy, a) instead of (a, dy)
};

TEST(Autodiff, MatmulTransposes) {
  const MatmulCase cases[] = {
      {false, false, "f32[2,3]", "f32[3,4]", false, true, true, false, false, false},
      {false, true, "f32[2,3]", "f32[4,3]", false, false, true, false, false, true},
      {true, false, "f32[3,2]", "f32[3,4]", false, true, false, false, true, false},
      {true, true, "f32[3,2]", "f32[4,3]", true, true, true, true, true, true},
  };
  for (const MatmulCase& c : cases) {
    SCOPED_TRACE(fmt::format("transpose_a={} transpose_b={}", c.ta, c.tb));
    std::string text = fmt::format(R"(graph g {{
      %a = param() : {}
      %b = param() : {}
      %c = matmul(%a, %b) {{transpose_a = {}, transpose_b = {}}} : f32[2,4]
      %loss = reduce_sum(%c) : f32[]
      return %loss
    }})", c.a_type, c.b_type, c.ta, c.tb);
    Graph g = grad_graph(text, {"a", "b"});
    const Node& da = producer(g, "a.grad");
    const Node& db = producer(g, "b.grad");
    ASSERT_EQ(da.op, Op::matmul);
    ASSERT_EQ(db.op, Op::matmul);
    EXPECT_EQ(da.attrs.get_bool("transpose_a", false), c.da_ta);
    EXPECT_EQ(da.attrs.get_bool("transpose_b", false), c.da_tb);
    EXPECT_EQ(db.attrs.get_bool("transpose_a", false), c.db_ta);
    EXPECT_EQ(db.attrs.get_bool("transpose_b", false), c.db_tb);
    EXPECT_EQ(name_of(g, da.inputs[0]), c.da_swaps ? "b" : "c.grad");
    EXPECT_EQ(name_of(g, db.inputs[0]), c.db_swaps ? "c.grad" : "a");
  }
}

TEST(Autodiff, SharedMatrixOfABatchedMatmulIsOneMatmul) {
  Graph g = grad_graph(R"(graph g {
    %x = input() : f32[2,5,3]
    %w = param() : f32[4,3]
    %y = matmul(%x, %w) {transpose_b = true} : f32[2,5,4]
    %loss = reduce_sum(%y) : f32[]
    return %loss
  })", {"x", "w"});
  const Node& dw = producer(g, "w.grad");
  ASSERT_EQ(dw.op, Op::matmul);
  EXPECT_EQ(g.value(*g.find_value("w.grad")).type, (TensorType{DType::f32, {4, 3}}));
  // dW = dy_flat^T @ x_flat with both flattened to [batch*M, .].
  EXPECT_EQ(producer(g, name_of(g, dw.inputs[0])).op, Op::reshape);
  EXPECT_EQ(g.value(dw.inputs[0]).type, (TensorType{DType::f32, {10, 4}}));
  EXPECT_EQ(g.value(dw.inputs[1]).type, (TensorType{DType::f32, {10, 3}}));
  EXPECT_TRUE(dw.attrs.get_bool("transpose_a", false));
  // dX = dy_flat @ w, one matmul viewed back as x.
  const Node& dx = producer(g, "x.grad");
  ASSERT_EQ(dx.op, Op::reshape);
  const Node& dx_flat = producer(g, name_of(g, dx.inputs[0]));
  EXPECT_EQ(dx_flat.op, Op::matmul);
  EXPECT_EQ(dx_flat.inputs[0], dw.inputs[0]);
  EXPECT_EQ(count_op(g, Op::reduce_sum), 1);  // only the forward's: no batched dW summed afterwards
}

TEST(Autodiff, IntegerInputsAndUnusedValues) {
  constexpr std::string_view text = R"(graph g {
    %logits = input() : f32[4,10]
    %labels = input() : i64[4]
    %unused = param() : f32[3]
    %loss = cross_entropy(%logits, %labels) : f32[]
    return %loss
  })";
  Graph g = grad_graph(text, {"logits", "unused"});
  EXPECT_EQ(producer(g, "logits.grad").op, Op::cross_entropy_grad);
  const Node& zero = producer(g, "unused.grad");
  EXPECT_EQ(zero.op, Op::constant);
  EXPECT_EQ(zero.attrs.get_float("value", 1), 0.0);
  auto bad = build_gradient_graph(parse(text), std::vector<std::string>{"labels"});
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().str().find("%labels is i64[4]; only floating-point values have gradients"), std::string::npos)
      << bad.error().str();
}

TEST(Autodiff, EmptyWrtMeansEveryParameter) {
  Graph g = grad_graph(kFanOut, {});
  ASSERT_EQ(g.outputs().size(), 2u);
  EXPECT_EQ(name_of(g, g.outputs()[1]), "w.grad");
}

TEST(Autodiff, Errors) {
  auto expect_error = [](std::string_view text, std::vector<std::string> wrt, std::string_view needle) {
    auto g = build_gradient_graph(parse(text), wrt);
    ASSERT_FALSE(g.has_value()) << text;
    EXPECT_NE(g.error().str().find(needle), std::string::npos) << g.error().str();
  };
  expect_error("graph g {\n  %x = input() : f32[2]\n}", {"x"}, "exactly one output");
  expect_error("graph g {\n  %x = input() : f32[2]\n  return %x\n}", {"x"}, "scalar loss, but the output %x is f32[2]");
  expect_error(kFanOut, {"nosuch"}, "no value named %nosuch");
  // A malformed node on the path (add with one input) is refused before any rule reads its inputs.
  expect_error("graph g {\n  %x = param() : f32[2]\n  %y = add(%x) : f32[2]\n  %loss = reduce_sum(%y) : f32[]\n"
               "  return %loss\n}",
               {"x"}, "the forward graph does not verify: %y: op 'add' takes 2 inputs");
  expect_error(kFanOut, {"w", "w"}, "%w is listed twice");
  expect_error(R"(graph g {
    %x = param() : f32[2,3]
    %g = param() : f32[3]
    %b = param() : f32[3]
    %y, %m, %s = batch_norm(%x, %g, %b) : f32[2,3], f32[3], f32[3]
    %loss = reduce_sum(%m) : f32[]
    return %loss
  })", {"x"}, "saved mean or invstd outputs of 'batch_norm' are not supported");
  expect_error(R"(graph g {
    %x = param() : f32[2]
    %h = swap_out(%x) : f32[2] @host
    %d = swap_in(%h) : f32[2]
    %loss = reduce_sum(%d) : f32[]
    return %loss
  })", {"x"}, "%d: op 'swap_in' has no gradient rule");
  expect_error(R"(graph g {
    %x = param() : f32[1,2,3]
    %w = param() : f32[2,2,2]
    %y = conv_transpose1d(%x, %w) {stride = [1], output_pad = [1], dilation = [2]} : f32[1,2,6]
    %loss = reduce_sum(%y) : f32[]
    return %loss
  })", {"x"}, "needs output_pad < stride");
}

}  // namespace
}  // namespace lms
