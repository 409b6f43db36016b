// Tensor types and attributes: sizes, names, text spelling.
#include <gtest/gtest.h>

#include "lms/ir/attributes.h"
#include "lms/ir/types.h"

namespace lms {
namespace {

TEST(Types, SizesAndNames) {
  TensorType t{DType::bf16, {2, 3, 4}};
  EXPECT_EQ(t.num_elements(), 24);
  EXPECT_EQ(t.bytes(), 48);
  EXPECT_EQ(to_string(t), "bf16[2,3,4]");
  EXPECT_EQ(to_string(TensorType{DType::f32, {}}), "f32[]");
  for (int i = 0; i < kNumDTypes; ++i) {
    auto d = static_cast<DType>(i);
    EXPECT_EQ(parse_dtype(dtype_name(d)), d);
  }
  EXPECT_FALSE(parse_dtype("f128").has_value());
}

TEST(Attributes, FloatsKeepTheirKindAndValue) {
  EXPECT_EQ(to_string(Attribute{1.0}), "1.0");
  EXPECT_EQ(to_string(Attribute{1e-5}), "1e-05");
  EXPECT_EQ(to_string(Attribute{0.1}), "0.1");
  EXPECT_EQ(to_string(Attribute{int64_t{3}}), "3");
  EXPECT_EQ(to_string(Attribute{IntList{1, 2}}), "[1, 2]");
  EXPECT_EQ(to_string(Attribute{std::string("a\"b")}), "\"a\\\"b\"");
}

}  // namespace
}  // namespace lms
