// cuBLAS loaded at run time (dlopen) instead of linked. Loading libcublas and libcublasLt runs about 0.35 s of
// their initialisation in the process that loads them; linked, every `lms` command and every test process paid
// it at start-up, whether it used the GPU or not (docs/results.md). Now only the first cuda context pays it
// (make_dnn_context), and a machine without cuBLAS can still run everything else. The table holds the entry
// points the backend calls, typed from cublas_v2.h (a signature that changes fails to compile) and resolved by the
// names cublas_v2.h maps them to (cublasCreate is cublasCreate_v2). Internal to the cuda backend: it includes
// cublas_v2.h, which must stay out of widely included headers.
#pragma once

#include <cublas_v2.h>

#include <string>

#include "lms/support/error.h"

namespace lms::cuda {

struct CublasApi {
  std::string path;  // the library file loaded
  decltype(&cublasCreate) create = nullptr;
  decltype(&cublasDestroy) destroy = nullptr;
  decltype(&cublasSetStream) set_stream = nullptr;
  decltype(&cublasSetPointerMode) set_pointer_mode = nullptr;
  decltype(&cublasSetAtomicsMode) set_atomics_mode = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSetWorkspace) set_workspace = nullptr;
  decltype(&cublasSgemmStridedBatched) sgemm_strided_batched = nullptr;
  decltype(&cublasDgemmStridedBatched) dgemm_strided_batched = nullptr;
  decltype(&cublasGetStatusName) get_status_name = nullptr;
};

// The table, loaded on the first call (thread-safe; later calls return the same table or the same error): the
// library the build was configured with (LMS_CUBLAS_LIBRARY), else its soname on the loader's search path. The
// error names what was tried and the loader's message, or the entry point missing.
Result<const CublasApi*> cublas_api();

}  // namespace lms::cuda
