// HostTensor: a typed tensor in ordinary host memory (feeds, fetched results, parameter values, checkpoints,
// test fixtures). Not used on the hot path of a planned step, where buffers live in the arenas.
#pragma once

#include <cstddef>
#include <cstring>
#include <span>
#include <vector>

#include "lms/ir/types.h"

namespace lms {

struct HostTensor {
  TensorType type;
  std::vector<std::byte> data;  // type.bytes() bytes, row-major

  HostTensor() = default;
  explicit HostTensor(TensorType t) : type(std::move(t)), data(static_cast<size_t>(type.bytes())) {}

  template <class T>
  std::span<T> as() {
    return {reinterpret_cast<T*>(data.data()), data.size() / sizeof(T)};
  }
  template <class T>
  std::span<const T> as() const {
    return {reinterpret_cast<const T*>(data.data()), data.size() / sizeof(T)};
  }
  // Element i converted to double (float and integer dtypes; f16/bf16 decoded).
  double get(int64_t i) const;
  // Stores v into element i, converting to the tensor's dtype (rounding to nearest for f16/bf16).
  void set(int64_t i, double v);
};

// f16 / bf16 conversions (round to nearest even), shared by kernels and tensors.
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t h);
uint16_t float_to_bf16(float f);

}  // namespace lms
