#include "lms/backends/cuda/cublas_api.h"

#include <dlfcn.h>

#include <type_traits>

namespace lms::cuda {

namespace {

// The symbol a cublas_v2.h name stands for: the argument is macro-expanded before it is made a string.
#define LMS_CUBLAS_SYMBOL(f) LMS_CUBLAS_STRING(f)
#define LMS_CUBLAS_STRING(f) #f

Result<CublasApi> load() {
  std::string tried;
  void* lib = nullptr;
  CublasApi api;
  for (const char* path : {LMS_CUBLAS_LIBRARY, LMS_CUBLAS_SONAME}) {
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);  // never closed: the process keeps it
    if (lib) {
      api.path = path;
      break;
    }
    const char* why = dlerror();
    tried += fmt::format("{}{} ({})", tried.empty() ? "" : "; ", path, why ? why : "unknown error");
  }
  if (!lib) return fail("cuda backend: cannot load cuBLAS: {}", tried);
  auto bind = [&](auto& fn, const char* symbol) -> Result<void> {
    void* p = dlsym(lib, symbol);
    if (!p) return fail("cuda backend: cuBLAS library {} has no {}", api.path, symbol);
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
    return {};
  };
#define LMS_BIND(field, f) LMS_TRY_VOID(bind(api.field, LMS_CUBLAS_SYMBOL(f)))
  LMS_BIND(create, cublasCreate);
  LMS_BIND(destroy, cublasDestroy);
  LMS_BIND(set_stream, cublasSetStream);
  LMS_BIND(set_pointer_mode, cublasSetPointerMode);
  LMS_BIND(set_atomics_mode, cublasSetAtomicsMode);
  LMS_BIND(set_math_mode, cublasSetMathMode);
  LMS_BIND(set_workspace, cublasSetWorkspace);
  LMS_BIND(sgemm_strided_batched, cublasSgemmStridedBatched);
  LMS_BIND(dgemm_strided_batched, cublasDgemmStridedBatched);
  LMS_BIND(get_status_name, cublasGetStatusName);
#undef LMS_BIND
  return api;
}

}  // namespace

Result<const CublasApi*> cublas_api() {
  static const Result<CublasApi> loaded = load();
  if (!loaded) return std::unexpected(loaded.error());
  return &*loaded;
}

}  // namespace lms::cuda
