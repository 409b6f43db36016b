// The auto planner's candidates (plan/auto/candidates.h) on a hand-written residual block: which activations are
// candidates, their recompute chains, and their segments (the ops that remake a block's output from the block's
// input, with the most bytes their clones hold at once), and when a value gets no segment; a backward value
// read again after a gap (a skip connection's gradient), a candidate to swap only; and a forward gap (a block's
// input read again by its residual add), likewise.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "lms/ir/parser.h"
#include "lms/plan/auto/candidates.h"
#include "lms/sim/device_model.h"

namespace lms {
namespace {

using autoplan::Candidate;

// Every tensor is f32[16], 64 bytes. %a is the block's input, %y its output; %c is read backward inside it.
// `backward` is the backward pass's text.
std::string block(std::string_view backward) {
  return std::string(R"(graph g {
  %x = input() : f32[16]
  %a = relu(%x) : f32[16] #fwd
  %b = scale(%a) {factor = 2.0} : f32[16] #fwd
  %c = relu(%b) : f32[16] #fwd
  %d = scale(%c) {factor = 0.5} : f32[16] #fwd
  %e = add(%d, %a) : f32[16] #fwd
  %y = relu(%e) : f32[16] #fwd
  %z = relu(%y) : f32[16] #fwd
  %gz = relu(%z) : f32[16] #bwd
)") + std::string(backward) + "}\n";
}

std::vector<Candidate> candidates_of(const Graph& g) {
  AutoOptions o;
  o.device = *device_model("h200-pcie5");
  auto tl = autoplan::timeline(g, o);
  EXPECT_TRUE(tl.has_value()) << tl.error().str();
  return autoplan::find_candidates(g, *tl, o);
}

const Candidate& find(const Graph& g, const std::vector<Candidate>& cs, const std::string& name) {
  const auto it = std::find_if(cs.begin(), cs.end(), [&](const Candidate& c) { return g.value(c.value).name == name; });
  EXPECT_NE(it, cs.end()) << name << " is not a candidate";
  return *it;
}

std::vector<std::string> names(const Graph& g, const std::vector<ValueId>& vs) {
  std::vector<std::string> out;
  for (ValueId v : vs) out.push_back(g.value(v).name);
  return out;
}

TEST(AutoCandidates, ABlockOutputIsRemadeFromTheBlockInput) {
  // %gy reads %y first, then %gc reads %c and %ga reads %a: all three are candidates, and %a is still resident
  // when %y is first read backward.
  const Graph g = *parse_graph(block("  %gy = mul(%gz, %y) : f32[16] #bwd\n  %gc = mul(%gy, %c) : f32[16] #bwd\n"
                                     "  %ga = mul(%gc, %a) : f32[16] #bwd\n"));
  const std::vector<Candidate> cs = candidates_of(g);
  ASSERT_EQ(cs.size(), 4u);  // and %a's forward gap (AutoCandidates.AForwardGapIsASwapCandidateAfterTheOthers)
  // %y's chain stops at %c and %a, which are resident: %d, %e, %y. Its segment goes back to the block's input:
  // %b, %c (cloned again for it alone), %d, %e, %y; at most two of the clones live at once besides %y (an op's
  // input and output).
  const Candidate& y = find(g, cs, "y");
  EXPECT_EQ(names(g, y.chain), (std::vector<std::string>{"d", "e", "y"}));
  EXPECT_EQ(names(g, y.segment), (std::vector<std::string>{"b", "c", "d", "e", "y"}));
  EXPECT_EQ(g.value(y.remade_from).name, "a");
  EXPECT_EQ(y.segment_transient, 2 * 64);
  EXPECT_GT(y.segment_seconds, y.recompute_seconds);
  // %c's chain (%b, %c from %a) is already the fewest ops back to one candidate: no segment.
  const Candidate& c = find(g, cs, "c");
  EXPECT_EQ(names(g, c.chain), (std::vector<std::string>{"b", "c"}));
  EXPECT_TRUE(c.segment.empty());
}

TEST(AutoCandidates, NoSegmentFromAnInputGoneByTheFirstBackwardReader) {
  // %a's only backward reader runs before %y's: the segment would need %a back.
  const Graph g = *parse_graph(block("  %ga = mul(%gz, %a) : f32[16] #bwd\n  %gy = mul(%ga, %y) : f32[16] #bwd\n"
                                     "  %gc = mul(%gy, %c) : f32[16] #bwd\n"));
  const std::vector<Candidate> cs = candidates_of(g);
  const Candidate& y = find(g, cs, "y");
  EXPECT_TRUE(y.segment.empty());
  EXPECT_FALSE(y.remade_from.valid());
}

TEST(AutoCandidates, ABackwardValueReadAfterAGapIsASwapCandidate) {
  // %ga2 is made early in the backward pass and read only by its last op (as a U-Net's skip-connection gradient
  // is); %gy is read by the next op only (no gap to free); nothing reads %ga.
  const Graph g = *parse_graph(block("  %ga2 = mul(%gz, %a) : f32[16] #bwd\n  %gy = mul(%gz, %y) : f32[16] #bwd\n"
                                     "  %gc = mul(%gy, %c) : f32[16] #bwd\n  %gb = relu(%gc) : f32[16] #bwd\n"
                                     "  %ga = add(%gb, %ga2) : f32[16] #bwd\n"));
  const std::vector<Candidate> cs = candidates_of(g);
  const Candidate& ga2 = find(g, cs, "ga2");
  EXPECT_EQ(ga2.fwd_end, static_cast<int>(g.value(ga2.value).producer.v));  // no forward reader: its producer
  EXPECT_EQ(ga2.bwd_first, static_cast<int>(g.value(*g.find_value("ga")).producer.v));
  EXPECT_FALSE(ga2.recomputable);  // backward ops are not recomputed
  EXPECT_TRUE(ga2.chain.empty());
  EXPECT_TRUE(ga2.segment.empty());
  for (const char* name : {"gz", "gy", "gc", "gb", "ga"})
    EXPECT_TRUE(std::none_of(cs.begin(), cs.end(), [&](const Candidate& c) { return g.value(c.value).name == name; }))
        << name;
}

TEST(AutoCandidates, AForwardGapIsASwapCandidateAfterTheOthers) {
  // %a, the block's input, is read by %b and then, after the block's insides, by the residual add %e: its forward
  // gap is (%b, %e), a candidate to swap only, listed after every backward one; %a's backward gap (from %e to
  // %ga) is a candidate too. %c's forward readers follow each other (no gap); %y is read by %z next.
  const Graph g = *parse_graph(block("  %gy = mul(%gz, %y) : f32[16] #bwd\n  %gc = mul(%gy, %c) : f32[16] #bwd\n"
                                     "  %ga = mul(%gc, %a) : f32[16] #bwd\n"));
  const std::vector<Candidate> cs = candidates_of(g);
  ASSERT_EQ(cs.size(), 4u);
  auto position = [&](const char* name) { return static_cast<int>(g.value(*g.find_value(name)).producer.v); };
  for (size_t i = 0; i < 3; ++i) EXPECT_FALSE(cs[i].forward);
  const Candidate& a = cs[3];
  EXPECT_EQ(g.value(a.value).name, "a");
  EXPECT_TRUE(a.forward);
  EXPECT_EQ(a.fwd_end, position("b"));
  EXPECT_EQ(a.bwd_first, position("e"));
  EXPECT_FALSE(a.recomputable);
  EXPECT_TRUE(a.chain.empty());
  EXPECT_GT(a.gap, 0.0);
  EXPECT_GE(a.trigger, a.fwd_end);
  EXPECT_LT(a.trigger, a.bwd_first);
  const Candidate& backward = find(g, cs, "a");
  EXPECT_FALSE(backward.forward);
  EXPECT_EQ(backward.fwd_end, position("e"));
  EXPECT_EQ(backward.bwd_first, position("ga"));
}

}  // namespace
}  // namespace lms
