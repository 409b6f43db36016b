// Dropout's mask and scaling as a pure function of (key, seed, element index), shared by every backend's
// kernel (the reference, the cpu backend through it, and the cuda kernels on the device and in host mode), so
// that all of them drop the same elements and compute the same bits. See Note [Dropout masks] in docs/ops.md:
// the key is an i64 state value that `rng_advance` increments once per training step, so the mask changes
// every step, while a recomputed forward dropout and the backward one (dropout of dy with the same key and
// seed) regenerate the forward's mask exactly and nothing stores it. Plain C++20 (nvcc compiles it too).
#pragma once

#include <cstdint>

#include "lms/support/counter_hash.h"

namespace lms {

inline constexpr double kTwoTo32 = 4294967296.0;

// Element i is dropped iff the top 32 bits of stream_bits(derive_key(key, seed), i) are below `threshold`
// = round(p * 2^32); a kept element is multiplied by 1 / (1 - p) (inverted dropout, as torch.nn.Dropout).
struct DropoutMask {
  uint64_t threshold = 0;  // round(p * 2^32): 0 keeps everything (p = 0)
  double scale = 1;        // 1 / (1 - p), applied in double before the single rounding to the output dtype
  uint64_t seed = 0;       // the node's seed attribute: the dropouts of one step draw different masks

  // The element stream of one step: computed once per kernel from the key's current value.
  LMS_HASH_HD uint64_t stream(uint64_t key) const { return derive_key(key, seed); }
  LMS_HASH_HD bool keep(uint64_t stream, int64_t i) const {
    return (stream_bits(stream, static_cast<uint64_t>(i)) >> 32) >= threshold;
  }
  // x times its factor (scale, or 0 when dropped): a dropped NaN or infinity gives NaN, as PyTorch's
  // x * mask * scale does, so a dropout never hides a non-finite activation.
  LMS_HASH_HD double apply(uint64_t stream, int64_t i, double x) const {
    return x * (keep(stream, i) ? scale : 0.0);
  }
};

// The mask parameters for drop probability p in [0, 1) (the op's shape rule checks it) and attribute `seed`.
inline DropoutMask dropout_mask(double p, int64_t seed) {
  return DropoutMask{static_cast<uint64_t>(p * kTwoTo32 + 0.5), 1.0 / (1.0 - p), static_cast<uint64_t>(seed)};
}

}  // namespace lms
