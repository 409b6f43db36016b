// The own kernels on the GPU: one grid-stride kernel template runs any element function of kernel_fns.h or
// pool_fns.h over [0, n) on a stream, explicitly instantiated for every element function the dispatcher
// (cuda_ops.cc) uses (a missing one is a link error, not a silent fallback); plus the stream-ordered memset and
// copy of cuda_launch.h.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "lms/backends/cuda/cuda_launch.h"
#include "lms/backends/cuda/conv_gemm_fns.h"
#include "lms/backends/cuda/kernel_fns.h"
#include "lms/backends/cuda/pool_fns.h"

namespace lms::cuda {

namespace {

// Threads per block, and the most blocks one launch uses (the grid-stride loop covers the rest). 256 threads
// keep every element function's registers within an SM's budget; the block cap keeps a launch's size in range.
constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t{1} << 20;

template <class F>
__global__ void each(F f, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) f(i);
}

}  // namespace

template <class F>
int device_launch(const F& f, int64_t n, void* stream) {
  const int64_t blocks = std::min((n + kThreads - 1) / kThreads, kMaxBlocks);
  each<F><<<static_cast<unsigned>(blocks), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(f, n);
  return static_cast<int>(cudaGetLastError());
}

int device_memset_zero(void* p, int64_t bytes, void* stream) {
  return static_cast<int>(cudaMemsetAsync(p, 0, static_cast<size_t>(bytes), static_cast<cudaStream_t>(stream)));
}

int device_copy(void* dst, const void* src, int64_t bytes, void* stream) {
  return static_cast<int>(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice,
                                          static_cast<cudaStream_t>(stream)));
}

const char* device_error_string(int code) { return cudaGetErrorString(static_cast<cudaError_t>(code)); }

#define LMS_LAUNCH(...) template int device_launch<__VA_ARGS__>(const __VA_ARGS__&, int64_t, void*);
#define LMS_LAUNCH_FLOAT(F) LMS_LAUNCH(F<float>) LMS_LAUNCH(F<double>)
#define LMS_LAUNCH_ELEMENT(F) LMS_LAUNCH(F<uint8_t>) LMS_LAUNCH(F<uint16_t>) LMS_LAUNCH(F<uint32_t>) LMS_LAUNCH(F<uint64_t>)

LMS_LAUNCH_FLOAT(Fill)
LMS_LAUNCH(Fill<int32_t>)
LMS_LAUNCH(Fill<int64_t>)
LMS_LAUNCH_FLOAT(Unary)
LMS_LAUNCH_FLOAT(ActivationGrad)
LMS_LAUNCH_FLOAT(Dropout)
LMS_LAUNCH(KeyAdvance)
LMS_LAUNCH_FLOAT(BroadcastBinary)
LMS_LAUNCH(Packed4)
LMS_LAUNCH_FLOAT(BiasAdd)
LMS_LAUNCH_ELEMENT(StridedCopy)
LMS_LAUNCH_ELEMENT(EmbeddingGather)
LMS_LAUNCH(EmbeddingGradSort)
LMS_LAUNCH_FLOAT(EmbeddingGradRows)
LMS_LAUNCH(Reduce<float, double>)
LMS_LAUNCH(Reduce<double, double>)
LMS_LAUNCH(Reduce<int32_t, int64_t>)
LMS_LAUNCH(Reduce<int64_t, int64_t>)
LMS_LAUNCH_FLOAT(PoolForward)
LMS_LAUNCH_FLOAT(MaxPoolGrad)
LMS_LAUNCH_FLOAT(MaxPoolArgmax)
LMS_LAUNCH_FLOAT(MaxPoolGradByPosition)
LMS_LAUNCH(MaxPoolArgmax<float, int32_t>)
LMS_LAUNCH(MaxPoolArgmax<double, int32_t>)
LMS_LAUNCH(MaxPoolGradByPosition<float, int32_t>)
LMS_LAUNCH(MaxPoolGradByPosition<double, int32_t>)
LMS_LAUNCH_FLOAT(AvgPoolGrad)
LMS_LAUNCH_FLOAT(Softmax)
LMS_LAUNCH_FLOAT(SoftmaxGrad)
LMS_LAUNCH_FLOAT(LayerNorm)
LMS_LAUNCH_FLOAT(LayerNormGradRows)
LMS_LAUNCH_FLOAT(LayerNormGradColumns)
LMS_LAUNCH_FLOAT(BnGradLanes)
LMS_LAUNCH(BnGradGroups)
LMS_LAUNCH_FLOAT(BnGradChannels)
LMS_LAUNCH_FLOAT(BnGradData)
LMS_LAUNCH_FLOAT(BnRunningUpdate)
LMS_LAUNCH_FLOAT(CrossEntropyRows)
LMS_LAUNCH(MeanOfTerms)
LMS_LAUNCH_FLOAT(CrossEntropyGrad)
LMS_LAUNCH_FLOAT(SgdUpdate)
LMS_LAUNCH_FLOAT(MomentumUpdate)
LMS_LAUNCH_FLOAT(AdamUpdate)
LMS_LAUNCH(AdamStep)
LMS_LAUNCH_FLOAT(SumPartials)
LMS_LAUNCH_FLOAT(Im2Col)
LMS_LAUNCH_FLOAT(Col2Im)

}  // namespace lms::cuda
