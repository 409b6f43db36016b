// The npz data kind: a Keras-style archive written by NumPy (tests/fixtures/make_numpy_fixtures.py: uint8 images
// and labels) read into f32 / i64 batches, the sample shapes an archive may have for an input (the same, without
// 1-sized dims, flat), per-voxel labels, an archive without a test split, and one clear error for each kind of
// bad file: a missing or misnamed member, counts that differ, channels-last images, labels out of range or not
// integers, token ids out of range, non-finite inputs, half a test split, not an archive.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>

#include <gtest/gtest.h>
#include <unistd.h>

#include "lms/data/data.h"
#include "lms/io/npz.h"
#include "lms/io/zip.h"

namespace lms {
namespace {

namespace fs = std::filesystem;

const std::string kKerasStyle = std::string(LMS_SOURCE_DIR) + "/tests/fixtures/numpy_data.npz";

DataOptions npz(const std::string& file, uint64_t seed = 0) {
  DataOptions o;
  o.kind = "npz";
  o.file = file;
  o.seed = seed;
  return o;
}

// The fixture's pixel p of sample s (make_numpy_fixtures.py keras_style_data()).
double fixture_pixel(int64_t s, int64_t p) { return static_cast<double>((31 * s + 7 * p) % 256); }

class NpzDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lms_npz_data_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // An archive of `arrays` in the temp dir.
  std::string write(const std::map<std::string, HostTensor>& arrays) {
    const std::string path = (dir_ / "data.npz").string();
    auto w = write_npz(path, arrays);
    EXPECT_TRUE(w.has_value()) << w.error().str();
    return path;
  }
  std::string error(const std::map<std::string, HostTensor>& arrays, const TensorType& x = kX,
                    const TensorType& labels = kY) {
    auto s = open_data(npz(write(arrays)), x, labels);
    EXPECT_FALSE(s.has_value());
    return s ? "" : s.error().str();
  }

  // Filled with f(i) for element i.
  static HostTensor tensor(TensorType t, const std::function<double(int64_t)>& f) {
    HostTensor h(std::move(t));
    for (int64_t i = 0; i < h.type.num_elements(); ++i) h.set(i, f(i));
    return h;
  }
  // A valid small set: 6 train and 2 test samples of f32[3,4,4] with labels in [0, 10).
  static std::map<std::string, HostTensor> valid() {
    return {{"x_train", tensor({DType::f32, {6, 3, 4, 4}}, [](int64_t i) { return 0.25 * static_cast<double>(i); })},
            {"y_train", tensor({DType::i64, {6}}, [](int64_t i) { return static_cast<double>(i); })},
            {"x_test", tensor({DType::f32, {2, 3, 4, 4}}, [](int64_t i) { return -static_cast<double>(i); })},
            {"y_test", tensor({DType::i64, {2}}, [](int64_t i) { return static_cast<double>(9 - i); })}};
  }
  static inline const TensorType kX{DType::f32, {2, 3, 4, 4}};
  static inline const TensorType kY{DType::i64, {2}};

  fs::path dir_;
};

TEST_F(NpzDataTest, ReadsAKerasStyleArchiveWrittenByNumpy) {
  auto s = open_data(npz(kKerasStyle), {DType::f32, {4, 1, 28, 28}}, {DType::i64, {4}});
  ASSERT_TRUE(s.has_value()) << s.error().str();
  DataSource& d = **s;
  EXPECT_EQ(d.kind(), "npz");
  EXPECT_EQ(d.train_size(), 10);
  EXPECT_EQ(d.test_size(), 3);
  EXPECT_EQ(d.train_batches(), 2);
  EXPECT_EQ(d.test_batches(), 1);
  HostTensor x, labels;
  // Test samples in file order, the padding row zero.
  auto rows = d.test_batch(0, x, labels);
  ASSERT_TRUE(rows.has_value()) << rows.error().str();
  EXPECT_EQ(*rows, 3);
  for (int64_t s = 0; s < 3; ++s) {
    EXPECT_EQ(labels.as<int64_t>()[s], 9 - s);
    for (int64_t p : {0, 5, 783}) EXPECT_EQ(x.as<float>()[s * 784 + p], fixture_pixel(s, p)) << s << " " << p;
  }
  EXPECT_EQ(labels.as<int64_t>()[3], 0);
  EXPECT_EQ(x.as<float>()[3 * 784 + 100], 0.0f);
  // Train batches follow the seeded order of every data kind.
  for (int64_t epoch : {0, 1})
    for (int64_t b = 0; b < d.train_batches(); ++b) {
      ASSERT_TRUE(d.train_batch(epoch, b, x, labels));
      for (int64_t r = 0; r < 4; ++r) {
        const int64_t s = d.train_sample(epoch, b * 4 + r);
        EXPECT_EQ(labels.as<int64_t>()[r], s % 10);
        for (int64_t p : {0, 1, 400, 783}) EXPECT_EQ(x.as<float>()[r * 784 + p], fixture_pixel(s, p));
      }
    }
  // The same archive feeds a flat input, and i32 labels.
  auto flat = open_data(npz(kKerasStyle), {DType::f32, {5, 784}}, {DType::i32, {5}});
  ASSERT_TRUE(flat.has_value()) << flat.error().str();
  ASSERT_TRUE((*flat)->test_batch(0, x, labels));
  EXPECT_EQ(x.as<float>()[784 + 9], fixture_pixel(1, 9));
  EXPECT_EQ(labels.as<int32_t>()[2], 7);
}

// Every element type a data file may hold (make_numpy_fixtures.py element_types(): [2,3] arrays) as x_train,
// converted into f32 and f64 inputs: each value as NpyArray::get reads it.
TEST_F(NpzDataTest, EveryElementTypeConvertsAsItReads) {
  const std::string types = std::string(LMS_SOURCE_DIR) + "/tests/fixtures/numpy_element_types.npz";
  auto reader = zip::Reader::open(types);
  ASSERT_TRUE(reader.has_value()) << reader.error().str();
  auto arrays = read_npz_arrays(types);
  ASSERT_TRUE(arrays.has_value()) << arrays.error().str();
  auto labels = encode_npy(tensor({DType::i64, {2}}, [](int64_t i) { return static_cast<double>(i); }));
  ASSERT_TRUE(labels.has_value());
  int checked = 0;
  for (const zip::Entry& e : reader->entries()) {
    const std::string key = e.name.substr(0, e.name.size() - 4);  // without ".npy"
    if (arrays->at(key).shape != Shape{2, 3}) continue;            // the extremes are [1]
    auto member = reader->read(e);
    ASSERT_TRUE(member.has_value()) << member.error().str();
    const std::string path = (dir_ / (key + ".npz")).string();
    const zip::WriteMember members[] = {{"x_train.npy", {std::span(*member)}}, {"y_train.npy", {std::span(*labels)}}};
    ASSERT_TRUE(zip::write_archive(path, members));
    for (DType dt : {DType::f32, DType::f64}) {
      auto s = open_data(npz(path), {dt, {2, 3}}, {DType::i64, {2}});
      ASSERT_TRUE(s.has_value()) << key << ": " << s.error().str();
      HostTensor x, y;
      ASSERT_TRUE((*s)->test_batches() == 0 && (*s)->train_batch(0, 0, x, y));
      for (int64_t r = 0; r < 2; ++r) {
        const int64_t sample = (*s)->train_sample(0, r);
        for (int64_t i = 0; i < 3; ++i)
          EXPECT_EQ(x.get(r * 3 + i), static_cast<double>(static_cast<float>(arrays->at(key).get(sample * 3 + i))))
              << key << " into " << dtype_name(dt) << ", sample " << sample << " element " << i;
      }
    }
    ++checked;
  }
  EXPECT_EQ(checked, 10);
}

TEST_F(NpzDataTest, MatchingDtypesAreCopiedAsTheyAre) {
  auto s = open_data(npz(write(valid()), /*seed=*/3), kX, kY);
  ASSERT_TRUE(s.has_value()) << s.error().str();
  HostTensor x, labels;
  ASSERT_TRUE((*s)->train_batch(2, 1, x, labels));
  for (int64_t r = 0; r < 2; ++r) {
    const int64_t sample = (*s)->train_sample(2, 2 + r);
    EXPECT_EQ(labels.as<int64_t>()[r], sample);
    for (int64_t i = 0; i < 48; ++i) EXPECT_EQ(x.as<float>()[r * 48 + i], 0.25f * static_cast<float>(sample * 48 + i));
  }
}

TEST_F(NpzDataTest, PerVoxelLabelsAndNoTestSplit) {
  // A 3-D segmenter's shapes: x [N,1,4,4,4], labels [N,4,4,4]; the archive's x has no channel dim.
  std::map<std::string, HostTensor> a = {
      {"x_train", tensor({DType::f32, {3, 4, 4, 4}}, [](int64_t i) { return static_cast<double>(i % 7); })},
      {"y_train", tensor({DType::i32, {3, 4, 4, 4}}, [](int64_t i) { return static_cast<double>(i % 3); })}};
  const TensorType x{DType::f32, {1, 1, 4, 4, 4}}, labels{DType::i64, {1, 4, 4, 4}};
  auto s = open_data(npz(write(a)), x, labels);
  ASSERT_TRUE(s.has_value()) << s.error().str();
  EXPECT_EQ((*s)->test_size(), 0);
  EXPECT_EQ((*s)->test_batches(), 0);
  HostTensor xs, ls;
  ASSERT_TRUE((*s)->train_batch(0, 0, xs, ls));
  const int64_t sample = (*s)->train_sample(0, 0);
  for (int64_t i = 0; i < 64; ++i) {
    EXPECT_EQ(ls.as<int64_t>()[i], (sample * 64 + i) % 3);
    EXPECT_EQ(xs.as<float>()[i], static_cast<float>((sample * 64 + i) % 7));
  }
  // Label 3 at sample 2, voxel 5, with 3 classes.
  a["y_train"].set(2 * 64 + 5, 3);
  DataOptions o = npz(write(a));
  o.classes = 3;
  auto e = open_data(o, x, labels);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.error().str().find("y_train: sample 2 holds 3, outside [0, 2] (the model has 3 classes)"),
            std::string::npos) << e.error().str();
}

TEST_F(NpzDataTest, TokenIds) {
  std::map<std::string, HostTensor> a = {
      {"x_train", tensor({DType::i64, {4, 8}}, [](int64_t i) { return static_cast<double>(i % 10); })},
      {"y_train", tensor({DType::i64, {4, 8}}, [](int64_t i) { return static_cast<double>((i + 1) % 10); })}};
  const TensorType x{DType::i64, {2, 8}}, labels{DType::i64, {2, 8}};
  ASSERT_TRUE(open_data(npz(write(a)), x, labels).has_value());
  a["x_train"].set(17, 10);
  EXPECT_NE(error(a, x, labels).find("x_train: sample 2 holds 10, outside [0, 9]"), std::string::npos);
  a["x_train"] = tensor({DType::f32, {4, 8}}, [](int64_t) { return 1.0; });
  EXPECT_NE(error(a, x, labels).find("x_train holds <f4 values, but the model's %x takes i64 token ids"),
            std::string::npos);
}

TEST_F(NpzDataTest, Errors) {
  auto expect = [&](std::map<std::string, HostTensor> a, const std::string& want, const TensorType& x = kX) {
    const std::string e = error(a, x);
    EXPECT_NE(e.find(want), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  };
  {
    auto a = valid();
    a["X_train"] = std::move(a["x_train"]);
    a.erase("x_train");
    expect(a, "no member 'x_train' (members: X_train, x_test, y_test, y_train)");
  }
  {
    auto a = valid();
    a["y_train"] = tensor({DType::i64, {5}}, [](int64_t) { return 1.0; });
    expect(a, "x_train has 6 samples ('<f4' [6,3,4,4]), y_train has 5 ('<i8' [5])");
  }
  {
    auto a = valid();
    a["x_train"] = tensor({DType::f32, {6, 4, 4, 3}}, [](int64_t) { return 0.0; });
    expect(a, "x_train holds samples of shape [4,4,3], but the model's %x takes [3,4,4] per sample (the same dims "
              "in another order: channels-last");
    a["x_train"] = tensor({DType::f32, {6, 48}}, [](int64_t) { return 0.0; });
    expect(a, "x_train holds samples of shape [48], but the model's %x takes [3,4,4] per sample");
  }
  {
    auto a = valid();
    a["y_test"] = tensor({DType::f32, {2}}, [](int64_t) { return 1.0; });
    expect(a, "y_test holds <f4 values, but the model's %labels takes i64 class indices");
  }
  {
    auto a = valid();
    a["y_train"].set(4, -1);
    expect(a, "y_train: sample 4 holds -1, outside [0, 9]");
  }
  {
    auto a = valid();
    a["x_train"].set(5 * 48 + 7, std::numeric_limits<double>::quiet_NaN());
    expect(a, "x_train: sample 5 holds nan");
  }
  {
    auto a = valid();
    a.erase("y_test");
    expect(a, "x_test without y_test: give both or neither");
  }
  {
    auto a = valid();
    a["x_train"] = tensor({DType::f32, {}}, [](int64_t) { return 1.0; });
    expect(a, "x_train is a scalar");
  }
  {
    auto a = valid();
    a["x_train"] = tensor({DType::f32, {1, 3, 4, 4}}, [](int64_t) { return 1.0; });
    a["y_train"] = tensor({DType::i64, {1}}, [](int64_t) { return 1.0; });
    expect(a, "the train split has 1 samples, fewer than one batch of 2");
  }
  // Not an archive, and no archive at all.
  const std::string text = (dir_ / "text.npz").string();
  std::ofstream(text) << "not a zip archive";
  for (const std::string& file : {text, (dir_ / "missing.npz").string(), std::string()}) {
    auto s = open_data(npz(file), kX, kY);
    ASSERT_FALSE(s.has_value()) << file;
    EXPECT_NE(s.error().str().find(file.empty() ? "no archive given" : file), std::string::npos) << s.error().str();
  }
}

}  // namespace
}  // namespace lms
