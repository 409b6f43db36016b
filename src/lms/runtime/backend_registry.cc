// The backend list (see backend_registry.h).
#include "lms/runtime/backend_registry.h"

#include <array>
#include <string>

#include "lms/backends/reference/reference_backend.h"
#ifdef LMS_HAVE_CPU_BACKEND
#include "lms/backends/cpu/cpu_backend.h"
#endif
#ifdef LMS_HAVE_CUDA_BACKEND
#include "lms/backends/cuda/cuda_backend.h"
#endif

namespace lms {

namespace {
constexpr std::array<std::string_view, 3> kBackendNames = {"reference", "cpu", "cuda"};
}  // namespace

std::span<const std::string_view> backend_names() { return kBackendNames; }

Result<std::unique_ptr<Backend>> make_backend(std::string_view device, const BackendOptions& opts) {
  if (device == "reference") return std::unique_ptr<Backend>(std::make_unique<ReferenceBackend>(opts));
#ifdef LMS_HAVE_CPU_BACKEND
  if (device == "cpu") return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(opts));
#endif
#ifdef LMS_HAVE_CUDA_BACKEND
  if (device == "cuda") {
    auto b = CudaBackend::create(opts);
    if (!b) return fail("device 'cuda': {}", b.error().str());
    return std::unique_ptr<Backend>(std::move(*b));
  }
#endif
  for (std::string_view known : kBackendNames)
    if (device == known) return fail("device '{}' is not in this build (its library was not found at configure time)", device);
  std::string list;
  for (std::string_view known : kBackendNames) list += (list.empty() ? "" : ", ") + std::string(known);
  return fail("unknown device '{}' (devices: {})", device, list);
}

Result<void> check_backend_dtypes(const Graph& g) {
  for (uint32_t i = 0; i < g.num_values(); ++i) {
    const ValueId v{i};
    const DType t = g.value(v).type.dtype;
    if (is_float(t) && t != DType::f32 && t != DType::f64)
      return fail("%{} is {}: the backends compute in f32 and f64 only (no {} kernels yet); models in {} can be "
                  "planned (lms plan, maxbatch, maxres) but not run", g.value(v).name, dtype_name(t), dtype_name(t),
                  dtype_name(t));
  }
  return {};
}

}  // namespace lms
