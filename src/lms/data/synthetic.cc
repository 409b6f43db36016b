// Synthetic data: a fixed set of random samples of whatever shape the model's inputs have. Float inputs are
// standard normal; integer inputs (token ids) and labels are uniform in [0, classes). Sample s of a split is
// computed on demand from a stream keyed by (seed, split, s), so nothing is stored, the contents do not depend
// on the batch size, and the same sample comes back every epoch (a model can fit them, so the loss falls).
#include <algorithm>

#include "lms/data/sources.h"
#include "lms/support/random.h"

namespace lms::data {

namespace {

// Per-sample sub-streams.
constexpr uint64_t kInputStream = 0;
constexpr uint64_t kLabelStream = 1;

class SyntheticSource final : public DataSource {
 public:
  SyntheticSource(const TensorType& x, const TensorType& labels, uint64_t seed, int64_t classes, int64_t train,
                  int64_t test)
      : DataSource(x, labels, seed), classes_(classes), train_(train), test_(test) {}

  std::string_view kind() const override { return "synthetic"; }
  int64_t size(Split s) const override { return s == Split::train ? train_ : test_; }

 protected:
  void fill(Split split, int64_t sample, int64_t row, HostTensor& x, HostTensor& labels) const override {
    const uint64_t key = derive_key(derive_key(derive_key(seed(), kSyntheticStream), static_cast<uint64_t>(split)),
                                    static_cast<uint64_t>(sample));
    const RandomStream xs(derive_key(key, kInputStream)), ls(derive_key(key, kLabelStream));
    const int64_t xn = x.type.num_elements() / batch_size(), ln = labels.type.num_elements() / batch_size();
    const auto classes = static_cast<uint64_t>(classes_);
    if (is_float(x.type.dtype)) {
      for (int64_t i = 0; i < xn; i += 2) {
        auto [a, b] = xs.normal_pair(static_cast<uint64_t>(i / 2));
        x.set(row * xn + i, a);
        if (i + 1 < xn) x.set(row * xn + i + 1, b);
      }
    } else {
      for (int64_t i = 0; i < xn; ++i)
        x.set(row * xn + i, static_cast<double>(xs.below(static_cast<uint64_t>(i), classes)));
    }
    for (int64_t i = 0; i < ln; ++i)
      labels.set(row * ln + i, static_cast<double>(ls.below(static_cast<uint64_t>(i), classes)));
  }

 private:
  int64_t classes_, train_, test_;
};

}  // namespace

Result<std::unique_ptr<DataSource>> open_synthetic(const DataOptions& o, const TensorType& x, const TensorType& labels) {
  // Integer class ids must be exact in the double that HostTensor::set goes through, and fit an i32.
  constexpr int64_t kMaxClasses = int64_t{1} << 31;
  if (o.classes < 1 || o.classes >= kMaxClasses)
    return fail("synthetic data: classes must be in [1, 2^31), got {}", o.classes);
  if (!is_float(x.dtype) && x.dtype != DType::i32 && x.dtype != DType::i64)
    return fail("synthetic data: unsupported %x dtype {}", to_string(x));
  if (o.synthetic_train_samples < 0 || o.synthetic_test_samples < 0)
    return fail("synthetic data: sample counts must be >= 0, got train {} and test {}", o.synthetic_train_samples,
                o.synthetic_test_samples);
  const int64_t batch = x.shape[0];
  int64_t train = o.synthetic_train_samples, test = o.synthetic_test_samples;
  if ((train == 0 && __builtin_mul_overflow(batch, kSyntheticTrainBatches, &train)) ||
      (test == 0 && __builtin_mul_overflow(batch, kSyntheticTestBatches, &test)))
    return fail("synthetic data: batch {} is too large", batch);
  return std::make_unique<SyntheticSource>(x, labels, o.seed, o.classes, train, test);
}

}  // namespace lms::data
