// ONNX import (io/onnx_import.h) on models built here as OnnxModel values, so that these tests need no .onnx
// file and run in every build: shape arithmetic folded away at another batch, batch-norm statistics as the
// initial running state, constant factors as `scale`, and one clear error naming the node for each thing the
// importer refuses. tests/torch/torch_fixture_test.cc checks real PyTorch exports against PyTorch's gradients.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "lms/autodiff/autodiff.h"
#include "lms/autodiff/optimizer.h"
#include "io/onnx_nodes.h"
#include "lms/io/onnx_import.h"
#include "lms/ir/printer.h"
#include "lms/ir/verifier.h"

namespace lms {
namespace {

// A float input with dims (nullopt: symbolic, named "n").
OnnxValueInfo input(std::string name, std::vector<std::optional<int64_t>> dims) {
  OnnxValueInfo v;
  v.name = std::move(name);
  v.elem_type = 1;  // FLOAT
  v.dims = std::move(dims);
  for (const auto& d : v.dims) v.dim_names.push_back(d ? "" : "n");
  return v;
}

// An f32 tensor with elements start, start + step, ...
HostTensor f32(Shape shape, double start = 0.5, double step = 0.25) {
  HostTensor t(TensorType{DType::f32, std::move(shape)});
  for (int64_t i = 0; i < t.type.num_elements(); ++i) t.set(i, start + step * static_cast<double>(i));
  return t;
}
HostTensor i64(std::vector<int64_t> v, Shape shape) {
  HostTensor t(TensorType{DType::i64, std::move(shape)});
  std::memcpy(t.data.data(), v.data(), t.data.size());
  return t;
}

const Node* find_op(const Graph& g, Op op) {
  for (NodeId id : g.node_ids())
    if (g.node(id).op == op) return &g.node(id);
  return nullptr;
}

// x[n,4,2,2] -> x.view(x.size(0), -1) as PyTorch exports it with a symbolic batch -> Gemm to 3 classes.
OnnxModel dynamic_flatten_model() {
  OnnxModel m;
  m.opset = 13;
  m.inputs = {input("x", {std::nullopt, 4, 2, 2})};
  m.outputs = {input("logits", {std::nullopt, 3})};
  m.initializers = {{"fc.weight", f32({3, 16})}, {"fc.bias", f32({3}, -1.0, 0.5)},
                    {"zero", i64({0}, {})}, {"axes0", i64({0}, {1})}, {"minus_one", i64({-1}, {1})}};
  m.nodes = {node("Shape", {"x"}, {"s"}),
             node("Gather", {"s", "zero"}, {"n"}, {int_attr("axis", 0)}),
             node("Unsqueeze", {"n", "axes0"}, {"n1"}),
             node("Concat", {"n1", "minus_one"}, {"target"}, {int_attr("axis", 0)}),
             node("Reshape", {"x", "target"}, {"flat"}),
             node("Gemm", {"flat", "fc.weight", "fc.bias"}, {"logits"}, {int_attr("transB", 1)})};
  return m;
}

TEST(OnnxImport, ShapeArithmeticIsFoldedAtAnotherBatch) {
  OnnxImportOptions opts;
  opts.batch = 5;
  auto m = import_onnx(dynamic_flatten_model(), "flat", opts);
  ASSERT_TRUE(m.has_value()) << m.error().str();
  const Graph& g = m->forward;
  ASSERT_TRUE(verify(g).has_value()) << verify(g).error().str();
  EXPECT_EQ(to_string(g.value(*g.find_value("x")).type), "f32[5,4,2,2]");
  EXPECT_EQ(to_string(g.value(*g.find_value("labels")).type), "i64[5]");
  ASSERT_EQ(count_op(g, Op::reshape), 1) << "Shape/Gather/Unsqueeze/Concat fold into one reshape";
  EXPECT_EQ(std::get<IntList>(*find_op(g, Op::reshape)->attrs.find("shape")), (IntList{5, 16}));
  EXPECT_EQ(count_op(g, Op::matmul), 1);
  EXPECT_EQ(count_op(g, Op::bias_add), 1) << "Gemm's 1-D C is a bias";
  EXPECT_EQ(count_op(g, Op::cross_entropy), 1);
  // The weights are the initializers, byte for byte, under the parameters' names; integer constants are not.
  ASSERT_EQ(m->weights.size(), 2u);
  EXPECT_EQ(m->weights.at("fc.weight").data, f32({3, 16}).data);
  EXPECT_EQ(m->weights.at("fc.bias").data, f32({3}, -1.0, 0.5).data);
  EXPECT_EQ(g.node(g.value(*g.find_value("fc.weight")).producer).op, Op::param);

  // Without --batch, a symbolic batch takes `symbolic_batch`.
  OnnxImportOptions fallback;
  fallback.symbolic_batch = 2;
  auto m2 = import_onnx(dynamic_flatten_model(), "flat", fallback);
  ASSERT_TRUE(m2.has_value()) << m2.error().str();
  EXPECT_EQ(to_string(m2->forward.value(*m2->forward.find_value("x")).type), "f32[2,4,2,2]");
}

TEST(OnnxImport, BatchNormStatisticsBecomeTheRunningState) {
  OnnxModel m;
  m.opset = 14;
  m.inputs = {input("x", {2, 3, 4, 4})};
  m.outputs = {input("y", {2, 3})};
  m.initializers = {{"bn.weight", f32({3}, 1.0)}, {"bn.bias", f32({3}, 0.0)},
                    {"bn.running_mean", f32({3}, 0.1, 0.1)}, {"bn.running_var", f32({3}, 2.0, 1.0)}};
  m.nodes = {node("BatchNormalization", {"x", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"},
                  {"bn_out"}, {float_attr("epsilon", 1e-3), float_attr("momentum", 0.75)}),
             node("GlobalAveragePool", {"bn_out"}, {"pooled"}),
             node("Flatten", {"pooled"}, {"y"}, {int_attr("axis", 1)})};
  auto imported = import_onnx(m, "bn");
  ASSERT_TRUE(imported.has_value()) << imported.error().str();
  const Graph& g = imported->forward;
  const Node* bn = find_op(g, Op::batch_norm);
  ASSERT_NE(bn, nullptr);
  EXPECT_DOUBLE_EQ(std::get<double>(*bn->attrs.find("eps")), 1e-3);
  EXPECT_DOUBLE_EQ(std::get<double>(*bn->attrs.find("momentum")), 0.25) << "ONNX weighs the old value by momentum";
  EXPECT_EQ(count_op(g, Op::reshape), 0) << "GlobalAveragePool then Flatten needs no copy";
  const std::string name = g.value(bn->outputs[0]).name;
  ASSERT_TRUE(imported->weights.contains(name + ".running_mean"));
  EXPECT_EQ(imported->weights.at(name + ".running_mean").data, f32({3}, 0.1, 0.1).data);
  EXPECT_EQ(imported->weights.at(name + ".running_var").data, f32({3}, 2.0, 1.0).data);
  EXPECT_FALSE(g.find_value("bn.running_mean").has_value()) << "statistics are not parameters";
  // The training graph has state values of exactly those names, so the weights initialize them.
  auto train = build_training_graph(g, TrainingOptions{});
  ASSERT_TRUE(train.has_value()) << train.error().str();
  for (const auto& [key, t] : imported->weights) {
    auto v = train->find_value(key);
    ASSERT_TRUE(v.has_value()) << key;
    EXPECT_TRUE(train->is_persistent(*v)) << key;
    EXPECT_EQ(train->value(*v).type, t.type) << key;
  }
  // Planning needs the graph alone: the same graph, and the values are not copied.
  OnnxImportOptions graph_only;
  graph_only.values = false;
  auto bare = import_onnx(m, "bn", graph_only);
  ASSERT_TRUE(bare.has_value()) << bare.error().str();
  EXPECT_EQ(print_graph(bare->forward), print_graph(g));
  EXPECT_TRUE(bare->weights.empty());
}

TEST(OnnxImport, ConstantFactorsAreScales) {
  OnnxModel m;
  m.opset = 14;
  m.inputs = {input("x", {2, 4})};
  m.outputs = {input("y", {2, 4})};
  m.initializers = {{"half", f32({}, 0.5)}, {"four", f32({1}, 4.0)}};
  m.nodes = {node("Mul", {"half", "x"}, {"a"}), node("Div", {"a", "four"}, {"b"}), node("Sub", {"x", "b"}, {"y"})};
  auto imported = import_onnx(m, "scales");
  ASSERT_TRUE(imported.has_value()) << imported.error().str();
  const Graph& g = imported->forward;
  EXPECT_EQ(count_op(g, Op::scale), 3) << "Mul, Div and Sub's negation";
  EXPECT_EQ(count_op(g, Op::add), 1);
  EXPECT_EQ(count_op(g, Op::param), 0);
  EXPECT_TRUE(imported->weights.empty());
  std::vector<double> factors;
  for (NodeId id : g.node_ids())
    if (g.node(id).op == Op::scale) factors.push_back(std::get<double>(*g.node(id).attrs.find("factor")));
  EXPECT_EQ(factors, (std::vector<double>{0.5, 0.25, -1.0}));

  // Swin's `q * (C // heads) ** -0.5` with C from the shape: Cast, Pow, Sqrt, Reciprocal of constants are
  // evaluated at import (in double, rounded once), so the product is a scale too.
  OnnxModel pow = m;
  pow.initializers = {{"sixteen", i64({16}, {})}, {"minus_half", f32({}, -0.5)}};  // a float one is a parameter
  pow.nodes = {node("Cast", {"sixteen"}, {"c"}, {int_attr("to", 1)}), node("Pow", {"c", "minus_half"}, {"f"}),
               node("Constant", {}, {"nine"}, {float_attr("value_float", 9)}), node("Sqrt", {"nine"}, {"three"}),
               node("Reciprocal", {"three"}, {"third"}),
               node("Mul", {"x", "f"}, {"a"}), node("Mul", {"third", "a"}, {"y"})};
  auto folded = import_onnx(pow, "pow");
  ASSERT_TRUE(folded.has_value()) << folded.error().str();
  factors.clear();
  for (NodeId id : folded->forward.node_ids()) {
    EXPECT_TRUE(folded->forward.node(id).op != Op::sqrt && folded->forward.node(id).op != Op::constant);
    if (folded->forward.node(id).op == Op::scale)
      factors.push_back(std::get<double>(*folded->forward.node(id).attrs.find("factor")));
  }
  EXPECT_EQ(factors, (std::vector<double>{0.25, static_cast<double>(1.0f / 3.0f)}));
}

// A valid conv net to break one thing at a time: x[2,3,8,8] -> Conv(3->4, 3x3, pad 1) -> Relu -> MaxPool 2 ->
// GlobalAveragePool -> Flatten.
OnnxModel conv_model() {
  OnnxModel m;
  m.opset = 14;
  m.inputs = {input("x", {std::nullopt, 3, 8, 8})};
  m.outputs = {input("y", {std::nullopt, 4})};
  m.initializers = {{"w", f32({4, 3, 3, 3})}};
  m.nodes = {node("Conv", {"x", "w"}, {"c"}, {ints_attr("pads", {1, 1, 1, 1}), ints_attr("kernel_shape", {3, 3})}),
             node("Relu", {"c"}, {"r"}),
             node("MaxPool", {"r"}, {"p"}, {ints_attr("kernel_shape", {2, 2}), ints_attr("strides", {2, 2})}),
             node("GlobalAveragePool", {"p"}, {"g"}),
             node("Flatten", {"g"}, {"y"})};
  return m;
}

TEST(OnnxImport, RefusalsNameTheNode) {
  ASSERT_TRUE(import_onnx(conv_model(), "ok").has_value());
  struct Case {
    const char* what;
    std::function<void(OnnxModel&)> edit;
    const char* needle;
  };
  const Case cases[] = {
      {"unsupported op", [](OnnxModel& m) { m.nodes[1].op_type = "Elu"; },
       "node 'Relu_r' (Elu): operator not supported (LMS imports: Add, AveragePool,"},
      {"asymmetric pads", [](OnnxModel& m) { m.nodes[0].attributes[0].ints = {0, 0, 1, 1}; },
       "node 'Conv_c' (Conv): asymmetric padding [0,0,1,1]"},
      {"auto_pad", [](OnnxModel& m) { m.nodes[0].attributes.push_back(string_attr("auto_pad", "SAME_UPPER")); },
       "auto_pad 'SAME_UPPER' is not supported"},
      {"storage order", [](OnnxModel& m) { m.nodes[2].attributes.push_back(int_attr("storage_order", 1)); },
       "node 'MaxPool_p' (MaxPool): storage_order 1"},
      {"attribute kind", [](OnnxModel& m) { m.nodes[0].attributes.push_back(float_attr("group", 1)); },
       "attribute 'group' has the wrong kind"},
      {"custom domain", [](OnnxModel& m) { m.nodes[1].domain = "com.microsoft"; }, "domain 'com.microsoft'"},
      {"second data input", [](OnnxModel& m) { m.inputs.push_back(input("mask", {2, 8})); },
       "the model has 2 data inputs ('x', 'mask')"},
      {"symbolic size", [](OnnxModel& m) {
         m.inputs[0].dims[2] = std::nullopt;
         m.inputs[0].dim_names[2] = "height";
       }, "input 'x': dimension 2 is symbolic ('height')"},
      {"unknown tensor", [](OnnxModel& m) { m.nodes[1].inputs[0] = "nowhere"; },
       "input 'nowhere' is not produced by any node"},
      {"two outputs", [](OnnxModel& m) { m.outputs.push_back(input("c", {2, 4, 8, 8})); }, "the model has 2 outputs"},
      {"not logits", [](OnnxModel& m) {
         m.nodes.push_back(node("ReduceMean", {"y"}, {"s"}, {int_attr("keepdims", 0)}));
         m.outputs[0].name = "s";
       }, "output 's' is f32[]; a classifier's logits"},
      {"shape rule", [](OnnxModel& m) { m.initializers[0].second = f32({4, 2, 3, 3}); }, "node 'Conv_c' (Conv):"},
      {"dropout mode from data", [](OnnxModel& m) {
         m.initializers.push_back({"ratio", f32({}, 0.5)});
         m.nodes.insert(m.nodes.begin() + 2, node("Dropout", {"r", "ratio", "c"}, {"d"}));
         m.nodes[3].inputs[0] = "d";
       }, "node 'Dropout_d' (Dropout): training_mode must be a constant"},
      {"dropout mask read", [](OnnxModel& m) {
         m.nodes.insert(m.nodes.begin() + 2, node("Dropout", {"r"}, {"d", "mask"}));
         m.nodes[3].inputs[0] = "d";
         m.nodes.push_back(node("Relu", {"mask"}, {"unused"}));
       }, "the mask output is read"},
      {"log_softmax inside", [](OnnxModel& m) {
         m.nodes.insert(m.nodes.begin() + 2, node("LogSoftmax", {"r"}, {"l"}, {int_attr("axis", 1)}));
         m.nodes[3].inputs[0] = "l";
       }, "node 'LogSoftmax_l' (LogSoftmax): LogSoftmax is imported only as the model's output"},
      {"log_softmax over the wrong axis", [](OnnxModel& m) {
         m.nodes.back().outputs[0] = "flat";
         m.nodes.push_back(node("LogSoftmax", {"flat"}, {"y"}, {int_attr("axis", 0)}));
       }, "LogSoftmax over axis 0 of rank 2: the loss's classes are axis 1"},
  };
  for (const Case& c : cases) {
    OnnxModel m = conv_model();
    c.edit(m);
    auto r = import_onnx(m, "bad");
    ASSERT_FALSE(r.has_value()) << c.what;
    EXPECT_NE(r.error().str().find(c.needle), std::string::npos) << c.what << ": " << r.error().str();
    EXPECT_EQ(r.error().str().find('\n'), std::string::npos) << c.what;
  }
}

// Dropout in training mode (opset 12+, a true training_mode constant) becomes LMS's dropout with the ratio as p,
// reading the graph's key; in evaluation mode, with ratio 0, or with no training_mode it is the identity.
TEST(OnnxImport, TrainingModeDropoutDrops) {
  auto with_dropout = [](double ratio, int64_t training) {
    OnnxModel m = conv_model();
    m.initializers.push_back({"ratio", f32({}, ratio)});
    m.initializers.push_back({"train", i64({training}, {})});
    m.nodes.insert(m.nodes.begin() + 2, node("Dropout", {"r", "ratio", "train"}, {"d"}));
    m.nodes.insert(m.nodes.begin() + 3, node("Dropout", {"d", "ratio", "train"}, {"d2", "unread_mask"}));
    m.nodes[4].inputs[0] = "d2";
    return m;
  };
  auto imported = import_onnx(with_dropout(0.25, 1), "train");
  ASSERT_TRUE(imported.has_value()) << imported.error().str();
  const Graph* g = &imported->forward;
  std::vector<int64_t> seeds;
  for (NodeId n : g->node_ids())
    if (g->node(n).op == Op::dropout) {
      EXPECT_DOUBLE_EQ(g->node(n).attrs.get_float("p", 0), 0.25);
      EXPECT_EQ(g->value(g->node(n).inputs[1]).name, "dropout.key");
      seeds.push_back(g->node(n).attrs.get_int("seed", -1));
    }
  EXPECT_EQ(seeds, (std::vector<int64_t>{0, 1})) << "each dropout draws its own mask";
  auto key = g->find_value("dropout.key");
  ASSERT_TRUE(key.has_value());
  EXPECT_EQ(g->node(g->value(*key).producer).op, Op::state);
  EXPECT_EQ(g->node(g->value(*key).producer).attrs.get_string("init", ""), "bits");
  for (auto [ratio, training] : {std::pair{0.25, int64_t{0}}, {0.0, int64_t{1}}}) {
    auto eval = import_onnx(with_dropout(ratio, training), "eval");
    ASSERT_TRUE(eval.has_value()) << eval.error().str();
    EXPECT_EQ(count_op(eval->forward, Op::dropout), 0) << ratio << " " << training;
  }
  auto bad = import_onnx(with_dropout(1.0, 1), "p1");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().str().find("dropout p = 1 must be in [0, 1)"), std::string::npos) << bad.error().str();
}

// MaxPool and AveragePool with ceil_mode keep it: a 3x3/2 window on 8x8 gives 4x4 (3x3 without it).
TEST(OnnxImport, CeilModePoolingKeepsItsLastWindow) {
  for (const char* pool : {"MaxPool", "AveragePool"}) {
    OnnxModel m = conv_model();
    m.nodes[2] = node(pool, {"r"}, {"p"},
                      {ints_attr("kernel_shape", {3, 3}), ints_attr("strides", {2, 2}), int_attr("ceil_mode", 1)});
    auto imported = import_onnx(m, "ceil");
    ASSERT_TRUE(imported.has_value()) << pool << ": " << imported.error().str();
    const Graph& g = imported->forward;
    const ValueId p = *g.find_value("p");
    EXPECT_EQ(g.value(p).type.shape, (Shape{1, 4, 4, 4})) << pool;  // the symbolic batch imports as 1
    EXPECT_TRUE(g.node(g.value(p).producer).attrs.get_bool("ceil_mode", false)) << pool;
  }
}

// A Vision Transformer's class token as PyTorch exports `cls.expand(n, -1, -1)` (the -1s replaced through
// ConstantOfShape, Equal and Where) and `h[:, 0]` (a Gather of one constant index on axis 1): the token stays a
// parameter, broadcast to the batch by `broadcast_to` (whose gradient sums it back), and the pick is a slice.
TEST(OnnxImport, ClassTokenExpandAndPick) {
  OnnxModel m;
  m.opset = 14;
  m.inputs = {input("x", {std::nullopt, 2, 3})};
  m.outputs = {input("logits", {std::nullopt, 4})};
  OnnxAttribute one;
  one.name = "value";
  one.kind = OnnxAttribute::Kind::t;
  one.t = i64({1}, {1});
  m.initializers = {{"cls", f32({1, 1, 3})},        {"fc.weight", f32({4, 3})}, {"zero", i64({0}, {})},
                    {"axes0", i64({0}, {1})},       {"rest", i64({-1, -1}, {2})}, {"three", i64({3}, {1})},
                    {"minus_one", i64({-1}, {})}};
  m.nodes = {node("Shape", {"x"}, {"s"}),
             node("Gather", {"s", "zero"}, {"n"}, {int_attr("axis", 0)}),
             node("Unsqueeze", {"n", "axes0"}, {"n1"}),
             node("Concat", {"n1", "rest"}, {"target"}, {int_attr("axis", 0)}),
             node("ConstantOfShape", {"three"}, {"ones"}, {one}),
             node("Equal", {"target", "minus_one"}, {"is_free"}),
             node("Where", {"is_free", "ones", "target"}, {"expand_to"}),
             node("Expand", {"cls", "expand_to"}, {"tokens"}),
             node("Concat", {"tokens", "x"}, {"h"}, {int_attr("axis", 1)}),
             node("Gather", {"h", "zero"}, {"first"}, {int_attr("axis", 1)}),
             node("Gemm", {"first", "fc.weight"}, {"logits"}, {int_attr("transB", 1)})};
  OnnxImportOptions opts;
  opts.batch = 5;
  auto imported = import_onnx(m, "vit", opts);
  ASSERT_TRUE(imported.has_value()) << imported.error().str();
  const Graph& g = imported->forward;
  ASSERT_TRUE(verify(g).has_value()) << verify(g).error().str();
  const Node* expand = find_op(g, Op::broadcast_to);
  ASSERT_NE(expand, nullptr);
  EXPECT_EQ(g.value(expand->inputs[0]).name, "cls");
  EXPECT_EQ(g.node(g.value(expand->inputs[0]).producer).op, Op::param);
  EXPECT_EQ(g.value(expand->outputs[0]).type.shape, (Shape{5, 1, 3}));
  const Node* pick = find_op(g, Op::slice);
  ASSERT_NE(pick, nullptr);
  EXPECT_EQ(pick->attrs.get_int("axis", -1), 1);
  EXPECT_EQ(pick->attrs.get_int("end", -1), 1);
  EXPECT_EQ(imported->weights.at("cls").data, f32({1, 1, 3}).data);
  const std::vector<std::string> wrt = {"cls", "fc.weight"};
  auto training = build_gradient_graph(g, wrt);
  ASSERT_TRUE(training.has_value()) << training.error().str();
  EXPECT_EQ(count_op(*training, Op::sum_to), 1) << "the token's gradient sums over the batch";

  m.initializers.push_back({"picks", i64({0, 2}, {2})});  // not consecutive: refused, the indices listed
  m.nodes[9].inputs[1] = "picks";
  auto r = import_onnx(m, "vit", opts);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().str().find("constant indices [0,2] are not consecutive entries of axis 1 of [5,3,3]"),
            std::string::npos)
      << r.error().str();
}

// Float initializers are parameters unless frozen (PyTorch's buffers: a normalization mean here), which makes
// them state holding the file's values. A parameter folded at import stays the parameter under another shape (a
// view); any other computation on it runs in the graph, never on a silently frozen copy.
TEST(OnnxImport, BuffersAreFrozenByName) {
  OnnxModel m;
  m.opset = 14;
  m.inputs = {input("x", {std::nullopt, 4})};
  m.outputs = {input("logits", {std::nullopt, 3})};
  m.initializers = {{"norm.mean", f32({4}, 0.1)}, {"fc.w", f32({12})}, {"shape", i64({3, 4}, {2})}};
  m.nodes = {node("Sub", {"x", "norm.mean"}, {"c"}), node("Reshape", {"fc.w", "shape"}, {"w"}),
             node("Gemm", {"c", "w"}, {"logits"}, {int_attr("transB", 1)})};
  auto op_of = [](const ImportedModel& im, const std::string& name) {
    return im.forward.node(im.forward.value(*im.forward.find_value(name)).producer).op;
  };
  auto trained = import_onnx(m, "norm");
  ASSERT_TRUE(trained.has_value()) << trained.error().str();
  EXPECT_EQ(op_of(*trained, "norm.mean"), Op::param);
  EXPECT_EQ(op_of(*trained, "fc.w"), Op::param) << "the reshaped weight is the parameter, viewed";
  EXPECT_EQ(count_op(trained->forward, Op::reshape), 1);

  OnnxImportOptions opts;
  opts.frozen = {"norm.*"};
  auto frozen = import_onnx(m, "norm", opts);
  ASSERT_TRUE(frozen.has_value()) << frozen.error().str();
  EXPECT_EQ(op_of(*frozen, "norm.mean"), Op::state);
  EXPECT_EQ(frozen->weights.at("norm.mean").data, f32({4}, 0.1).data) << "the buffer keeps the file's values";
  EXPECT_EQ(count_op(frozen->forward, Op::param), 1);

  opts.frozen = {"norm.mean", "bn.*"};
  auto typo = import_onnx(m, "norm", opts);
  ASSERT_FALSE(typo.has_value());
  EXPECT_NE(typo.error().str().find("frozen 'bn.*' matches no float initializer of the model (norm.mean, fc.w)"),
            std::string::npos)
      << typo.error().str();

  // Rows 0 and 1 of the weight: folded at import they would be a constant computed from the parameter, so the
  // import runs again with the slice in the graph, on the parameter; frozen, the slice is folded.
  m.initializers.push_back({"ends", i64({2}, {1})});
  m.initializers.push_back({"starts", i64({0}, {1})});
  m.nodes.insert(m.nodes.begin() + 2, node("Slice", {"w", "starts", "ends"}, {"w2"}));
  m.nodes.back().inputs[1] = "w2";
  m.outputs[0].dims[1] = 2;
  auto sliced = import_onnx(m, "norm");
  ASSERT_TRUE(sliced.has_value()) << sliced.error().str();
  EXPECT_EQ(op_of(*sliced, "fc.w"), Op::param);
  EXPECT_EQ(count_op(sliced->forward, Op::slice), 1);
  EXPECT_EQ(sliced->weights.at("fc.w").data, f32({12}).data);
  opts.frozen = {"fc.w"};
  auto frozen_slice = import_onnx(m, "norm", opts);
  ASSERT_TRUE(frozen_slice.has_value()) << frozen_slice.error().str();
  EXPECT_EQ(count_op(frozen_slice->forward, Op::slice), 0);
  EXPECT_EQ(count_op(frozen_slice->forward, Op::param), 1) << "norm.mean";
}

// A table read at constant indices that are not consecutive (Swin's relative position bias) is an embedding at
// ids held as state, once for every Gather at those indices.
TEST(OnnxImport, GatherAtConstantIndicesIsAnEmbedding) {
  OnnxModel m;
  m.opset = 14;
  m.inputs = {input("x", {std::nullopt, 3})};
  m.outputs = {input("logits", {std::nullopt, 3})};
  m.initializers = {{"t1", f32({5, 3})}, {"t2", f32({5, 3}, -1.0)}, {"picks", i64({4, 0, -1}, {3})}};
  m.nodes = {node("Gather", {"t1", "picks"}, {"g1"}), node("Gather", {"t2", "picks"}, {"g2"}),
             node("Add", {"g1", "g2"}, {"bias"}), node("MatMul", {"x", "bias"}, {"logits"})};
  auto imported = import_onnx(m, "gather");
  ASSERT_TRUE(imported.has_value()) << imported.error().str();
  const Graph& g = imported->forward;
  EXPECT_EQ(count_op(g, Op::embedding), 2);
  EXPECT_EQ(count_op(g, Op::state), 1);
  EXPECT_EQ(imported->weights.at("picks").data, i64({4, 0, 4}, {3}).data) << "negative indices count from the end";
}

TEST(OnnxImport, FixedBatchReshapeAtAnotherBatchSaysWhy) {
  OnnxModel m = dynamic_flatten_model();
  m.inputs[0].dims[0] = 2;  // exported at batch 2 with the batch folded into the target shape
  m.initializers.push_back({"fixed", i64({2, 16}, {2})});
  m.nodes.erase(m.nodes.begin(), m.nodes.begin() + 4);
  m.nodes[0].inputs[1] = "fixed";
  ASSERT_TRUE(import_onnx(m, "fixed").has_value()) << "at its own batch it imports";
  OnnxImportOptions opts;
  opts.batch = 3;
  auto r = import_onnx(m, "fixed", opts);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().str().find("cannot reshape [3,4,2,2] (48 elements) to [2,16]"), std::string::npos)
      << r.error().str();
  EXPECT_NE(r.error().str().find("symbolic batch dimension"), std::string::npos) << r.error().str();
}


// Inputs held at a value (OnnxImportOptions::input_values, --input-value: an attention mask of ones) are
// constants of their type and shape, the batch resolved as the data input's; one data input remains.
TEST(OnnxImport, InputsHeldAtAValue) {
  OnnxModel m = conv_model();
  m.inputs.push_back(input("keep", {std::nullopt, 4}));
  m.nodes.back().outputs[0] = "f";
  m.nodes.push_back(node("Mul", {"f", "keep"}, {"y"}));
  auto two = import_onnx(m, "two");
  ASSERT_FALSE(two.has_value());
  EXPECT_NE(two.error().str().find("the model has 2 data inputs ('x', 'keep'); LMS trains models with exactly one "
                                   "(hold the others at a value: --input-value NAME=V"),
            std::string::npos)
      << two.error().str();
  OnnxImportOptions o;
  o.batch = 3;
  o.input_values = {{"keep", 0.5}};
  auto held = import_onnx(m, "held", o);
  ASSERT_TRUE(held.has_value()) << held.error().str();
  int inputs = 0;
  for (NodeId n : held->forward.node_ids()) inputs += held->forward.node(n).op == Op::input;
  EXPECT_EQ(inputs, 2) << "x and the labels";
  EXPECT_EQ(held->forward.value(*held->forward.find_value("x")).type.shape, (Shape{3, 3, 8, 8}));
  o.input_values = {{"mask", 1}};
  auto wrong = import_onnx(m, "wrong", o);
  ASSERT_FALSE(wrong.has_value());
  EXPECT_NE(wrong.error().str().find("an input value for 'mask', which is not an input of the model (its inputs: "
                                     "'x', 'keep')"),
            std::string::npos)
      << wrong.error().str();
}


// Symbolic sizes past the batch (OnnxImportOptions::dims, --dim) are given by the name the file uses.
TEST(OnnxImport, SymbolicSizesAreGivenByName) {
  OnnxModel m = conv_model();
  m.inputs[0].dims[2] = m.inputs[0].dims[3] = std::nullopt;
  m.inputs[0].dim_names[2] = "height";
  m.inputs[0].dim_names[3] = "width";
  OnnxImportOptions o;
  o.dims = {{"height", 6}, {"width", 10}};
  auto r = import_onnx(m, "sized", o);
  ASSERT_TRUE(r.has_value()) << r.error().str();
  EXPECT_EQ(r->forward.value(*r->forward.find_value("x")).type.shape, (Shape{1, 3, 6, 10}));
  o.dims = {{"height", 6}};
  auto half = import_onnx(m, "half", o);
  ASSERT_FALSE(half.has_value());
  EXPECT_NE(half.error().str().find("dimension 3 is symbolic ('width'): give its size (--dim width=N)"),
            std::string::npos)
      << half.error().str();
  o.dims = {{"height", 0}, {"width", 10}};
  auto zero = import_onnx(m, "zero", o);
  ASSERT_FALSE(zero.has_value());
  EXPECT_NE(zero.error().str().find("dimension 2 ('height') of 0 must be >= 1"), std::string::npos)
      << zero.error().str();
}

// Mish (opset 18) is x * tanh(softplus(x)), the chain PyTorch writes before opset 18; Softplus is one op.
TEST(OnnxImport, MishAndSoftplus) {
  OnnxModel m = conv_model();
  m.nodes[1].op_type = "Mish";
  m.nodes.insert(m.nodes.begin() + 2, node("Softplus", {"r"}, {"s"}));
  m.nodes[3].inputs[0] = "s";
  auto r = import_onnx(m, "mish");
  ASSERT_TRUE(r.has_value()) << r.error().str();
  const Graph& g = r->forward;
  const Node& mish = g.node(g.value(*g.find_value("r")).producer);
  ASSERT_EQ(mish.op, Op::mul);
  EXPECT_EQ(g.node(g.value(mish.inputs[1]).producer).op, Op::tanh);
  EXPECT_EQ(g.node(g.value(*g.find_value("r.softplus")).producer).op, Op::softplus);
  EXPECT_EQ(g.node(g.value(*g.find_value("s")).producer).op, Op::softplus);
}
}  // namespace
}  // namespace lms
