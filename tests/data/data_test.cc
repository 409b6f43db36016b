// Data sources. Fashion-MNIST on Debian's real files (counts, first labels, normalization statistics, the
// per-epoch shuffle being a permutation, batches matching the raw files) and on small datasets written to a
// temp dir, valid and corrupted (missing file, bad magic, truncated data, truncated gzip stream, bad label,
// count mismatch, wrong image size). Synthetic data: determinism per (seed, epoch, index), shapes of every
// kind of model input, value ranges and statistics. Shape and kind errors. The npz kind against fashion-mnist on
// the same samples (tests/data/npz_data_test.cc has the rest of it).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include "lms/data/data.h"
#include "lms/data/idx.h"
#include "lms/io/npz.h"

namespace lms {
namespace {

namespace fs = std::filesystem;

const TensorType kImages{DType::f32, {32, 1, 28, 28}};
const TensorType kLabels{DType::i64, {32}};

bool have_fashion_mnist() { return fs::exists(std::string(kFashionMnistDir) + "/t10k-labels-idx1-ubyte.gz"); }

std::unique_ptr<DataSource> open_ok(const DataOptions& o, const TensorType& x, const TensorType& labels) {
  auto s = open_data(o, x, labels);
  EXPECT_TRUE(s.has_value()) << (s ? "" : s.error().str());
  return s ? std::move(*s) : nullptr;
}

std::string open_error(const DataOptions& o, const TensorType& x, const TensorType& labels) {
  auto s = open_data(o, x, labels);
  EXPECT_FALSE(s.has_value());
  return s ? "" : s.error().str();
}

DataOptions fashion(std::string dir = kFashionMnistDir, uint64_t seed = 0) {
  DataOptions o;
  o.kind = "fashion-mnist";
  o.dir = std::move(dir);
  o.seed = seed;
  return o;
}

// --- Fashion-MNIST, real files ------------------------------------------------------------------------------

class FashionMnistTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!have_fashion_mnist()) return;
    auto s = open_data(fashion(), kImages, kLabels);
    if (s) source_ = s->release();
  }
  static void TearDownTestSuite() {
    delete source_;
    source_ = nullptr;
  }
  void SetUp() override {
    if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed at " << kFashionMnistDir;
    ASSERT_NE(source_, nullptr);
  }
  static DataSource* source_;
};
DataSource* FashionMnistTest::source_ = nullptr;

TEST_F(FashionMnistTest, CountsAndFirstLabels) {
  EXPECT_EQ(source_->train_size(), 60000);
  EXPECT_EQ(source_->test_size(), 10000);
  EXPECT_EQ(source_->train_batches(), 1875);
  EXPECT_EQ(source_->test_batches(), 313);  // 312 full batches and one of 16
  HostTensor x, labels;
  auto valid = source_->test_batch(0, x, labels);
  ASSERT_TRUE(valid.has_value());
  EXPECT_EQ(*valid, 32);
  // The first test labels of Fashion-MNIST's t10k set.
  const std::vector<int64_t> first = {9, 2, 1, 1, 6, 1, 4, 6, 5, 7, 4, 5};
  for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(labels.as<int64_t>()[i], first[i]) << i;
  // And of the train set, read raw (train batches are shuffled).
  auto raw = data::read_idx(std::string(kFashionMnistDir) + "/train-labels-idx1-ubyte.gz", 1, "labels");
  ASSERT_TRUE(raw.has_value());
  EXPECT_EQ(raw->dims, std::vector<int64_t>{60000});
  EXPECT_EQ(std::vector<int>(raw->data.begin(), raw->data.begin() + 5), (std::vector<int>{9, 0, 0, 3, 0}));
}

TEST_F(FashionMnistTest, PixelsAreNormalizedToZeroMeanUnitStd) {
  HostTensor x, labels;
  double sum = 0, sq = 0, lo = 1e9, hi = -1e9;
  int64_t n = 0;
  for (int64_t b = 0; b < source_->test_batches(); ++b) {
    const int64_t valid = *source_->test_batch(b, x, labels);
    for (int64_t i = 0; i < valid * 784; ++i) {
      const double v = x.as<float>()[i];
      sum += v;
      sq += v * v;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    n += valid * 784;
  }
  const double mean = sum / static_cast<double>(n), stddev = std::sqrt(sq / static_cast<double>(n) - mean * mean);
  EXPECT_NEAR(mean, 0, 0.01);
  EXPECT_NEAR(stddev, 1, 0.01);
  EXPECT_NEAR(lo, (0 - 0.2860) / 0.3530, 1e-6);  // black pixels exist
  EXPECT_NEAR(hi, (1 - 0.2860) / 0.3530, 1e-6);  // and white ones
}

TEST_F(FashionMnistTest, LastTestBatchIsPaddedWithZeros) {
  HostTensor x, labels;
  auto valid = source_->test_batch(312, x, labels);
  ASSERT_TRUE(valid.has_value());
  EXPECT_EQ(*valid, 10000 - 312 * 32);
  for (int64_t i = *valid * 784; i < 32 * 784; ++i) ASSERT_EQ(x.as<float>()[i], 0.0f);
  for (int64_t r = *valid; r < 32; ++r) EXPECT_EQ(labels.as<int64_t>()[r], 0);
  EXPECT_FALSE(source_->test_batch(313, x, labels).has_value());
  EXPECT_FALSE(source_->train_batch(0, 1875, x, labels).has_value());
  EXPECT_FALSE(source_->train_batch(-1, 0, x, labels).has_value());
}

TEST_F(FashionMnistTest, EachEpochIsADifferentPermutation) {
  std::vector<int64_t> e0(60000), e1(60000);
  for (int64_t i = 0; i < 60000; ++i) e0[i] = source_->train_sample(0, i);
  for (int64_t i = 0; i < 60000; ++i) e1[i] = source_->train_sample(1, i);
  EXPECT_NE(e0, e1);
  // Shuffled, not the identity, and every sample exactly once.
  int64_t fixed = 0;
  for (int64_t i = 0; i < 60000; ++i) fixed += e0[i] == i;
  EXPECT_LT(fixed, 10);
  std::sort(e0.begin(), e0.end());
  std::vector<int64_t> ids(60000);
  std::iota(ids.begin(), ids.end(), 0);
  EXPECT_EQ(e0, ids);
}

TEST_F(FashionMnistTest, TrainBatchesFollowTheOrderAndTheSeed) {
  auto raw = data::read_idx(std::string(kFashionMnistDir) + "/train-labels-idx1-ubyte.gz", 1, "labels");
  ASSERT_TRUE(raw.has_value());
  HostTensor x, labels;
  ASSERT_TRUE(source_->train_batch(2, 7, x, labels));
  for (int64_t r = 0; r < 32; ++r)
    EXPECT_EQ(labels.as<int64_t>()[r], raw->data[source_->train_sample(2, 7 * 32 + r)]) << r;
  // Same seed: the same batch from a second source; another seed: another order.
  auto again = open_ok(fashion(), kImages, kLabels);
  auto other = open_ok(fashion(kFashionMnistDir, 1), kImages, kLabels);
  HostTensor x2, l2, x3, l3;
  ASSERT_TRUE(again->train_batch(2, 7, x2, l2));
  ASSERT_TRUE(other->train_batch(2, 7, x3, l3));
  EXPECT_EQ(x.data, x2.data);
  EXPECT_EQ(labels.data, l2.data);
  EXPECT_NE(x.data, x3.data);
}

TEST_F(FashionMnistTest, FlatInputsAndShapeErrors) {
  auto flat = open_ok(fashion(), {DType::f32, {8, 784}}, {DType::i32, {8}});
  ASSERT_NE(flat, nullptr);
  HostTensor x, labels;
  ASSERT_TRUE(flat->test_batch(0, x, labels));
  EXPECT_EQ(to_string(x.type), "f32[8,784]");
  EXPECT_EQ(labels.as<int32_t>()[0], 9);
  const std::string e1 = open_error(fashion(), {DType::f32, {4, 3, 32, 32}}, {DType::i64, {4}});
  EXPECT_NE(e1.find("[4,1,28,28] or [4,784]"), std::string::npos) << e1;
  EXPECT_NE(e1.find("f32[4,3,32,32]"), std::string::npos) << e1;
  EXPECT_NE(open_error(fashion(), {DType::i64, {4, 784}}, {DType::i64, {4}}).find("float"), std::string::npos);
  EXPECT_NE(open_error(fashion(), {DType::f32, {4, 784}}, {DType::i64, {4, 2}}).find("%labels must be [4]"),
            std::string::npos);
}

// --- Fashion-MNIST, small written copies ----------------------------------------------------------------------

class SmallFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lms_data_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    write_images("train-images-idx3-ubyte.gz", 10, 28, 28, 10 * 784);
    write_labels("train-labels-idx1-ubyte.gz", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
    write_images("t10k-images-idx3-ubyte.gz", 3, 28, 28, 3 * 784);
    write_labels("t10k-labels-idx1-ubyte.gz", {9, 8, 7});
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::vector<uint8_t> be32(uint32_t v) {
    return {static_cast<uint8_t>(v >> 24), static_cast<uint8_t>(v >> 16), static_cast<uint8_t>(v >> 8),
            static_cast<uint8_t>(v)};
  }
  void write_gz(const std::string& name, const std::vector<uint8_t>& bytes) {
    gzFile f = gzopen((dir_ / name).string().c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
    gzclose(f);
  }
  // An image file whose header says `count` x rows x cols but that holds `pixels` pixel bytes; pixel i is
  // i % 256.
  void write_images(const std::string& name, uint32_t count, uint32_t rows, uint32_t cols, size_t pixels,
                    uint32_t magic = 0x803) {
    std::vector<uint8_t> b;
    for (uint32_t v : {magic, count, rows, cols})
      for (uint8_t c : be32(v)) b.push_back(c);
    for (size_t i = 0; i < pixels; ++i) b.push_back(static_cast<uint8_t>(i % 256));
    write_gz(name, b);
  }
  void write_labels(const std::string& name, const std::vector<uint8_t>& labels) {
    std::vector<uint8_t> b;
    for (uint32_t v : {0x801u, static_cast<uint32_t>(labels.size())})
      for (uint8_t c : be32(v)) b.push_back(c);
    b.insert(b.end(), labels.begin(), labels.end());
    write_gz(name, b);
  }
  std::string error() { return open_error(fashion(dir_.string()), {DType::f32, {4, 1, 28, 28}}, {DType::i64, {4}}); }

  fs::path dir_;
};

TEST_F(SmallFilesTest, ValidSmallDataset) {
  auto s = open_ok(fashion(dir_.string()), {DType::f32, {4, 1, 28, 28}}, {DType::i64, {4}});
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->train_size(), 10);
  EXPECT_EQ(s->train_batches(), 2);  // the last 2 samples are dropped each epoch
  EXPECT_EQ(s->test_batches(), 1);
  HostTensor x, labels;
  auto valid = s->test_batch(0, x, labels);
  ASSERT_TRUE(valid.has_value());
  EXPECT_EQ(*valid, 3);
  EXPECT_EQ(std::vector<int64_t>(labels.as<int64_t>().begin(), labels.as<int64_t>().end()),
            (std::vector<int64_t>{9, 8, 7, 0}));
  // Test sample 1, pixel 5 is byte (784 + 5) % 256.
  EXPECT_FLOAT_EQ(x.as<float>()[784 + 5], static_cast<float>(((784 + 5) % 256 / 255.0 - 0.2860) / 0.3530));
  // A train batch's labels are the shuffled samples' labels (label i for sample i here).
  ASSERT_TRUE(s->train_batch(3, 1, x, labels));
  for (int64_t r = 0; r < 4; ++r) EXPECT_EQ(labels.as<int64_t>()[r], s->train_sample(3, 4 + r));
  // A batch larger than the train split.
  const std::string e = open_error(fashion(dir_.string()), {DType::f32, {16, 784}}, {DType::i64, {16}});
  EXPECT_NE(e.find("10 samples, fewer than one batch of 16"), std::string::npos) << e;
}

// The same samples as an .npz archive (f32 images as fashion-mnist normalizes them, i64 labels) give the same
// batches, bit for bit, in every epoch: both kinds share the order and the padding.
TEST_F(SmallFilesTest, AnNpzArchiveOfTheSameSamplesGivesTheSameBatches) {
  const TensorType x{DType::f32, {1, 1, 28, 28}}, y{DType::i64, {1}};
  auto one = open_ok(fashion(dir_.string(), 7), x, y);
  ASSERT_NE(one, nullptr);
  // Samples in file order: train batch i of epoch 0 at batch 1 is sample train_sample(0, i).
  std::map<std::string, HostTensor> arrays = {{"x_train", HostTensor({DType::f32, {10, 1, 28, 28}})},
                                              {"y_train", HostTensor({DType::i64, {10}})},
                                              {"x_test", HostTensor({DType::f32, {3, 1, 28, 28}})},
                                              {"y_test", HostTensor({DType::i64, {3}})}};
  HostTensor xs, ls;
  for (int64_t i = 0; i < 10; ++i) {
    ASSERT_TRUE(one->train_batch(0, i, xs, ls));
    const int64_t s = one->train_sample(0, i);
    std::memcpy(arrays["x_train"].data.data() + s * 784 * 4, xs.data.data(), 784 * 4);
    arrays["y_train"].as<int64_t>()[static_cast<size_t>(s)] = ls.as<int64_t>()[0];
  }
  for (int64_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(one->test_batch(i, xs, ls));
    std::memcpy(arrays["x_test"].data.data() + i * 784 * 4, xs.data.data(), 784 * 4);
    arrays["y_test"].as<int64_t>()[static_cast<size_t>(i)] = ls.as<int64_t>()[0];
  }
  const std::string archive = (dir_ / "same.npz").string();
  ASSERT_TRUE(write_npz(archive, arrays));
  DataOptions o;
  o.kind = "npz";
  o.file = archive;
  o.seed = 7;
  const TensorType bx{DType::f32, {4, 1, 28, 28}}, by{DType::i64, {4}};
  auto idx = open_ok(fashion(dir_.string(), 7), bx, by), npz = open_ok(o, bx, by);
  ASSERT_NE(idx, nullptr);
  ASSERT_NE(npz, nullptr);
  HostTensor x1, l1, x2, l2;
  for (int64_t epoch : {0, 1, 2})
    for (int64_t b = 0; b < idx->train_batches(); ++b) {
      ASSERT_TRUE(idx->train_batch(epoch, b, x1, l1));
      ASSERT_TRUE(npz->train_batch(epoch, b, x2, l2));
      EXPECT_EQ(x1.data, x2.data) << epoch << " " << b;
      EXPECT_EQ(l1.data, l2.data) << epoch << " " << b;
    }
  ASSERT_EQ(*idx->test_batch(0, x1, l1), *npz->test_batch(0, x2, l2));
  EXPECT_EQ(x1.data, x2.data);
  EXPECT_EQ(l1.data, l2.data);
}

TEST_F(SmallFilesTest, MissingFile) {
  fs::remove(dir_ / "t10k-labels-idx1-ubyte.gz");
  const std::string e = error();
  EXPECT_NE(e.find("t10k-labels-idx1-ubyte.gz: cannot open labels file"), std::string::npos) << e;
}

TEST_F(SmallFilesTest, BadMagic) {
  write_images("train-images-idx3-ubyte.gz", 10, 28, 28, 10 * 784, 0x801);
  const std::string e = error();
  EXPECT_NE(e.find("train-images-idx3-ubyte.gz: bad magic 0x00000801 (expected 0x00000803"), std::string::npos) << e;
}

TEST_F(SmallFilesTest, TruncatedImages) {
  write_images("train-images-idx3-ubyte.gz", 10, 28, 28, 5 * 784);
  const std::string e = error();
  EXPECT_NE(e.find("train-images-idx3-ubyte.gz: truncated: expected 7840 bytes of images, got 3920"), std::string::npos)
      << e;
}

TEST_F(SmallFilesTest, TruncatedGzipStream) {
  // The real test labels cut in half: the gzip stream ends early.
  if (!have_fashion_mnist()) GTEST_SKIP() << "needs dataset-fashion-mnist";
  std::ifstream in(std::string(kFashionMnistDir) + "/t10k-labels-idx1-ubyte.gz", std::ios::binary);
  std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::ofstream((dir_ / "t10k-labels-idx1-ubyte.gz").string(), std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  const std::string e = error();
  EXPECT_NE(e.find("t10k-labels-idx1-ubyte.gz: "), std::string::npos) << e;
  EXPECT_NE(e.find("truncated gzip stream"), std::string::npos) << e;
}

TEST_F(SmallFilesTest, CorruptGzipData) {
  std::ifstream in((dir_ / "train-images-idx3-ubyte.gz").string(), std::ios::binary);
  std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  in.close();
  for (size_t i = 20; i < 40 && i < bytes.size(); ++i) bytes[i] = static_cast<char>(bytes[i] ^ 0x5a);
  std::ofstream((dir_ / "train-images-idx3-ubyte.gz").string(), std::ios::binary) << bytes;
  const std::string e = error();
  EXPECT_NE(e.find("train-images-idx3-ubyte.gz: corrupt gzip data"), std::string::npos) << e;
}

TEST_F(SmallFilesTest, TrailingBytes) {
  write_images("t10k-images-idx3-ubyte.gz", 3, 28, 28, 3 * 784 + 7);
  EXPECT_NE(error().find("unexpected bytes after the 2352 images"), std::string::npos) << error();
}

TEST_F(SmallFilesTest, LabelOutOfRange) {
  write_labels("t10k-labels-idx1-ubyte.gz", {9, 10, 7});
  EXPECT_NE(error().find("label 10 of sample 1 is outside [0, 9]"), std::string::npos) << error();
}

TEST_F(SmallFilesTest, CountMismatch) {
  write_labels("t10k-labels-idx1-ubyte.gz", {9, 8});
  EXPECT_NE(error().find("2 labels for 3 images"), std::string::npos) << error();
}

TEST_F(SmallFilesTest, WrongImageSize) {
  write_images("train-images-idx3-ubyte.gz", 10, 28, 27, 10 * 28 * 27);
  EXPECT_NE(error().find("images are 28x27, expected 28x28"), std::string::npos) << error();
}

// --- synthetic ---------------------------------------------------------------------------------------------------

DataOptions synthetic(uint64_t seed, int64_t classes = 10) {
  DataOptions o;
  o.kind = "synthetic";
  o.seed = seed;
  o.classes = classes;
  return o;
}

TEST(SyntheticDataTest, DeterministicPerSeedEpochAndIndex) {
  const TensorType x{DType::f32, {4, 3, 8, 8}}, labels{DType::i64, {4}};
  auto a = open_ok(synthetic(5), x, labels), b = open_ok(synthetic(5), x, labels), c = open_ok(synthetic(6), x, labels);
  HostTensor xa, la, xb, lb, xc, lc;
  ASSERT_TRUE(a->train_batch(1, 3, xa, la));
  ASSERT_TRUE(b->train_batch(1, 3, xb, lb));
  ASSERT_TRUE(c->train_batch(1, 3, xc, lc));
  EXPECT_EQ(xa.data, xb.data);
  EXPECT_EQ(la.data, lb.data);
  EXPECT_NE(xa.data, xc.data);
  ASSERT_TRUE(b->train_batch(1, 4, xb, lb));
  EXPECT_NE(xa.data, xb.data);
  ASSERT_TRUE(b->train_batch(2, 3, xb, lb));
  EXPECT_NE(xa.data, xb.data);
  EXPECT_EQ(a->train_size(), 4 * kSyntheticTrainBatches);
  EXPECT_EQ(a->test_size(), 4 * kSyntheticTestBatches);
}

TEST(SyntheticDataTest, SamplesDoNotDependOnTheBatchSize) {
  auto two = open_ok(synthetic(1), {DType::f32, {2, 5}}, {DType::i32, {2}});
  auto four = open_ok(synthetic(1), {DType::f32, {4, 5}}, {DType::i32, {4}});
  HostTensor x2, l2, x4, l4;
  ASSERT_TRUE(two->test_batch(1, x2, l2));  // test samples 2 and 3
  ASSERT_TRUE(four->test_batch(0, x4, l4));  // test samples 0..3
  for (int i = 0; i < 10; ++i) EXPECT_EQ(x2.as<float>()[i], x4.as<float>()[10 + i]);
  EXPECT_EQ(l2.as<int32_t>()[0], l4.as<int32_t>()[2]);
}

TEST(SyntheticDataTest, FloatInputsAreStandardNormal) {
  auto s = open_ok(synthetic(2), {DType::f64, {8, 64, 64}}, {DType::i64, {8}});
  HostTensor x, labels;
  ASSERT_TRUE(s->train_batch(0, 0, x, labels));
  double sum = 0, sq = 0;
  for (double v : x.as<double>()) {
    sum += v;
    sq += v * v;
  }
  const double n = static_cast<double>(x.type.num_elements());
  EXPECT_NEAR(sum / n, 0, 0.03);
  EXPECT_NEAR(std::sqrt(sq / n), 1, 0.03);
  for (int64_t l : labels.as<int64_t>()) EXPECT_TRUE(l >= 0 && l < 10);
}

TEST(SyntheticDataTest, TokenIdsAndDenseLabelsStayInRange) {
  // gpt: x and labels are token ids [B, S] in [0, vocab); unet3d: labels [N, D, H, W] in [0, classes).
  auto gpt = open_ok(synthetic(3, 50257), {DType::i64, {2, 64}}, {DType::i64, {2, 64}});
  HostTensor x, labels;
  ASSERT_TRUE(gpt->train_batch(0, 0, x, labels));
  std::set<int64_t> distinct;
  for (int64_t t : x.as<int64_t>()) {
    EXPECT_TRUE(t >= 0 && t < 50257) << t;
    distinct.insert(t);
  }
  EXPECT_GT(distinct.size(), 120u);  // 128 draws from 50257 values: nearly all distinct
  auto unet = open_ok(synthetic(3, 3), {DType::f32, {1, 4, 8, 8, 8}}, {DType::i32, {1, 8, 8, 8}});
  ASSERT_TRUE(unet->test_batch(0, x, labels));
  std::vector<int> hits(3, 0);
  for (int32_t l : labels.as<int32_t>()) {
    ASSERT_TRUE(l >= 0 && l < 3) << l;
    ++hits[l];
  }
  for (int h : hits) EXPECT_GT(h, 100);  // 512 draws over 3 classes
}

TEST(SyntheticDataTest, ExplicitSizesAndErrors) {
  DataOptions o = synthetic(0);
  o.synthetic_train_samples = 10;
  o.synthetic_test_samples = 5;
  auto s = open_ok(o, {DType::f32, {4, 2}}, {DType::i64, {4}});
  EXPECT_EQ(s->train_batches(), 2);
  EXPECT_EQ(s->test_batches(), 2);
  HostTensor x, labels;
  EXPECT_EQ(*s->test_batch(1, x, labels), 1);
  EXPECT_NE(open_error(synthetic(0), {DType::f32, {4, 2}}, {DType::f32, {4}}).find("i32 or i64"), std::string::npos);
  EXPECT_NE(open_error(synthetic(0), {DType::f32, {4, 2}}, {DType::i64, {3}}).find("batch 4 differs"),
            std::string::npos);
  EXPECT_NE(open_error(synthetic(0), {DType::f32, {}}, {DType::i64, {3}}).find("batch dimension"), std::string::npos);
  EXPECT_NE(open_error(synthetic(0, 0), {DType::f32, {4, 2}}, {DType::i64, {4}}).find("classes"), std::string::npos);
  DataOptions bad;
  bad.kind = "imagenet";
  EXPECT_NE(open_error(bad, {DType::f32, {4, 2}}, {DType::i64, {4}}).find("unknown data kind 'imagenet'"),
            std::string::npos);
}

}  // namespace
}  // namespace lms
