// Internal to src/lms/data: the constructors of each data kind, which data.cc's open_data dispatches to after
// the checks every kind shares (a batch dimension, matching batch sizes).
#pragma once

#include <memory>

#include "lms/data/data.h"

namespace lms::data {

Result<std::unique_ptr<DataSource>> open_synthetic(const DataOptions& o, const TensorType& x, const TensorType& labels);
Result<std::unique_ptr<DataSource>> open_fashion_mnist(const DataOptions& o, const TensorType& x,
                                                       const TensorType& labels);
Result<std::unique_ptr<DataSource>> open_npz(const DataOptions& o, const TensorType& x, const TensorType& labels);

// Random-stream labels (support/random.h derive_key): one per purpose, so streams never overlap.
inline constexpr uint64_t kShuffleStream = 1;
inline constexpr uint64_t kSyntheticStream = 2;

}  // namespace lms::data
