// Fashion-MNIST (Xiao, Rasul, Vollgraf 2017) from Debian's dataset-fashion-mnist: 60000 train and 10000 test
// 28x28 grey images in 10 classes, as four gzipped IDX files. All four are read and validated when the source
// opens (dimensions, matching counts, labels in [0, 9]); pixels are normalized on the fly to
// (p / 255 - mean) / std with the dataset's standard mean and standard deviation.
#include <array>
#include <filesystem>

#include "lms/data/idx.h"
#include "lms/data/sources.h"

namespace lms::data {

namespace {

constexpr int64_t kSide = 28;
constexpr int64_t kPixels = kSide * kSide;
constexpr int64_t kClasses = 10;
constexpr double kPixelMax = 255.0;
// The training set's pixel mean and standard deviation on the [0, 1] scale (the values torchvision examples
// use for Fashion-MNIST).
constexpr double kMean = 0.2860;
constexpr double kStd = 0.3530;

struct SplitFiles {
  const char* images;
  const char* labels;
};
constexpr SplitFiles kTrainFiles = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"};
constexpr SplitFiles kTestFiles = {"t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};

struct SplitData {
  int64_t count = 0;
  std::vector<uint8_t> images;  // count x 28 x 28
  std::vector<uint8_t> labels;  // count
};

Result<SplitData> load_split(const std::string& dir, const SplitFiles& files) {
  const std::string ipath = (std::filesystem::path(dir) / files.images).string();
  const std::string lpath = (std::filesystem::path(dir) / files.labels).string();
  IdxArray images = LMS_TRY(read_idx(ipath, 3, "images"));
  if (images.dims[1] != kSide || images.dims[2] != kSide)
    return fail_at(ipath, "images are {}x{}, expected {}x{}", images.dims[1], images.dims[2], kSide, kSide);
  IdxArray labels = LMS_TRY(read_idx(lpath, 1, "labels"));
  if (labels.dims[0] != images.dims[0])
    return fail_at(lpath, "{} labels for {} images in {}", labels.dims[0], images.dims[0], files.images);
  for (size_t i = 0; i < labels.data.size(); ++i)
    if (labels.data[i] >= kClasses)
      return fail_at(lpath, "label {} of sample {} is outside [0, {}]", labels.data[i], i, kClasses - 1);
  if (images.dims[0] == 0) return fail_at(ipath, "no images");
  return SplitData{images.dims[0], std::move(images.data), std::move(labels.data)};
}

class FashionMnistSource final : public DataSource {
 public:
  FashionMnistSource(const TensorType& x, const TensorType& labels, uint64_t seed, SplitData train, SplitData test)
      : DataSource(x, labels, seed), train_(std::move(train)), test_(std::move(test)) {
    for (size_t p = 0; p < normalized_.size(); ++p) normalized_[p] = (static_cast<double>(p) / kPixelMax - kMean) / kStd;
  }

  std::string_view kind() const override { return "fashion-mnist"; }
  int64_t size(Split s) const override { return s == Split::train ? train_.count : test_.count; }

 protected:
  void fill(Split split, int64_t sample, int64_t row, HostTensor& x, HostTensor& labels) const override {
    const SplitData& d = split == Split::train ? train_ : test_;
    const uint8_t* pixels = d.images.data() + sample * kPixels;
    for (int64_t i = 0; i < kPixels; ++i) x.set(row * kPixels + i, normalized_[pixels[i]]);
    labels.set(row, d.labels[static_cast<size_t>(sample)]);
  }

 private:
  SplitData train_, test_;
  std::array<double, 256> normalized_{};  // by pixel value
};

}  // namespace

Result<std::unique_ptr<DataSource>> open_fashion_mnist(const DataOptions& o, const TensorType& x,
                                                       const TensorType& labels) {
  const int64_t n = x.shape[0];
  const bool image_shape = x.shape == Shape{n, 1, kSide, kSide}, flat_shape = x.shape == Shape{n, kPixels};
  if (!is_float(x.dtype) || !(image_shape || flat_shape))
    return fail("fashion-mnist data gives 1x28x28 images: the model's %x must be a float [{},1,28,28] or [{},784], got {}",
                n, n, to_string(x));
  if (labels.shape != Shape{n})
    return fail("fashion-mnist data gives one class per image: the model's %labels must be [{}], got {}", n,
                to_string(labels));
  SplitData train = LMS_TRY(load_split(o.dir, kTrainFiles));
  SplitData test = LMS_TRY(load_split(o.dir, kTestFiles));
  return std::make_unique<FashionMnistSource>(x, labels, o.seed, std::move(train), std::move(test));
}

}  // namespace lms::data
