// Model builders and graph statistics: published parameter counts (torchvision ResNets, GPT-2 small),
// ResNet-50's multiply-adds, every model at a default and a small size, PyTorch-style value names, each
// option error reported as an error value, image size parsing, verifier and text round trip of every model,
// and the build-time budget for a large graph.
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "lms/analysis/stats.h"
#include "lms/ir/parser.h"
#include "lms/ir/printer.h"
#include "lms/ir/verifier.h"
#include "lms/models/models.h"

namespace lms {
namespace {

Graph build_ok(std::string_view name, const ModelOptions& o = {}) {
  auto g = build_model(name, o);
  EXPECT_TRUE(g.has_value()) << name << ": " << (g ? "" : g.error().str());
  return g ? std::move(*g) : Graph();
}

std::string build_error(std::string_view name, const ModelOptions& o) {
  auto g = build_model(name, o);
  EXPECT_FALSE(g.has_value()) << name << " built but should have failed";
  return g ? std::string() : g.error().str();
}

// The graph's output is one scalar f32 loss; %x and %labels exist.
void expect_training_shape(const Graph& g) {
  ASSERT_EQ(g.outputs().size(), 1u);
  const Value& loss = g.value(g.outputs()[0]);
  EXPECT_EQ(to_string(loss.type), "f32[]");
  EXPECT_EQ(loss.name, "loss");
  EXPECT_TRUE(g.find_value("x").has_value());
  EXPECT_TRUE(g.find_value("labels").has_value());
}

TEST(Models, ResNetParamsMatchTorchvision) {
  const std::pair<const char*, int64_t> expected[] = {{"resnet18", 11'689'512},
                                                      {"resnet34", 21'797'672},
                                                      {"resnet50", 25'557'032},
                                                      {"resnet101", 44'549'160},
                                                      {"resnet152", 60'192'808}};
  for (const auto& [name, params] : expected) {
    Graph g = build_ok(name);
    EXPECT_EQ(g.name(), name);
    EXPECT_EQ(graph_stats(g).params, params) << name;
    expect_training_shape(g);
  }
}

TEST(Models, ResNet50MacsAt224) {
  Graph g = build_ok("resnet50");
  const double macs = matmul_conv_macs(g);
  EXPECT_NEAR(macs / 4.1e9, 1.0, 0.03) << macs;
  // Scales with the batch.
  ModelOptions o;
  o.batch = 4;
  EXPECT_NEAR(matmul_conv_macs(build_ok("resnet50", o)) / macs, 4.0, 1e-9);
}

TEST(Models, Gpt2SmallParams) {
  Graph g = build_ok("gpt");
  EXPECT_EQ(graph_stats(g).params, 124'439'808);
  expect_training_shape(g);
  ModelOptions o;
  o.untied = true;
  EXPECT_EQ(graph_stats(build_ok("gpt", o)).params, 124'439'808 + 50257 * 768);
}

TEST(Models, GptGeluForm) {
  ModelOptions o;
  o.layers = 2;
  o.gelu = "tanh";
  Graph g = build_ok("gpt", o);
  int tanh_gelus = 0;
  for (NodeId id : g.node_ids())
    if (g.node(id).op == Op::gelu) tanh_gelus += g.node(id).attrs.get_string("approximate", "none") == "tanh";
  EXPECT_EQ(tanh_gelus, 2);
  o.gelu = "fast";
  auto bad = build_model("gpt", o);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().str().find("gelu: must be erf or tanh, got 'fast'"), std::string::npos) << bad.error().str();
  ModelOptions r;
  r.gelu = "tanh";
  auto wrong_model = build_model("resnet18", r);
  ASSERT_FALSE(wrong_model.has_value());
  EXPECT_NE(wrong_model.error().str().find("gelu: option does not apply"), std::string::npos);
}

TEST(Models, MlpParamsAndStats) {
  Graph g = build_ok("mlp");
  expect_training_shape(g);
  const GraphStats s = graph_stats(g);
  EXPECT_EQ(s.params, 784 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10);
  EXPECT_EQ(s.param_bytes, 4 * s.params);
  EXPECT_EQ(s.state_bytes, 0);
  EXPECT_EQ(s.input_bytes, 784 * 4 + 8);  // x f32[1,1,28,28] and labels i64[1]
  EXPECT_EQ(s.nodes, static_cast<int64_t>(g.num_nodes()));
  EXPECT_GT(s.activation_bytes, 0);
  // Matmul multiply-adds are exactly the weight elements at batch 1.
  EXPECT_DOUBLE_EQ(matmul_conv_macs(g), 784.0 * 512 + 512 * 256 + 256 * 10);
  EXPECT_GE(s.flops, 2 * matmul_conv_macs(g));
}

TEST(Models, UNet3dParamsFollowTheLayout) {
  // Default: 4 in-channels, 3 classes, depth 4, 32 base filters.
  auto conv_bn = [](int64_t cin, int64_t cout) { return cin * cout * 27 + 2 * cout; };
  int64_t expected = 0, cin = 4;
  for (int level = 0; level < 4; ++level) {
    const int64_t f = 32 << level;
    expected += conv_bn(cin, f) + conv_bn(f, f);
    cin = f;
  }
  for (int level = 2; level >= 0; --level) {
    const int64_t f = 32 << level;
    expected += cin * f * 8 + f;  // transposed conv with bias
    expected += conv_bn(2 * f, f) + conv_bn(f, f);
    cin = f;
  }
  expected += 32 * 3 + 3;
  Graph g = build_ok("unet3d");
  EXPECT_EQ(graph_stats(g).params, expected);
  expect_training_shape(g);
  EXPECT_EQ(to_string(g.value(*g.find_value("labels")).type), "i64[1,64,64,64]");
}

TEST(Models, EveryModelBuildsSmall) {
  for (const ModelInfo& m : model_list()) {
    ModelOptions o;
    o.batch = 2;
    const std::string name(m.name);
    if (name == "mlp") {
      o.hidden = {32};
      o.image = {8, 12};
    } else if (name.starts_with("resnet")) {
      o.image = {32};
      o.small_stem = true;
      o.classes = 10;
    } else if (name == "unet3d") {
      o.image = {16};
      o.depth = 3;
      o.base_filters = 8;
    } else if (name == "gpt") {
      o.layers = 2;
      o.hidden_size = 64;
      o.heads = 4;
      o.seq = 16;
      o.vocab = 100;
    }
    Graph g = build_ok(m.name, o);
    expect_training_shape(g);
    EXPECT_FALSE(m.summary.empty());
    // Well formed, and the text format round-trips byte for byte.
    auto ok = verify(g);
    EXPECT_TRUE(ok.has_value()) << name << ": " << (ok ? "" : ok.error().str());
    const std::string text = print_graph(g);
    auto parsed = parse_graph(text);
    ASSERT_TRUE(parsed.has_value()) << name << ": " << parsed.error().str();
    EXPECT_EQ(print_graph(*parsed), text) << name;
  }
}

TEST(Models, SmallShapes) {
  ModelOptions o;
  o.image = {32};
  o.small_stem = true;
  Graph r = build_ok("resnet18", o);
  EXPECT_EQ(to_string(r.value(*r.find_value("layer4.1.relu")).type), "f32[1,512,4,4]");
  EXPECT_FALSE(r.find_value("maxpool").has_value());
  o = {};
  o.image = {16, 32, 8};
  o.depth = 3;
  Graph u = build_ok("unet3d", o);
  EXPECT_EQ(to_string(u.value(*u.find_value("enc2.relu2")).type), "f32[1,128,4,8,2]");
  EXPECT_EQ(to_string(u.value(*u.find_value("dec0.concat")).type), "f32[1,64,16,32,8]");
  EXPECT_EQ(to_string(u.value(*u.find_value("out")).type), "f32[1,3,16,32,8]");
  o = {};
  o.layers = 2;
  o.hidden_size = 64;
  o.heads = 4;
  o.seq = 16;
  o.batch = 3;
  Graph t = build_ok("gpt", o);
  EXPECT_EQ(to_string(t.value(*t.find_value("h.1.attn.scores")).type), "f32[3,4,16,16]");
  EXPECT_EQ(to_string(t.value(*t.find_value("lm_head")).type), "f32[48,50257]");  // the logits, flat
}

TEST(Models, ValueNamesArePyTorchLike) {
  Graph r = build_ok("resnet50");
  for (const char* n : {"conv1.w", "bn1.gamma", "bn1.beta", "maxpool", "layer1.0.conv1", "layer1.0.bn1",
                        "layer1.0.conv2.w", "layer1.0.downsample.0.w", "layer1.0.downsample.1",
                        "layer4.2.conv3", "avgpool", "fc.w", "fc.b"})
    EXPECT_TRUE(r.find_value(n).has_value()) << n;
  EXPECT_FALSE(r.find_value("layer1.1.downsample.0").has_value());
  const Value& w = r.value(*r.find_value("conv1.w"));
  EXPECT_EQ(to_string(w.type), "f32[64,3,7,7]");
  EXPECT_EQ(r.node(w.producer).attrs.get_string("init", ""), "he");
  Graph t = build_ok("gpt");
  for (const char* n : {"wte", "wpe", "h.3.attn.qkv", "h.3.attn.qkv.w", "h.3.attn.qkv.b", "h.3.ln_1.gamma",
                        "h.3.mlp.fc.w", "h.11.mlp.proj.b", "ln_f", "lm_head"})
    EXPECT_TRUE(t.find_value(n).has_value()) << n;
  const Value& wte = t.value(*t.find_value("wte"));
  EXPECT_EQ(t.node(wte.producer).attrs.get_string("init", ""), "normal(0.02)");
}

TEST(Models, BuildIsDeterministic) {
  ModelOptions o;
  o.image = {32};
  o.small_stem = true;
  Graph a = build_ok("resnet18", o), b = build_ok("resnet18", o);
  ASSERT_EQ(a.num_values(), b.num_values());
  for (uint32_t i = 0; i < a.num_values(); ++i) {
    EXPECT_EQ(a.value(ValueId{i}).name, b.value(ValueId{i}).name);
    EXPECT_EQ(a.value(ValueId{i}).type, b.value(ValueId{i}).type);
  }
}

TEST(Models, Errors) {
  ModelOptions o;
  std::string e = build_error("resnet51", o);
  EXPECT_NE(e.find("unknown model 'resnet51'"), std::string::npos) << e;
  EXPECT_NE(e.find("resnet50, resnet101"), std::string::npos) << e;

  o.batch = 0;
  e = build_error("resnet18", o);
  EXPECT_NE(e.find("batch"), std::string::npos) << e;
  o = {};
  o.dtype = DType::i32;
  EXPECT_NE(build_error("mlp", o).find("dtype"), std::string::npos);

  o = {};
  o.image = {32, 32, 32};
  e = build_error("resnet18", o);
  EXPECT_NE(e.find("2 spatial dims"), std::string::npos) << e;
  o.image = {32, 32};
  e = build_error("unet3d", o);
  EXPECT_NE(e.find("3 spatial dims"), std::string::npos) << e;
  o.image = {-4};
  EXPECT_NE(build_error("mlp", o).find("image"), std::string::npos);

  o = {};
  o.image = {36};  // depth 4 needs multiples of 8
  e = build_error("unet3d", o);
  EXPECT_NE(e.find("divisible by 2^(depth-1) = 8"), std::string::npos) << e;
  o.image = {8};
  o.depth = 5;  // too small for 4 down-samplings
  EXPECT_NE(build_error("unet3d", o).find("divisible"), std::string::npos);
  o = {};
  o.base_filters = 0;
  EXPECT_NE(build_error("unet3d", o).find("base-filters"), std::string::npos);

  o = {};
  o.heads = 5;
  e = build_error("gpt", o);
  EXPECT_EQ(e, "gpt: heads: 5 heads do not divide hidden-size 768");
  o = {};
  o.layers = int64_t{1} << 31;  // refused before building, not built until memory runs out
  EXPECT_EQ(build_error("gpt", o), "gpt: layers: must be at most 1000, got 2147483648");
  o = {};
  o.seq = 0;
  EXPECT_NE(build_error("gpt", o).find("seq"), std::string::npos);

  o = {};
  o.classes = -1;
  EXPECT_NE(build_error("resnet50", o).find("classes"), std::string::npos);
  o = {};
  o.hidden = {64, 0};
  EXPECT_NE(build_error("mlp", o).find("hidden"), std::string::npos);

  // Options a model does not read are refused, naming the option.
  o = {};
  o.heads = 8;
  e = build_error("resnet18", o);
  EXPECT_NE(e.find("resnet18: heads: option does not apply"), std::string::npos) << e;
  o = {};
  o.image = {32};
  EXPECT_NE(build_error("gpt", o).find("image"), std::string::npos);
  o = {};
  o.small_stem = true;
  EXPECT_NE(build_error("unet3d", o).find("small-stem"), std::string::npos);

  // Sizes whose tensors would overflow are errors too, naming the tensor.
  o = {};
  o.batch = int64_t{1} << 40;
  e = build_error("resnet18", o);
  EXPECT_NE(e.find("resnet18: %x: tensor f32[1099511627776,3,224,224] has more than 2^48"), std::string::npos) << e;
  o.batch = int64_t{1} << 60;
  EXPECT_NE(build_error("resnet18", o).find("2^48"), std::string::npos);
  o = {};
  o.image = {int64_t{1} << 31, int64_t{1} << 31};
  EXPECT_NE(build_error("mlp", o).find("mlp: %"), std::string::npos);
  o = {};
  o.seq = int64_t{1} << 62;
  o.batch = 4;
  EXPECT_NE(build_error("gpt", o).find("seq"), std::string::npos);
}

TEST(Models, ParseImageSize) {
  EXPECT_EQ(parse_image_size("224").value(), (std::vector<int64_t>{224}));
  EXPECT_EQ(parse_image_size("256x320").value(), (std::vector<int64_t>{256, 320}));
  EXPECT_EQ(parse_image_size("64x64x64").value(), (std::vector<int64_t>{64, 64, 64}));
  for (const char* bad : {"", "0", "-3", "x", "12x", "x12", "12xx3", "abc", "12a", " 12", "+4", "1.5", "2x0",
                          "99999999999999999999", "1x2x3x4"}) {
    auto r = parse_image_size(bad);
    EXPECT_FALSE(r.has_value()) << "'" << bad << "'";
    if (!r) {
      EXPECT_EQ(r.error().where, "image") << bad;
    }
  }
  EXPECT_NE(parse_image_size("99999999999999999999").error().what.find("too large"), std::string::npos);
}

// Every model at its default (full) size also verifies and round-trips: the second size of the round-trip test.
TEST(Models, EveryModelAtDefaultSizeRoundTrips) {
  for (const ModelInfo& m : model_list()) {
    ModelOptions o;
    o.batch = 2;
    Graph g = build_ok(m.name, o);
    auto ok = verify(g);
    EXPECT_TRUE(ok.has_value()) << m.name << ": " << (ok ? "" : ok.error().str());
    const std::string text = print_graph(g);
    auto parsed = parse_graph(text);
    ASSERT_TRUE(parsed.has_value()) << m.name << ": " << parsed.error().str();
    EXPECT_EQ(print_graph(*parsed), text) << m.name;
  }
}

}  // namespace
}  // namespace lms
