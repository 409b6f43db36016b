// The backends by name, in one explicit list: `reference` always; `cpu` (oneDNN) and `cuda` are named so that
// asking for them gives a clear "not available in this build" error until they are built in.
#pragma once

#include <memory>
#include <span>
#include <string_view>

#include "lms/ir/graph.h"
#include "lms/runtime/backend.h"
#include "lms/support/error.h"

namespace lms {

// Every device name the command line accepts, available or not, in a stable order.
std::span<const std::string_view> backend_names();

// A new backend for `device`. Errors: unknown name (listing the known ones), or a backend not in this build.
Result<std::unique_ptr<Backend>> make_backend(std::string_view device, const BackendOptions& opts = {});

// Whether the backends can run `g`'s values: every backend computes floats in f32 and f64 (f16 and bf16 models can
// be planned: lms plan, maxbatch, maxres). Checked before planning, so that a model no backend can run fails at
// once rather than at its first kernel. Errors name the first value (in id order) of another float dtype.
Result<void> check_backend_dtypes(const Graph& g);

}  // namespace lms
