// HostTensor element access and the f16 / bf16 conversions (runtime/tensor.cc): exact bit patterns for normal,
// subnormal, overflowing, tie and NaN cases, worked out from the IEEE formats by hand.
#include <bit>
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "lms/runtime/tensor.h"

namespace lms {
namespace {

TEST(ReferenceTensor, HalfFromFloatExactBits) {
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);         // exponent 15, mantissa 0
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);        // sign, exponent 16
  EXPECT_EQ(float_to_half(0.0f), 0x0000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);     // the largest finite half
  EXPECT_EQ(float_to_half(65519.0f), 0x7bff);     // below the halfway point 65520: rounds down
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);     // the tie rounds to even, which is infinity
  EXPECT_EQ(float_to_half(1e6f), 0x7c00);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);  // half of it: a tie, rounds to even (0)
  EXPECT_EQ(float_to_half(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 subnormal units: tie rounds to even (2)
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -26)), 0x0000);  // a quarter unit: rounds to 0
  // 1 + 2^-11 is halfway between 1 and the next half (1 + 2^-10): the tie goes to the even mantissa 0.
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3*2^-11 is halfway between mantissas 1 and 2: even is 2.
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  // Slightly above a tie rounds up.
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);
  uint16_t nan = float_to_half(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()), 0x7c00);
}

TEST(ReferenceTensor, HalfToFloat) {
  EXPECT_EQ(half_to_float(0x3c00), 1.0f);
  EXPECT_EQ(half_to_float(0xc000), -2.0f);
  EXPECT_EQ(half_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(half_to_float(0x8001), -std::ldexp(1.0f, -24));
  EXPECT_EQ(half_to_float(0x3555), 0.333251953125f);  // 0x155 = 341: (1 + 341/1024) * 2^-2
  EXPECT_TRUE(std::isinf(half_to_float(0x7c00)));
  EXPECT_TRUE(std::isnan(half_to_float(0x7e00)));
  // Every finite half survives the round trip bit for bit.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00) continue;
    ASSERT_EQ(float_to_half(half_to_float(static_cast<uint16_t>(h))), h) << h;
  }
}

TEST(ReferenceTensor, Bfloat16) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_float(0xc040), -3.0f);
  // 0x3f808000 is exactly halfway between 0x3f80 and 0x3f81: ties to even (0x3f80); 0x3f818000 -> 0x3f82.
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds past the largest: infinity
  uint16_t nan = float_to_bf16(std::bit_cast<float>(0x7f800001u));      // a signalling NaN with a low payload
  EXPECT_TRUE(std::isnan(bf16_to_float(nan)));                          // truncation alone would give infinity
}

TEST(ReferenceTensor, GetSetEveryDtype) {
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    HostTensor h(TensorType{t, {3}});
    ASSERT_EQ(h.data.size(), static_cast<size_t>(3 * dtype_size(t)));
    h.set(0, 1.5);
    h.set(1, -3);
    h.set(2, 256);
    EXPECT_EQ(h.get(0), is_float(t) ? 1.5 : 1.0);  // integers truncate
    EXPECT_EQ(h.get(1), -3.0);
    EXPECT_EQ(h.get(2), 256.0);
  }
  HostTensor h(TensorType{DType::f16, {1}});
  h.set(0, 0.1);  // 0.1 is not representable: nearest half is 0x2e66 = (1 + 614/1024) * 2^-4
  EXPECT_EQ(h.as<uint16_t>()[0], 0x2e66);
  EXPECT_EQ(h.get(0), (1 + 614.0 / 1024) / 16);
}

}  // namespace
}  // namespace lms
