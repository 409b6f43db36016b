// The ONNX importer's transformer paths, on OnnxModel values built here: the constant folds (io/onnx_fold.h), causal
// masks (Where and additive) becoming a causal softmax and other constant masks an add, Split and Slice (steps too)
// as `slice`, Range positions as a slice of the table, Identity-shared initializers as separate parameters, and
// the refusals. tests/torch/torch_fixture_test.cc checks a real nanoGPT export against PyTorch's gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "io/onnx_nodes.h"
#include "lms/io/onnx_fold.h"
#include "lms/backends/reference/interpreter.h"
#include "lms/io/onnx_import.h"
#include "lms/ir/verifier.h"

namespace lms {
namespace {

// Whether the graph's one softmax is causal.
bool causal_softmax(const Graph& g) {
  for (NodeId id : g.node_ids())
    if (g.node(id).op == Op::softmax) return std::get<bool>(*g.node(id).attrs.find("causal"));
  return false;
}

TEST(OnnxFold, BinaryBroadcastsAndDividesIntegersExactly) {
  auto sum = fold_binary("Add", tensor(DType::f32, {2, 1}, {1, 2}), tensor(DType::f32, {3}, {10, 20, 30}));
  ASSERT_TRUE(sum.has_value()) << sum.error().str();
  EXPECT_EQ(sum->type.shape, (Shape{2, 3}));
  EXPECT_EQ(values(*sum), (std::vector<double>{11, 21, 31, 12, 22, 32}));
  auto q = fold_binary("Div", tensor(DType::i64, {2}, {16, 7}), tensor(DType::i64, {}, {2}));
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(values(*q), (std::vector<double>{8, 3}));
  auto eq = fold_binary("Equal", tensor(DType::f32, {3}, {0, 1, 0}), tensor(DType::f32, {}, {0}));
  ASSERT_TRUE(eq.has_value());
  EXPECT_EQ(eq->type.dtype, DType::i64);
  EXPECT_EQ(values(*eq), (std::vector<double>{1, 0, 1}));
  EXPECT_FALSE(fold_binary("Div", tensor(DType::i64, {}, {1}), tensor(DType::i64, {}, {0})).has_value());
  EXPECT_FALSE(fold_binary("Add", tensor(DType::f32, {2}, {}), tensor(DType::f32, {3}, {})).has_value());
}

// What swin's shifted-window mask is built from: Mod with either sign rule, Transpose, Concat, Expand, ScatterND.
TEST(OnnxFold, ModTransposeConcatExpandScatter) {
  auto mod = fold_binary("Mod", tensor(DType::i64, {4}, {7, -7, 7, -7}), tensor(DType::i64, {4}, {3, 3, -3, -3}));
  ASSERT_TRUE(mod.has_value()) << mod.error().str();
  EXPECT_EQ(values(*mod), (std::vector<double>{1, 2, -2, -1})) << "the divisor's sign, as Python's %";
  auto fmod = fold_binary("Fmod", tensor(DType::f32, {2}, {7, -7}), tensor(DType::f32, {}, {3}));
  ASSERT_TRUE(fmod.has_value()) << fmod.error().str();
  EXPECT_EQ(values(*fmod), (std::vector<double>{1, -1})) << "the dividend's sign, as C's fmod";
  EXPECT_FALSE(fold_binary("Mod", tensor(DType::f32, {}, {1}), tensor(DType::f32, {}, {2})).has_value());

  const HostTensor x = tensor(DType::i64, {2, 3}, {0, 1, 2, 3, 4, 5});
  auto t = fold_transpose(x, std::vector<int64_t>{1, 0});
  ASSERT_TRUE(t.has_value()) << t.error().str();
  EXPECT_EQ(t->type.shape, (Shape{3, 2}));
  EXPECT_EQ(values(*t), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  EXPECT_FALSE(fold_transpose(x, std::vector<int64_t>{0, 0}).has_value());

  const HostTensor col = tensor(DType::i64, {2, 1}, {9, 8});
  const HostTensor* parts[] = {&x, &col};
  auto c = fold_concat(parts, -1);
  ASSERT_TRUE(c.has_value()) << c.error().str();
  EXPECT_EQ(c->type.shape, (Shape{2, 4}));
  EXPECT_EQ(values(*c), (std::vector<double>{0, 1, 2, 9, 3, 4, 5, 8}));
  const HostTensor* bad[] = {&x, &t.value()};
  EXPECT_FALSE(fold_concat(bad, 0).has_value());

  auto e = fold_expand(tensor(DType::f32, {2, 1}, {1, 2}), Shape{3, 1, 2});
  ASSERT_TRUE(e.has_value()) << e.error().str();
  EXPECT_EQ(e->type.shape, (Shape{3, 2, 2})) << "two-way: a 1 in the shape keeps the input's dim";
  EXPECT_EQ(values(*e), (std::vector<double>{1, 1, 2, 2, 1, 1, 2, 2, 1, 1, 2, 2}));

  // Rows 2 and 0 of a 3x2 zero matrix replaced: indices [2,1] of depth 1, updates [2,2].
  auto sc = fold_scatter_nd(tensor(DType::f32, {3, 2}, {0, 0, 0, 0, 0, 0}), tensor(DType::i64, {2, 1}, {2, 0}),
                            tensor(DType::f32, {2, 2}, {5, 6, 7, 8}));
  ASSERT_TRUE(sc.has_value()) << sc.error().str();
  EXPECT_EQ(values(*sc), (std::vector<double>{7, 8, 0, 0, 5, 6}));
  EXPECT_FALSE(fold_scatter_nd(tensor(DType::f32, {3, 2}, {0, 0, 0, 0, 0, 0}), tensor(DType::i64, {1, 1}, {3}),
                               tensor(DType::f32, {1, 2}, {1, 1}))
                   .has_value())
      << "index out of range";
}

TEST(OnnxFold, SliceClampsAsOnnxDefines) {
  const HostTensor x = tensor(DType::f32, {3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  // Rows 1.. (end past the size clamps), columns -3..-1; then every other column backwards.
  auto y = fold_slice(x, std::vector<int64_t>{1, -3}, std::vector<int64_t>{100, -1}, {}, {});
  ASSERT_TRUE(y.has_value()) << y.error().str();
  EXPECT_EQ(y->type.shape, (Shape{2, 2}));
  EXPECT_EQ(values(*y), (std::vector<double>{5, 6, 9, 10}));
  auto back = fold_slice(x, std::vector<int64_t>{-1}, std::vector<int64_t>{std::numeric_limits<int64_t>::min()},
                         std::vector<int64_t>{1}, std::vector<int64_t>{-2});
  ASSERT_TRUE(back.has_value()) << back.error().str();
  EXPECT_EQ(values(*back), (std::vector<double>{3, 1, 7, 5, 11, 9}));
  EXPECT_FALSE(fold_slice(x, std::vector<int64_t>{0}, std::vector<int64_t>{1}, std::vector<int64_t>{2}, {}));
}

TEST(OnnxFold, RangeWhereNotAndTheCausalPattern) {
  auto r = fold_range(tensor(DType::i64, {}, {2}), tensor(DType::i64, {}, {9}), tensor(DType::i64, {}, {3}));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(values(*r), (std::vector<double>{2, 5, 8}));
  auto w = fold_where(tensor(DType::i64, {2}, {1, 0}), tensor(DType::f32, {}, {7}), tensor(DType::f32, {2}, {1, 2}));
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(values(*w), (std::vector<double>{7, 2}));
  EXPECT_EQ(values(fold_not(tensor(DType::f32, {2}, {0, 3}))), (std::vector<double>{1, 0}));
  const HostTensor causal = tensor(DType::i64, {1, 2, 3}, {0, 1, 1, 0, 0, 1});
  EXPECT_TRUE(is_causal_mask(causal, {4, 5, 2, 3}));
  EXPECT_FALSE(is_causal_mask(fold_not(causal), {4, 5, 2, 3})) << "the kept entries are not the masked ones";
  EXPECT_FALSE(is_causal_mask(causal, {4, 5, 2, 4})) << "a causal mask covers every column";
}

// One attention head over token ids x[n,4] (n symbolic): embedding + positions (Range -> Gather), one qkv
// projection split three ways, scores = q k^T masked causally by `masking` nodes reading "scores" and writing
// "masked", softmax, times v, then a head to 6 classes; the layer norm's weight is read through an Identity.
OnnxModel attention(std::vector<OnnxNode> masking, std::vector<std::pair<std::string, HostTensor>> extra = {}) {
  OnnxModel m;
  m.opset = 17;
  m.inputs = {info("x", {std::nullopt, 4}, /*INT64*/ 7)};
  m.outputs = {info("logits", {std::nullopt, 4, 6})};
  auto f = [](Shape s, double start) {
    HostTensor t(TensorType{DType::f32, s});
    for (int64_t i = 0; i < t.type.num_elements(); ++i) t.set(i, start + 0.01 * static_cast<double>(i));
    return t;
  };
  m.initializers = {{"wte", f({6, 8}, 0.1)}, {"wpe", f({4, 8}, -0.2)},   {"qkv", f({8, 24}, 0.3)},
                    {"head", f({8, 6}, -0.1)}, {"ln.w", f({8}, 1.0)},   {"ln.b", f({8}, 0.0)},
                    {"zero", tensor(DType::i64, {}, {0})}, {"four", tensor(DType::i64, {}, {4})},
                    {"one", tensor(DType::i64, {}, {1})},  {"split", tensor(DType::i64, {3}, {8, 8, 8})}};
  for (auto& e : extra) m.initializers.push_back(std::move(e));
  m.nodes = {node("Gather", {"wte", "x"}, {"tok"}),
             node("Range", {"zero", "four", "one"}, {"pos_ids"}),
             node("Gather", {"wpe", "pos_ids"}, {"pos"}),
             node("Add", {"tok", "pos"}, {"h"}),
             node("MatMul", {"h", "qkv"}, {"qkv_out"}),
             node("Split", {"qkv_out", "split"}, {"q", "k", "v"}),
             node("Transpose", {"k"}, {"kt"})};
  m.nodes[5].attributes.push_back(int_attr("axis", 2));
  m.nodes.back().attributes.push_back(ints_attr("perm", {0, 2, 1}));
  m.nodes.push_back(node("MatMul", {"q", "kt"}, {"scores"}));
  for (OnnxNode& n : masking) m.nodes.push_back(std::move(n));
  m.nodes.push_back(node("Softmax", {"masked"}, {"p"}));
  m.nodes.push_back(node("MatMul", {"p", "v"}, {"att"}));
  m.nodes.push_back(node("Identity", {"ln.w"}, {"ln2.w"}));
  m.nodes.push_back(node("LayerNormalization", {"att", "ln2.w", "ln.b"}, {"normed"}));
  m.nodes.push_back(node("MatMul", {"normed", "head"}, {"logits"}));
  return m;
}

HostTensor tril_keep() {  // 1 where attention is allowed (j <= i)
  HostTensor t(TensorType{DType::f32, {1, 4, 4}});
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 4; ++j) t.set(i * 4 + j, j <= i);
  return t;
}

TEST(OnnxAttention, AMaskedFillBecomesACausalSoftmax) {
  const double inf = std::numeric_limits<double>::infinity();
  OnnxModel m = attention({node("Equal", {"keep", "fzero"}, {"cond"}),
                           node("Where", {"cond", "ninf", "scores"}, {"masked"})},
                          {{"keep", tril_keep()}, {"fzero", tensor(DType::f32, {}, {0})},
                           {"ninf", tensor(DType::f32, {}, {-inf})}});
  OnnxImportOptions opts;
  opts.batch = 3;
  auto imported = import_onnx(m, "att", opts);
  ASSERT_TRUE(imported.has_value()) << imported.error().str();
  const Graph& g = imported->forward;
  ASSERT_TRUE(verify(g).has_value()) << verify(g).error().str();
  ASSERT_EQ(count_op(g, Op::softmax), 1);
  EXPECT_TRUE(causal_softmax(g));
  EXPECT_EQ(count_op(g, Op::slice), 3) << "three Split parts; the positions read all of wpe's rows, no slice";
  EXPECT_EQ(count_op(g, Op::embedding), 1);
  // Token logits [3,4,6] are one row of 6 classes per token; labels are per token.
  EXPECT_EQ(to_string(g.value(*g.find_value("labels")).type), "i64[3,4]");
  // The Identity-read layer-norm weight is a parameter of its own, with the shared initializer's values.
  ASSERT_TRUE(imported->weights.contains("ln2.w"));
  EXPECT_EQ(imported->weights.at("ln2.w").data, m.initializers[4].second.data);
  EXPECT_FALSE(g.find_value("ln.w").has_value()) << "only the Identity's reader uses it here";
  EXPECT_FALSE(imported->weights.contains("keep")) << "the mask is folded, not a parameter";

  // The additive form: scores + (0 where kept, -1e9 where masked).
  HostTensor additive = tril_keep();
  for (int64_t i = 0; i < additive.type.num_elements(); ++i) additive.set(i, additive.get(i) != 0 ? 0.0 : -1e9);
  auto added =
      import_onnx(attention({node("Add", {"scores", "bias"}, {"masked"})}, {{"bias", additive}}), "att2", opts);
  ASSERT_TRUE(added.has_value()) << added.error().str();
  EXPECT_TRUE(causal_softmax(added->forward));
}

// Slices with steps on data (PatchMerging's x[:, 1::2, 0::2, :]): a span viewed as [count, step] and one entry of
// each step, so the values are exactly the strided ones. Rows 1::2 of 4 take a span ending at the axis' end;
// columns 0::2 of 5 need 6 elements, so the last one is concatenated.
TEST(OnnxSlice, StepsOnDataPickEveryStepthElement) {
  OnnxModel m;
  m.opset = 14;
  m.inputs = {info("x", {std::nullopt, 4, 5, 1}, /*FLOAT*/ 1)};
  m.outputs = {info("logits", {std::nullopt, 3})};
  m.initializers = {{"starts", tensor(DType::i64, {2}, {1, 0})},
                    {"ends", tensor(DType::i64, {2}, {100, 100})},
                    {"axes", tensor(DType::i64, {2}, {1, 2})},
                    {"steps", tensor(DType::i64, {2}, {2, 2})},
                    {"flat", tensor(DType::i64, {2}, {0, -1})},
                    {"fc", tensor(DType::f32, {6, 3}, std::vector<double>(18, 0.5))}};
  m.nodes = {node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"picked"}),
             node("Reshape", {"picked", "flat"}, {"rows"}),
             node("MatMul", {"rows", "fc"}, {"logits"})};
  auto imported = import_onnx(m, "strided");
  ASSERT_TRUE(imported.has_value()) << imported.error().str();
  const Graph& g = imported->forward;
  ASSERT_TRUE(verify(g).has_value()) << verify(g).error().str();
  const ValueId picked = *g.find_value("picked");
  EXPECT_EQ(g.value(picked).type.shape, (Shape{1, 2, 3, 1}));
  std::vector<double> x(20);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i);
  std::map<std::string, HostTensor> feeds = {{"x", tensor(DType::f32, {1, 4, 5, 1}, x)},
                                             {"labels", tensor(DType::i64, {1}, {0})},
                                             {"fc", imported->weights.at("fc")}};
  auto out = interpret(g, feeds);
  ASSERT_TRUE(out.has_value()) << out.error().str();
  // Rows 1 and 3, columns 0, 2 and 4 of the 4x5 matrix 0..19.
  EXPECT_EQ(values((*out)[picked.v]), (std::vector<double>{5, 7, 9, 15, 17, 19}));

  m.initializers[0].second = tensor(DType::i64, {2}, {1, 4});  // columns backwards: refused
  m.initializers[1].second = tensor(DType::i64, {2}, {100, -100});
  m.initializers[3].second = tensor(DType::i64, {2}, {2, -1});
  auto r = import_onnx(m, "strided");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().str().find("a slice with step -1 along axis 2 (backwards) is not supported"), std::string::npos)
      << r.error().str();
}

// A constant mask that is not causal (here: keeping j >= i) is the scores plus a constant held as state, 0 where
// kept and the fill where masked; the Softmax stays a plain one.
TEST(OnnxAttention, OtherConstantMasksAreAdded) {
  HostTensor anti = tril_keep();  // keeps j >= i: not causal
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 4; ++j) anti.set(i * 4 + j, j >= i);
  OnnxImportOptions opts;
  opts.batch = 3;
  for (double fill : {-std::numeric_limits<double>::infinity(), -1e9}) {
    auto imported = import_onnx(attention({node("Where", {"keep", "scores", "fill"}, {"masked"})},
                                          {{"keep", anti}, {"fill", tensor(DType::f32, {}, {fill})}}),
                                "anti", opts);
    ASSERT_TRUE(imported.has_value()) << imported.error().str();
    const Graph& g = imported->forward;
    ASSERT_TRUE(verify(g).has_value()) << verify(g).error().str();
    EXPECT_FALSE(causal_softmax(g));
    const ValueId masked = *g.find_value("masked");
    const Node& add = g.node(g.value(masked).producer);
    ASSERT_EQ(add.op, Op::add);
    const Value& mask = g.value(add.inputs[1]);
    EXPECT_EQ(g.node(mask.producer).op, Op::state);
    const HostTensor& values = imported->weights.at(mask.name);
    EXPECT_EQ(values.type.shape, (Shape{1, 4, 4}));
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(values.get(i * 4 + j), j >= i ? 0.0 : fill) << i << "," << j;
  }
  // Layers masking with the same condition share one constant.
  auto twice = import_onnx(attention({node("Where", {"keep", "scores", "fill"}, {"once"}),
                                      node("Where", {"keep", "once", "fill"}, {"masked"})},
                                     {{"keep", anti}, {"fill", tensor(DType::f32, {}, {-1e9})}}),
                           "anti", opts);
  ASSERT_TRUE(twice.has_value()) << twice.error().str();
  EXPECT_EQ(count_op(twice->forward, Op::add), 3) << "the positions, and one per mask";
  EXPECT_EQ(count_op(twice->forward, Op::state), 1);
}

TEST(OnnxAttention, RefusalsSayWhatIsSupported) {
  const double inf = std::numeric_limits<double>::infinity();
  HostTensor first_row_out = tril_keep();  // row 0 masked whole
  first_row_out.set(0, 0);
  struct Case {
    const char* what;
    OnnxModel model;
    const char* needle;
  };
  const Case cases[] = {
      {"a row masked whole by a finite fill",
       attention({node("Where", {"keep", "scores", "fill"}, {"masked"})},
                 {{"keep", first_row_out}, {"fill", tensor(DType::f32, {}, {-1e9})}}),
       "the attention mask [1,4,4] masks row 0 whole with the finite fill"},
      {"a small fill",
       attention({node("Where", {"keep", "scores", "small"}, {"masked"})},
                 {{"keep", tril_keep()}, {"small", tensor(DType::f32, {}, {-1})}}),
       "Where is supported on constants, and on data only as an attention mask"},
      {"masked scores read elsewhere",
       [&] {
         OnnxModel m = attention({node("Where", {"keep", "scores", "ninf"}, {"masked"})},
                                 {{"keep", tril_keep()}, {"ninf", tensor(DType::f32, {}, {-inf})}});
         m.nodes.insert(m.nodes.end() - 5, node("Relu", {"masked"}, {"r"}));
         return m;
       }(),
       "holds attention scores under a causal mask"},
      {"Equal on data",
       attention({node("Equal", {"scores", "scores"}, {"masked"})}),
       "Equal is supported on constants only"},
  };
  OnnxImportOptions opts;
  opts.batch = 3;
  for (const Case& c : cases) {
    auto r = import_onnx(c.model, "bad", opts);
    ASSERT_FALSE(r.has_value()) << c.what;
    EXPECT_NE(r.error().str().find(c.needle), std::string::npos) << c.what << ": " << r.error().str();
    EXPECT_EQ(r.error().str().find('\n'), std::string::npos) << c.what;
  }
}

}  // namespace
}  // namespace lms
