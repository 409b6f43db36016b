// The integer hashing under every counter-based random number in LMS: splitmix64's finalizer (`mix64`), key
// derivation (`derive_key`) and the counter-th word of a keyed stream (`stream_bits`). Plain C++20 with no
// other headers, callable from CUDA device code (LMS_HASH_HD), so the host's initializers and kernels and the
// GPU's kernels compute the same bits from the same key (support/random.h builds the float draws on top;
// ops/dropout_mask.h the dropout mask).
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define LMS_HASH_HD __host__ __device__
#else
#define LMS_HASH_HD
#endif

namespace lms {

// splitmix64's constants (Steele, Lea, Flood: "Fast splittable pseudorandom number generators", 2014).
inline constexpr uint64_t kSplitMixGamma = 0x9e3779b97f4a7c15ull;
inline constexpr uint64_t kSplitMixMul1 = 0xbf58476d1ce4e5b9ull;
inline constexpr uint64_t kSplitMixMul2 = 0x94d049bb133111ebull;

// splitmix64's finalizer: a bijection of 64-bit words with good avalanche.
LMS_HASH_HD inline constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * kSplitMixMul1;
  z = (z ^ (z >> 27)) * kSplitMixMul2;
  return z ^ (z >> 31);
}

// Derives a child key from a parent key and a label (a value-name hash, an epoch, a split...). Mixing before
// and after keeps keys that differ in one bit, or labels 0 and 1, unrelated.
LMS_HASH_HD inline constexpr uint64_t derive_key(uint64_t parent, uint64_t label) {
  return mix64(mix64(parent) ^ mix64(label + kSplitMixGamma));
}

// The counter-th 64-bit word of the stream keyed by `key`: splitmix64's output at position counter.
LMS_HASH_HD inline constexpr uint64_t stream_bits(uint64_t key, uint64_t counter) {
  return mix64(key + (counter + 1) * kSplitMixGamma);
}

}  // namespace lms
