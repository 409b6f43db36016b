// The chunk-loss pass: which losses it splits and how (blocks as even as the rows divide, the old names kept for
// the loss), that the loss and every gradient of the split graph are the unsplit graph's within rounding (f64 on
// the reference interpreter), and its errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "backends/reference_test_util.h"
#include "lms/autodiff/autodiff.h"
#include "lms/backends/reference/interpreter.h"
#include "lms/ir/printer.h"
#include "lms/passes/chunk_loss.h"
#include "passes/pass_test_util.h"

namespace lms {
namespace {

using pass_test::count_op;
using pass_test::gradients;
using pass_test::parse;

// A language model's head over [2, 5] tokens: h [2, 5, 4] by the tied [7, 4] table, reshaped to [10, 7] logits,
// as imported from ONNX; in f64 so that the split changes only the last bits.
constexpr std::string_view kHead3d = R"(graph head {
  %x = input() : f64[2,5,4]
  %proj = param() : f64[4,4]
  %h = matmul(%x, %proj) : f64[2,5,4]
  %wte = param() : f64[7,4]
  %logits = matmul(%h, %wte) {transpose_b = true} : f64[2,5,7]
  %flat = reshape(%logits) {shape = [10, 7]} : f64[10,7]
  %labels = input() : i64[10]
  %loss = cross_entropy(%flat, %labels) : f64[]
  return %loss
})";

// A classifier's head with a bias, h already [N, K].
constexpr std::string_view kHeadBias = R"(graph head {
  %h = input() : f64[9,4]
  %w = param() : f64[4,6]
  %b = param() : f64[6]
  %z = matmul(%h, %w) : f64[9,6]
  %logits = bias_add(%z, %b) {axis = 1} : f64[9,6]
  %labels = input() : i64[9]
  %loss = cross_entropy(%logits, %labels) : f64[]
  return %loss
})";

TEST(ChunkLoss, SplitsTheRowsAsEvenlyAsTheyDivide) {
  Graph g = parse(kHead3d);
  ASSERT_TRUE(chunk_loss(g, 4).has_value());
  // Ten rows in four blocks: [0, 2), [2, 5), [5, 7), [7, 10), each weighted by its share of the rows.
  EXPECT_EQ(count_op(g, Op::cross_entropy), 4);
  EXPECT_EQ(count_op(g, Op::reshape), 1);  // h's [2, 5, 4] viewed as [10, 4] rows; the logits' reshape is gone
  const std::vector<std::pair<int64_t, double>> blocks = {{2, 0.2}, {3, 0.3}, {2, 0.2}, {3, 0.3}};
  for (size_t i = 0; i < blocks.size(); ++i) {
    const std::string z = "flat." + std::to_string(i);  // named after the loss's logits
    ASSERT_TRUE(g.find_value(z).has_value()) << print_graph(g);
    EXPECT_EQ(g.value(*g.find_value(z)).type.shape, (Shape{blocks[i].first, 7})) << z;
    const Node& w = g.node(g.value(*g.find_value("loss." + std::to_string(i) + ".weighted")).producer);
    EXPECT_DOUBLE_EQ(w.attrs.get_float("factor", 0), blocks[i].second) << i;
  }
  ASSERT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(g.value(g.outputs()[0]).name, "loss");
  EXPECT_EQ(g.node(g.value(g.outputs()[0]).producer).op, Op::add);
  EXPECT_FALSE(g.find_value("logits").has_value());
  EXPECT_FALSE(g.find_value("flat").has_value());
  // One chunk changes nothing.
  Graph same = parse(kHead3d);
  ASSERT_TRUE(chunk_loss(same, 1).has_value());
  EXPECT_EQ(print_graph(same), print_graph(parse(kHead3d)));
}

// The loss and the gradient of every parameter, split and unsplit, over the same random feeds.
void expect_same_loss_and_gradients(std::string_view text, int64_t chunks,
                                    const std::map<std::string, HostTensor>& feeds) {
  const Graph whole = gradients(parse(text));
  Graph split_forward = parse(text);
  ASSERT_TRUE(chunk_loss(split_forward, chunks).has_value());
  const Graph split = gradients(split_forward);
  auto want = interpret(whole, feeds), got = interpret(split, feeds);
  ASSERT_TRUE(want.has_value()) << want.error().str();
  ASSERT_TRUE(got.has_value()) << got.error().str();
  ASSERT_EQ(whole.outputs().size(), split.outputs().size());
  ASSERT_EQ(whole.outputs().size(), 3u);  // the loss and two parameters' gradients
  for (size_t o = 0; o < whole.outputs().size(); ++o) {
    const std::string name = whole.value(whole.outputs()[o]).name;
    EXPECT_EQ(split.value(split.outputs()[o]).name, name);
    const HostTensor &a = (*want)[whole.outputs()[o].v], &b = (*got)[split.outputs()[o].v];
    ASSERT_EQ(a.type, b.type) << name;
    double largest = 0;
    for (int64_t i = 0; i < a.type.num_elements(); ++i) largest = std::max(largest, std::abs(a.get(i)));
    ASSERT_GT(largest, 0) << name << " is all zeros";
    for (int64_t i = 0; i < a.type.num_elements(); ++i)
      EXPECT_NEAR(b.get(i), a.get(i), 1e-13 * largest) << name << "[" << i << "]";
  }
}

HostTensor labels(int64_t n, int64_t classes) {
  HostTensor t(TensorType{DType::i64, {n}});
  for (int64_t i = 0; i < n; ++i) t.set(i, static_cast<double>((3 * i + 1) % classes));
  return t;
}

TEST(ChunkLoss, LossAndGradientsMatchTheUnsplitLoss) {
  expect_same_loss_and_gradients(kHead3d, 3,
                                 {{"x", ref_test::random(DType::f64, {2, 5, 4}, 1, -2, 2)},
                                  {"proj", ref_test::random(DType::f64, {4, 4}, 2)},
                                  {"wte", ref_test::random(DType::f64, {7, 4}, 3)},
                                  {"labels", labels(10, 7)}});
  expect_same_loss_and_gradients(kHeadBias, 4,
                                 {{"h", ref_test::random(DType::f64, {9, 4}, 4, -2, 2)},
                                  {"w", ref_test::random(DType::f64, {4, 6}, 5)},
                                  {"b", ref_test::random(DType::f64, {6}, 6)},
                                  {"labels", labels(9, 6)}});
  // A bias along the sequence axis of [B, S, V] logits (bias_add's default axis 1) is not over the classes.
  std::string seq_bias(kHead3d);
  seq_bias.replace(seq_bias.find("  %flat = reshape(%logits)"), 0,
                   "  %b = param() : f64[5]\n  %biased = bias_add(%logits, %b) : f64[2,5,7]\n");
  seq_bias.replace(seq_bias.find("reshape(%logits)"), 16, "reshape(%biased)");
  Graph refused = parse(seq_bias);
  EXPECT_FALSE(chunk_loss(refused, 2).has_value());
  // Each block adds the bias to its own logits.
  Graph g = parse(kHeadBias);
  ASSERT_TRUE(chunk_loss(g, 4).has_value());
  EXPECT_EQ(count_op(g, Op::bias_add), 4);
  EXPECT_EQ(count_op(g, Op::matmul), 4);
}

TEST(ChunkLoss, Errors) {
  struct {
    std::string_view text;
    int64_t chunks;
    std::string message;
  } cases[] = {
      {kHead3d, 0, "chunks must be >= 1, got 0"},
      {kHead3d, 11, "11 chunks for the 10 rows of the logits %flat: at most one chunk per row"},
      {R"(graph g {
        %x = input() : f32[4,3]
        %loss = mean(%x) : f32[]
        return %loss
      })", 2, "the loss %loss is mean, not cross_entropy"},
      {R"(graph g {
        %z = input() : f32[4,3]
        %y = input() : i64[4]
        %loss = cross_entropy(%z, %y) : f32[]
        return %loss
      })", 2, "the loss's logits %z are not a matmul"},
      // The logits read by something else as well: their blocks would not replace them.
      {R"(graph g {
        %h = input() : f32[4,3]
        %w = param() : f32[3,5]
        %z = matmul(%h, %w) : f32[4,5]
        %y = input() : i64[4]
        %loss = cross_entropy(%z, %y) : f32[]
        %also = relu(%z) : f32[4,5]
        return %loss
      })", 2, "the loss's logits %z are not a matmul"},
      // A batched right-hand side is not a projection.
      {R"(graph g {
        %h = input() : f32[2,4,3]
        %w = param() : f32[2,3,5]
        %z = matmul(%h, %w) : f32[2,4,5]
        %zf = reshape(%z) {shape = [8, 5]} : f32[8,5]
        %y = input() : i64[8]
        %loss = cross_entropy(%zf, %y) : f32[]
        return %loss
      })", 2, "the loss's logits %zf are not a matmul"},
  };
  for (const auto& c : cases) {
    Graph g = parse(c.text);
    auto r = chunk_loss(g, c.chunks);
    ASSERT_FALSE(r.has_value()) << c.message;
    EXPECT_NE(r.error().str().find(c.message), std::string::npos) << r.error().str();
  }
}

}  // namespace
}  // namespace lms
