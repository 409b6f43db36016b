// Element types and tensor types: names, sizes, printing.
#include "lms/ir/types.h"

#include <array>

#include <fmt/format.h>

namespace lms {

namespace {
struct DTypeInfo {
  std::string_view name;
  int64_t size;
  bool is_float;
};
constexpr std::array<DTypeInfo, kNumDTypes> kDTypes = {{
    {"f32", 4, true},
    {"f16", 2, true},
    {"bf16", 2, true},
    {"i32", 4, false},
    {"i64", 8, false},
    {"f64", 8, true},
}};
}  // namespace

int64_t dtype_size(DType t) { return kDTypes[static_cast<int>(t)].size; }
std::string_view dtype_name(DType t) { return kDTypes[static_cast<int>(t)].name; }
bool is_float(DType t) { return kDTypes[static_cast<int>(t)].is_float; }

std::optional<DType> parse_dtype(std::string_view s) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (kDTypes[i].name == s) return static_cast<DType>(i);
  return std::nullopt;
}

int64_t TensorType::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string to_string(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ",")); }

std::string to_string(const TensorType& t) {
  return fmt::format("{}{}", dtype_name(t.dtype), to_string(t.shape));
}

}  // namespace lms
