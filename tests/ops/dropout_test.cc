// Dropout's mask (ops/dropout_mask.h) and the reference kernels of dropout and rng_advance: the drop rate is p
// within sampling error, masks of different keys, seeds or neighbouring elements are independent, kept elements
// are scaled by exactly 1/(1-p), p = 0 is the identity, non-finite inputs stay non-finite, and the same
// (key, seed, p) always drops the same elements. The backends' kernels are checked against these in the
// cross-backend op table (tests/backends/op_cases.h); the training-level properties in
// tests/runtime/dropout_training_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "backends/reference_test_util.h"
#include "lms/ops/dropout_mask.h"

namespace lms {
namespace {
using namespace ref_test;

constexpr int64_t kSamples = 1 << 20;

// The fraction of kept elements among the first kSamples of (key, seed) at p.
double kept_fraction(double p, uint64_t key, int64_t seed) {
  const DropoutMask m = dropout_mask(p, seed);
  const uint64_t stream = m.stream(key);
  int64_t kept = 0;
  for (int64_t i = 0; i < kSamples; ++i) kept += m.keep(stream, i) ? 1 : 0;
  return static_cast<double>(kept) / kSamples;
}

TEST(DropoutMask, KeepsOneMinusPWithinSamplingError) {
  for (double p : {0.01, 0.1, 0.5, 0.9}) {
    const double sigma = std::sqrt(p * (1 - p) / kSamples);
    for (uint64_t key : {uint64_t{0}, uint64_t{12345}, ~uint64_t{0}})
      EXPECT_NEAR(kept_fraction(p, key, 3), 1 - p, 5 * sigma) << "p " << p << " key " << key;
  }
  EXPECT_EQ(kept_fraction(0, 99, 0), 1.0) << "p = 0 keeps everything";
  EXPECT_EQ(dropout_mask(0.25, 0).threshold, uint64_t{1} << 30) << "round(p * 2^32)";
  EXPECT_EQ(dropout_mask(0.25, 0).scale, 1 / 0.75);
}

// Two masks agree on an element with probability (1-p)^2 + p^2 when independent: 0.5 at p = 0.5. Checked for
// keys one apart (consecutive steps), seeds one apart (neighbouring dropouts) and elements one apart.
TEST(DropoutMask, NeighbouringKeysSeedsAndElementsAreIndependent) {
  const double p = 0.5, sigma = std::sqrt(0.25 / kSamples);
  const DropoutMask a = dropout_mask(p, 4), b = dropout_mask(p, 5);
  const uint64_t s = a.stream(1000), next_key = a.stream(1001), next_seed = b.stream(1000);
  int64_t same_key = 0, same_seed = 0, same_element = 0;
  for (int64_t i = 0; i < kSamples; ++i) {
    same_key += a.keep(s, i) == a.keep(next_key, i) ? 1 : 0;
    same_seed += a.keep(s, i) == b.keep(next_seed, i) ? 1 : 0;
    same_element += a.keep(s, i) == a.keep(s, i + 1) ? 1 : 0;
  }
  EXPECT_NEAR(static_cast<double>(same_key) / kSamples, 0.5, 5 * sigma);
  EXPECT_NEAR(static_cast<double>(same_seed) / kSamples, 0.5, 5 * sigma);
  EXPECT_NEAR(static_cast<double>(same_element) / kSamples, 0.5, 5 * sigma);
}

TEST(DropoutKernel, ScalesKeptElementsAndZeroesTheRest) {
  const int64_t n = 4096;
  HostTensor x = random(DType::f64, {n}, 11, -2, 2);
  const Attributes attrs = A({{"p", F(0.3)}, {"seed", I(2)}});
  const HostTensor key = i64({}, {777});
  const HostTensor y = run1(Op::dropout, {x, key}, attrs);
  const DropoutMask m = dropout_mask(0.3, 2);
  const uint64_t stream = m.stream(777);
  int64_t dropped = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (m.keep(stream, i)) {
      EXPECT_EQ(y.get(i), x.get(i) * (1 / 0.7)) << i;
    } else {
      EXPECT_EQ(y.get(i), 0.0) << i;
      ++dropped;
    }
  }
  EXPECT_GT(dropped, 0);
  EXPECT_EQ(run1(Op::dropout, {x, key}, attrs).data, y.data) << "the same key gives the same mask";
  EXPECT_NE(run1(Op::dropout, {x, i64({}, {778})}, attrs).data, y.data) << "the next key another";
  EXPECT_EQ(run1(Op::dropout, {x, key}, A({{"p", F(0)}})).data, x.data) << "p = 0 is the identity";
  // f32: the product in double, rounded once.
  const HostTensor x32 = random(DType::f32, {n}, 12);
  const HostTensor y32 = run1(Op::dropout, {x32, key}, attrs);
  for (int64_t i = 0; i < n; ++i)
    EXPECT_EQ(y32.as<float>()[static_cast<size_t>(i)],
              static_cast<float>(m.apply(stream, i, static_cast<double>(x32.as<float>()[static_cast<size_t>(i)]))));
}

TEST(DropoutKernel, NonFiniteInputsStayNonFinite) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  HostTensor x = f64({64});
  for (int64_t i = 0; i < 64; ++i) x.set(i, i % 2 == 0 ? nan : inf);
  const HostTensor y = run1(Op::dropout, {x, i64({}, {5})}, A({{"p", F(0.5)}}));
  for (int64_t i = 0; i < 64; ++i) EXPECT_FALSE(std::isfinite(y.get(i))) << i;
}

TEST(DropoutKernel, RngAdvanceIncrementsAndWraps) {
  EXPECT_EQ(run1(Op::rng_advance, {i64({}, {41})}).get(0), 42);
  HostTensor top = i64({});
  top.as<int64_t>()[0] = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(run1(Op::rng_advance, {top}).as<int64_t>()[0], std::numeric_limits<int64_t>::min());
  HostTensor all_ones = i64({}, {-1});
  EXPECT_EQ(run1(Op::rng_advance, {all_ones}).get(0), 0);
}

}  // namespace
}  // namespace lms
