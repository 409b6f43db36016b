// recompute on real training graphs (mlp, resnet18, gpt), recomputing every recomputable forward activation a
// backward op reads: the result verifies, its node order is a valid schedule, backward readers read the clones
// and forward readers the originals; run on the reference backend (mlp, resnet18) it trains to bit-identical
// losses and parameters. On hand-written graphs: the statistics, `.re2` names, the in-place guard, a graph
// out of schedule order, and option errors. Segments: resnet18's blocks remade whole, bit-identical training.
#include <gtest/gtest.h>

#include <cstring>

#include "lms/autodiff/optimizer.h"
#include "lms/ir/parser.h"
#include "lms/ir/printer.h"
#include "lms/ir/verifier.h"
#include "lms/passes/recompute.h"
#include "lms/plan/schedule.h"
#include "passes/pass_test_util.h"

namespace lms {
namespace {

using pass_test::expect_same_training;
using pass_test::gpt;
using pass_test::mlp;
using pass_test::parse;
using pass_test::resnet18;
using pass_test::training_graph;
using pass_test::two_steps;
bool cloneable(const Graph& g, NodeId n) {
  const Traits& t = g.def(n).traits;
  return g.node(n).category == Category::fwd && t.recomputable && !t.source && !t.persistent && !t.random &&
         !t.side_effecting && !t.in_place && !t.is_copy;
}

// Forward activations a backward op reads, whose producer may be cloned (the pass's rule; the first output of
// each producer), and the first outputs of the several-output producers (batch_norm) such an activation reads:
// chained, those are recomputed for the clones only.
std::vector<std::string> recomputable_activations(const Graph& g) {
  std::vector<std::string> names;
  std::vector<bool> taken(g.num_values(), false);
  for (NodeId n : g.node_ids()) {
    if (!cloneable(g, n)) continue;
    const Value& v = g.value(g.first_output(n));
    for (NodeId c : v.consumers)
      if (g.node(c).category == Category::bwd) {
        names.push_back(v.name);
        taken[g.first_output(n).v] = true;
        break;
      }
  }
  for (size_t i = 0, e = names.size(); i < e; ++i)
    for (ValueId in : g.node(g.value(*g.find_value(names[i])).producer).inputs) {
      const NodeId p = g.value(in).producer;
      if (!taken[in.v] && cloneable(g, p) && g.node(p).outputs.size() > 1 && g.first_output(p) == in) {
        names.push_back(g.value(in).name);
        taken[in.v] = true;
      }
    }
  return names;
}

// Checks the rewrite of `before` into `after` for the chosen `names`.
void expect_rewired(const Graph& before, const Graph& after, const std::vector<std::string>& names) {
  EXPECT_EQ(after.num_nodes(), before.num_nodes() + names.size());
  for (const std::string& name : names) {
    ValueId v = *after.find_value(name);
    auto clone = after.find_value(name + ".re");
    ASSERT_TRUE(clone.has_value()) << name;
    const Node& cn = after.node(after.value(*clone).producer);
    const Node& on = after.node(after.value(v).producer);
    EXPECT_EQ(cn.category, Category::recompute) << name;
    EXPECT_EQ(cn.op, on.op) << name;
    EXPECT_EQ(cn.attrs, on.attrs) << name;
    for (NodeId c : after.value(v).consumers) EXPECT_NE(after.node(c).category, Category::bwd) << name;
    EXPECT_FALSE(after.value(*clone).consumers.empty()) << name;
    // Every backward reader of the value before now reads the clone.
    for (NodeId c : before.value(*before.find_value(name)).consumers) {
      if (before.node(c).category != Category::bwd) continue;
      NodeId now = after.value(*after.find_value(before.value(before.first_output(c)).name)).producer;
      const auto& ins = after.node(now).inputs;
      EXPECT_NE(std::find(ins.begin(), ins.end(), *clone), ins.end()) << name;
    }
  }
}

TEST(Recompute, TrainingGraphsVerifyAndStayInScheduleOrder) {
  for (auto [model, mo] : {std::pair{"mlp", mlp()}, std::pair{"resnet18", resnet18()}, std::pair{"gpt", gpt()}}) {
    SCOPED_TRACE(model);
    Graph g = training_graph(model, mo);
    std::vector<std::string> names = recomputable_activations(g);
    ASSERT_GE(names.size(), 2u);
    Graph before = g;
    auto stats = insert_recompute(g, RecomputeOptions{names});
    ASSERT_TRUE(stats.has_value()) << stats.error().str();
    EXPECT_EQ(stats->clones, static_cast<int>(names.size()));
    EXPECT_GE(stats->redirected, stats->clones);
    EXPECT_GT(stats->flops, 0);
    auto ok = verify(g);
    ASSERT_TRUE(ok.has_value()) << ok.error().str();
    auto order = check_schedule_order(g);
    EXPECT_TRUE(order.has_value()) << order.error().str();
    expect_rewired(before, g, names);
    // The text round-trips (the clones' names and category parse back).
    auto reparsed = parse_graph(print_graph(g));
    ASSERT_TRUE(reparsed.has_value()) << reparsed.error().str();
    EXPECT_EQ(print_graph(*reparsed), print_graph(g));
  }
}

TEST(Recompute, TrainingGivesBitIdenticalLossesAndParameters) {
  for (auto [model, mo] : {std::pair{"mlp", mlp()}, std::pair{"resnet18", resnet18()}}) {
    SCOPED_TRACE(model);
    Graph plain = training_graph(model, mo);
    Graph rewritten = plain;
    std::vector<std::string> names = recomputable_activations(plain);
    auto stats = insert_recompute(rewritten, RecomputeOptions{names});
    ASSERT_TRUE(stats.has_value()) << stats.error().str();
    auto a = two_steps(plain), b = two_steps(rewritten);
    ASSERT_TRUE(a.run && b.run);
    expect_same_training(*a.run, *b.run);
  }
}

TEST(Recompute, SegmentsTrainBitIdentically) {
  // resnet18: every block's output remade whole from the block's input (a segment per block: its forward ops, the
  // last one's output the target), each reading the previous block's remade output, while every other
  // recomputable activation is recomputed as a value too, so the insides are cloned twice.
  Graph plain = training_graph("resnet18", resnet18());
  std::vector<std::string> values;
  std::vector<std::vector<std::string>> segments;
  for (const std::string& name : recomputable_activations(plain)) {
    const size_t dot = name.find('.', name.find('.') + 1);  // "layer1.1" of "layer1.1.relu"
    if (name.starts_with("layer") && name.substr(dot) == ".relu") {
      std::vector<std::string> seg;
      for (NodeId n : plain.node_ids())
        if (cloneable(plain, n) && plain.value(plain.first_output(n)).name.starts_with(name.substr(0, dot + 1)))
          seg.push_back(plain.value(plain.first_output(n)).name);
      segments.push_back(std::move(seg));
    } else {
      values.push_back(name);
    }
  }
  ASSERT_EQ(segments.size(), 8u);
  ASSERT_GE(segments[2].size(), 9u);  // layer2.0: two convolutions and a downsample, each normalized
  Graph rewritten = plain;
  auto stats = insert_recompute(rewritten, RecomputeOptions{values, segments});
  ASSERT_TRUE(stats.has_value()) << stats.error().str();
  size_t members = 0;
  for (const auto& seg : segments) members += seg.size();
  EXPECT_EQ(stats->clones, static_cast<int>(values.size() + members));
  ASSERT_TRUE(verify(rewritten).has_value());
  // The last block's output is read backward through its segment's clone, which reads the block before's.
  const ValueId target = *rewritten.find_value("layer4.1.relu");
  for (NodeId c : rewritten.value(target).consumers) EXPECT_NE(rewritten.node(c).category, Category::bwd);
  const Node& remade = rewritten.node(rewritten.value(*rewritten.find_value("layer4.1.relu.re")).producer);
  EXPECT_EQ(remade.category, Category::recompute);
  auto a = two_steps(plain), b = two_steps(rewritten);
  ASSERT_TRUE(a.run && b.run);
  expect_same_training(*a.run, *b.run);
}

TEST(Recompute, StatsAndNames) {
  // %a.re is taken, so the clone is %a.re2; %gy and %g2 both read %a: two redirected readers.
  Graph g = parse(R"(graph g {
  %x = input() : f32[4,8]
  %a = relu(%x) : f32[4,8] #fwd
  %a.re = relu(%a) : f32[4,8] #fwd
  %gy = add(%a.re, %a) : f32[4,8] #bwd
  %g2 = mul(%gy, %a) : f32[4,8] #bwd
  return %g2
})");
  auto stats = insert_recompute(g, RecomputeOptions{{"a"}});
  ASSERT_TRUE(stats.has_value()) << stats.error().str();
  EXPECT_EQ(stats->clones, 1);
  EXPECT_EQ(stats->redirected, 2);
  EXPECT_EQ(stats->flops, op_cost(Op::relu, std::vector{TensorType{DType::f32, {4, 8}}}, {},
                                  std::vector{TensorType{DType::f32, {4, 8}}})
                              .flops);
  EXPECT_TRUE(verify(g).has_value());
  EXPECT_NE(print_graph(g).find("  %a.re2 = relu(%x) : f32[4,8] #recompute\n  %gy = add(%a.re, %a.re2)"),
            std::string::npos)
      << print_graph(g);
  // No values: nothing changes.
  Graph same = g;
  ASSERT_TRUE(insert_recompute(same, RecomputeOptions{}).has_value());
  EXPECT_EQ(print_graph(same), print_graph(g));
}

TEST(Recompute, InputOverwrittenBeforeTheBackwardReaderIsAnError) {
  // The update of %w runs before %gx (which it is ordered before by a control edge): a clone of %h placed
  // before %gx would read the updated %w.
  Graph g = parse(R"(graph g {
  %x = input() : f32[4,8]
  %w = param() : f32[8,8]
  %gw = input() : f32[8,8]
  %h = matmul(%x, %w) : f32[4,8] #fwd
  %w1 = sgd_update(%w, %gw) after(%h) {lr = 0.1} : f32[8,8] #upd
  %gx = relu(%h) after(%w1) : f32[4,8] #bwd
  return %gx
})");
  auto r = insert_recompute(g, RecomputeOptions{{"h"}});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().str(), "%h: recompute: its input %w is overwritten in place by %w1 before its first backward reader");
}

TEST(Recompute, GraphOutOfScheduleOrderIsOrderedFirst) {
  // %b is stored before %a, which it reads.
  Graph g = parse(R"(graph g {
  %x = input() : f32[4,8]
  %b = relu(%a) : f32[4,8] #fwd
  %a = relu(%x) : f32[4,8] #fwd
  %gb = mul(%b, %a) : f32[4,8] #bwd
  return %gb
})");
  auto r = insert_recompute(g, RecomputeOptions{{"b", "a"}});
  ASSERT_TRUE(r.has_value()) << r.error().str();
  EXPECT_TRUE(verify(g).has_value());
  EXPECT_TRUE(check_schedule_order(g).has_value());
  EXPECT_NE(print_graph(g).find("  %a.re = relu(%x) : f32[4,8] #recompute\n  %b.re = relu(%a.re) : f32[4,8] "
                                "#recompute\n  %gb = mul(%b.re, %a.re)"),
            std::string::npos)
      << print_graph(g);
}

TEST(Recompute, OptionErrorsNameTheOption) {
  Graph g = parse(R"(graph g {
  %x = input() : f32[4,8]
  %a = relu(%x) : f32[4,8] #fwd
  %ga = relu(%a) : f32[4,8] #bwd
  return %ga
})");
  Attributes o;
  o.set("values", std::string("a,"));
  auto r = run_recompute_pass(g, o);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().where, "option 'values'");
  o.set("values", std::string("%a"));
  ASSERT_TRUE(run_recompute_pass(g, o).has_value());
  EXPECT_TRUE(g.find_value("a.re").has_value());
}

}  // namespace
}  // namespace lms
