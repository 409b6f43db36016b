// Parameter initialization and the portable generator under it: the generator against splitmix64's published
// first output and its log/sin/cos against libm; init strings (every one the model builders emit parses);
// statistics of he / normal / uniform on large tensors; zeros and ones exactly; determinism across calls,
// seeds and graph changes (adding a layer leaves the other layers' values alone); errors naming the value.
#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "lms/ir/builder.h"
#include "lms/models/models.h"
#include "lms/runtime/init.h"
#include "lms/support/random.h"

namespace lms {
namespace {

struct Moments {
  double mean = 0, stddev = 0, min = 0, max = 0;
};
Moments moments(const HostTensor& t) {
  const int64_t n = t.type.num_elements();
  double sum = 0, sq = 0;
  Moments m{0, 0, t.get(0), t.get(0)};
  for (int64_t i = 0; i < n; ++i) {
    const double v = t.get(i);
    sum += v;
    sq += v * v;
    m.min = std::min(m.min, v);
    m.max = std::max(m.max, v);
  }
  m.mean = sum / static_cast<double>(n);
  m.stddev = std::sqrt(sq / static_cast<double>(n) - m.mean * m.mean);
  return m;
}

HostTensor make(const TensorType& t, std::string_view init, std::string_view name = "w", uint64_t seed = 7) {
  auto spec = parse_init(init);
  EXPECT_TRUE(spec.has_value()) << init;
  auto v = make_initial_value(t, *spec, name, seed);
  EXPECT_TRUE(v.has_value()) << (v ? "" : v.error().str());
  return v ? std::move(*v) : HostTensor(t);
}

TEST(RandomTest, SplitMix64MatchesTheReference) {
  // splitmix64 seeded with 0 (Vigna's reference implementation): the first output is 0xe220a8397b1dcdaf.
  EXPECT_EQ(RandomStream(0).bits(0), 0xe220a8397b1dcdafull);
  EXPECT_EQ(fnv1a64(""), kFnvOffset);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);  // the FNV-1a 64 test vector for "a"
}

TEST(RandomTest, PortableMathMatchesLibm) {
  for (double x : {1e-300, 1e-17, 0.001, 0.3, 0.7071, 1.0, 1.5, 2.0, 1e5, 1e300})
    EXPECT_NEAR(portable_log(x), std::log(x), 4e-16 * std::max(1.0, std::abs(std::log(x)))) << x;
  for (int k = 0; k < 1000; ++k) {
    const double u = k / 1000.0 + 1e-4;
    auto [s, c] = portable_sin_cos_turns(u);
    EXPECT_NEAR(s, std::sin(2 * std::numbers::pi * u), 1e-15) << u;
    EXPECT_NEAR(c, std::cos(2 * std::numbers::pi * u), 1e-15) << u;
  }
}

TEST(RandomTest, BelowStaysInRangeAndCoversIt) {
  const RandomStream s(42);
  std::vector<int> hits(7, 0);
  for (uint64_t i = 0; i < 7000; ++i) {
    const uint64_t v = s.below(i, 7);
    ASSERT_LT(v, 7u);
    ++hits[v];
  }
  for (int h : hits) EXPECT_NEAR(h, 1000, 150);
}

TEST(InitTest, ParsesEveryForm) {
  using K = InitSpec::Kind;
  EXPECT_EQ(parse_init("he")->kind, K::he);
  EXPECT_EQ(parse_init("zeros")->kind, K::zeros);
  EXPECT_EQ(parse_init("ones")->kind, K::ones);
  EXPECT_EQ(parse_init("normal(0.00408248)")->kind, K::normal);
  EXPECT_DOUBLE_EQ(parse_init("normal(0.00408248)")->scale, 0.00408248);
  EXPECT_DOUBLE_EQ(parse_init("uniform(1e-2)")->scale, 0.01);
  EXPECT_DOUBLE_EQ(parse_init("normal( 0.5 )")->scale, 0.5);
  for (const char* bad : {"xavier", "normal()", "normal(abc)", "normal(-1)", "uniform(inf)", "normal(0.1",
                          "normal(0.1)x", "HE"}) {
    auto r = parse_init(bad);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_NE(r.error().str().find(bad), std::string::npos) << r.error().str();
  }
}

TEST(InitTest, EveryInitTheModelsEmitIsSupported) {
  ModelOptions small_gpt;
  small_gpt.layers = 3;
  small_gpt.hidden_size = 48;
  small_gpt.heads = 2;
  small_gpt.seq = 8;
  small_gpt.vocab = 50;
  ModelOptions small_unet;
  small_unet.image = {16};
  small_unet.depth = 2;
  small_unet.base_filters = 4;
  ModelOptions small_resnet;
  small_resnet.image = {32};
  small_resnet.classes = 10;
  std::set<std::string> seen;
  for (auto [name, opts] : {std::pair{"mlp", ModelOptions{}}, {"resnet18", small_resnet},
                            {"unet3d", small_unet}, {"gpt", small_gpt}}) {
    auto g = build_model(name, opts);
    ASSERT_TRUE(g.has_value()) << name << ": " << g.error().str();
    auto values = initial_values(*g, 1);
    ASSERT_TRUE(values.has_value()) << name << ": " << values.error().str();
    EXPECT_FALSE(values->empty()) << name;
    for (NodeId n : g->node_ids())
      if (g->node(n).op == Op::param) seen.insert(g->node(n).attrs.get_string("init", ""));
  }
  // he, zeros, ones, and gpt's two normal() strings (0.02 and the residual 0.02/sqrt(2*3)).
  EXPECT_TRUE(seen.contains("he") && seen.contains("zeros") && seen.contains("ones") && seen.contains("normal(0.02)"));
  EXPECT_TRUE(seen.contains("normal(0.00816497)")) << "gpt's residual init string changed; check parse_init";
}

TEST(InitTest, HeHasTheRightStatistics) {
  // fan_in = 64 * 3 * 3 = 576: std = sqrt(2/576).
  const HostTensor t = make({DType::f32, {256, 64, 3, 3}}, "he");
  const Moments m = moments(t);
  EXPECT_NEAR(m.stddev, std::sqrt(2.0 / 576), 0.01 * std::sqrt(2.0 / 576));
  EXPECT_NEAR(m.mean, 0, 0.01 * m.stddev);
  // A normal's 4.5-sigma tails exist in 147456 draws but 6-sigma ones (p ~ 2e-9) should not.
  EXPECT_GT(m.max, 3.5 * m.stddev);
  EXPECT_LT(m.max, 6.5 * m.stddev);
}

TEST(InitTest, NormalAndUniformHaveTheRightStatistics) {
  const Moments n = moments(make({DType::f64, {100000}}, "normal(0.02)"));
  EXPECT_NEAR(n.stddev, 0.02, 0.02 * 0.01);
  EXPECT_NEAR(n.mean, 0, 0.02 * 0.01);
  const Moments u = moments(make({DType::f32, {300, 300}}, "uniform(0.1)"));
  EXPECT_GE(u.min, -0.1);
  EXPECT_LE(u.max, 0.1);
  EXPECT_LT(u.min, -0.099);
  EXPECT_GT(u.max, 0.099);
  EXPECT_NEAR(u.stddev, 0.1 / std::sqrt(3.0), 0.001);
  // Reduced precision: the same numbers rounded.
  const HostTensor h = make({DType::f16, {1000}}, "normal(1)"), f = make({DType::f32, {1000}}, "normal(1)");
  for (int64_t i = 0; i < 1000; ++i) EXPECT_NEAR(h.get(i), f.get(i), 1e-3 * std::max(1.0, std::abs(f.get(i))));
}

TEST(InitTest, ZerosAndOnesAreExact) {
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64}) {
    const HostTensor z = make({dt, {3, 5}}, "zeros"), o = make({dt, {3, 5}}, "ones");
    for (int64_t i = 0; i < 15; ++i) {
      EXPECT_EQ(z.get(i), 0.0);
      EXPECT_EQ(o.get(i), 1.0);
    }
  }
}

TEST(InitTest, DeterministicPerSeedAndName) {
  const TensorType t{DType::f32, {64, 32}};
  EXPECT_EQ(make(t, "he", "fc1.w", 3).data, make(t, "he", "fc1.w", 3).data);
  EXPECT_NE(make(t, "he", "fc1.w", 3).data, make(t, "he", "fc1.w", 4).data);
  EXPECT_NE(make(t, "he", "fc1.w", 3).data, make(t, "he", "fc2.w", 3).data);
}

TEST(InitTest, AddingALayerLeavesTheOthersAlone) {
  ModelOptions a, b;
  a.hidden = {32, 16};
  b.hidden = {32, 16, 8};
  auto ga = build_model("mlp", a), gb = build_model("mlp", b);
  ASSERT_TRUE(ga && gb);
  auto va = initial_values(*ga, 11), vb = initial_values(*gb, 11);
  ASSERT_TRUE(va && vb);
  for (const char* name : {"fc1.w", "fc1.b", "fc2.w", "fc2.b"}) EXPECT_EQ(va->at(name).data, vb->at(name).data) << name;
  EXPECT_EQ(vb->size(), va->size() + 2);
  // ... and the defaults: he weights, zero biases.
  EXPECT_EQ(moments(va->at("fc1.b")).max, 0.0);
  EXPECT_NEAR(moments(va->at("fc1.w")).stddev, std::sqrt(2.0 / 784), 0.03 * std::sqrt(2.0 / 784));
}

TEST(InitTest, EmptyInitAndErrorsNameTheValue) {
  Graph g("t");
  Builder b(g);
  ValueId w = b.param({DType::f32, {8, 4}}, "w");
  ValueId bias = b.param({DType::f32, {8}}, "bias");
  ValueId bad = b.param({DType::f32, {8, 4}}, "odd", "xavier");
  ValueId he1 = b.param({DType::f32, {8}}, "he1", "he");
  ValueId ids = b.param({DType::i64, {8}}, "ids", "normal(1)");
  ValueId mom = b.state({DType::f32, {8}}, "mom");
  ValueId x = b.input({DType::f32, {8}}, "x");
  ASSERT_TRUE(b.ok()) << b.error()->str();
  EXPECT_GT(moments(*initial_value(g, w, 1)).stddev, 0.3);  // he: sqrt(2/4) = 0.71
  EXPECT_EQ(moments(*initial_value(g, bias, 1)).max, 0.0);
  EXPECT_EQ(moments(*initial_value(g, mom, 1)).max, 0.0);
  auto e1 = initial_value(g, bad, 1);
  ASSERT_FALSE(e1.has_value());
  EXPECT_NE(e1.error().str().find("%odd"), std::string::npos);
  EXPECT_NE(e1.error().str().find("unknown init 'xavier'"), std::string::npos);
  auto e2 = initial_value(g, he1, 1);
  ASSERT_FALSE(e2.has_value());
  EXPECT_NE(e2.error().str().find("%he1"), std::string::npos);
  EXPECT_NE(e2.error().str().find("rank >= 2"), std::string::npos);
  auto e3 = initial_value(g, ids, 1);
  ASSERT_FALSE(e3.has_value());
  EXPECT_NE(e3.error().str().find("floating-point"), std::string::npos);
  auto e4 = initial_value(g, x, 1);
  ASSERT_FALSE(e4.has_value());
  EXPECT_NE(e4.error().str().find("not a param or state"), std::string::npos);
  auto all = initial_values(g, 1);
  ASSERT_FALSE(all.has_value());
  EXPECT_NE(all.error().str().find("%odd"), std::string::npos);
}

}  // namespace
}  // namespace lms
