// The reference interpreter: feeds and their errors, state initialization, in-place updates leaving their
// input values intact, ordering (unscheduled graphs in any storage order), kernel errors named by node, and
// determinism. Two hand-built training steps (an MLP on 28x28 inputs and a small conv net with batch norm and
// pooling) run end to end: the loss must fall over a few SGD steps, reruns must be bit-identical, and the step
// time is printed to show the loops are practical.
#include <chrono>
#include <cmath>

#include "lms/backends/reference/interpreter.h"
#include "lms/ir/builder.h"
#include "reference_test_util.h"

namespace lms {
namespace {
using namespace ref_test;

TensorType t32(Shape s) { return {DType::f32, std::move(s)}; }

// %x[2,3] @ %w[3,2] -> relu -> reduce_sum.
Graph small_graph() {
  Graph g;
  Builder b(g);
  ValueId x = b.input(t32({2, 3}), "x");
  ValueId w = b.param(t32({3, 2}), "w");
  ValueId y = b.op(Op::matmul, {x, w}, {}, "y");
  ValueId r = b.op(Op::relu, {y}, {}, "r");
  b.op(Op::reduce_sum, {r}, {}, "s");
  EXPECT_TRUE(b.ok()) << b.error()->str();
  return g;
}

std::map<std::string, HostTensor> small_feeds() {
  // x = [[1,2,3],[4,5,6]], w = [[1,-1],[0,1],[1,-2]]: y = [[1+3, -1+2-6], [4+6, -4+5-12]] = [[4,-5],[10,-11]];
  // relu keeps 4 and 10; the sum is 14.
  return {{"x", f32({2, 3}, {1, 2, 3, 4, 5, 6})}, {"w", f32({3, 2}, {1, -1, 0, 1, 1, -2})}};
}

const HostTensor& value(const Graph& g, const std::vector<HostTensor>& vs, std::string_view name) {
  return vs[g.find_value(name)->v];
}

TEST(ReferenceInterpreter, RunsASmallGraph) {
  Graph g = small_graph();
  auto vs = interpret(g, small_feeds());
  ASSERT_TRUE(vs) << vs.error().str();
  ASSERT_EQ(vs->size(), g.num_values());
  EXPECT_TRUE(near(value(g, *vs, "y"), {4, -5, 10, -11}, 0));
  EXPECT_TRUE(near(value(g, *vs, "r"), {4, 0, 10, 0}, 0));
  EXPECT_TRUE(near(value(g, *vs, "s"), {14}, 0));
  EXPECT_TRUE(near(value(g, *vs, "x"), {1, 2, 3, 4, 5, 6}, 0));  // fed values are returned too
}

TEST(ReferenceInterpreter, FeedErrors) {
  Graph g = small_graph();
  auto feeds = small_feeds();
  feeds.erase("w");
  auto missing = interpret(g, feeds);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().str(), "%w: missing feed for param %w (f32[3,2])");

  feeds = small_feeds();
  feeds["x"] = f32({3, 2});
  auto wrong_type = interpret(g, feeds);
  ASSERT_FALSE(wrong_type);
  EXPECT_EQ(wrong_type.error().str(), "feed 'x' is f32[3,2] but the value is f32[2,3]");

  feeds = small_feeds();
  feeds["z"] = f32({1});
  auto unknown = interpret(g, feeds);
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().what.find("feed 'z' names no value"), std::string::npos) << unknown.error().str();

  feeds = small_feeds();
  feeds["y"] = f32({2, 2});
  auto computed = interpret(g, feeds);
  ASSERT_FALSE(computed);
  EXPECT_NE(computed.error().what.find("computed by matmul"), std::string::npos) << computed.error().str();
}

TEST(ReferenceInterpreter, StateInitAndConstants) {
  Graph g;
  Builder b(g);
  ValueId ones = b.state(t32({2}), "ones", "ones");
  ValueId zeros = b.state(t32({2}), "zeros");
  ValueId c = b.add(Op::constant, {}, A({{"value", F(2.5)}}), "c", {t32({2})}).front();
  b.op(Op::add, {ones, c}, {}, "a");
  b.op(Op::add, {zeros, c}, {}, "z");
  ASSERT_TRUE(b.ok()) << b.error()->str();
  auto vs = interpret(g, {});
  ASSERT_TRUE(vs) << vs.error().str();
  EXPECT_TRUE(near(value(g, *vs, "a"), {3.5, 3.5}, 0));
  EXPECT_TRUE(near(value(g, *vs, "z"), {2.5, 2.5}, 0));
  // A fed state overrides its init.
  auto fed = interpret(g, {{"ones", f32({2}, {10, 20})}});
  ASSERT_TRUE(fed) << fed.error().str();
  EXPECT_TRUE(near(value(g, *fed, "a"), {12.5, 22.5}, 0));
}

TEST(ReferenceInterpreter, InPlaceUpdatesKeepTheirInputs) {
  Graph g;
  Builder b(g);
  ValueId w = b.param(t32({2}), "w");
  ValueId v = b.state(t32({2}), "v");
  ValueId grad = b.input(t32({2}), "grad");
  b.add(Op::momentum_update, {w, v, grad}, A({{"lr", F(0.5)}, {"momentum", F(0.5)}}), "step");
  ASSERT_TRUE(b.ok()) << b.error()->str();
  auto vs = interpret(g, {{"w", f32({2}, {1, 2})}, {"grad", f32({2}, {1, -1})}});
  ASSERT_TRUE(vs) << vs.error().str();
  // v = 0.5*0 + g = [1, -1]; w = [1, 2] - 0.5*v = [0.5, 2.5]. The inputs' values are unchanged.
  EXPECT_TRUE(near(value(g, *vs, "step"), {0.5, 2.5}, 0));
  EXPECT_TRUE(near(value(g, *vs, "step.v_new"), {1, -1}, 0));
  EXPECT_TRUE(near(value(g, *vs, "w"), {1, 2}, 0));
  EXPECT_TRUE(near(value(g, *vs, "v"), {0, 0}, 0));
}

TEST(ReferenceInterpreter, UnscheduledGraphsRunInTopologicalOrder) {
  Graph g = small_graph();
  // Store the nodes in reverse: consumers before producers. Unscheduled, the interpreter must still order them.
  std::vector<NodeId> reversed = g.node_ids();
  std::reverse(reversed.begin(), reversed.end());
  g.reorder(reversed);
  // A control edge (s after x's node) is respected as well; it changes nothing here but must not break the order.
  g.add_control_input(g.value(*g.find_value("s")).producer, g.value(*g.find_value("x")).producer);
  auto vs = interpret(g, small_feeds());
  ASSERT_TRUE(vs) << vs.error().str();
  EXPECT_TRUE(near(value(g, *vs, "s"), {14}, 0));
  // Marked scheduled, the same storage order reads values before they are defined: the verifier refuses it.
  g.set_scheduled(true);
  auto bad = interpret(g, small_feeds());
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().what.find("before it is defined"), std::string::npos) << bad.error().str();
}

TEST(ReferenceInterpreter, KernelErrorsNameTheNode) {
  Graph g;
  Builder b(g);
  ValueId logits = b.input(t32({2, 3}), "logits");
  ValueId labels = b.input(TensorType{DType::i64, {2}}, "labels");
  b.op(Op::cross_entropy, {logits, labels}, {}, "loss");
  ASSERT_TRUE(b.ok());
  auto r = interpret(g, {{"logits", f32({2, 3})}, {"labels", i64({2}, {1, 3})}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().where, "%loss");
  EXPECT_NE(r.error().what.find("label 3"), std::string::npos) << r.error().str();
}

// A hand-built training step: forward, backward with the gradient ops, SGD updates. `step_names` maps each
// param to its updated value's name.
struct TrainingGraph {
  Graph g;
  std::map<std::string, std::string> updated;  // param name -> name of its sgd_update output
};

void add_sgd(Builder& b, TrainingGraph& t, ValueId param, ValueId grad, double lr) {
  std::string name = b.graph().value(param).name;
  b.op(Op::sgd_update, {param, grad}, A({{"lr", F(lr)}}), name + ".new");
  t.updated[name] = name + ".new";
}

// x[N, 784] -> linear 512 -> relu -> linear 10 -> cross_entropy, and its backward pass.
TrainingGraph mlp_step(int64_t batch, int64_t hidden, double lr) {
  TrainingGraph t;
  Builder b(t.g);
  ValueId x = b.input(t32({batch, 784}), "x");
  ValueId labels = b.input(TensorType{DType::i64, {batch}}, "labels");
  ValueId w1 = b.param(t32({784, hidden}), "w1"), b1 = b.param(t32({hidden}), "b1");
  ValueId w2 = b.param(t32({hidden, 10}), "w2"), b2 = b.param(t32({10}), "b2");
  ValueId a1 = b.op(Op::bias_add, {b.op(Op::matmul, {x, w1}), b1}, {}, "a1");
  ValueId h1 = b.op(Op::relu, {a1}, {}, "h1");
  ValueId logits = b.op(Op::bias_add, {b.op(Op::matmul, {h1, w2}), b2}, {}, "logits");
  ValueId loss = b.op(Op::cross_entropy, {logits, labels}, {}, "loss");
  b.set_category(Category::bwd);
  ValueId dloss = b.add(Op::constant, {}, A({{"value", F(1)}}), "dloss", {b.type(loss)}).front();
  ValueId dlogits = b.op(Op::cross_entropy_grad, {dloss, logits, labels}, {}, "dlogits");
  ValueId dw2 = b.op(Op::matmul, {h1, dlogits}, A({{"transpose_a", B(true)}}), "dw2");
  ValueId db2 = b.op(Op::reduce_sum, {dlogits}, A({{"axes", L({0})}}), "db2");
  ValueId dh1 = b.op(Op::matmul, {dlogits, w2}, A({{"transpose_b", B(true)}}), "dh1");
  ValueId da1 = b.op(Op::relu_grad, {dh1, h1}, {}, "da1");
  ValueId dw1 = b.op(Op::matmul, {x, da1}, A({{"transpose_a", B(true)}}), "dw1");
  ValueId db1 = b.op(Op::reduce_sum, {da1}, A({{"axes", L({0})}}), "db1");
  b.set_category(Category::upd);
  for (auto [p, d] : {std::pair{w1, dw1}, {b1, db1}, {w2, dw2}, {b2, db2}}) add_sgd(b, t, p, d, lr);
  EXPECT_TRUE(b.ok()) << b.error()->str();
  return t;
}

// Runs `steps` training steps, feeding each step's updated params to the next; returns the losses.
std::vector<double> train(const TrainingGraph& t, std::map<std::string, HostTensor> feeds, int steps,
                          double* seconds_per_step = nullptr) {
  std::vector<double> losses;
  auto start = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) {
    auto vs = interpret(t.g, feeds);
    if (!vs) {
      ADD_FAILURE() << vs.error().str();
      return losses;
    }
    losses.push_back(value(t.g, *vs, "loss").get(0));
    for (const auto& [param, updated] : t.updated) feeds[param] = value(t.g, *vs, updated);
  }
  std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  if (seconds_per_step) *seconds_per_step = took.count() / steps;
  return losses;
}

// He-style uniform initialization with a fixed seed.
HostTensor init(Shape s, int64_t fan_in, uint64_t seed) {
  double bound = std::sqrt(6.0 / static_cast<double>(fan_in));
  return random(DType::f32, std::move(s), seed, -bound, bound);
}

HostTensor labels_for(int64_t n, uint64_t seed) {
  HostTensor u = random(DType::f64, {n}, seed, 0, 10);
  HostTensor l = i64({n});
  for (int64_t i = 0; i < n; ++i) l.set(i, std::floor(u.get(i)));
  return l;
}

TEST(ReferenceInterpreter, MlpTrainingStepLearnsAndIsPractical) {
  const int64_t batch = 64, hidden = 512;
  TrainingGraph t = mlp_step(batch, hidden, 0.05);
  std::map<std::string, HostTensor> feeds = {
      {"x", random(DType::f32, {batch, 784}, 1, 0, 1)}, {"labels", labels_for(batch, 2)},
      {"w1", init({784, hidden}, 784, 3)},              {"b1", f32({hidden})},
      {"w2", init({hidden, 10}, hidden, 4)},             {"b2", f32({10})}};
  double seconds = 0;
  std::vector<double> losses = train(t, feeds, 5, &seconds);
  ASSERT_EQ(losses.size(), 5u);
  // Steps on one batch must drive its loss down.
  EXPECT_LT(losses.back(), losses.front());
  std::printf("[ reference ] MLP 784-%ld-10, batch %ld: %.1f ms per forward+backward+update step; losses %s\n",
              static_cast<long>(hidden), static_cast<long>(batch), seconds * 1e3,
              fmt::format("{:.4f}", fmt::join(losses, " ")).c_str());
  // Rerunning gives bit-identical values.
  EXPECT_EQ(train(t, feeds, 5), losses);
}

// conv(1->16, 3x3, pad 1) -> batch_norm -> relu -> max_pool 2 -> conv(16->32, 3x3, stride 2, pad 1) -> relu ->
// global_avg_pool -> matmul -> cross_entropy on 28x28 inputs, with its backward pass and updates, including
// batch norm's running statistics.
TrainingGraph convnet_step(int64_t batch, double lr) {
  TrainingGraph t;
  Builder b(t.g);
  ValueId x = b.input(t32({batch, 1, 28, 28}), "x");
  ValueId labels = b.input(TensorType{DType::i64, {batch}}, "labels");
  ValueId w1 = b.param(t32({16, 1, 3, 3}), "w1"), gamma = b.param(t32({16}), "gamma"), beta = b.param(t32({16}), "beta");
  ValueId w2 = b.param(t32({32, 16, 3, 3}), "w2"), w3 = b.param(t32({32, 10}), "w3");
  ValueId rm = b.state(t32({16}), "running_mean"), rv = b.state(t32({16}), "running_var", "ones");
  Attributes c1 = A({{"stride", L({1, 1})}, {"pad", L({1, 1})}, {"dilation", L({1, 1})}, {"groups", I(1)}});
  Attributes c2 = A({{"stride", L({2, 2})}, {"pad", L({1, 1})}, {"dilation", L({1, 1})}, {"groups", I(1)}});
  Attributes pool = A({{"kernel", L({2, 2})}, {"stride", L({2, 2})}, {"pad", L({0, 0})}});
  ValueId conv1 = b.op(Op::conv2d, {x, w1}, c1, "conv1");
  std::vector<ValueId> bn = b.add(Op::batch_norm, {conv1, gamma, beta}, {}, "bn");
  ValueId r1 = b.op(Op::relu, {bn[0]}, {}, "r1");
  ValueId p1 = b.op(Op::max_pool2d, {r1}, pool, "p1");
  ValueId conv2 = b.op(Op::conv2d, {p1, w2}, c2, "conv2");
  ValueId r2 = b.op(Op::relu, {conv2}, {}, "r2");
  ValueId gap = b.op(Op::global_avg_pool, {r2}, {}, "gap");
  ValueId logits = b.op(Op::matmul, {gap, w3}, {}, "logits");
  ValueId loss = b.op(Op::cross_entropy, {logits, labels}, {}, "loss");
  b.set_category(Category::bwd);
  ValueId dloss = b.add(Op::constant, {}, A({{"value", F(1)}}), "dloss", {b.type(loss)}).front();
  ValueId dlogits = b.op(Op::cross_entropy_grad, {dloss, logits, labels}, {}, "dlogits");
  ValueId dw3 = b.op(Op::matmul, {gap, dlogits}, A({{"transpose_a", B(true)}}), "dw3");
  ValueId dgap = b.op(Op::matmul, {dlogits, w3}, A({{"transpose_b", B(true)}}), "dgap");
  // global_avg_pool's gradient: dgap/49 broadcast over the 7x7 positions.
  ValueId dgap4 = b.op(Op::reshape, {dgap}, A({{"shape", L({batch, 32, 1, 1})}}), "dgap4");
  ValueId dr2 = b.op(Op::scale, {b.op(Op::broadcast_to, {dgap4}, A({{"shape", L({batch, 32, 7, 7})}}))},
                     A({{"factor", F(1.0 / 49)}}), "dr2");
  ValueId dconv2 = b.op(Op::relu_grad, {dr2, r2}, {}, "dconv2");
  Attributes f2 = c2, d2 = c2, f1 = c1;
  f2.set("w_shape", L({32, 16, 3, 3}));
  d2.set("x_shape", L({batch, 16, 14, 14}));
  f1.set("w_shape", L({16, 1, 3, 3}));
  ValueId dw2 = b.op(Op::conv_backward_filter, {p1, dconv2}, f2, "dw2");
  ValueId dp1 = b.op(Op::conv_backward_data, {dconv2, w2}, d2, "dp1");
  ValueId dr1 = b.op(Op::max_pool_grad, {dp1, r1}, pool, "dr1");
  ValueId dbn = b.op(Op::relu_grad, {dr1, r1}, {}, "dbn");
  std::vector<ValueId> bn_grads = b.add(Op::batch_norm_grad, {dbn, conv1, gamma, bn[1], bn[2]}, {}, "bn_grad");
  ValueId dw1 = b.op(Op::conv_backward_filter, {x, bn_grads[0]}, f1, "dw1");
  b.set_category(Category::upd);
  for (auto [p, d] : {std::pair{w1, dw1}, {gamma, bn_grads[1]}, {beta, bn_grads[2]}, {w2, dw2}, {w3, dw3}})
    add_sgd(b, t, p, d, lr);
  b.add(Op::bn_running_update, {rm, rv, bn[1], bn[2]}, A({{"count", I(batch * 28 * 28)}}), "running");
  EXPECT_TRUE(b.ok()) << b.error()->str();
  return t;
}

TEST(ReferenceInterpreter, ConvNetTrainingStepLearnsAndIsDeterministic) {
  const int64_t batch = 16;
  TrainingGraph t = convnet_step(batch, 0.1);
  std::map<std::string, HostTensor> feeds = {
      {"x", random(DType::f32, {batch, 1, 28, 28}, 5, 0, 1)}, {"labels", labels_for(batch, 6)},
      {"w1", init({16, 1, 3, 3}, 9, 7)},                     {"gamma", f32({16}, std::vector<double>(16, 1))},
      {"beta", f32({16})},                                   {"w2", init({32, 16, 3, 3}, 144, 8)},
      {"w3", init({32, 10}, 32, 9)}};
  double seconds = 0;
  std::vector<double> losses = train(t, feeds, 4, &seconds);
  ASSERT_EQ(losses.size(), 4u);
  EXPECT_LT(losses.back(), losses.front());
  std::printf("[ reference ] conv net on 28x28, batch %ld: %.1f ms per step; losses %s\n", static_cast<long>(batch),
              seconds * 1e3, fmt::format("{:.4f}", fmt::join(losses, " ")).c_str());
  // Two runs of one step agree bit for bit in every value.
  auto a = interpret(t.g, feeds), b = interpret(t.g, feeds);
  ASSERT_TRUE(a && b);
  for (size_t i = 0; i < a->size(); ++i) EXPECT_EQ((*a)[i].data, (*b)[i].data) << t.g.value(ValueId{static_cast<uint32_t>(i)}).name;
  // The running statistics moved from their inits (0 and 1) towards the batch's.
  const HostTensor& running_mean = value(t.g, *a, "running");
  EXPECT_NE(running_mean.get(0), 0.0);
}

}  // namespace
}  // namespace lms
