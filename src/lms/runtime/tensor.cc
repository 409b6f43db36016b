// HostTensor element access (get/set through double, for tests, feeds and fetched results) and the f16 / bf16
// conversions shared by kernels and tensors. The conversions are exact bit manipulations with IEEE
// round-to-nearest-even, so a value converted twice gives the same bits on every machine; NaN stays NaN (quiet)
// and values beyond the format's range become infinities, as a hardware conversion does.
#include "lms/runtime/tensor.h"

#include <bit>
#include <cmath>
#include <cstdint>

namespace lms {

namespace {

// binary32 layout.
constexpr uint32_t kF32SignMask = 0x80000000u;
constexpr uint32_t kF32AbsMask = 0x7fffffffu;
constexpr uint32_t kF32Inf = 0x7f800000u;
constexpr int kF32MantBits = 23;
constexpr uint32_t kF32MantMask = 0x007fffffu;
constexpr uint32_t kF32ImplicitOne = 0x00800000u;
constexpr int kF32Bias = 127;

// binary16 layout.
constexpr uint16_t kF16SignMask = 0x8000u;
constexpr uint16_t kF16Inf = 0x7c00u;
constexpr uint16_t kF16QuietBit = 0x0200u;
constexpr int kF16MantBits = 10;
constexpr uint32_t kF16MantMask = 0x03ffu;
constexpr uint32_t kF16ExpMax = 0x1fu;
constexpr int kF16Bias = 15;
// The mantissa bits binary32 has beyond binary16's.
constexpr int kMantDrop = kF32MantBits - kF16MantBits;
// Smallest binary32 whose binary16 rounding is infinite: halfway between 65504 (the largest finite half) and
// 65536; ties go to even, and 65504's mantissa is odd, so the tie itself rounds up to infinity.
constexpr uint32_t kF16OverflowThreshold = 0x477ff000u;
// Smallest normal binary16, 2^-14, as binary32 bits.
constexpr uint32_t kF16MinNormal = 0x38800000u;
// A half subnormal is m * 2^-24 for a 10-bit m.
constexpr int kF16SubnormalExp = -24;

// bfloat16 is the top half of a binary32.
constexpr int kBf16Shift = 16;
constexpr uint32_t kBf16QuietBit = 0x0040u;

// Rounds `value >> shift` to nearest, ties to even (shift >= 1).
uint32_t shift_round_even(uint32_t value, int shift) {
  uint32_t kept = value >> shift;
  uint32_t rest = value & ((1u << shift) - 1);
  uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (kept & 1u))) ++kept;
  return kept;
}

}  // namespace

float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & kF16SignMask) << 16;
  uint32_t exp = (h >> kF16MantBits) & kF16ExpMax;
  uint32_t mant = h & kF16MantMask;
  if (exp == kF16ExpMax) return std::bit_cast<float>(sign | kF32Inf | (mant << kMantDrop));  // inf or NaN
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in binary32
    float v = std::ldexp(static_cast<float>(mant), kF16SubnormalExp);
    return sign ? -v : v;
  }
  uint32_t e32 = exp - kF16Bias + kF32Bias;
  return std::bit_cast<float>(sign | (e32 << kF32MantBits) | (mant << kMantDrop));
}

uint16_t float_to_half(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  auto sign = static_cast<uint16_t>((x & kF32SignMask) >> 16);
  uint32_t abs = x & kF32AbsMask;
  if (abs > kF32Inf)  // NaN: keep the top payload bits and force a quiet NaN
    return static_cast<uint16_t>(sign | kF16Inf | kF16QuietBit | ((abs >> kMantDrop) & kF16MantMask));
  if (abs >= kF16OverflowThreshold) return static_cast<uint16_t>(sign | kF16Inf);
  int e32 = static_cast<int>(abs >> kF32MantBits);
  if (abs >= kF16MinNormal) {
    // Rebias the exponent and round the mantissa; a carry out of the mantissa correctly bumps the exponent.
    uint32_t rebased = abs - (static_cast<uint32_t>(kF32Bias - kF16Bias) << kF32MantBits);
    return static_cast<uint16_t>(sign | shift_round_even(rebased, kMantDrop));
  }
  // Subnormal half (or zero): value * 2^24 rounded. value = m * 2^(e32 - 150) with the implicit one, so the
  // half mantissa is m >> (126 - e32). Binary32 subnormals (e32 == 0) are far below half's range.
  if (e32 == 0) return sign;
  uint32_t m = (abs & kF32MantMask) | kF32ImplicitOne;
  int shift = (kF32Bias - 1) - e32;
  if (shift > kF32MantBits + 1) return sign;  // below half the smallest subnormal: rounds to zero
  return static_cast<uint16_t>(sign | shift_round_even(m, shift));
}

float bf16_to_float(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << kBf16Shift); }

uint16_t float_to_bf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & kF32AbsMask) > kF32Inf) return static_cast<uint16_t>((x >> kBf16Shift) | kBf16QuietBit);
  // Round to nearest even on the dropped 16 bits; overflow past the largest finite value gives infinity.
  return static_cast<uint16_t>(shift_round_even(x, kBf16Shift));
}

double HostTensor::get(int64_t i) const {
  switch (type.dtype) {
    case DType::f32: return as<float>()[i];
    case DType::f64: return as<double>()[i];
    case DType::f16: return half_to_float(as<uint16_t>()[i]);
    case DType::bf16: return bf16_to_float(as<uint16_t>()[i]);
    case DType::i32: return as<int32_t>()[i];
    case DType::i64: return static_cast<double>(as<int64_t>()[i]);
  }
  return 0;
}

// f16/bf16 go through float: double -> float -> half can differ from a direct rounding only for a double that
// lies within float precision of a half-way point, which test fixtures and feeds (float data) never produce.
void HostTensor::set(int64_t i, double v) {
  switch (type.dtype) {
    case DType::f32: as<float>()[i] = static_cast<float>(v); return;
    case DType::f64: as<double>()[i] = v; return;
    case DType::f16: as<uint16_t>()[i] = float_to_half(static_cast<float>(v)); return;
    case DType::bf16: as<uint16_t>()[i] = float_to_bf16(static_cast<float>(v)); return;
    case DType::i32: as<int32_t>()[i] = static_cast<int32_t>(v); return;
    case DType::i64: as<int64_t>()[i] = static_cast<int64_t>(v); return;
  }
}

}  // namespace lms
