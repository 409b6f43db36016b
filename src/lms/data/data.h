// Data sources for training: batches of inputs and labels shaped like a model's `%x` and `%labels` inputs
// (dim 0 is the batch). Three kinds: "synthetic" (seeded random samples of any shape, for benchmarks and models
// without a dataset), "fashion-mnist" (Debian's dataset-fashion-mnist IDX files) and "npz" (the user's own
// arrays in a NumPy archive: x_train, y_train, and optionally x_test, y_test). A source is a fixed set
// of train and test samples; training visits the train samples in a seeded order reshuffled every epoch and
// drops the last partial batch; testing visits the test samples in order and pads the last batch, reporting
// how many rows are real. Everything is deterministic per (seed, epoch, batch index) and uses the portable
// generator of support/random.h, so batches are the same on every machine. docs/data.md is the user reference.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lms/ir/types.h"
#include "lms/runtime/tensor.h"
#include "lms/support/error.h"

namespace lms {

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

struct DataOptions {
  std::string kind = "synthetic";      // "synthetic", "fashion-mnist" or "npz"
  std::string dir = kFashionMnistDir;  // fashion-mnist: the directory holding the four IDX .gz files
  std::string file;                    // npz: the archive (.npz) holding x_train, y_train [, x_test, y_test]
  uint64_t seed = 0;                   // synthetic contents and the per-epoch training order
  int64_t classes = 10;                // synthetic, npz: labels, and integer inputs (token ids), lie in [0, classes)
  int64_t synthetic_train_samples = 0; // synthetic: train split size; 0 = kSyntheticTrainBatches batches
  int64_t synthetic_test_samples = 0;  // synthetic: test split size; 0 = kSyntheticTestBatches batches
};

// Default synthetic split sizes, in batches: enough distinct samples that an epoch is more than a few steps,
// few enough that a model can visibly fit them (the loss falls over epochs).
inline constexpr int64_t kSyntheticTrainBatches = 64;
inline constexpr int64_t kSyntheticTestBatches = 4;

enum class Split { train, test };

// A fixed set of samples split into train and test, served in batches. Batches are written into caller-owned
// tensors, which are (re)allocated to x_type() / labels_type() when their types differ, so a loop can reuse
// them without allocating.
class DataSource {
 public:
  DataSource(TensorType x, TensorType labels, uint64_t seed);
  virtual ~DataSource() = default;

  virtual std::string_view kind() const = 0;
  virtual int64_t size(Split split) const = 0;  // samples in the split
  int64_t train_size() const { return size(Split::train); }
  int64_t test_size() const { return size(Split::test); }

  const TensorType& x_type() const { return x_; }
  const TensorType& labels_type() const { return labels_; }
  int64_t batch_size() const { return x_.shape[0]; }
  // Full training batches per epoch (the last partial batch is dropped) and test batches (the last one may
  // be partial).
  int64_t train_batches() const { return train_size() / batch_size(); }
  int64_t test_batches() const { return (test_size() + batch_size() - 1) / batch_size(); }

  // Training batch `index` (in [0, train_batches())) of epoch `epoch` (>= 0): rows are the train samples at
  // positions [index * batch, (index + 1) * batch) of the epoch's shuffled order.
  Result<void> train_batch(int64_t epoch, int64_t index, HostTensor& x, HostTensor& labels);
  // Test batch `index` (in [0, test_batches())), samples in order. Returns the number of real rows; rows past
  // it (only in the last batch) are zeros and must be ignored when scoring.
  Result<int64_t> test_batch(int64_t index, HostTensor& x, HostTensor& labels);

  // The train sample at `position` of epoch `epoch`'s order (a seeded Fisher-Yates permutation).
  int64_t train_sample(int64_t epoch, int64_t position);

 protected:
  // Writes sample `sample` of `split` into row `row` of x and labels (already of the right types).
  virtual void fill(Split split, int64_t sample, int64_t row, HostTensor& x, HostTensor& labels) const = 0;
  uint64_t seed() const { return seed_; }

 private:
  void prepare(HostTensor& x, HostTensor& labels) const;

  TensorType x_;
  TensorType labels_;
  uint64_t seed_;
  int64_t order_epoch_ = -1;   // the epoch whose order is cached in `order_`
  std::vector<int64_t> order_;
};

// The data kinds, in a stable order (for help text and errors).
std::span<const std::string_view> data_kinds();

// Opens a source of `options.kind` for a model whose inputs have types `x` and `labels` (batch = dim 0 of
// both). Errors: unknown kind, inputs the kind cannot produce (naming the expected shape), a split smaller
// than one batch, and for fashion-mnist and npz missing or corrupt files (naming the file and what is wrong),
// and for npz arrays that do not fit the inputs (naming the member, its shape and the input's) or hold labels
// outside [0, classes) or non-finite inputs (naming the sample).
Result<std::unique_ptr<DataSource>> open_data(const DataOptions& options, const TensorType& x,
                                              const TensorType& labels);

}  // namespace lms
