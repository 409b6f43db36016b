// The seam between the runtime and a backend's op implementations: one call of one op on concrete buffers.
// In-place ops (OpDef::aliases) receive output pointers equal to the aliased inputs' pointers. Kernels never
// allocate device memory: scratch space, when an op needs it, is a planned buffer passed as `workspace`.
#pragma once

#include <cstdint>
#include <span>

#include "lms/ir/attributes.h"
#include "lms/ir/types.h"
#include "lms/ops/op.h"

namespace lms {

struct TensorRef {
  const TensorType* type = nullptr;
  void* data = nullptr;
};

struct KernelCall {
  Op op{};
  const Attributes* attrs = nullptr;   // normalized (OpCall-style getters apply the op's defaults)
  std::span<const TensorRef> inputs;
  std::span<const TensorRef> outputs;
  void* workspace = nullptr;           // planned scratch space, workspace_bytes long
  int64_t workspace_bytes = 0;
};

}  // namespace lms
