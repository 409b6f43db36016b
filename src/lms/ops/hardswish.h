// PyTorch's hardswish and its derivative as the one definition the reference kernels, the cpu backend's loops and
// the cuda kernels (on the device and in host mode) call, so that all of them compute the same bits: each element
// in double, rounded once by the caller. The derivative is PyTorch's hardswish_backward, whose one-sided choices at
// -3 and 3 (x / 3 + 1/2, so -1/2 and 3/2 there) differ from oneDNN's eltwise_hardswish (0 and 1): hence own loops
// on the cpu backend. Plain C++20 (nvcc compiles it too).
#pragma once

#ifdef __CUDACC__
#define LMS_OPS_HD __host__ __device__
#else
#define LMS_OPS_HD
#endif

namespace lms {

// x * clamp(x + 3, 0, 6) / 6; NaN stays NaN.
LMS_OPS_HD inline double hardswish_value(double x) {
  const double gate = x + 3 < 0 ? 0 : (x + 3 > 6 ? 6 : x + 3);  // NaN for NaN x
  return x * gate / 6;
}

// dx for dy at input x: 0 for x < -3, dy * (x / 3 + 1/2) for -3 <= x <= 3, dy above (NaN x: NaN).
LMS_OPS_HD inline double hardswish_derivative(double dy, double x) {
  if (x < -3) return 0;
  if (x <= 3) return dy * (x / 3 + 0.5);
  return x != x ? x : dy;
}

}  // namespace lms
