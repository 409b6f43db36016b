// The ONNX importer's fusions of decomposed operators, on OnnxModel values built here: GELU in its erf and tanh
// forms (io/onnx_gelu.h), SiLU as x * sigmoid(x) (io/onnx_silu.h) and layer norm before opset 17
// (io/onnx_layer_norm.h), each matched in the orders and
// spellings exporters and hand-written modules produce, left alone when an intermediate is shared or a constant
// is wrong, and imported to exactly the graph the explicit operator gives. Also the activations that map to one
// op or a few (Sigmoid, Tanh, Clip, HardSigmoid, HardSwish), padding and upsampling. The fixtures
// in tests/torch check real PyTorch exports against PyTorch's gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "io/onnx_nodes.h"
#include "lms/backends/reference/interpreter.h"
#include "lms/io/onnx_fold.h"
#include "lms/io/onnx_gelu.h"
#include "lms/io/onnx_import.h"
#include "lms/io/onnx_layer_norm.h"
#include "lms/ir/printer.h"

namespace lms {
namespace {

HostTensor scalar(double v) { return tensor(DType::f32, {}, {v}); }

// x[2,4] -> y[2,4] through `nodes`, with scalar initializers.
OnnxModel model(std::vector<OnnxNode> nodes, std::vector<std::pair<std::string, HostTensor>> inits) {
  OnnxModel m;
  m.opset = 14;
  m.inputs = {info("x", {2, 4})};
  m.outputs = {info("y", {2, 4})};
  m.initializers = std::move(inits);
  m.nodes = std::move(nodes);
  return m;
}

// `m` imported with its output y averaged into the scalar the graph must end in: the graph printed, or the
// import's error (a test expecting the other one fails).
Result<std::string> import_mean(OnnxModel m) {
  m.nodes.push_back(node("ReduceMean", {"y"}, {"y_mean"}, {int_attr("keepdims", 0)}));  // over all axes
  m.outputs = {info("y_mean", {})};
  OnnxImportOptions opts;
  opts.add_loss = false;
  auto r = import_onnx(m, "g", opts);
  if (!r) return std::unexpected(r.error());
  return print_graph(r->forward);
}
std::string imported(const OnnxModel& m) {
  auto r = import_mean(m);
  if (!r) ADD_FAILURE() << r.error().str();
  return r.value_or("");
}
std::string import_error(const OnnxModel& m) {
  auto r = import_mean(m);
  if (r) ADD_FAILURE() << "imported:\n" << *r;
  return r ? "" : r.error().str();
}

// GELU written out as PyTorch exports it; `half_first` writes (x * 0.5) * (1 + erf) instead.
OnnxModel erf_gelu(bool half_first) {
  std::vector<OnnxNode> n = {node("Div", {"x", "root2"}, {"d"}), node("Erf", {"d"}, {"e"}),
                             node("Add", {"e", "one"}, {"a"})};
  if (half_first) {
    n.push_back(node("Mul", {"half", "x"}, {"h"}));
    n.push_back(node("Mul", {"a", "h"}, {"y"}));
  } else {
    n.push_back(node("Mul", {"x", "a"}, {"p"}));
    n.push_back(node("Mul", {"p", "half"}, {"y"}));
  }
  return model(std::move(n), {{"root2", scalar(std::sqrt(2.0))}, {"one", scalar(1)}, {"half", scalar(0.5)}});
}

// The one node GELU and layer norm chains should become, as an exporter with the operator would write it.
OnnxModel explicit_gelu(std::string approximate) {
  return model({node("Gelu", {"x"}, {"y"}, {string_attr("approximate", std::move(approximate))})}, {});
}

TEST(OnnxGeluFusion, ErfFormInBothProductOrders) {
  for (bool half_first : {false, true}) {
    const OnnxModel m = erf_gelu(half_first);
    const std::vector<OnnxNode> fused = fuse_gelu(m.nodes, m);
    ASSERT_EQ(fused.size(), 1u) << half_first;
    EXPECT_EQ(fused[0].op_type, "Gelu");
    EXPECT_EQ(fused[0].inputs, (std::vector<std::string>{"x"}));
    EXPECT_EQ(fused[0].outputs, (std::vector<std::string>{"y"}));
    EXPECT_EQ(imported(m), imported(explicit_gelu("none"))) << half_first;
  }
}

TEST(OnnxGeluFusion, SharedIntermediatesAndWrongConstantsAreLeftAlone) {
  OnnxModel shared = erf_gelu(false);
  shared.nodes.push_back(node("Add", {"e", "y"}, {"z"}));  // the Erf output has a second reader
  shared.outputs[0].name = "z";
  EXPECT_EQ(fuse_gelu(shared.nodes, shared).size(), shared.nodes.size());
  OnnxModel output = erf_gelu(false);
  output.outputs.push_back(info("a", {2, 4}));  // an intermediate is a graph output
  EXPECT_EQ(fuse_gelu(output.nodes, output).size(), output.nodes.size());
  OnnxModel wrong = erf_gelu(false);
  wrong.initializers[2].second = scalar(0.25);
  EXPECT_EQ(fuse_gelu(wrong.nodes, wrong).size(), wrong.nodes.size()) << "not GELU: no fusion";
}

// The tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), the cube as Pow (GPT-2's gelu_new), as
// x * (x * x) (PyTorch's export of F.gelu(approximate='tanh')) or as (x * x) * x.
enum class Cube { pow, mul_right, mul_left };
OnnxModel tanh_gelu(Cube cube, double kappa = 0.044715) {
  std::vector<OnnxNode> n;
  if (cube == Cube::pow) {
    n.push_back(node("Pow", {"x", "three"}, {"c"}));
  } else {
    n.push_back(node("Mul", {"x", "x"}, {"sq"}));
    n.push_back(cube == Cube::mul_right ? node("Mul", {"x", "sq"}, {"c"}) : node("Mul", {"sq", "x"}, {"c"}));
  }
  n.push_back(node("Mul", {"kappa", "c"}, {"kc"}));
  n.push_back(node("Add", {"x", "kc"}, {"s"}));
  n.push_back(node("Mul", {"s", "beta"}, {"u"}));
  n.push_back(node("Tanh", {"u"}, {"t"}));
  n.push_back(node("Add", {"one", "t"}, {"a"}));
  n.push_back(node("Mul", {"half", "x"}, {"h"}));
  n.push_back(node("Mul", {"h", "a"}, {"y"}));
  return model(std::move(n), {{"three", scalar(3)},
                              {"kappa", scalar(kappa)},
                              {"beta", scalar(std::numbers::sqrt2 * std::numbers::inv_sqrtpi)},
                              {"one", scalar(1)},
                              {"half", scalar(0.5)}});
}

TEST(OnnxGeluFusion, TanhFormInEachCubeSpelling) {
  for (Cube cube : {Cube::pow, Cube::mul_right, Cube::mul_left}) {
    const OnnxModel m = tanh_gelu(cube);
    const std::vector<OnnxNode> fused = fuse_gelu(m.nodes, m);
    ASSERT_EQ(fused.size(), 1u) << static_cast<int>(cube);
    EXPECT_EQ(fused[0].attribute("approximate")->s, "tanh");
    const std::string g = imported(m);
    EXPECT_EQ(g, imported(explicit_gelu("tanh")));
    EXPECT_NE(g.find("gelu(%x) {approximate = \"tanh\"}"), std::string::npos) << g;
  }
  const OnnxModel wrong = tanh_gelu(Cube::pow, 0.05);
  EXPECT_EQ(fuse_gelu(wrong.nodes, wrong).size(), wrong.nodes.size()) << "another coefficient: not GELU";
  // Unfused, the chain imports node by node (the cube as two products).
  const std::string unfused = imported(wrong);
  EXPECT_EQ(unfused.find("gelu("), std::string::npos) << unfused;
  EXPECT_NE(unfused.find("%c = mul(%c.square, %x)"), std::string::npos) << unfused;
  EXPECT_NE(unfused.find("%t = tanh(%u)"), std::string::npos) << unfused;
}

TEST(OnnxImportActivations, SigmoidTanhAndGeluForms) {
  const OnnxModel m = model({node("Sigmoid", {"x"}, {"s"}), node("Tanh", {"s"}, {"y"})}, {});
  const std::string g = imported(m);
  EXPECT_NE(g.find("sigmoid(%x)"), std::string::npos) << g;
  EXPECT_NE(g.find("tanh(%"), std::string::npos) << g;
  EXPECT_NE(import_error(explicit_gelu("fast")).find("approximate = \"fast\" is not a GELU form"), std::string::npos);
}

// PyTorch's export of nn.SiLU: Mul(x, Sigmoid(x)), in either operand order, becomes silu(x); a sigmoid with another
// reader, or a product with something else, stays as it is.
TEST(OnnxSiluFusion, EitherOrderAndOnlyTheSigmoidsOwnInput) {
  for (bool sigmoid_first : {false, true}) {
    const OnnxModel m = model({node("Sigmoid", {"x"}, {"s"}),
                               node("Mul", sigmoid_first ? std::vector<std::string>{"s", "x"}
                                                         : std::vector<std::string>{"x", "s"}, {"y"})}, {});
    const std::string g = imported(m);
    EXPECT_NE(g.find("%y = silu(%x)"), std::string::npos) << g;
    EXPECT_EQ(g.find("sigmoid"), std::string::npos) << g;
  }
  const std::string shared = imported(model({node("Sigmoid", {"x"}, {"s"}), node("Mul", {"x", "s"}, {"m"}),
                                             node("Add", {"m", "s"}, {"y"})}, {}));
  EXPECT_NE(shared.find("%s = sigmoid(%x)"), std::string::npos) << shared;
  EXPECT_NE(shared.find("%m = mul(%x, %s)"), std::string::npos) << shared;
  const std::string other = imported(model({node("Tanh", {"x"}, {"t"}), node("Sigmoid", {"x"}, {"s"}),
                                            node("Mul", {"t", "s"}, {"y"})}, {}));
  EXPECT_NE(other.find("%y = mul(%t, %s)"), std::string::npos) << other;
}

TEST(OnnxImportArithmetic, PowNegSqrtReciprocalAndDivisionByData) {
  const auto pow = [](double p) {
    return model({node("Pow", {"x", "p"}, {"y"})}, {{"p", scalar(p)}});
  };
  EXPECT_NE(imported(pow(2)).find("%y = mul(%x, %x)"), std::string::npos) << imported(pow(2));
  EXPECT_NE(imported(pow(0.5)).find("%y = sqrt(%x)"), std::string::npos) << imported(pow(0.5));
  EXPECT_NE(imported(pow(-1)).find("%y = reciprocal(%x)"), std::string::npos) << imported(pow(-1));
  EXPECT_NE(imported(pow(-0.5)).find("%y = reciprocal(%y.sqrt)"), std::string::npos) << imported(pow(-0.5));
  EXPECT_NE(imported(pow(1)).find("mean(%x)"), std::string::npos) << "the identity: " << imported(pow(1));
  EXPECT_NE(import_error(pow(1.5)).find("exponent 1.5 is not supported"), std::string::npos);
  const std::string neg = imported(model({node("Neg", {"x"}, {"y"})}, {}));
  EXPECT_NE(neg.find("%y = scale(%x) {factor = -1.0}"), std::string::npos) << neg;
  // Division by data: a product with the reciprocal; a constant numerator scales it (rsqrt is 1 / Sqrt(x)).
  OnnxModel by_data = model({node("Sqrt", {"x"}, {"s"}), node("Div", {"x", "s"}, {"y"})}, {});
  EXPECT_NE(imported(by_data).find("%y = mul(%x, %y.reciprocal)"), std::string::npos) << imported(by_data);
  OnnxModel rsqrt = model({node("Sqrt", {"x"}, {"s"}), node("Div", {"two", "s"}, {"y"})}, {{"two", scalar(2)}});
  EXPECT_NE(imported(rsqrt).find("%y = scale(%y.reciprocal) {factor = 2.0}"), std::string::npos) << imported(rsqrt);
  EXPECT_NE(imported(rsqrt).find("%y.reciprocal = reciprocal(%s)"), std::string::npos) << imported(rsqrt);
}

TEST(OnnxImportActivations, ClipBoundsFromInputsOrAttributes) {
  // Opset 11+: optional constant inputs (max only here, min omitted as ""); opset 6: attributes.
  OnnxModel inputs = model({node("Clip", {"x", "lo", "hi"}, {"y"})}, {{"lo", scalar(0)}, {"hi", scalar(6)}});
  EXPECT_NE(imported(inputs).find("clamp(%x) {min = 0.0, max = 6.0}"), std::string::npos) << imported(inputs);
  OnnxModel max_only = model({node("Clip", {"x", "", "hi"}, {"y"})}, {{"hi", scalar(6)}});
  EXPECT_NE(imported(max_only).find("clamp(%x) {max = 6.0}"), std::string::npos) << imported(max_only);
  OnnxModel attributes = model({node("Clip", {"x"}, {"y"}, {float_attr("min", -1), float_attr("max", 1)})}, {});
  attributes.opset = 6;
  EXPECT_NE(imported(attributes).find("clamp(%x) {min = -1.0, max = 1.0}"), std::string::npos) << imported(attributes);
  OnnxModel data_bound = model({node("Clip", {"x", "x"}, {"y"})}, {});
  EXPECT_NE(import_error(data_bound).find("the min input must be a one-element constant"), std::string::npos);
}

TEST(OnnxImportActivations, HardSigmoidAndHardSwish) {
  // HardSigmoid(x) = clamp(alpha x + beta, 0, 1); HardSwish(x) = x * clamp(x + 3, 0, 6) / 6, one op.
  const std::string sigmoid = imported(
      model({node("HardSigmoid", {"x"}, {"y"}, {float_attr("alpha", 0.25), float_attr("beta", 0.375)})}, {}));
  EXPECT_NE(sigmoid.find("%y.scaled = scale(%x) {factor = 0.25}"), std::string::npos) << sigmoid;
  EXPECT_NE(sigmoid.find("%y.beta = constant() {value = 0.375} : f32[]"), std::string::npos) << sigmoid;
  EXPECT_NE(sigmoid.find("%y = clamp(%y.shifted) {min = 0.0, max = 1.0}"), std::string::npos) << sigmoid;
  const std::string swish = imported(model({node("HardSwish", {"x"}, {"y"})}, {}));
  EXPECT_NE(swish.find("%y = hardswish(%x)"), std::string::npos) << swish;
}

TEST(OnnxImportPad, ZeroAmountsAreTheIdentity) {
  OnnxModel zero = model({node("Pad", {"x", "pads"}, {"p"}), node("Relu", {"p"}, {"y"})},
                         {{"pads", tensor(DType::i64, {4}, {0, 0, 0, 0})}});
  EXPECT_NE(imported(zero).find("relu(%x)"), std::string::npos) << imported(zero);
}

// x[1,2,5,5] zero-padded by 1 on each spatial side, then `reader`; against `reader` with the padding itself.
OnnxModel padded(OnnxNode reader, std::vector<int64_t> pads = {0, 0, 1, 1, 0, 0, 1, 1}) {
  OnnxModel m = model({node("Pad", {"x", "pads"}, {"p"}), std::move(reader)},
                      {{"pads", tensor(DType::i64, {8}, std::vector<double>(pads.begin(), pads.end()))},
                       {"w", tensor(DType::f32, {3, 2, 3, 3}, {})}});
  m.inputs = {info("x", {1, 2, 5, 5})};
  m.outputs = {info("y", {})};
  return m;
}
OnnxModel unpadded(OnnxNode reader) {
  OnnxModel m = padded(std::move(reader), {0, 0, 0, 0, 0, 0, 0, 0});
  m.nodes.erase(m.nodes.begin());
  m.nodes[0].inputs[0] = "x";
  m.initializers.erase(m.initializers.begin());
  return m;
}

TEST(OnnxImportPad, ZeroPaddingBecomesTheReadersPadding) {
  const auto kernel = ints_attr("kernel_shape", {3, 3});
  EXPECT_EQ(imported(padded(node("Conv", {"p", "w"}, {"y"}, {kernel}))),
            imported(unpadded(node("Conv", {"x", "w"}, {"y"}, {kernel, ints_attr("pads", {1, 1, 1, 1})}))));
  // Zero padding is counted by the pool, as count_include_pad does.
  const std::string pool = imported(padded(node("AveragePool", {"p"}, {"y"}, {kernel})));
  const OnnxNode counting = node("AveragePool", {"x"}, {"y"},
                                 {kernel, ints_attr("pads", {1, 1, 1, 1}), int_attr("count_include_pad", 1)});
  EXPECT_EQ(pool, imported(unpadded(counting)));
  EXPECT_NE(pool.find("pad = [1, 1]"), std::string::npos) << pool;
}

// Any other constant padding (a nonzero value, one side only, before MaxPool or Relu, a negative amount that
// crops) is the input between constant blocks, one `concat` per padded dim: the values are exactly ONNX's.
TEST(OnnxImportPad, OtherConstantPaddingIsConcatenated) {
  OnnxModel m = model({node("Pad", {"x", "pads", "value"}, {"y"}),
                       node("ReduceMean", {"y"}, {"y_mean"}, {int_attr("keepdims", 0)})},
                      {{"pads", tensor(DType::i64, {4}, {1, 0, 0, -2})}, {"value", scalar(2.5)}});
  m.outputs = {info("y_mean", {})};
  OnnxImportOptions opts;
  opts.add_loss = false;
  auto r = import_onnx(m, "g", opts);
  ASSERT_TRUE(r.has_value()) << r.error().str();
  const std::string text = print_graph(r->forward);
  EXPECT_NE(text.find("%y.axis0.before = constant() {value = 2.5} : f32[1,4]"), std::string::npos) << text;
  EXPECT_NE(text.find("%y.axis1.cropped = slice(%y.axis0) {axis = 1, start = 0, end = 2}"), std::string::npos)
      << text;
  const std::vector<double> x = {1, 2, 3, 4, 5, 6, 7, 8};
  auto out = interpret(r->forward, {{"x", tensor(DType::f32, {2, 4}, x)}});
  ASSERT_TRUE(out.has_value()) << out.error().str();
  const ValueId y = *r->forward.find_value("y.axis1.cropped");
  EXPECT_EQ(values((*out)[y.v]), (std::vector<double>{2.5, 2.5, 1, 2, 5, 6}));

  const auto kernel = ints_attr("kernel_shape", {3, 3});
  for (const OnnxModel& other : {padded(node("MaxPool", {"p"}, {"y"}, {kernel})),
                                 padded(node("Conv", {"p", "w"}, {"y"}, {kernel}), {0, 0, 1, 0, 0, 0, 1, 1}),
                                 padded(node("Relu", {"p"}, {"y"}))}) {
    const std::string g = imported(other);
    EXPECT_NE(g.find("%p.axis2 = concat(%p.axis2.before, %x, %p.axis2.after) {axis = 2}"), std::string::npos) << g;
  }
  OnnxModel reflect = padded(node("Conv", {"p", "w"}, {"y"}, {kernel}));
  reflect.nodes[0].attributes = {string_attr("mode", "reflect")};
  EXPECT_NE(import_error(reflect).find("padding by [0,0,1,1,0,0,1,1] in mode 'reflect' is not supported"),
            std::string::npos);
  OnnxModel gone = padded(node("Relu", {"p"}, {"y"}), {0, 0, -3, 0, 0, 0, -2, 0});
  EXPECT_NE(import_error(gone).find("crops dim 2 of [1,2,5,5] away"), std::string::npos);
}

// Resize by whole factors: nearest repeats, linear (half_pixel) interpolates as F.interpolate(align_corners=False)
// does: [1, 2, 3, 4] becomes [1, 1.25, 1.75, 2.25, 2.75, 3.25, 3.75, 4].
TEST(OnnxImportResize, NearestAndLinearByWholeFactors) {
  auto resized = [](std::vector<OnnxAttribute> attributes, HostTensor scales) -> Result<std::vector<double>> {
    OnnxModel m = model({node("Resize", {"x", "", "scales"}, {"y"}, std::move(attributes)),
                         node("ReduceMean", {"y"}, {"y_mean"}, {int_attr("keepdims", 0)})},
                        {{"scales", std::move(scales)}});
    m.outputs = {info("y_mean", {})};
    OnnxImportOptions opts;
    opts.add_loss = false;
    auto r = LMS_TRY(import_onnx(m, "g", opts));
    const std::vector<double> x = {1, 2, 3, 4, 5, 6, 7, 8};
    std::map<std::string, HostTensor> feeds = r.weights;  // an interpolation matrix, held as state
    feeds.emplace("x", tensor(DType::f32, {2, 4}, x));
    auto out = LMS_TRY(interpret(r.forward, feeds));
    const Node& mean = r.forward.node(r.forward.value(r.forward.outputs()[0]).producer);
    return values(out[mean.inputs[0].v]);
  };
  const HostTensor twice = tensor(DType::f32, {2}, {1, 2});
  auto nearest = resized({string_attr("mode", "nearest"), string_attr("coordinate_transformation_mode", "asymmetric"),
                          string_attr("nearest_mode", "floor")},
                         twice);
  ASSERT_TRUE(nearest.has_value()) << nearest.error().str();
  EXPECT_EQ(*nearest, (std::vector<double>{1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8}));
  auto linear = resized({string_attr("mode", "linear")}, twice);
  ASSERT_TRUE(linear.has_value()) << linear.error().str();
  EXPECT_EQ(*linear, (std::vector<double>{1, 1.25, 1.75, 2.25, 2.75, 3.25, 3.75, 4, 5, 5.25, 5.75, 6.25, 6.75, 7.25,
                                          7.75, 8}));
  // Anything else linear is a matmul by PyTorch's interpolation matrix: align_corners (src = j (d-1) / (D-1)),
  // 1.5 (src = (j + 0.5) / 1.5 - 0.5, clamped) and 0.5 (downsampling without antialiasing: the midpoints).
  auto corners = resized({string_attr("mode", "linear"), string_attr("coordinate_transformation_mode",
                                                                      "align_corners")}, twice);
  ASSERT_TRUE(corners.has_value()) << corners.error().str();
  auto three_halves = resized({string_attr("mode", "linear")}, tensor(DType::f32, {2}, {1, 1.5}));
  ASSERT_TRUE(three_halves.has_value()) << three_halves.error().str();
  auto half = resized({string_attr("mode", "linear")}, tensor(DType::f32, {2}, {1, 0.5}));
  ASSERT_TRUE(half.has_value()) << half.error().str();
  ASSERT_EQ(corners->size(), 16u);
  ASSERT_EQ(three_halves->size(), 12u);
  for (int64_t j = 0; j < 8; ++j)
    EXPECT_NEAR((*corners)[static_cast<size_t>(j)], 1 + 3.0 * static_cast<double>(j) / 7, 1e-6) << j;
  const std::vector<double> expect_three_halves = {1, 1.5, 2 + 1.0 / 6, 2 + 5.0 / 6, 3.5, 4};
  for (size_t j = 0; j < 6; ++j) EXPECT_NEAR((*three_halves)[j], expect_three_halves[j], 1e-6) << j;
  EXPECT_EQ(*half, (std::vector<double>{1.5, 3.5, 5.5, 7.5}));
  const struct {
    std::vector<OnnxAttribute> attributes;
    HostTensor scales;
    const char* needle;
  } refused[] = {
      {{string_attr("mode", "cubic")}, twice, "mode 'cubic' is not supported"},
      {{string_attr("mode", "linear"), string_attr("coordinate_transformation_mode", "tf_crop_and_resize")}, twice,
       "linear with coordinate_transformation_mode 'tf_crop_and_resize' is not supported"},
      {{string_attr("mode", "nearest"), string_attr("coordinate_transformation_mode", "asymmetric")}, twice,
       "nearest with coordinate_transformation_mode 'asymmetric' and nearest_mode 'round_prefer_floor'"},
      {{}, tensor(DType::f32, {2}, {1, 1.5}), "nearest resizing of axis 1 from 4 to 6 is not supported"},
      {{string_attr("mode", "linear")}, tensor(DType::f32, {2}, {1, -1}), "scale -1 along axis 1 of [2,4] is out"},
  };
  for (const auto& c : refused) {
    auto r = resized(c.attributes, c.scales);
    ASSERT_FALSE(r.has_value()) << c.needle;
    EXPECT_NE(r.error().str().find(c.needle), std::string::npos) << r.error().str();
  }
}

// LeakyRelu is relu(x) - alpha relu(-x): alpha x below zero and x above, exactly.
TEST(OnnxImportActivations, LeakyReluIsExact) {
  OnnxModel m = model({node("LeakyRelu", {"x"}, {"y"}, {float_attr("alpha", 0.1)}),
                       node("ReduceMean", {"y"}, {"y_mean"}, {int_attr("keepdims", 0)})},
                      {});
  m.outputs = {info("y_mean", {})};
  OnnxImportOptions opts;
  opts.add_loss = false;
  auto r = import_onnx(m, "g", opts);
  ASSERT_TRUE(r.has_value()) << r.error().str();
  const std::vector<double> x = {-3, -0.5, 0, 0.7, 1e-30, -1e30, 5, -7.25};
  auto out = interpret(r->forward, {{"x", tensor(DType::f32, {2, 4}, x)}});
  ASSERT_TRUE(out.has_value()) << out.error().str();
  const std::vector<double> y = values((*out)[r->forward.find_value("y")->v]);
  for (size_t i = 0; i < x.size(); ++i) {
    const auto xf = static_cast<float>(x[i]);
    EXPECT_EQ(static_cast<float>(y[i]), xf > 0 ? xf : 0.1f * xf) << x[i];
  }
}

// ReduceSum (axes as an input since opset 13) and Sum of several inputs, broadcasting.
TEST(OnnxImportReduce, ReduceSumAndSum) {
  OnnxModel m = model({node("ReduceSum", {"x", "axes"}, {"rows"}, {int_attr("keepdims", 1)}),
                       node("Sum", {"x", "rows", "two"}, {"y"}),
                       node("ReduceMean", {"y"}, {"y_mean"}, {int_attr("keepdims", 0)})},
                      {{"axes", tensor(DType::i64, {1}, {1})}, {"two", scalar(2)}});
  m.outputs = {info("y_mean", {})};
  OnnxImportOptions opts;
  opts.add_loss = false;
  auto r = import_onnx(m, "g", opts);
  ASSERT_TRUE(r.has_value()) << r.error().str();
  std::map<std::string, HostTensor> feeds = r->weights;  // "two", a float initializer: a parameter
  feeds.emplace("x", tensor(DType::f32, {2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}));
  auto out = interpret(r->forward, feeds);
  ASSERT_TRUE(out.has_value()) << out.error().str();
  // Row sums 10 and 26, added to every element with 2.
  EXPECT_EQ(values((*out)[r->forward.find_value("y")->v]),
            (std::vector<double>{13, 14, 15, 16, 33, 34, 35, 36}));
}

// Tile on data repeats along each axis (a reshape, broadcast_to and reshape per axis); on constants it folds.
TEST(OnnxImportReduce, TileRepeats) {
  OnnxModel m = model({node("Tile", {"x", "reps"}, {"y"}), node("ReduceMean", {"y"}, {"y_mean"},
                                                                {int_attr("keepdims", 0)})},
                      {{"reps", tensor(DType::i64, {2}, {2, 3})}});
  m.outputs = {info("y_mean", {})};
  OnnxImportOptions opts;
  opts.add_loss = false;
  auto r = import_onnx(m, "g", opts);
  ASSERT_TRUE(r.has_value()) << r.error().str();
  auto out = interpret(r->forward, {{"x", tensor(DType::f32, {2, 4}, {1, 2, 3, 4, 5, 6, 7, 8})}});
  ASSERT_TRUE(out.has_value()) << out.error().str();
  const ValueId y = *r->forward.find_value("y.axis1");
  EXPECT_EQ(r->forward.value(y).type.shape, (Shape{4, 12}));
  std::vector<double> expect;
  for (int rep = 0; rep < 2; ++rep)
    for (int row = 0; row < 2; ++row)
      for (int col = 0; col < 12; ++col) expect.push_back(1 + row * 4 + col % 4);
  EXPECT_EQ(values((*out)[y.v]), expect);
  auto folded = fold_tile(tensor(DType::i64, {2}, {7, 9}), std::vector<int64_t>{3});
  ASSERT_TRUE(folded.has_value()) << folded.error().str();
  EXPECT_EQ(values(*folded), (std::vector<double>{7, 9, 7, 9, 7, 9}));
}

// Einsum of one operand transposes and sums; forms LMS does not take are refused with the reason.
TEST(OnnxImportReduce, EinsumOfOneOperandAndRefusals) {
  auto run = [](std::string equation, std::vector<std::string> inputs = {"x"}) -> Result<std::vector<double>> {
    OnnxModel m = model({node("Einsum", std::move(inputs), {"y"}, {string_attr("equation", std::move(equation))}),
                         node("ReduceMean", {"y"}, {"y_mean"}, {int_attr("keepdims", 0)})},
                        {});
    m.outputs = {info("y_mean", {})};
    OnnxImportOptions opts;
    opts.add_loss = false;
    auto r = LMS_TRY(import_onnx(m, "g", opts));
    auto out = LMS_TRY(interpret(r.forward, {{"x", tensor(DType::f32, {2, 4}, {1, 2, 3, 4, 5, 6, 7, 8})}}));
    const Node& mean = r.forward.node(r.forward.value(r.forward.outputs()[0]).producer);
    return values(out[mean.inputs[0].v]);
  };
  auto transposed = run("ij->ji");
  ASSERT_TRUE(transposed.has_value()) << transposed.error().str();
  EXPECT_EQ(*transposed, (std::vector<double>{1, 5, 2, 6, 3, 7, 4, 8}));
  auto rows = run("ij -> i");
  ASSERT_TRUE(rows.has_value()) << rows.error().str();
  EXPECT_EQ(*rows, (std::vector<double>{10, 26}));
  auto gram = run("ij,kj->ik", {"x", "x"});  // x x^T, implicit letters contracted
  ASSERT_TRUE(gram.has_value()) << gram.error().str();
  EXPECT_EQ(*gram, (std::vector<double>{30, 70, 70, 174}));
  const std::pair<const char*, const char*> refused[] = {
      {"...j->j", "ellipses and other forms are not supported"},
      {"ii->i", "'i' repeats within an operand"},
      {"ij->ik", "output letter 'k' is repeated or not in an operand"},
      {"ijk->i", "operand 0 has rank 2 for 'ijk'"},
  };
  for (const auto& [equation, needle] : refused) {
    auto r = run(equation);
    ASSERT_FALSE(r.has_value()) << equation;
    EXPECT_NE(r.error().str().find(needle), std::string::npos) << r.error().str();
  }
  auto mismatch = run("ij,jk->ik", {"x", "x"});
  ASSERT_FALSE(mismatch.has_value());
  EXPECT_NE(mismatch.error().str().find("'j' is 4 in one operand and 2 in another"), std::string::npos)
      << mismatch.error().str();
}

// InstanceNormalization needs spatial dims.
TEST(OnnxImportNorm, InstanceNormOfAMatrixIsRefused) {
  OnnxModel m = model({node("InstanceNormalization", {"x", "g", "b"}, {"y"})},
                      {{"g", tensor(DType::f32, {4}, {1, 1, 1, 1})}, {"b", tensor(DType::f32, {4}, {0, 0, 0, 0})}});
  EXPECT_NE(import_error(m).find("input [2,4] has no spatial dims (N, C, ...)"), std::string::npos);
}

// nn.LayerNorm(4) over x[2,4] as opset 14 writes it: ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div,
// Mul gamma, Add beta. `hand_written` is the common hand-written module instead: the centred value computed
// twice, squared as d * d, divided as d * Reciprocal(std), and gamma * n + beta with the operands swapped.
OnnxModel decomposed_layer_norm(bool hand_written, std::vector<int64_t> axes = {-1}) {
  std::vector<OnnxNode> n = {node("ReduceMean", {"x"}, {"m"}, {ints_attr("axes", axes)})};
  if (!hand_written) {
    n.push_back(node("Sub", {"x", "m"}, {"d"}));
    n.push_back(node("Pow", {"d", "two"}, {"sq"}));
  } else {
    n.push_back(node("Sub", {"x", "m"}, {"d"}));
    n.push_back(node("Sub", {"x", "m"}, {"d2"}));
    n.push_back(node("Mul", {"d2", "d2"}, {"sq"}));
  }
  n.push_back(node("ReduceMean", {"sq"}, {"v"}, {ints_attr("axes", axes)}));
  n.push_back(node("Add", {"v", "eps"}, {"ve"}));
  n.push_back(node("Sqrt", {"ve"}, {"sd"}));
  if (!hand_written) {
    n.push_back(node("Div", {"d", "sd"}, {"nrm"}));
    n.push_back(node("Mul", {"nrm", "gamma"}, {"w"}));
    n.push_back(node("Add", {"w", "beta"}, {"y"}));
  } else {
    n.push_back(node("Reciprocal", {"sd"}, {"inv"}));
    n.push_back(node("Mul", {"inv", "d"}, {"nrm"}));
    n.push_back(node("Mul", {"gamma", "nrm"}, {"w"}));
    n.push_back(node("Add", {"beta", "w"}, {"y"}));
  }
  return model(std::move(n), {{"two", scalar(2)},
                              {"eps", scalar(1e-5)},
                              {"gamma", tensor(DType::f32, {4}, {1, 2, 3, 4})},
                              {"beta", tensor(DType::f32, {4}, {0, 1, 0, 1})}});
}

OnnxModel explicit_layer_norm() {
  return model({node("LayerNormalization", {"x", "gamma", "beta"}, {"y"},
                     {int_attr("axis", -1), float_attr("epsilon", static_cast<float>(1e-5))})},
               {{"gamma", tensor(DType::f32, {4}, {1, 2, 3, 4})}, {"beta", tensor(DType::f32, {4}, {0, 1, 0, 1})}});
}

TEST(OnnxLayerNormFusion, ExportedAndHandWrittenForms) {
  for (bool hand_written : {false, true}) {
    const OnnxModel m = decomposed_layer_norm(hand_written);
    const std::vector<OnnxNode> fused = fuse_layer_norm(m.nodes, m);
    ASSERT_EQ(fused.size(), 1u) << hand_written;
    EXPECT_EQ(fused[0].op_type, "LayerNormalization");
    EXPECT_EQ(fused[0].inputs, (std::vector<std::string>{"x", "gamma", "beta"}));
    EXPECT_EQ(fused[0].attribute("axis")->i, -1);
    EXPECT_EQ(imported(m), imported(explicit_layer_norm())) << hand_written;
  }
  // The positive spelling of the last axis fuses too; an inner axis is fused and then refused by the importer
  // (LMS normalizes the last axis only), a reduction over two axes is not fused at all.
  EXPECT_EQ(imported(decomposed_layer_norm(false, {1})), imported(explicit_layer_norm()));
  EXPECT_NE(import_error(decomposed_layer_norm(false, {0})).find("only the last axis is supported"),
            std::string::npos);
  const OnnxModel two_axes = decomposed_layer_norm(false, {0, 1});
  EXPECT_EQ(fuse_layer_norm(two_axes.nodes, two_axes).size(), two_axes.nodes.size());
}

TEST(OnnxLayerNormFusion, SharedIntermediatesAreLeftAlone) {
  OnnxModel output = decomposed_layer_norm(false);
  output.outputs.push_back(info("v", {2, 1}));  // the variance is a graph output
  EXPECT_EQ(fuse_layer_norm(output.nodes, output).size(), output.nodes.size());
  OnnxModel shared = decomposed_layer_norm(false);
  shared.nodes.push_back(node("Add", {"d", "y"}, {"z"}));  // the centred value has a third reader
  shared.outputs[0].name = "z";
  EXPECT_EQ(fuse_layer_norm(shared.nodes, shared).size(), shared.nodes.size());
  OnnxModel other_mean = decomposed_layer_norm(false);
  other_mean.nodes[1].inputs[0] = "y0";  // x - mean of something else: not a layer norm
  other_mean.inputs.push_back(info("y0", {2, 4}));
  EXPECT_EQ(fuse_layer_norm(other_mean.nodes, other_mean).size(), other_mean.nodes.size());
}

}  // namespace
}  // namespace lms
