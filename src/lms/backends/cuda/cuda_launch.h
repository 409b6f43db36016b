// The few entry points into CUDA code that host code calls (defined in cuda_kernels.cu, built only with the
// cuda backend): launching an element function of kernel_fns.h over a grid on a stream, and the stream-ordered
// memset and device-to-device copy the own kernels need. Return values are cudaError_t as int (0: success),
// so this header needs no CUDA header.
#pragma once

#include <cstdint>

namespace lms::cuda {

// Enqueues f(i) for every i in [0, n) on `stream` (a cudaStream_t). Instantiated in cuda_kernels.cu for every
// element function the dispatcher (cuda_ops.cc) uses.
template <class F>
int device_launch(const F& f, int64_t n, void* stream);

int device_memset_zero(void* p, int64_t bytes, void* stream);
int device_copy(void* dst, const void* src, int64_t bytes, void* stream);
const char* device_error_string(int code);

}  // namespace lms::cuda
