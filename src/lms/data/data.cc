// The DataSource base (batching, the per-epoch shuffle, test-batch padding) and open_data, which checks what
// every kind needs and dispatches to the kind (data.h).
#include "lms/data/data.h"

#include <array>
#include <cstring>
#include <numeric>

#include "lms/data/sources.h"
#include "lms/support/random.h"

namespace lms {

DataSource::DataSource(TensorType x, TensorType labels, uint64_t seed)
    : x_(std::move(x)), labels_(std::move(labels)), seed_(seed) {}

void DataSource::prepare(HostTensor& x, HostTensor& labels) const {
  if (x.type != x_ || x.data.size() != static_cast<size_t>(x_.bytes())) x = HostTensor(x_);
  if (labels.type != labels_ || labels.data.size() != static_cast<size_t>(labels_.bytes())) labels = HostTensor(labels_);
}

int64_t DataSource::train_sample(int64_t epoch, int64_t position) {
  if (order_epoch_ != epoch) {
    // Fisher-Yates from the back: position i swaps with a uniform j in [0, i], drawn from counter i of the
    // epoch's stream. Our own generator, not std::shuffle, so the order is the same with every library.
    const RandomStream stream(derive_key(derive_key(seed_, data::kShuffleStream), static_cast<uint64_t>(epoch)));
    order_.resize(static_cast<size_t>(train_size()));
    std::iota(order_.begin(), order_.end(), int64_t{0});
    for (size_t i = order_.size(); i-- > 1;) std::swap(order_[i], order_[stream.below(i, i + 1)]);
    order_epoch_ = epoch;
  }
  return order_[static_cast<size_t>(position)];
}

Result<void> DataSource::train_batch(int64_t epoch, int64_t index, HostTensor& x, HostTensor& labels) {
  if (epoch < 0) return fail("{} data: epoch {} is negative", kind(), epoch);
  if (index < 0 || index >= train_batches())
    return fail("{} data: train batch {} out of range [0, {}) ({} samples, batch {})", kind(), index, train_batches(),
                train_size(), batch_size());
  prepare(x, labels);
  for (int64_t row = 0; row < batch_size(); ++row)
    fill(Split::train, train_sample(epoch, index * batch_size() + row), row, x, labels);
  return {};
}

Result<int64_t> DataSource::test_batch(int64_t index, HostTensor& x, HostTensor& labels) {
  if (index < 0 || index >= test_batches())
    return fail("{} data: test batch {} out of range [0, {}) ({} samples, batch {})", kind(), index, test_batches(),
                test_size(), batch_size());
  prepare(x, labels);
  const int64_t first = index * batch_size();
  const int64_t valid = std::min(batch_size(), test_size() - first);
  for (int64_t row = 0; row < valid; ++row) fill(Split::test, first + row, row, x, labels);
  // Zero the padding rows: bytes per row times the rows past `valid`.
  const size_t x_row = x.data.size() / static_cast<size_t>(batch_size());
  const size_t l_row = labels.data.size() / static_cast<size_t>(batch_size());
  const auto pad = static_cast<size_t>(batch_size() - valid);
  if (pad > 0) {
    std::memset(x.data.data() + x_row * static_cast<size_t>(valid), 0, x_row * pad);
    std::memset(labels.data.data() + l_row * static_cast<size_t>(valid), 0, l_row * pad);
  }
  return valid;
}

std::span<const std::string_view> data_kinds() {
  static constexpr std::array<std::string_view, 3> kKinds = {"synthetic", "fashion-mnist", "npz"};
  return kKinds;
}

Result<std::unique_ptr<DataSource>> open_data(const DataOptions& options, const TensorType& x,
                                              const TensorType& labels) {
  if (x.rank() < 1 || labels.rank() < 1)
    return fail("data: %x and %labels need a batch dimension (dim 0), got {} and {}", to_string(x), to_string(labels));
  if (x.shape[0] != labels.shape[0])
    return fail("data: %x batch {} differs from %labels batch {}", x.shape[0], labels.shape[0]);
  if (x.shape[0] < 1) return fail("data: batch size must be >= 1, got {}", x.shape[0]);
  if (labels.dtype != DType::i32 && labels.dtype != DType::i64)
    return fail("data: %labels must be i32 or i64 class indices, got {}", to_string(labels));
  std::unique_ptr<DataSource> source;
  if (options.kind == "synthetic") {
    source = LMS_TRY(data::open_synthetic(options, x, labels));
  } else if (options.kind == "fashion-mnist") {
    source = LMS_TRY(data::open_fashion_mnist(options, x, labels));
  } else if (options.kind == "npz") {
    source = LMS_TRY(data::open_npz(options, x, labels));
  } else {
    return fail("unknown data kind '{}' (known: synthetic, fashion-mnist, npz)", options.kind);
  }
  if (source->train_size() < source->batch_size())
    return fail("{} data: the train split has {} samples, fewer than one batch of {}", options.kind,
                source->train_size(), source->batch_size());
  return source;
}

}  // namespace lms
