// swap on real training graphs (mlp, resnet18, gpt), swapping every forward activation that a backward op reads and
// every backward value that another backward op reads (a gradient kept for a later sum: all its readers are late),
// without triggers and with two kinds of trigger (the producer's successor halfway to the first late reader, and
// the node right before that reader), and halfway with the space held a quarter of the way: the result verifies,
// its node order is a valid schedule, late readers read the swap_ins and other readers the originals, and the text
// round-trips; trained on the reference backend (mlp, resnet18) it gives bit-identical losses and parameters. On
// hand-written graphs: the statistics, `.in2` names, an in-place writer of the swapped storage waiting for the
// swap_out (and a hold at or past it refused), a graph out of schedule order (ordered first; a bad trigger reported
// before anything changes), and option errors. Forward swaps across the gaps between forward readers (resnet18's
// residual inputs), some swapped for the backward too: verifies, rewiring, round trip, bit-identical training.
#include <gtest/gtest.h>

#include <cstring>

#include "lms/autodiff/optimizer.h"
#include "lms/ir/parser.h"
#include "lms/ir/printer.h"
#include "lms/ir/verifier.h"
#include "lms/passes/swap.h"
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
bool is_late(const Graph& g, NodeId n) {
  return g.node(n).category == Category::bwd || g.node(n).category == Category::recompute;
}

// `held`: triggered halfway, with the value's space held a quarter of the way to its first late reader.
enum class Trigger { none, halfway, right_before, held };

// Every output of a forward or backward node that a backward op reads and the pass may swap (not persistent, not
// on the host, producer neither a source nor a copy), with a trigger of the given kind. The graph is in node order.
std::vector<SwapChoice> swappable_activations(const Graph& g, Trigger kind) {
  std::vector<SwapChoice> choices;
  for (NodeId n : g.node_ids()) {
    const Traits& t = g.def(n).traits;
    const Category cat = g.node(n).category;
    if ((cat != Category::fwd && cat != Category::bwd) || t.source || t.is_copy) continue;
    for (ValueId v : g.node(n).outputs) {
      if (g.is_persistent(v) || g.value(v).placement == Placement::host) continue;
      NodeId first;
      for (NodeId c : g.value(v).consumers)
        if (is_late(g, c)) {
          first = c;  // consumers are sorted by id
          break;
        }
      if (!first.valid()) continue;
      SwapChoice c{g.value(v).name, ""};
      const bool halfway = kind == Trigger::halfway || kind == Trigger::held;
      NodeId trigger = halfway ? NodeId{n.v + (first.v - n.v) / 2} : NodeId{first.v - 1};
      if (kind != Trigger::none) c.trigger = g.value(g.first_output(trigger)).name;
      if (kind == Trigger::held) c.hold = g.value(g.first_output(NodeId{n.v + (first.v - n.v) / 4})).name;
      choices.push_back(c);
    }
  }
  return choices;
}

// Checks the rewrite of `before` into `after` for the given choices.
void expect_rewired(const Graph& before, const Graph& after, const std::vector<SwapChoice>& choices) {
  EXPECT_EQ(after.num_nodes(), before.num_nodes() + 2 * choices.size());
  for (const SwapChoice& c : choices) {
    SCOPED_TRACE(c.value);
    ValueId v = *after.find_value(c.value);
    auto out = after.find_value(c.value + ".out");
    auto in = after.find_value(c.value + ".in");
    ASSERT_TRUE(out.has_value() && in.has_value());
    const NodeId out_node = after.value(*out).producer, in_node = after.value(*in).producer;
    EXPECT_EQ(after.node(out_node).op, Op::swap_out);
    EXPECT_EQ(after.node(in_node).op, Op::swap_in);
    EXPECT_EQ(after.node(out_node).category, Category::swap);
    EXPECT_EQ(after.node(in_node).category, Category::swap);
    EXPECT_EQ(after.node(out_node).inputs, std::vector<ValueId>{v});
    EXPECT_EQ(after.node(in_node).inputs, std::vector<ValueId>{*out});
    EXPECT_EQ(after.value(*out).placement, Placement::host);
    // The swap_out sits right after the producer (or hold), past any other swap_outs there.
    NodeId p = after.value(*after.find_value(c.hold.empty() ? c.value : c.hold)).producer;
    EXPECT_GT(out_node, p);
    for (uint32_t k = p.v + 1; k < out_node.v; ++k) EXPECT_TRUE(after.def(NodeId{k}).traits.is_copy);
    if (c.trigger.empty()) {
      EXPECT_TRUE(after.node(in_node).control_inputs.empty());
      // Right before the first late reader: only other swap_ins between.
      NodeId first = after.value(*in).consumers.front();
      for (uint32_t k = in_node.v + 1; k < first.v; ++k) EXPECT_EQ(after.node(NodeId{k}).op, Op::swap_in);
    } else {
      NodeId t = after.value(*after.find_value(c.trigger)).producer;
      EXPECT_EQ(after.node(in_node).control_inputs, std::vector<NodeId>{t});
      EXPECT_GT(in_node, t);
      for (uint32_t k = t.v + 1; k < in_node.v; ++k) EXPECT_TRUE(after.def(NodeId{k}).traits.is_copy);
    }
    // No late reader reads the original any more; each one that did reads the swap_in now.
    for (NodeId r : after.value(v).consumers)
      EXPECT_FALSE(is_late(after, r)) << after.value(after.first_output(r)).name;
    const Value& old = before.value(*before.find_value(c.value));
    int late = 0;
    for (NodeId r : old.consumers) {
      NodeId now = after.value(*after.find_value(before.value(before.first_output(r)).name)).producer;
      const auto& ins = after.node(now).inputs;
      if (is_late(before, r)) {
        ++late;
        EXPECT_NE(std::find(ins.begin(), ins.end(), *in), ins.end());
      } else {
        EXPECT_NE(std::find(ins.begin(), ins.end(), v), ins.end());
      }
    }
    EXPECT_EQ(static_cast<int>(after.value(*in).consumers.size()), late);
  }
}

TEST(Swap, TrainingGraphsVerifyAndStayInScheduleOrder) {
  for (auto [model, mo] : {std::pair{"mlp", mlp()}, std::pair{"resnet18", resnet18()}, std::pair{"gpt", gpt()}})
    for (Trigger kind : {Trigger::none, Trigger::halfway, Trigger::right_before, Trigger::held}) {
      SCOPED_TRACE(std::string(model) + " trigger kind " + std::to_string(static_cast<int>(kind)));
      Graph g = training_graph(model, mo);
      ASSERT_TRUE(check_schedule_order(g).has_value());
      std::vector<SwapChoice> choices = swappable_activations(g, kind);
      ASSERT_GE(choices.size(), 2u);
      Graph before = g;
      auto stats = insert_swaps(g, SwapOptions{choices});
      ASSERT_TRUE(stats.has_value()) << stats.error().str();
      EXPECT_EQ(stats->swapped, static_cast<int>(choices.size()));
      EXPECT_EQ(stats->triggered, kind == Trigger::none ? 0 : static_cast<int>(choices.size()));
      EXPECT_GE(stats->redirected, stats->swapped);
      auto ok = verify(g);
      ASSERT_TRUE(ok.has_value()) << ok.error().str();
      auto order = check_schedule_order(g);
      EXPECT_TRUE(order.has_value()) << order.error().str();
      expect_rewired(before, g, choices);
      auto reparsed = parse_graph(print_graph(g));
      ASSERT_TRUE(reparsed.has_value()) << reparsed.error().str();
      EXPECT_EQ(print_graph(*reparsed), print_graph(g));
    }
}

TEST(Swap, TrainingGivesBitIdenticalLossesAndParameters) {
  for (auto [model, mo] : {std::pair{"mlp", mlp()}, std::pair{"resnet18", resnet18()}}) {
    Graph plain = training_graph(model, mo);
    auto a = two_steps(plain);
    ASSERT_TRUE(a.run);
    for (Trigger kind : {Trigger::none, Trigger::halfway, Trigger::right_before, Trigger::held}) {
      SCOPED_TRACE(std::string(model) + " trigger kind " + std::to_string(static_cast<int>(kind)));
      Graph rewritten = plain;
      auto stats = insert_swaps(rewritten, SwapOptions{swappable_activations(plain, kind)});
      ASSERT_TRUE(stats.has_value()) << stats.error().str();
      auto b = two_steps(rewritten);
      ASSERT_TRUE(b.run);
      expect_same_training(*a.run, *b.run);
    }
  }
}

// Forward swaps of every value with a gap between two of its forward readers (the producer counts as one): each
// across its widest gap, triggered right before the reader after it and held up to the reader before it; every
// other one also swapped for its late readers (one copy out, two swap_ins). resnet18's block inputs are read by
// the block's first convolution and, after it, by the residual add.
std::pair<std::vector<SwapChoice>, std::vector<SwapChoice>> forward_gaps(const Graph& g) {
  std::vector<SwapChoice> forward, backward;
  for (SwapChoice b : swappable_activations(g, Trigger::none)) {
    const ValueId v = *g.find_value(b.value);
    std::vector<NodeId> early{g.value(v).producer};
    for (NodeId c : g.value(v).consumers)
      if (g.node(c).category == Category::fwd) early.push_back(c);
    size_t widest = 0;
    for (size_t i = 1; i + 1 < early.size(); ++i)
      if (early[i + 1].v - early[i].v > early[widest + 1].v - early[widest].v) widest = i;
    if (early.size() < 2 || early[widest + 1].v - early[widest].v < 2) continue;
    auto name = [&](NodeId n) { return g.value(g.first_output(n)).name; };
    forward.push_back({b.value, name(NodeId{early[widest + 1].v - 1}), widest > 0 ? name(early[widest]) : ""});
    if (forward.size() % 2 == 0) backward.push_back(b);
  }
  return {forward, backward};
}

TEST(Swap, ForwardGapsVerifyAndGiveBitIdenticalTraining) {
  Graph plain = training_graph("resnet18", resnet18());
  auto a = two_steps(plain);
  ASSERT_TRUE(a.run);
  auto [forward, backward] = forward_gaps(plain);
  ASSERT_GE(forward.size(), 8u);
  Graph g = plain;
  auto stats = insert_swaps(g, SwapOptions{backward, forward});
  ASSERT_TRUE(stats.has_value()) << stats.error().str();
  EXPECT_EQ(stats->swapped, static_cast<int>(forward.size()));
  EXPECT_EQ(stats->forward, static_cast<int>(forward.size()));
  EXPECT_EQ(stats->triggered, static_cast<int>(forward.size()));
  EXPECT_EQ(g.num_nodes(), plain.num_nodes() + 2 * forward.size() + backward.size());
  auto ok = verify(g);
  ASSERT_TRUE(ok.has_value()) << ok.error().str();
  EXPECT_TRUE(check_schedule_order(g).has_value());
  for (const SwapChoice& f : forward) {  // after the gap, no reader reads the original
    SCOPED_TRACE(f.value);
    const NodeId trigger = g.value(*g.find_value(f.trigger)).producer;
    for (NodeId r : g.value(*g.find_value(f.value)).consumers) EXPECT_LT(r, trigger);
  }
  auto reparsed = parse_graph(print_graph(g));
  ASSERT_TRUE(reparsed.has_value()) << reparsed.error().str();
  EXPECT_EQ(print_graph(*reparsed), print_graph(g));
  auto b = two_steps(g);
  ASSERT_TRUE(b.run);
  expect_same_training(*a.run, *b.run);
}

TEST(Swap, StatsAndNames) {
  // %a.in is taken, so the swap_in is %a.in2; %gy and %g2 read %a (late), %a.in (forward) does not move; %b
  // has one late reader, %g2, and a trigger. Bytes: 4*8 + 4*16 floats.
  Graph g = parse(R"(graph g {
  %x = input() : f32[4,8]
  %a = relu(%x) : f32[4,8] #fwd
  %a.in = relu(%a) : f32[4,8] #fwd
  %b = concat(%a, %a.in) {axis = 1} : f32[4,16] #fwd
  %gy = add(%a.in, %a) : f32[4,8] #bwd
  %g2 = mul(%gy, %a) : f32[4,8] #bwd
  %g3 = slice(%b) {axis = 1, start = 0, end = 8} : f32[4,8] #bwd
  %g4 = add(%g2, %g3) : f32[4,8] #bwd
  return %g4
})");
  auto stats = insert_swaps(g, SwapOptions{{{"b", "gy"}, {"a", ""}}});
  ASSERT_TRUE(stats.has_value()) << stats.error().str();
  EXPECT_EQ(stats->swapped, 2);
  EXPECT_EQ(stats->triggered, 1);
  EXPECT_EQ(stats->redirected, 3);
  EXPECT_EQ(stats->bytes_each_way, (4 * 8 + 4 * 16) * 4);
  ASSERT_TRUE(verify(g).has_value()) << verify(g).error().str();
  EXPECT_NE(print_graph(g).find("  %a.in2 = swap_in(%a.out) : f32[4,8] #swap\n"
                                "  %gy = add(%a.in, %a.in2) : f32[4,8] #bwd\n"
                                "  %b.in = swap_in(%b.out) after(%gy) : f32[4,16] #swap\n"
                                "  %g2 = mul(%gy, %a.in2)"),
            std::string::npos)
      << print_graph(g);
  // No values: nothing changes.
  Graph same = g;
  auto none = insert_swaps(same, SwapOptions{});
  ASSERT_TRUE(none.has_value());
  EXPECT_EQ(none->swapped, 0);
  EXPECT_EQ(print_graph(same), print_graph(g));
}

TEST(Swap, InPlaceWriterOfTheSwappedStorageWaitsForTheSwapOut) {
  // %a is not persistent, yet an in-place update overwrites it after its last reader (which reads %a.in after
  // the rewrite): the update must not start before %a's copy to the host is done.
  Graph g = parse(R"(graph g {
  %x = input() : f32[4,8]
  %gx = input() : f32[4,8]
  %a = relu(%x) : f32[4,8] #fwd
  %ga = relu_grad(%gx, %a) : f32[4,8] #bwd
  %a1 = sgd_update(%a, %ga) {lr = 0.1} : f32[4,8] #upd
  return %a1
})");
  auto stats = insert_swaps(g, SwapOptions{{{"a", ""}}});
  ASSERT_TRUE(stats.has_value()) << stats.error().str();
  ASSERT_TRUE(verify(g).has_value()) << verify(g).error().str();
  EXPECT_NE(print_graph(g).find("%a1 = sgd_update(%a, %ga) after(%a.out) {lr = 0.1}"), std::string::npos)
      << print_graph(g);
}

TEST(Swap, HoldMustComeBeforeAnInPlaceWriterOfTheStorage) {
  // %a1 overwrites %a's storage in the forward pass: the swap_out must come before it, so a hold at or after it
  // is an error (before anything changes); a hold before it is placed and the writer waits for the swap_out.
  const char* text = R"(graph g {
  %x = input() : f32[4,8]
  %gx = input() : f32[4,8]
  %a = relu(%x) : f32[4,8] #fwd
  %b = relu(%a) : f32[4,8] #fwd
  %a1 = sgd_update(%a, %b) {lr = 0.1} : f32[4,8] #fwd
  %c = relu(%a1) : f32[4,8] #fwd
  %ga = relu_grad(%gx, %a) : f32[4,8] #bwd
  return %ga, %c
})";
  for (const char* hold : {"a1", "c"}) {
    Graph g = parse(text);
    auto stats = insert_swaps(g, SwapOptions{{{"a", "", hold}}});
    ASSERT_FALSE(stats.has_value());
    EXPECT_EQ(stats.error().str(),
              fmt::format("%a: swap: its hold %{} is not before %a1, which overwrites its storage in place", hold));
    EXPECT_EQ(print_graph(g), print_graph(parse(text)));
  }
  Graph g = parse(text);
  auto stats = insert_swaps(g, SwapOptions{{{"a", "", "b"}}});
  ASSERT_TRUE(stats.has_value()) << stats.error().str();
  EXPECT_NE(print_graph(g).find("  %b = relu(%a) : f32[4,8] #fwd\n  %a.out = swap_out(%a) : f32[4,8] @host #swap\n"
                                "  %a1 = sgd_update(%a, %b) after(%a.out) {lr = 0.1} : f32[4,8] #fwd\n"),
            std::string::npos)
      << print_graph(g);
}

TEST(Swap, GraphOutOfScheduleOrderIsOrderedFirst) {
  // %b is stored before %a, which it reads, and %t (the trigger) before %b.
  const char* text = R"(graph g {
  %x = input() : f32[4,8]
  %t = relu(%b) : f32[4,8] #fwd
  %b = relu(%a) : f32[4,8] #fwd
  %a = relu(%x) : f32[4,8] #fwd
  %gb = mul(%t, %a) : f32[4,8] #bwd
  %gc = add(%gb, %b) : f32[4,8] #bwd
  return %gc
})";
  Graph g = parse(text);
  auto r = insert_swaps(g, SwapOptions{{{"a", "t"}}});
  ASSERT_TRUE(r.has_value()) << r.error().str();
  EXPECT_TRUE(verify(g).has_value());
  EXPECT_TRUE(check_schedule_order(g).has_value());
  EXPECT_NE(print_graph(g).find("  %a = relu(%x) : f32[4,8] #fwd\n"
                                "  %a.out = swap_out(%a) : f32[4,8] @host #swap\n"
                                "  %b = relu(%a) : f32[4,8] #fwd\n"
                                "  %t = relu(%b) : f32[4,8] #fwd\n"
                                "  %a.in = swap_in(%a.out) after(%t) : f32[4,8] #swap\n"
                                "  %gb = mul(%t, %a.in)"),
            std::string::npos)
      << print_graph(g);
  // %a is stored after %b but runs before it: a trigger is judged in schedule order, and the error leaves the
  // graph as it was.
  Graph bad = parse(text);
  const std::string was = print_graph(bad);
  auto e = insert_swaps(bad, SwapOptions{{{"b", "a"}}});
  ASSERT_FALSE(e.has_value());
  EXPECT_EQ(e.error().str(), "%b: swap: its trigger %a comes before its producer %b in node order");
  EXPECT_EQ(print_graph(bad), was);
}

TEST(Swap, OptionErrorsNameTheOption) {
  Graph g = parse(R"(graph g {
  %x = input() : f32[4,8]
  %a = relu(%x) : f32[4,8] #fwd
  %b = relu(%a) : f32[4,8] #fwd
  %ga = relu_grad(%b, %a) : f32[4,8] #bwd
  return %ga
})");
  Attributes o;
  for (const char* bad : {"a,", "a:", ":b", "%:b", "a:%"}) {
    o.set("values", std::string(bad));
    auto r = run_swap_pass(g, o);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().where, "option 'values'") << bad;
  }
  o.set("values", std::string("%a:%b"));
  ASSERT_TRUE(run_swap_pass(g, o).has_value());
  ASSERT_TRUE(g.find_value("a.in").has_value());
  EXPECT_EQ(g.node(g.value(*g.find_value("a.in")).producer).control_inputs,
            std::vector<NodeId>{g.value(*g.find_value("b")).producer});
}

}  // namespace
}  // namespace lms
