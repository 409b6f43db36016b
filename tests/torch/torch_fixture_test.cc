// LMS against PyTorch: the loss and the gradient of every parameter, computed by autodiff
// (build_gradient_graph) and run by the reference interpreter, must match what PyTorch computed for the same
// network, inputs and parameter values (tests/fixtures/make_torch_fixtures.py wrote them; CI has no PyTorch and
// only reads the committed .npz files). Two networks: the `mlp` model as the builder makes it, and a tiny
// ResNet (conv, training-mode batch norm, relu, max-pool, a strided block with a downsample shortcut, an
// identity block, global average pooling, a linear classifier) built here with the Builder, value for value
// as the script builds it in PyTorch. Each runs in f32 (what training uses) and in f64.
//
// Tolerance: relative error below 1e-4, per tensor in the max norm (max |ours - torch| / max |torch|), which
// is robust to individual gradient entries near zero. The fixture's parameters are exact f32 values and its
// reference gradients are float64 results rounded to f32, so f64 runs agree to ~1e-7 and f32 runs to ~1e-6.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "lms/autodiff/autodiff.h"
#include "lms/backends/reference/interpreter.h"
#include "lms/io/npz.h"
#include "lms/io/onnx.h"
#include "lms/io/onnx_import.h"
#include "lms/ir/builder.h"
#include "lms/models/models.h"

namespace lms {
namespace {

constexpr double kTolerance = 1e-4;
const std::string kFixtures = std::string(LMS_SOURCE_DIR) + "/tests/fixtures/";
const std::string kGradPrefix = "grad/";

// The tiny ResNet of make_torch_fixtures.py: x [4,3,8,8], stem 8 channels, one stage of two BasicBlocks at
// 16 channels (the first with stride 2 and a downsample), 10 classes.
constexpr int64_t kBatch = 4, kChannels = 3, kImage = 8, kStem = 8, kWidth = 16, kClasses = 10;

class TinyResNet {
 public:
  explicit TinyResNet(Graph& g, DType dt) : b_(g), dt_(dt) {}

  Result<void> build() {
    ValueId x = b_.input({dt_, {kBatch, kChannels, kImage, kImage}}, "x");
    ValueId labels = b_.input({DType::i64, {kBatch}}, "labels");
    ValueId h = relu(bn(conv(x, kStem, 3, 1, 1, "conv1"), "bn1"), "relu");
    h = b_.op(Op::max_pool2d, {h}, attrs({{"kernel", IntList{3, 3}}, {"stride", IntList{2, 2}}, {"pad", IntList{1, 1}}}),
              "maxpool");
    b_.set_prefix("layer1.0.");
    ValueId y = relu(bn(conv(h, kWidth, 3, 2, 1, "conv1"), "bn1"), "relu1");
    y = bn(conv(y, kWidth, 3, 1, 1, "conv2"), "bn2");
    ValueId shortcut = bn(conv(h, kWidth, 1, 2, 0, "downsample.0"), "downsample.1");
    h = relu(b_.op(Op::add, {y, shortcut}, {}, "add"), "relu");
    b_.set_prefix("layer1.1.");
    y = relu(bn(conv(h, kWidth, 3, 1, 1, "conv1"), "bn1"), "relu1");
    y = bn(conv(y, kWidth, 3, 1, 1, "conv2"), "bn2");
    h = relu(b_.op(Op::add, {y, h}, {}, "add"), "relu");
    b_.set_prefix("");
    h = b_.op(Op::global_avg_pool, {h}, {}, "avgpool");
    ValueId w = b_.param({dt_, {kClasses, kWidth}}, "fc.w", "he");
    ValueId mm = b_.op(Op::matmul, {h, w}, attrs({{"transpose_b", true}}), "fc.matmul");
    ValueId bias = b_.param({dt_, {kClasses}}, "fc.b", "zeros");
    ValueId logits = b_.op(Op::bias_add, {mm, bias}, attrs({{"axis", int64_t{-1}}}), "fc");
    ValueId loss = b_.op(Op::cross_entropy, {logits, labels}, {}, "loss");
    if (!b_.ok()) return std::unexpected(*b_.error());
    b_.graph().set_outputs({loss});
    return {};
  }

 private:
  ValueId conv(ValueId x, int64_t out, int64_t k, int64_t stride, int64_t pad, const std::string& name) {
    const int64_t cin = b_.ok() ? b_.type(x).shape[1] : 0;
    ValueId w = b_.param({dt_, {out, cin, k, k}}, name + ".w", "he");
    return b_.op(Op::conv2d, {x, w}, attrs({{"stride", IntList{stride, stride}}, {"pad", IntList{pad, pad}}}), name);
  }
  ValueId bn(ValueId x, const std::string& name) {
    const int64_t c = b_.ok() ? b_.type(x).shape[1] : 0;
    ValueId gamma = b_.param({dt_, {c}}, name + ".gamma", "ones");
    ValueId beta = b_.param({dt_, {c}}, name + ".beta", "zeros");
    auto outs = b_.add(Op::batch_norm, {x, gamma, beta}, {}, name);
    return outs.empty() ? ValueId{} : outs[0];
  }
  ValueId relu(ValueId x, const std::string& name) { return b_.op(Op::relu, {x}, {}, name); }

  Builder b_;
  DType dt_;
};

HostTensor convert(const HostTensor& t, DType dt) {
  if (t.type.dtype == dt || !is_float(t.type.dtype)) return t;
  HostTensor out(TensorType{dt, t.type.shape});
  for (int64_t i = 0; i < t.type.num_elements(); ++i) out.set(i, t.get(i));
  return out;
}

// max |a - b| / max |b| (b the reference); the absolute difference when b is all zeros.
double relative_error(const HostTensor& a, const HostTensor& b) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < b.type.num_elements(); ++i) {
    diff = std::max(diff, std::abs(a.get(i) - b.get(i)));
    scale = std::max(scale, std::abs(b.get(i)));
  }
  return scale > 0 ? diff / scale : diff;
}

// Loads `fixture`, checks that it holds exactly the graph's parameters (same names and shapes), differentiates
// the loss with respect to every parameter, runs the gradient graph on the fixture's values and compares.
// State the fixture lacks comes from `constants` (an import's constant tensors: attention masks, index tables).
void compare_with_torch(const Graph& forward, const std::string& fixture, DType dt,
                        const std::map<std::string, HostTensor>& constants = {}) {
  auto fx = read_npz(kFixtures + fixture);
  ASSERT_TRUE(fx.has_value()) << fx.error().str();
  std::vector<std::string> params;
  std::map<std::string, HostTensor> feeds;
  for (NodeId n : forward.node_ids()) {
    const Node& node = forward.node(n);
    // State is read from the fixture where the forward pass reads it (a dropout key, which fixes the masks).
    if (node.op != Op::param && node.op != Op::input && node.op != Op::state) continue;
    const Value& v = forward.value(node.outputs[0]);
    if (node.op == Op::state && !fx->contains(v.name) && constants.contains(v.name)) {
      feeds.emplace(v.name, constants.at(v.name));
      continue;
    }
    ASSERT_TRUE(fx->contains(v.name)) << fixture << " lacks %" << v.name;
    HostTensor t = convert(fx->at(v.name), dt);
    ASSERT_EQ(to_string(t.type), to_string(v.type)) << "%" << v.name;
    feeds.emplace(v.name, std::move(t));
    if (node.op == Op::param) {
      params.push_back(v.name);
      ASSERT_TRUE(fx->contains(kGradPrefix + v.name)) << fixture << " lacks the gradient of %" << v.name;
    }
  }
  // Nothing in the fixture that the graph lacks: names on both sides agree exactly.
  for (const auto& [key, t] : *fx) {
    const std::string name = key.starts_with(kGradPrefix) ? key.substr(kGradPrefix.size()) : key;
    EXPECT_TRUE(name == "loss" || forward.find_value(name).has_value()) << fixture << " has %" << name
                                                                         << ", which the graph lacks";
  }

  auto grad_graph = build_gradient_graph(forward, params);
  ASSERT_TRUE(grad_graph.has_value()) << grad_graph.error().str();
  ASSERT_EQ(grad_graph->outputs().size(), params.size() + 1);
  auto values = interpret(*grad_graph, feeds);
  ASSERT_TRUE(values.has_value()) << values.error().str();
  auto output = [&](size_t i) -> const HostTensor& { return (*values)[grad_graph->outputs()[i].v]; };

  const double torch_loss = fx->at("loss").get(0), loss = output(0).get(0);
  double worst = 0;
  std::string worst_name;
  EXPECT_LT(std::abs(loss - torch_loss) / std::abs(torch_loss), kTolerance)
      << fixture << " (" << dtype_name(dt) << "): loss " << loss << ", PyTorch " << torch_loss;
  for (size_t i = 0; i < params.size(); ++i) {
    const HostTensor& ref = fx->at(kGradPrefix + params[i]);
    const HostTensor& ours = output(i + 1);
    ASSERT_EQ(ours.type.shape, ref.type.shape) << params[i];
    double scale = 0;
    for (int64_t k = 0; k < ref.type.num_elements(); ++k) scale = std::max(scale, std::abs(ref.get(k)));
    EXPECT_GT(scale, 0) << "PyTorch's gradient of %" << params[i] << " is all zeros: the comparison would be empty";
    const double err = relative_error(ours, ref);
    EXPECT_LT(err, kTolerance) << fixture << " (" << dtype_name(dt) << "): gradient of %" << params[i];
    if (err >= worst) {
      worst = err;
      worst_name = params[i];
    }
  }
  // For the log: how close the agreement is, not just that it is within the tolerance.
  std::cout << fixture << " (" << dtype_name(dt) << "): loss relative error "
            << std::abs(loss - torch_loss) / std::abs(torch_loss) << ", worst gradient %" << worst_name << " "
            << worst << "\n";
}

class TorchFixtureTest : public ::testing::TestWithParam<DType> {};

TEST_P(TorchFixtureTest, MlpMatchesPyTorch) {
  ModelOptions o;
  o.batch = 4;
  o.hidden = {32, 16};
  o.dtype = GetParam();
  auto g = build_model("mlp", o);
  ASSERT_TRUE(g.has_value()) << g.error().str();
  compare_with_torch(*g, "torch_mlp.npz", GetParam());
}

TEST_P(TorchFixtureTest, TinyResNetMatchesPyTorch) {
  Graph g("tiny_resnet");
  TinyResNet net(g, GetParam());
  auto built = net.build();
  ASSERT_TRUE(built.has_value()) << built.error().str();
  compare_with_torch(g, "torch_resnet.npz", GetParam());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, TorchFixtureTest, ::testing::Values(DType::f32, DType::f64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// The comparison is not vacuous: a parameter off by 1% moves the loss or a gradient past the tolerance.
TEST(TorchFixtureSensitivityTest, APerturbedParameterIsCaught) {
  ModelOptions o;
  o.batch = 4;
  o.hidden = {32, 16};
  auto g = build_model("mlp", o);
  ASSERT_TRUE(g.has_value());
  auto fx = read_npz(kFixtures + "torch_mlp.npz");
  ASSERT_TRUE(fx.has_value());
  std::map<std::string, HostTensor> feeds;
  for (const char* name : {"x", "labels", "fc1.w", "fc1.b", "fc2.w", "fc2.b", "fc3.w", "fc3.b"}) feeds[name] = fx->at(name);
  for (int64_t i = 0; i < feeds["fc3.w"].type.num_elements(); ++i) feeds["fc3.w"].set(i, 1.01 * feeds["fc3.w"].get(i));
  const std::vector<std::string> wrt = {"fc3.w"};
  auto gg = build_gradient_graph(*g, wrt);
  ASSERT_TRUE(gg.has_value()) << gg.error().str();
  auto values = interpret(*gg, feeds);
  ASSERT_TRUE(values.has_value()) << values.error().str();
  const HostTensor& grad = (*values)[gg->outputs()[1].v];
  EXPECT_GT(relative_error(grad, fx->at("grad/fc3.w")), kTolerance);
}

// ONNX import against PyTorch: the networks tests/fixtures/make_onnx_fixtures.py exported, imported by
// io/onnx_import.h, must give PyTorch's loss and gradients, and the weights the importer returns must be the
// file's parameters bit for bit (and no other parameters than the fixture's). Only f32: the files are f32.
#if LMS_HAVE_ONNX_FILES
void compare_onnx_with_torch(const std::string& name, int64_t batch, std::vector<std::string> frozen = {},
                             std::map<std::string, double> held = {}, std::map<std::string, int64_t> dims = {}) {
  auto model = read_onnx(kFixtures + name + ".onnx");
  ASSERT_TRUE(model.has_value()) << model.error().str();
  OnnxImportOptions opts;
  opts.batch = batch;
  opts.frozen = std::move(frozen);
  opts.input_values = std::move(held);
  opts.dims = std::move(dims);
  auto imported = import_onnx(*model, name, opts);
  ASSERT_TRUE(imported.has_value()) << imported.error().str();
  auto fx = read_npz(kFixtures + name + ".npz");
  ASSERT_TRUE(fx.has_value()) << fx.error().str();
  int params = 0, stats = 0;
  std::map<std::string, HostTensor> constants;  // constant tensors the import holds as state
  for (const auto& [key, t] : imported->weights) {
    if (key.ends_with(".running_mean") || key.ends_with(".running_var")) {
      ++stats;
      continue;
    }
    const auto v = imported->forward.find_value(key);
    if (v && imported->forward.node(imported->forward.value(*v).producer).op == Op::state) {
      constants.emplace(key, t);
      continue;
    }
    ++params;
    ASSERT_TRUE(fx->contains(key)) << name << ": the importer's weight %" << key << " is not a PyTorch parameter";
    EXPECT_EQ(t.data, fx->at(key).data) << name << ": %" << key << " differs from the file's parameter";
  }
  EXPECT_EQ(params, static_cast<int>(std::ranges::count_if(*fx, [](const auto& e) {
              return e.first.starts_with(kGradPrefix);
            })));
  if (name == "onnx_cnn" || name == "onnx_seg3d" || name == "onnx_act" || name == "onnx_ceil" ||
      name == "onnx_upsample") {
    EXPECT_GT(stats, 0) << name << ": batch norm statistics should come with the weights";
  }
  compare_with_torch(imported->forward, name + ".npz", DType::f32, constants);
}

TEST(TorchOnnxFixtureTest, CnnImportMatchesPyTorch) { compare_onnx_with_torch("onnx_cnn", 4); }
TEST(TorchOnnxFixtureTest, Seg3dImportMatchesPyTorch) { compare_onnx_with_torch("onnx_seg3d", 2); }
// A nanoGPT-style export: Split, the causal masked_fill (Where), Range positions, the erf form of GELU and
// Identity-shared layer-norm parameters, with next-token cross entropy over [B, T, V] logits.
TEST(TorchOnnxFixtureTest, GptImportMatchesPyTorch) { compare_onnx_with_torch("onnx_gpt", 2); }
// GPT-2's spelling, at opset 14: the tanh GELU with Pow and every layer norm written out (io/onnx_layer_norm.h).
TEST(TorchOnnxFixtureTest, Gpt2Opset14ImportMatchesPyTorch) { compare_onnx_with_torch("onnx_gpt2", 2); }
// SiLU (x * Sigmoid(x)) and Tanh in a CNN.
TEST(TorchOnnxFixtureTest, ActivationsImportMatchesPyTorch) { compare_onnx_with_torch("onnx_act", 4); }
// LLaMA-style RMSNorm (Pow, Sqrt, Div(1, .)) and a SwiGLU MLP, and a division by data.
TEST(TorchOnnxFixtureTest, RmsNormImportMatchesPyTorch) { compare_onnx_with_torch("onnx_rms", 4); }
// Training-mode Dropout, with PyTorch's reference dropping by LMS's masks for the fixture's key.
TEST(TorchOnnxFixtureTest, DropoutImportMatchesPyTorch) { compare_onnx_with_torch("onnx_drop", 4); }
// ceil_mode max and average pooling (SqueezeNet's, GoogLeNet's), counting padding and not.
TEST(TorchOnnxFixtureTest, CeilModePoolingImportMatchesPyTorch) { compare_onnx_with_torch("onnx_ceil", 4); }
// torchvision's VisionTransformer: the class token (Expand, Concat), nn.MultiheadAttention without a mask, x[:, 0].
TEST(TorchOnnxFixtureTest, VisionTransformerImportMatchesPyTorch) { compare_onnx_with_torch("onnx_vit", 4); }
// torchvision's SwinTransformer: shifted windows (roll), their additive attention mask and the relative position
// bias as constant state, patch merging's step-2 slices.
TEST(TorchOnnxFixtureTest, SwinTransformerImportMatchesPyTorch) { compare_onnx_with_torch("onnx_swin", 4); }
// Upsampling as segmentation networks write it: nn.Upsample (Resize nearest), bilinear and trilinear interpolation.
TEST(TorchOnnxFixtureTest, UpsamplingImportMatchesPyTorch) { compare_onnx_with_torch("onnx_upsample", 4); }
// nnU-Net's and MONAI's building blocks: instance norm, group norm (exported as an instance norm and an affine),
// leaky relu, PReLU.
TEST(TorchOnnxFixtureTest, InstanceGroupNormAndLeakyReluImportMatchesPyTorch) {
  compare_onnx_with_torch("onnx_nnunet", 2);
}
// Attention written with torch.einsum: batch, contracted, free and summed letters, implicit output.
TEST(TorchOnnxFixtureTest, EinsumImportMatchesPyTorch) { compare_onnx_with_torch("onnx_einsum", 4); }
// Exp and Log in the data path (a learned exp scale, softplus written out) and log_softmax as the output: the
// cross-entropy LMS appends reads its input (the fixture's loss is cross_entropy of the log-probabilities, which
// is NLLLoss of them).
TEST(TorchOnnxFixtureTest, ExpLogAndLogSoftmaxOutputImportMatchesPyTorch) { compare_onnx_with_torch("onnx_explog", 4); }
// A BERT-style encoder with three inputs, the attention mask and token types held at 1 and 0 (--input-value):
// the additive mask folds to a constant, the token-type lookup reads constant ids; exported with a symbolic
// sequence length, given at import (--dim seq=8).
TEST(TorchOnnxFixtureTest, BertWithHeldInputsImportMatchesPyTorch) {
  compare_onnx_with_torch("onnx_bert", 2, {}, {{"attention_mask", 1}, {"token_type_ids", 0}}, {{"seq", 8}});
}
// A LLaMA decoder: RMSNorm, rotary embeddings from cos/sin buffers (frozen: without that they would be trained
// as parameters, which the fixture, holding PyTorch's parameters only, would catch), SwiGLU, causal attention.
TEST(TorchOnnxFixtureTest, LlamaWithRotaryBuffersImportMatchesPyTorch) {
  compare_onnx_with_torch("onnx_llama", 2, {"*_cached"});
}
#else
TEST(TorchOnnxFixtureTest, ReadingOnnxFilesIsAClearErrorInThisBuild) {
  auto model = read_onnx(kFixtures + "onnx_cnn.onnx");
  ASSERT_FALSE(model.has_value());
  EXPECT_NE(model.error().str().find("configured without libonnx-dev"), std::string::npos) << model.error().str();
}
#endif

}  // namespace
}  // namespace lms
