// The chunk-attention pass: which attention cores it splits and how (GPT's scaled [B, H, S, d] attention, ViT's
// ONNX [B*H, S, d] one; blocks of matrices, or of a matrix's query rows), that the output and every gradient of the
// split graph are the unsplit graph's on the reference interpreter (bit for bit: the same ops on the same rows; k's
// and v's gradients, summed over row blocks, within rounding), and what it leaves alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include <fmt/format.h>

#include "backends/reference_test_util.h"
#include "lms/autodiff/autodiff.h"
#include "lms/backends/reference/interpreter.h"
#include "lms/ir/printer.h"
#include "lms/passes/chunk_attention.h"
#include "passes/pass_test_util.h"

namespace lms {
namespace {

using pass_test::count_op;
using pass_test::gradients;
using pass_test::parse;

// GPT's attention core: [B, H, S, d] = [2, 3, 5, 4], scaled, causal; the context read by a transpose.
constexpr std::string_view kGpt = R"(graph attn {
  %q = param() : f64[2,3,5,4]
  %k = param() : f64[2,3,5,4]
  %v = param() : f64[2,3,5,4]
  %scores = matmul(%q, %k) {transpose_b = true} : f64[2,3,5,5]
  %scaled = scale(%scores) {factor = 0.5} : f64[2,3,5,5]
  %probs = softmax(%scaled) {axis = -1, causal = true} : f64[2,3,5,5]
  %ctx = matmul(%probs, %v) : f64[2,3,5,4]
  %ctx.t = transpose(%ctx) {perm = [0, 2, 1, 3]} : f64[2,5,3,4]
  %loss = reduce_sum(%ctx.t) : f64[]
  return %loss
})";

// ViT's as imported from ONNX: batch and heads already one axis of 4, k already transposed, no scale (q was).
constexpr std::string_view kVit = R"(graph attn {
  %q = param() : f64[4,3,2]
  %kt = param() : f64[4,2,3]
  %v = param() : f64[4,3,2]
  %w = param() : f64[4,3,2]
  %scores = matmul(%q, %kt) : f64[4,3,3]
  %probs = softmax(%scores) {axis = 2} : f64[4,3,3]
  %ctx = matmul(%probs, %v) : f64[4,3,2]
  %weighted = mul(%ctx, %w) : f64[4,3,2]
  %loss = reduce_sum(%weighted) : f64[]
  return %loss
})";

Graph split(std::string_view text, int64_t chunks, int expected_cores) {
  Graph g = parse(text);
  auto cores = chunk_attention(g, chunks);
  EXPECT_TRUE(cores.has_value()) << cores.error().str();
  EXPECT_EQ(cores.value_or(-1), expected_cores) << print_graph(g);
  return g;
}

TEST(ChunkAttention, SplitsTheAttentionMatricesIntoBlocks) {
  // Six [5, 5] attention matrices in four blocks: [0, 1), [1, 3), [3, 4), [4, 6).
  Graph g = split(kGpt, 4, 1);
  EXPECT_EQ(count_op(g, Op::softmax), 4);
  EXPECT_EQ(count_op(g, Op::scale), 4);
  EXPECT_EQ(count_op(g, Op::matmul), 8);
  const Shape sizes[] = {{1, 5, 5}, {2, 5, 5}, {1, 5, 5}, {2, 5, 5}};
  for (int i = 0; i < 4; ++i) {
    auto p = g.find_value("probs." + std::to_string(i));
    ASSERT_TRUE(p.has_value()) << print_graph(g);
    EXPECT_EQ(g.value(*p).type.shape, sizes[i]) << i;
    EXPECT_TRUE(g.node(g.value(*p).producer).attrs.get_bool("causal", false)) << i;
  }
  // The context keeps its name and shape: the blocks' concat viewed back as [2, 3, 5, 4].
  const Node& ctx = g.node(g.value(*g.find_value("ctx")).producer);
  EXPECT_EQ(ctx.op, Op::reshape);
  EXPECT_EQ(g.node(g.value(ctx.inputs[0]).producer).op, Op::concat);
  EXPECT_FALSE(g.find_value("probs").has_value());
  EXPECT_FALSE(g.find_value("scores").has_value());
  // With the leading axes already one, the context is the concat itself.
  Graph vit = split(kVit, 2, 1);
  EXPECT_EQ(count_op(vit, Op::softmax), 2);
  EXPECT_EQ(count_op(vit, Op::reshape), 0);
  EXPECT_EQ(vit.node(vit.value(*vit.find_value("ctx")).producer).op, Op::concat);
  // One chunk changes nothing.
  EXPECT_EQ(print_graph(split(kGpt, 1, 0)), print_graph(parse(kGpt)));
}

// More chunks than attention matrices: each matrix alone, its query rows in ceil(chunks / P) blocks, a causal
// block's mask offset by its first row and its keys and values cut after its last row; one matrix (not causal):
// its row blocks are the whole, each against every key.
TEST(ChunkAttention, RowBlocksOfACausalMatrixStartTheirMaskAtTheirFirstRow) {
  Graph g = split(kGpt, 12, 1);  // six matrices of five rows: rows [0, 2) and [2, 5) of each
  EXPECT_EQ(count_op(g, Op::softmax), 12);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 2; ++j) {
      const auto p = g.find_value(fmt::format("probs.{}.{}", i, j));
      ASSERT_TRUE(p.has_value()) << print_graph(g);
      // Rows [0, 2) see keys [0, 2) only (the rest are masked); rows [2, 5) all five.
      EXPECT_EQ(g.value(*p).type.shape, (Shape{1, j == 0 ? 2 : 3, j == 0 ? 2 : 5}));
      const Node& sm = g.node(g.value(*p).producer);
      EXPECT_TRUE(sm.attrs.get_bool("causal", false));
      EXPECT_EQ(sm.attrs.get_int("causal_offset", 0), j == 0 ? 0 : 2);
    }
  std::string one(kVit);  // a single [3, 3] matrix
  for (size_t at = one.find("f64[4,"); at != std::string::npos; at = one.find("f64[4,")) one.replace(at, 6, "f64[1,");
  Graph single = split(one, 3, 1);
  EXPECT_EQ(count_op(single, Op::softmax), 3);
  EXPECT_EQ(count_op(single, Op::slice), 3);  // q's rows; k and v whole (not causal)
  const Node& ctx = single.node(single.value(*single.find_value("ctx")).producer);
  EXPECT_EQ(ctx.op, Op::concat);
  EXPECT_EQ(ctx.attrs.get_int("axis", 0), 1);
}

// The loss and every gradient, split and unsplit, over the same feeds: bit for bit, but for the values named in
// `summed` (read by several blocks: their gradients are sums over the blocks, in another order) within 1e-13.
void expect_same_values(std::string_view text, int64_t chunks, const std::map<std::string, HostTensor>& feeds,
                        const std::vector<std::string>& summed = {}) {
  const Graph whole = gradients(parse(text)), blocks = gradients(split(text, chunks, 1));
  auto want = interpret(whole, feeds), got = interpret(blocks, feeds);
  ASSERT_TRUE(want.has_value()) << want.error().str();
  ASSERT_TRUE(got.has_value()) << got.error().str();
  ASSERT_EQ(whole.outputs().size(), blocks.outputs().size());
  for (size_t o = 0; o < whole.outputs().size(); ++o) {
    const std::string name = whole.value(whole.outputs()[o]).name;
    EXPECT_EQ(blocks.value(blocks.outputs()[o]).name, name);
    const HostTensor &a = (*want)[whole.outputs()[o].v], &b = (*got)[blocks.outputs()[o].v];
    if (std::ranges::find(summed, name) == summed.end()) {
      EXPECT_EQ(b.data, a.data) << name << " differs";
      continue;
    }
    for (int64_t i = 0; i < a.type.num_elements(); ++i)
      EXPECT_NEAR(b.get(i), a.get(i), 1e-13 * std::max(1.0, std::abs(a.get(i)))) << name << "[" << i << "]";
  }
}

TEST(ChunkAttention, OutputAndGradientsAreTheUnsplitGraphsOnTheReference) {
  const std::map<std::string, HostTensor> gpt = {{"q", ref_test::random(DType::f64, {2, 3, 5, 4}, 1, -2, 2)},
                                                 {"k", ref_test::random(DType::f64, {2, 3, 5, 4}, 2, -2, 2)},
                                                 {"v", ref_test::random(DType::f64, {2, 3, 5, 4}, 3)}};
  expect_same_values(kGpt, 4, gpt);
  // Row blocks: every row computed as before, k's and v's gradients summed over the row blocks that read them.
  expect_same_values(kGpt, 12, gpt, {"k.grad", "v.grad"});
  expect_same_values(kVit, 3,
                     {{"q", ref_test::random(DType::f64, {4, 3, 2}, 4, -2, 2)},
                      {"kt", ref_test::random(DType::f64, {4, 2, 3}, 5, -2, 2)},
                      {"v", ref_test::random(DType::f64, {4, 3, 2}, 6)},
                      {"w", ref_test::random(DType::f64, {4, 3, 2}, 7)}});
}

TEST(ChunkAttention, LeavesOtherShapesAlone) {
  auto untouched = [](std::string_view text) {
    Graph g = parse(text);
    auto cores = chunk_attention(g, 2);
    ASSERT_TRUE(cores.has_value()) << cores.error().str();
    EXPECT_EQ(*cores, 0) << text;
    EXPECT_EQ(print_graph(g), print_graph(parse(text)));
  };
  std::string masked(kVit);  // a mask added to the scores
  masked.replace(masked.find("  %probs = softmax(%scores)"), 0,
                 "  %mask = param() : f64[4,3,3]\n  %masked = add(%scores, %mask) : f64[4,3,3]\n");
  masked.replace(masked.find("softmax(%scores)"), 16, "softmax(%masked)");
  untouched(masked);
  std::string read_twice(kVit);  // the probabilities read by something else too
  read_twice.replace(read_twice.find("  %loss ="), 0, "  %p2 = relu(%probs) : f64[4,3,3]\n");
  untouched(read_twice);
  untouched(R"(graph attn {
    %q = param() : f64[1,1,2]
    %kt = param() : f64[1,2,3]
    %v = param() : f64[1,3,2]
    %scores = matmul(%q, %kt) : f64[1,1,3]
    %probs = softmax(%scores) {axis = 2} : f64[1,1,3]
    %ctx = matmul(%probs, %v) : f64[1,1,2]
    %loss = reduce_sum(%ctx) : f64[]
    return %loss
  })");  // one matrix of one query row: nothing to split
  Graph g = parse(kGpt);
  EXPECT_FALSE(chunk_attention(g, 0).has_value());
}

}  // namespace
}  // namespace lms
