// Element types and static tensor types. A TensorType is a dtype plus a static shape (rank 0 is a scalar);
// it knows its element count and byte size and prints as `f32[32,64,112,112]` (`f32[]` for a scalar).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lms {

enum class DType : uint8_t { f32, f16, bf16, i32, i64, f64 };  // f64: reference backend and gradient checks
inline constexpr int kNumDTypes = 6;

int64_t dtype_size(DType t);                           // bytes per element
std::string_view dtype_name(DType t);                  // "f32", ...
std::optional<DType> parse_dtype(std::string_view s);  // inverse of dtype_name
bool is_float(DType t);

using Shape = std::vector<int64_t>;

struct TensorType {
  DType dtype = DType::f32;
  Shape shape;  // static; every dimension >= 0

  int rank() const { return static_cast<int>(shape.size()); }
  int64_t num_elements() const;
  int64_t bytes() const { return num_elements() * dtype_size(dtype); }
  friend bool operator==(const TensorType&, const TensorType&) = default;
};

std::string to_string(const Shape& s);       // "[32,64]"
std::string to_string(const TensorType& t);  // "f32[32,64]"

}  // namespace lms
