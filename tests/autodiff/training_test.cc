// Training graphs (optimizer.h): one update per parameter with its state, control edges ordering every other
// reader of a parameter before its update, batch norm's running statistics, parameters without a gradient,
// option checks, the `train` and `autodiff` passes, and the training graphs of every model (small sizes):
// they verify and print, parse and print back identically.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "lms/autodiff/optimizer.h"
#include "lms/ir/parser.h"
#include "lms/ir/printer.h"
#include "lms/ir/verifier.h"
#include "lms/models/models.h"
#include "lms/passes/pass.h"

namespace lms {
namespace {

Graph parse(std::string_view text) {
  auto g = parse_graph(text);
  EXPECT_TRUE(g.has_value()) << g.error().str();
  return g ? *g : Graph{};
}

Graph train(const Graph& forward, TrainingOptions o) {
  auto g = build_training_graph(forward, o);
  EXPECT_TRUE(g.has_value()) << g.error().str();
  return g ? *g : Graph{};
}

TrainingOptions with(OptimizerKind k) {
  TrainingOptions o;
  o.optimizer.kind = k;
  return o;
}

std::vector<NodeId> nodes_of(const Graph& g, Op op) {
  std::vector<NodeId> out;
  for (NodeId n : g.node_ids())
    if (g.node(n).op == op) out.push_back(n);
  return out;
}

const Node& producer(const Graph& g, std::string_view value) {
  auto v = g.find_value(value);
  EXPECT_TRUE(v.has_value()) << "no value %" << value;
  static const Node kNone;
  return v ? g.node(g.value(*v).producer) : kNone;
}

// The property the control edges exist for: every reader of an updated parameter, other than its update, is
// ordered before the update (here: a direct control input of it).
void expect_readers_before_updates(const Graph& g) {
  for (NodeId u : g.node_ids()) {
    const Node& node = g.node(u);
    if (node.category != Category::upd || !g.def(u).traits.in_place) continue;
    ValueId target = node.inputs[0];
    for (NodeId reader : g.value(target).consumers) {
      if (reader == u) continue;
      EXPECT_TRUE(std::binary_search(node.control_inputs.begin(), node.control_inputs.end(), reader))
          << print_node(g, reader) << " is not ordered before " << print_node(g, u);
    }
  }
}

constexpr std::string_view kTiny = R"(graph tiny {
  %x = input() : f32[2,3]
  %labels = input() : i64[2]
  %w = param() : f32[4,3]
  %b = param() : f32[4]
  %unused = param() : f32[5]
  %h = matmul(%x, %w) {transpose_b = true} : f32[2,4]
  %logits = bias_add(%h, %b) {axis = -1} : f32[2,4]
  %loss = cross_entropy(%logits, %labels) : f32[]
  return %loss
})";

TEST(Training, SgdUpdatesEveryParameterWithAGradient) {
  TrainingOptions o = with(OptimizerKind::sgd);
  o.optimizer.lr = 0.5;
  Graph g = train(parse(kTiny), o);
  ASSERT_TRUE(verify(g).has_value());
  ASSERT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(g.value(g.outputs()[0]).name, "loss");
  std::vector<NodeId> updates = nodes_of(g, Op::sgd_update);
  ASSERT_EQ(updates.size(), 2u);  // w and b; %unused has no gradient path and gets no update
  const Node& uw = producer(g, "w.new");
  EXPECT_EQ(uw.op, Op::sgd_update);
  EXPECT_EQ(uw.category, Category::upd);
  EXPECT_EQ(g.value(uw.inputs[0]).name, "w");
  EXPECT_EQ(g.value(uw.inputs[1]).name, "w.grad");
  EXPECT_EQ(uw.attrs.get_float("lr", 0), 0.5);
  EXPECT_FALSE(g.find_value("unused.new").has_value());
  // %w's only other reader is the forward matmul (x needs no gradient, so no backward node reads %w).
  EXPECT_EQ(uw.control_inputs, std::vector<NodeId>{g.value(*g.find_value("h")).producer});
  expect_readers_before_updates(g);
}

TEST(Training, MomentumAndAdamState) {
  Graph m = train(parse(kTiny), with(OptimizerKind::momentum));
  const Node& um = producer(m, "w.new");
  EXPECT_EQ(um.op, Op::momentum_update);
  EXPECT_EQ(m.value(um.inputs[1]).name, "w.momentum");
  const Node& buffer = producer(m, "w.momentum");
  EXPECT_EQ(buffer.op, Op::state);
  EXPECT_EQ(buffer.attrs.get_string("init", ""), "zeros");
  EXPECT_EQ(m.value(um.outputs[1]).name, "w.momentum.new");
  EXPECT_EQ(um.attrs.get_float("lr", 0), kDefaultLr);
  EXPECT_EQ(um.attrs.get_float("momentum", 0), 0.9);

  Graph a = train(parse(kTiny), with(OptimizerKind::adam));
  const Node& ua = producer(a, "b.new");
  EXPECT_EQ(ua.op, Op::adam_update);
  std::vector<std::string> names;
  for (ValueId v : ua.inputs) names.push_back(a.value(v).name);
  EXPECT_EQ(names, (std::vector<std::string>{"b", "b.m", "b.v", "b.t", "b.grad"}));
  EXPECT_EQ(a.value(*a.find_value("b.t")).type, (TensorType{DType::f32, {}}));
  EXPECT_EQ(ua.attrs.get_float("lr", 0), kDefaultAdamLr);
  for (const char* s : {"b.m", "b.v", "b.t"}) EXPECT_EQ(producer(a, s).attrs.get_string("init", ""), "zeros") << s;
  EXPECT_FALSE(ua.attrs.has("decoupled_weight_decay"));
  EXPECT_EQ(ua.attrs.get_float("weight_decay", -1), 0);
  expect_readers_before_updates(a);
  EXPECT_TRUE(verify(a).has_value());

  // AdamW: Adam's state and op, the decay decoupled, torch.optim.AdamW's default decay 0.01 unless given.
  Graph w = train(parse(kTiny), with(OptimizerKind::adamw));
  const Node& uw = producer(w, "b.new");
  EXPECT_EQ(uw.op, Op::adam_update);
  EXPECT_TRUE(uw.attrs.get_bool("decoupled_weight_decay", false));
  EXPECT_EQ(uw.attrs.get_float("weight_decay", -1), kDefaultAdamwWeightDecay);
  EXPECT_EQ(uw.attrs.get_float("lr", 0), kDefaultAdamLr);
  TrainingOptions no_decay = with(OptimizerKind::adamw);
  no_decay.optimizer.weight_decay = 0;
  EXPECT_EQ(producer(train(parse(kTiny), no_decay), "b.new").attrs.get_float("weight_decay", -1), 0);
}

// With lr_scale, one f32[] input %lr_scale is every update's last input; the graph prints and parses back.
TEST(Training, LearningRateScaleInput) {
  for (OptimizerKind k : {OptimizerKind::sgd, OptimizerKind::momentum, OptimizerKind::adam}) {
    TrainingOptions o = with(k);
    o.optimizer.lr_scale = true;
    Graph g = train(parse(kTiny), o);
    ASSERT_TRUE(verify(g).has_value());
    const Node& input = producer(g, kLrScaleName);
    EXPECT_EQ(input.op, Op::input);
    const ValueId scale = *g.find_value(kLrScaleName);
    EXPECT_EQ(g.value(scale).type, (TensorType{DType::f32, {}}));
    for (const char* updated : {"w.new", "b.new"}) EXPECT_EQ(producer(g, updated).inputs.back(), scale) << updated;
    EXPECT_EQ(g.value(scale).consumers.size(), 2u);
    const std::string text = print_graph(g);
    EXPECT_NE(text.find("%w.grad, %lr_scale) after(%h) {lr = "), std::string::npos) << text;
    auto back = parse_graph(text);
    ASSERT_TRUE(back.has_value()) << back.error().str();
    EXPECT_EQ(print_graph(*back), text);
  }
  // A model whose own value has the input's name is refused, not given a second %lr_scale.
  std::string clash(kTiny);
  clash.replace(clash.find("%b = param()"), 12, "%lr_scale = param()");
  clash.replace(clash.find("bias_add(%h, %b)"), 16, "bias_add(%h, %lr_scale)");
  TrainingOptions o = with(OptimizerKind::sgd);
  o.optimizer.lr_scale = true;
  auto g = build_training_graph(parse(clash), o);
  ASSERT_FALSE(g.has_value());
  EXPECT_NE(g.error().str().find("input %lr_scale is also a value of graph 'tiny'"), std::string::npos)
      << g.error().str();
}

// With clip_grad_norm, the updates read the clipped gradients, min(1, max / (norm + 1e-6)) times the gradients,
// and the norm is the second output.
TEST(Training, GradientClipping) {
  TrainingOptions o = with(OptimizerKind::sgd);
  o.clip_grad_norm = 2.5;
  Graph g = train(parse(kTiny), o);
  ASSERT_TRUE(verify(g).has_value());
  ASSERT_EQ(g.outputs().size(), 2u);
  EXPECT_EQ(g.value(g.outputs()[1]).name, kGradNormName);
  EXPECT_EQ(producer(g, kGradNormName).op, Op::sqrt);
  for (const char* p : {"w", "b"}) {
    const Node& update = producer(g, std::string(p) + ".new");
    EXPECT_EQ(g.value(update.inputs[1]).name, std::string(p) + ".grad.clipped");
    const Node& clip = producer(g, std::string(p) + ".grad.clipped");
    EXPECT_EQ(clip.op, Op::mul);
    EXPECT_EQ(g.value(clip.inputs[1]).name, "grad_norm.clip");
  }
  EXPECT_EQ(producer(g, "grad_norm.coef").attrs.get_float("factor", 0), 2.5);
  EXPECT_EQ(producer(g, "grad_norm.clip").attrs.get_float("max", 0), 1.0);
  // The norm sums both gradients' squares.
  EXPECT_EQ(producer(g, "grad_norm.sumsq").op, Op::add);
  const std::string text = print_graph(g);
  auto back = parse_graph(text);
  ASSERT_TRUE(back.has_value()) << back.error().str();
  EXPECT_EQ(print_graph(*back), text);

  o.clip_grad_norm = -1;
  auto bad = build_training_graph(parse(kTiny), o);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().str().find("--clip-grad-norm must be > 0 (0: off), got -1"), std::string::npos);
}

TEST(Training, BackwardReadersOfAParameterComeFirst) {
  // w1 is read by the forward matmul and by the backward matmul that computes h1's gradient.
  Graph g = train(parse(R"(graph two {
    %x = input() : f32[2,3]
    %labels = input() : i64[2]
    %w1 = param() : f32[3,3]
    %w2 = param() : f32[3,4]
    %h1 = matmul(%x, %w1) : f32[2,3]
    %r = relu(%h1) : f32[2,3]
    %logits = matmul(%r, %w2) : f32[2,4]
    %loss = cross_entropy(%logits, %labels) : f32[]
    return %loss
  })"), with(OptimizerKind::sgd));
  const Node& u2 = producer(g, "w2.new");
  ValueId w2 = *g.find_value("w2");
  EXPECT_EQ(g.value(w2).consumers.size(), 3u);  // forward matmul, the matmul for r's gradient, the update
  EXPECT_EQ(u2.control_inputs.size(), 2u);
  expect_readers_before_updates(g);
}

TEST(Training, BatchNormRunningStatistics) {
  Graph forward = parse(R"(graph bn {
    %x = input() : f32[4,3,5,2]
    %labels = input() : i64[4,5,2]
    %g = param() : f32[3]
    %b = param() : f32[3]
    %y, %y.mean, %y.invstd = batch_norm(%x, %g, %b) {momentum = 0.25} : f32[4,3,5,2], f32[3], f32[3]
    %loss = cross_entropy(%y, %labels) : f32[]
    return %loss
  })");
  Graph g = train(forward, with(OptimizerKind::sgd));
  std::vector<NodeId> running = nodes_of(g, Op::bn_running_update);
  ASSERT_EQ(running.size(), 1u);
  const Node& r = g.node(running[0]);
  EXPECT_EQ(r.category, Category::upd);
  EXPECT_EQ(r.attrs.get_int("count", 0), 4 * 5 * 2);
  EXPECT_EQ(r.attrs.get_float("momentum", 0), 0.25);
  EXPECT_EQ(r.attrs.get_float("eps", 0), 1e-5);
  std::vector<std::string> names;
  for (ValueId v : r.inputs) names.push_back(g.value(v).name);
  EXPECT_EQ(names, (std::vector<std::string>{"y.running_mean", "y.running_var", "y.mean", "y.invstd"}));
  EXPECT_EQ(producer(g, "y.running_mean").attrs.get_string("init", ""), "zeros");
  EXPECT_EQ(producer(g, "y.running_var").attrs.get_string("init", ""), "ones");
  EXPECT_EQ(nodes_of(g, Op::batch_norm_grad).size(), 1u);
  EXPECT_TRUE(verify(g).has_value());

  TrainingOptions off = with(OptimizerKind::sgd);
  off.bn_running_stats = false;
  EXPECT_TRUE(nodes_of(train(forward, off), Op::bn_running_update).empty());
}

TEST(Training, Errors) {
  auto expect_error = [](const Graph& g, TrainingOptions o, std::string_view needle) {
    auto r = build_training_graph(g, o);
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.error().str().find(needle), std::string::npos) << r.error().str();
  };
  Graph tiny = parse(kTiny);
  TrainingOptions o;
  o.optimizer.lr = -1;
  expect_error(tiny, o, "'lr' = -1 must be >= 0");
  o = {};
  o.optimizer.nesterov = true;
  o.optimizer.momentum = 0;
  expect_error(tiny, o, "'nesterov' needs momentum > 0");
  o = with(OptimizerKind::adam);
  o.optimizer.beta2 = 1;
  expect_error(tiny, o, "'beta2' = 1 must be in [0, 1)");
  expect_error(parse("graph g {\n  %w = param() : f32[2]\n  return %w\n}"), {}, "scalar loss");
  // Batch norm over one value per channel has no unbiased variance.
  expect_error(parse(R"(graph bn {
    %x = input() : f32[1,3]
    %labels = input() : i64[1]
    %g = param() : f32[3]
    %b = param() : f32[3]
    %y, %m, %s = batch_norm(%x, %g, %b) : f32[1,3], f32[3], f32[3]
    %loss = cross_entropy(%y, %labels) : f32[]
    return %loss
  })"), {}, "running statistics of batch norm %y");
}

TEST(Training, Passes) {
  auto pipeline = parse_pipeline("train{optimizer=adam, lr=0.1, weight_decay=0.01},verify");
  ASSERT_TRUE(pipeline.has_value()) << pipeline.error().str();
  Graph g = parse(kTiny);
  auto r = run_pipeline(g, *pipeline);
  ASSERT_TRUE(r.has_value()) << r.error().str();
  const Node& u = producer(g, "w.new");
  EXPECT_EQ(u.op, Op::adam_update);
  EXPECT_EQ(u.attrs.get_float("lr", 0), 0.1);
  EXPECT_EQ(u.attrs.get_float("weight_decay", 0), 0.01);

  auto grads = parse_pipeline("autodiff{wrt=\"x,w\"},verify");
  ASSERT_TRUE(grads.has_value()) << grads.error().str();
  Graph d = parse(kTiny);
  ASSERT_TRUE(run_pipeline(d, *grads).has_value());
  ASSERT_EQ(d.outputs().size(), 3u);
  EXPECT_EQ(d.value(d.outputs()[1]).name, "x.grad");
  EXPECT_EQ(d.value(d.outputs()[2]).name, "w.grad");

  auto bad = parse_pipeline("train{optimizer=rmsprop}");
  ASSERT_TRUE(bad.has_value());
  Graph b = parse(kTiny);
  auto e = run_pipeline(b, *bad);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.error().str().find("unknown optimizer 'rmsprop'"), std::string::npos) << e.error().str();
}

struct ModelCase {
  const char* name;
  ModelOptions options;
};

class TrainingModels : public ::testing::TestWithParam<ModelCase> {};

TEST_P(TrainingModels, VerifyAndRoundTrip) {
  const ModelCase& m = GetParam();
  auto forward = build_model(m.name, m.options);
  ASSERT_TRUE(forward.has_value()) << forward.error().str();
  size_t params = nodes_of(*forward, Op::param).size();
  for (OptimizerKind k : {OptimizerKind::sgd, OptimizerKind::momentum, OptimizerKind::adam}) {
    SCOPED_TRACE(optimizer_name(k));
    Graph g = train(*forward, with(k));
    auto ok = verify(g);
    ASSERT_TRUE(ok.has_value()) << ok.error().str();
    Op update = k == OptimizerKind::sgd ? Op::sgd_update : k == OptimizerKind::momentum ? Op::momentum_update
                                                                                        : Op::adam_update;
    EXPECT_EQ(nodes_of(g, update).size(), params);  // every model parameter reaches the loss
    EXPECT_EQ(nodes_of(g, Op::bn_running_update).size(), nodes_of(*forward, Op::batch_norm).size());
    expect_readers_before_updates(g);
    const std::string text = print_graph(g);
    auto parsed = parse_graph(text);
    ASSERT_TRUE(parsed.has_value()) << parsed.error().str();
    EXPECT_EQ(print_graph(*parsed), text);
    EXPECT_TRUE(verify(*parsed).has_value());
  }
}

ModelOptions resnet_small() {
  ModelOptions o;
  o.batch = 2;
  o.image = {32};
  o.small_stem = true;
  return o;
}
ModelOptions unet_small() {
  ModelOptions o;
  o.image = {16};
  o.depth = 3;
  o.base_filters = 4;
  return o;
}
ModelOptions gpt_small() {
  ModelOptions o;
  o.batch = 2;
  o.layers = 2;
  o.hidden_size = 32;
  o.heads = 2;
  o.seq = 8;
  o.vocab = 50;
  return o;
}
ModelOptions gpt_untied() {
  ModelOptions o = gpt_small();
  o.untied = true;
  return o;
}
ModelOptions mlp_small() {
  ModelOptions o;
  o.batch = 4;
  return o;
}

INSTANTIATE_TEST_SUITE_P(Models, TrainingModels,
                         ::testing::Values(ModelCase{"mlp", mlp_small()}, ModelCase{"resnet18", resnet_small()},
                                           ModelCase{"unet3d", unet_small()}, ModelCase{"gpt", gpt_small()},
                                           ModelCase{"gpt", gpt_untied()}),
                         [](const ::testing::TestParamInfo<ModelCase>& info) {
                           return std::string(info.param.name) + (info.param.options.untied ? "_untied" : "");
                         });

}  // namespace
}  // namespace lms
