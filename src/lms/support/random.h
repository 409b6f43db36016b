// Portable counter-based random numbers: the same bits on every machine, compiler and standard library, so
// that parameter initialization, synthetic data and data shuffling are reproducible anywhere. The C++
// <random> distributions are not (std::normal_distribution and std::uniform_int_distribution are allowed to
// differ between standard libraries), and neither are libm's log/sin/cos in their last bit, so this header
// does everything itself with + - * / and sqrt, which IEEE 754 defines exactly. (That holds as long as the
// compiler does not fuse a*b+c into one rounding: g++ in strict -std=c++23 mode, as this project builds, does
// not contract across statements or expressions; -ffp-contract=fast on an FMA target would change low bits.)
//
// A `RandomStream` is a 64-bit key; element c of the stream is splitmix64's output at position c (the
// finalizer applied to key + (c + 1) * golden gamma). Being counter-based, any element can be computed
// independently: a tensor's i-th value does not depend on how many values were drawn before it.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <string_view>
#include <utility>

#include "lms/support/counter_hash.h"

namespace lms {

// 64-bit FNV-1a of a string: a stable hash of names (std::hash is not stable across libraries).
inline constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
inline constexpr uint64_t kFnvPrime = 0x100000001b3ull;
inline constexpr uint64_t fnv1a64(std::string_view s) {
  uint64_t h = kFnvOffset;
  for (char c : s) {
    h ^= static_cast<uint8_t>(c);
    h *= kFnvPrime;
  }
  return h;
}

// log(x) for finite x > 0 from basic operations: x = m 2^e with m in [sqrt(1/2), sqrt(2)), and
// log(m) = 2 atanh(s), s = (m-1)/(m+1), |s| < 0.172, summed to s^25 (truncation error below 1e-20).
inline double portable_log(double x) {
  constexpr int kAtanhTerms = 13;
  int e = 0;
  double m = std::frexp(x, &e);  // exact: m in [0.5, 1)
  if (m < std::numbers::sqrt2 / 2) {
    m *= 2;
    --e;
  }
  const double s = (m - 1) / (m + 1);
  const double s2 = s * s;
  double term = s, sum = 0;
  for (int k = 0; k < kAtanhTerms; ++k) {
    sum += term / (2 * k + 1);
    term *= s2;
  }
  return 2 * sum + e * std::numbers::ln2;
}

// (sin 2πu, cos 2πu) for u in [0, 1) from basic operations: the quadrant comes from 4u exactly, and the
// Taylor series on [0, π/2) summed to the 23rd power (truncation error below 1e-17).
inline std::pair<double, double> portable_sin_cos_turns(double u) {
  constexpr int kTaylorTerms = 12;
  const double four_u = 4 * u;
  const double quadrant = std::floor(four_u);
  const double a = (four_u - quadrant) * (std::numbers::pi / 2);
  const double a2 = a * a;
  double s = 0, c = 0, ts = a, tc = 1;
  for (int k = 0; k < kTaylorTerms; ++k) {
    s += ts;
    c += tc;
    ts *= -a2 / ((2 * k + 2) * (2 * k + 3));
    tc *= -a2 / ((2 * k + 1) * (2 * k + 2));
  }
  switch (static_cast<int>(quadrant) & 3) {
    case 0: return {s, c};
    case 1: return {c, -s};
    case 2: return {-s, -c};
    default: return {-c, s};
  }
}

class RandomStream {
 public:
  explicit constexpr RandomStream(uint64_t key) : key_(key) {}
  constexpr uint64_t key() const { return key_; }

  // The counter-th 64-bit word of the stream.
  constexpr uint64_t bits(uint64_t counter) const { return stream_bits(key_, counter); }

  // Uniform in [0, 1) with 53 random bits.
  double uniform(uint64_t counter) const { return static_cast<double>(bits(counter) >> kDropBits) * kUnit; }

  // Uniform integer in [0, n) for n >= 1 by multiply-high (Lemire); its bias, n / 2^64, is negligible.
  constexpr uint64_t below(uint64_t counter, uint64_t n) const {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(bits(counter)) * n) >> 64);
  }

  // Standard normals number 2p and 2p+1 (Box-Muller on words 2p and 2p+1). Element i of a normal tensor is
  // normal_pair(i / 2).first for even i and .second for odd i.
  std::pair<double, double> normal_pair(uint64_t p) const {
    const double u1 = static_cast<double>((bits(2 * p) >> kDropBits) + 1) * kUnit;  // (0, 1]: log is finite
    const double u2 = uniform(2 * p + 1);
    const double r = std::sqrt(-2 * portable_log(u1));
    auto [s, c] = portable_sin_cos_turns(u2);
    return {r * c, r * s};
  }
  double normal(uint64_t i) const {
    auto [a, b] = normal_pair(i / 2);
    return i % 2 == 0 ? a : b;
  }

 private:
  static constexpr int kDropBits = 11;                  // 64 - 53 mantissa bits
  static constexpr double kUnit = 0x1.0p-53;            // 2^-53
  uint64_t key_;
};

}  // namespace lms
