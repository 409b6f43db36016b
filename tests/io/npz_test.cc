// .npy / .npz: round trips of every supported dtype and rank (scalars, empty tensors), files written by NumPy
// (np.savez stored members and np.savez_compressed deflated ones, tests/fixtures/make_numpy_fixtures.py),
// ZIP64 records, NumPy reading what we write (when /usr/bin/python3 has NumPy), and one clear error for each
// kind of bad input: missing file, not a zip, bad magic, unsupported or big-endian dtype, Fortran order,
// truncated or trailing data, CRC mismatch, corrupt deflate data.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

#include "lms/io/npz.h"
#include "lms/io/zip.h"

namespace lms {
namespace {

namespace fs = std::filesystem;

const std::string kFixtures = std::string(LMS_SOURCE_DIR) + "/tests/fixtures/";

class NpzTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lms_npz_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

HostTensor iota_tensor(TensorType t, double scale, double offset) {
  HostTensor h(std::move(t));
  for (int64_t i = 0; i < h.type.num_elements(); ++i) h.set(i, offset + scale * static_cast<double>(i));
  return h;
}

std::map<std::string, HostTensor> sample_tensors() {
  std::map<std::string, HostTensor> m;
  m["f32"] = iota_tensor({DType::f32, {3, 4}}, 0.37, -1.5);
  m["f64"] = iota_tensor({DType::f64, {2, 3, 2}}, 1e-3, 1e10);
  m["f16"] = iota_tensor({DType::f16, {5}}, 0.5, -1);
  m["i32"] = iota_tensor({DType::i32, {2, 2}}, -7, 3);
  m["i64"] = iota_tensor({DType::i64, {4}}, 1e12, -5);
  m["scalar"] = iota_tensor({DType::f32, {}}, 0, 2.5);
  m["empty"] = HostTensor({DType::f32, {2, 0, 3}});
  m["layer1.0.conv1.w"] = iota_tensor({DType::f32, {2, 1, 3, 3}}, 0.1, 0);
  return m;
}

void expect_same(const std::map<std::string, HostTensor>& a, const std::map<std::string, HostTensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [k, t] : a) {
    ASSERT_TRUE(b.contains(k)) << k;
    EXPECT_EQ(to_string(b.at(k).type), to_string(t.type)) << k;
    EXPECT_EQ(b.at(k).data, t.data) << k;
  }
}

std::string read_text(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
void write_text(const std::string& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << s;
}

// An .npy file with a hand-written header dict and `data_bytes` zero bytes of data.
std::string npy_with_header(const std::string& dict, size_t data_bytes) {
  std::string h = dict + "\n";
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(h.size() & 0xff);
  out += static_cast<char>(h.size() >> 8);
  return out + h + std::string(data_bytes, '\0');
}

std::string npy_error(const std::string& bytes) {
  auto r = parse_npy(std::as_bytes(std::span(bytes.data(), bytes.size())), "t.npy");
  EXPECT_FALSE(r.has_value());
  return r ? "" : r.error().str();
}

TEST_F(NpzTest, NpzRoundTripEveryDtype) {
  auto m = sample_tensors();
  ASSERT_TRUE(write_npz(path("a.npz"), m));
  auto back = read_npz(path("a.npz"));
  ASSERT_TRUE(back.has_value()) << back.error().str();
  expect_same(m, *back);
  // The same tensors give the same bytes (fixed timestamps, key order).
  ASSERT_TRUE(write_npz(path("b.npz"), m));
  EXPECT_EQ(read_text(path("a.npz")), read_text(path("b.npz")));
}

TEST_F(NpzTest, NpyRoundTripAndHeaderLayout) {
  for (const auto& [k, t] : sample_tensors()) {
    ASSERT_TRUE(write_npy(path(k + ".npy"), t)) << k;
    auto back = read_npy(path(k + ".npy"));
    ASSERT_TRUE(back.has_value()) << back.error().str();
    EXPECT_EQ(back->type, t.type) << k;
    EXPECT_EQ(back->data, t.data) << k;
    auto bytes = encode_npy(t);
    ASSERT_TRUE(bytes.has_value());
    // Version 1.0, data aligned to 64 bytes, header ending in a newline.
    EXPECT_EQ(static_cast<int>((*bytes)[6]), 1);
    const size_t header_end = bytes->size() - t.data.size();
    EXPECT_EQ(header_end % 64, 0u) << k;
    EXPECT_EQ(static_cast<char>((*bytes)[header_end - 1]), '\n');
  }
  auto bytes = encode_npy(iota_tensor({DType::f32, {7}}, 1, 0));
  std::string text(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  EXPECT_NE(text.find("{'descr': '<f4', 'fortran_order': False, 'shape': (7,), }"), std::string::npos);
}

void expect_numpy_fixture(const std::map<std::string, HostTensor>& m) {
  ASSERT_EQ(m.size(), 6u);
  const HostTensor& w = m.at("w");
  ASSERT_EQ(to_string(w.type), "f32[3,4]");
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(w.get(i), 0.5 * static_cast<double>(i));
  ASSERT_EQ(to_string(m.at("ids").type), "i64[3]");
  EXPECT_EQ(m.at("ids").get(0), 1);
  EXPECT_EQ(m.at("ids").get(1), -2);
  EXPECT_EQ(m.at("ids").get(2), 3);
  ASSERT_EQ(to_string(m.at("scalar").type), "f64[]");
  EXPECT_EQ(m.at("scalar").get(0), -1.25);
  ASSERT_EQ(to_string(m.at("half").type), "f16[2,2]");
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(m.at("half").get(i), static_cast<double>(i) - 1.5);
  EXPECT_EQ(to_string(m.at("empty").type), "i32[2,0,3]");
  ASSERT_EQ(to_string(m.at("fc1.b").type), "f32[2]");
  EXPECT_EQ(m.at("fc1.b").get(1), -0.75);
}

TEST_F(NpzTest, ReadsNumpySavez) {
  auto m = read_npz(kFixtures + "numpy_savez.npz");
  ASSERT_TRUE(m.has_value()) << m.error().str();
  expect_numpy_fixture(*m);
}

TEST_F(NpzTest, ReadsNumpySavezCompressed) {
  auto m = read_npz(kFixtures + "numpy_savez_compressed.npz");
  ASSERT_TRUE(m.has_value()) << m.error().str();
  expect_numpy_fixture(*m);
}

// Data files hold element types that are no LMS dtype (make_numpy_fixtures.py element_types()): read as stored,
// converted per element, and mapped to a dtype only where the bytes are one.
TEST_F(NpzTest, ReadsEveryDataElementType) {
  auto m = read_npz_arrays(kFixtures + "numpy_element_types.npz");
  ASSERT_TRUE(m.has_value()) << m.error().str();
  const std::vector<std::pair<std::string, std::string>> descrs = {
      {"b1", "|b1"}, {"u1", "|u1"}, {"i1", "|i1"}, {"u2", "<u2"}, {"i2", "<i2"},
      {"i4", "<i4"}, {"i8", "<i8"}, {"f2", "<f2"}, {"f4", "<f4"}, {"f8", "<f8"}};
  for (const auto& [key, descr] : descrs) {
    ASSERT_TRUE(m->contains(key)) << key;
    const NpyArray& a = m->at(key);
    EXPECT_EQ(a.descr, descr);
    EXPECT_EQ(a.shape, (Shape{2, 3})) << key;
    ASSERT_EQ(a.size(), 6) << key;
    EXPECT_EQ(a.is_integer(), key[0] != 'f') << key;
    for (int64_t i = 0; i < 6; ++i) {
      const double d = static_cast<double>(i);
      const double want = key == "b1" ? static_cast<double>(i % 2) : key[0] == 'u' ? d : (i % 2 ? -d : d);
      EXPECT_EQ(a.get(i), want) << key << " element " << i;
    }
  }
  EXPECT_EQ(m->at("f4").dtype(), DType::f32);
  EXPECT_EQ(m->at("i8").dtype(), DType::i64);
  EXPECT_EQ(m->at("u1").dtype(), std::nullopt);
  EXPECT_EQ(m->at("u1_max").get(0), 255);
  EXPECT_EQ(m->at("i1_min").get(0), -128);
  EXPECT_EQ(m->at("u2_max").get(0), 65535);
  EXPECT_EQ(m->at("i2_min").get(0), -32768);
  // A checkpoint (read_npz) still takes only LMS dtypes.
  auto checkpoint = read_npz(kFixtures + "numpy_element_types.npz");
  ASSERT_FALSE(checkpoint.has_value());
  EXPECT_NE(checkpoint.error().str().find("unsupported dtype '|b1' (supported: <f2, <f4, <f8, <i4, <i8)"),
            std::string::npos) << checkpoint.error().str();
  // What data files cannot hold either, and the errors parse_npy gives.
  auto array_error = [](const std::string& bytes) {
    auto r = parse_npy_array(std::vector<std::byte>(reinterpret_cast<const std::byte*>(bytes.data()),
                                                    reinterpret_cast<const std::byte*>(bytes.data() + bytes.size())),
                             "t.npy");
    EXPECT_FALSE(r.has_value());
    return r ? "" : r.error().str();
  };
  EXPECT_NE(array_error(npy_with_header("{'descr': '<u8', 'fortran_order': False, 'shape': (2,), }", 16))
                .find("t.npy: unsupported dtype '<u8' (supported: |b1, |u1, |i1, <u2, <i2, <i4, <i8, <f2, <f4, <f8)"),
            std::string::npos);
  EXPECT_NE(array_error(npy_with_header("{'descr': '>i2', 'fortran_order': False, 'shape': (2,), }", 4))
                .find("big-endian"),
            std::string::npos);
  EXPECT_NE(array_error(npy_with_header("{'descr': '|u1', 'fortran_order': False, 'shape': (2, 3), }", 5))
                .find("truncated: expected 6 bytes of |u1[2,3] data, got 5"),
            std::string::npos);
}

TEST_F(NpzTest, Zip64RecordsRoundTrip) {
  // Force ZIP64 for every size and offset; our reader must follow the ZIP64 extras and end record.
  const std::string a = "first member", b(1000, 'x');
  std::vector<zip::WriteMember> members = {
      {"a", {std::as_bytes(std::span(a.data(), a.size()))}},
      {"b", {std::as_bytes(std::span(b.data(), 10)), std::as_bytes(std::span(b.data() + 10, b.size() - 10))}}};
  ASSERT_TRUE(zip::write_archive(path("z.zip"), members, zip::WriteOptions{.zip64_threshold = 0}));
  auto r = zip::Reader::open(path("z.zip"));
  ASSERT_TRUE(r.has_value()) << r.error().str();
  ASSERT_EQ(r->entries().size(), 2u);
  auto got_a = r->read(r->entries()[0]);
  auto got_b = r->read(r->entries()[1]);
  ASSERT_TRUE(got_a && got_b);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(got_a->data()), got_a->size()), a);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(got_b->data()), got_b->size()), b);
}

// NumPy reads what we write (plain and ZIP64 archives). Skipped where /usr/bin/python3 lacks NumPy (CI).
TEST_F(NpzTest, NumpyReadsOurFiles) {
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 with NumPy is not available";
  auto m = sample_tensors();
  m.erase("f16");  // compared separately below: Python prints halves differently
  ASSERT_TRUE(write_npz(path("ours.npz"), m));
  const std::string script = path("check.py");
  write_text(script,
             "import sys, numpy as np\n"
             "z = np.load(sys.argv[1])\n"
             "assert sorted(z.files) == sorted(['f32','f64','i32','i64','scalar','empty','layer1.0.conv1.w']), z.files\n"
             "assert z['f32'].dtype == np.float32 and z['f32'].shape == (3, 4)\n"
             "assert np.array_equal(z['f32'], (-1.5 + 0.37 * np.arange(12)).astype(np.float32).reshape(3, 4))\n"
             "assert np.array_equal(z['i64'], -5 + 10**12 * np.arange(4))\n"
             "assert z['scalar'].shape == () and z['scalar'] == 2.5\n"
             "assert z['empty'].shape == (2, 0, 3)\n"
             "assert np.array_equal(z['i32'], np.array([[3, -4], [-11, -18]], dtype=np.int32))\n");
  EXPECT_EQ(std::system(("/usr/bin/python3 " + script + " " + path("ours.npz")).c_str()), 0);
  std::vector<zip::WriteMember> members = {{"x.npy", {}}};
  auto bytes = encode_npy(iota_tensor({DType::f32, {5}}, 2, 1));
  members[0].pieces = {std::span<const std::byte>(*bytes)};
  ASSERT_TRUE(zip::write_archive(path("z64.npz"), members, zip::WriteOptions{.zip64_threshold = 0}));
  write_text(script,
             "import sys, numpy as np\n"
             "assert np.array_equal(np.load(sys.argv[1])['x'], np.array([1, 3, 5, 7, 9], dtype=np.float32))\n");
  EXPECT_EQ(std::system(("/usr/bin/python3 " + script + " " + path("z64.npz")).c_str()), 0);
}

TEST_F(NpzTest, NpyHeaderErrors) {
  EXPECT_NE(npy_error("PK\x03\x04 not numpy at all").find("bad magic"), std::string::npos);
  EXPECT_NE(npy_error(npy_with_header("{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }", 2))
                .find("unsupported dtype '|u1'"),
            std::string::npos);
  EXPECT_NE(npy_error(npy_with_header("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8))
                .find("big-endian"),
            std::string::npos);
  EXPECT_NE(npy_error(npy_with_header("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16))
                .find("Fortran"),
            std::string::npos);
  EXPECT_NE(npy_error(npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", 12))
                .find("truncated: expected 16 bytes of f32[2,2] data, got 12"),
            std::string::npos);
  EXPECT_NE(npy_error(npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 12))
                .find("4 unexpected bytes"),
            std::string::npos);
  EXPECT_NE(npy_error(npy_with_header("{'descr': '<f4', 'shape': (2,), }", 8)).find("lacks"), std::string::npos);
  EXPECT_NE(npy_error(npy_with_header("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (), }", 4))
                .find("structured"),
            std::string::npos);
  EXPECT_NE(npy_error(npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", 8))
                .find("bad dimension"),
            std::string::npos);
  EXPECT_NE(npy_error(npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }", 0))
                .find("too large"),
            std::string::npos);
  // The header length pointing past the end of the file.
  std::string cut = npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8).substr(0, 30);
  EXPECT_NE(npy_error(cut).find("truncated .npy header"), std::string::npos);
  // bf16 has no NumPy dtype.
  auto bf = write_npz(path("bf.npz"), {{"w", HostTensor({DType::bf16, {2}})}});
  ASSERT_FALSE(bf.has_value());
  EXPECT_NE(bf.error().str().find("bf16 has no NumPy equivalent"), std::string::npos);
  EXPECT_NE(bf.error().str().find("'w'"), std::string::npos);
}

TEST_F(NpzTest, ArchiveErrors) {
  auto missing = read_npz(path("nope.npz"));
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().str().find("nope.npz: cannot open"), std::string::npos);

  write_text(path("text.npz"), "this is a text file, long enough to hold an end record but it has none");
  auto text = read_npz(path("text.npz"));
  ASSERT_FALSE(text.has_value());
  EXPECT_NE(text.error().str().find("not a zip archive"), std::string::npos);

  write_text(path("short.npz"), "PK");
  EXPECT_NE(read_npz(path("short.npz")).error().str().find("too short"), std::string::npos);

  // Cutting off the end of a valid archive loses its end record.
  ASSERT_TRUE(write_npz(path("good.npz"), sample_tensors()));
  const std::string good = read_text(path("good.npz"));
  write_text(path("cut.npz"), good.substr(0, good.size() / 2));
  EXPECT_NE(read_npz(path("cut.npz")).error().str().find("not a zip archive"), std::string::npos);

  // A flipped byte in a stored member's data: the CRC catches it, naming the member.
  std::string flipped = good;
  const auto tensors = sample_tensors();
  const HostTensor& f32 = tensors.at("f32");
  const size_t header = encode_npy(f32)->size() - f32.data.size();
  const size_t at = flipped.find("f32.npy") + 7 + header + 5;  // inside f32's data
  flipped[at] = static_cast<char>(flipped[at] ^ 0x40);
  write_text(path("flipped.npz"), flipped);
  auto crc = read_npz(path("flipped.npz"));
  ASSERT_FALSE(crc.has_value());
  EXPECT_NE(crc.error().str().find("member 'f32.npy': CRC-32 mismatch"), std::string::npos) << crc.error().str();

  // Corrupt deflate data in NumPy's compressed archive.
  std::string zipped = read_text(kFixtures + "numpy_savez_compressed.npz");
  const size_t data = zipped.find("w.npy") + 5 + 20;  // past the name and numpy's 20-byte ZIP64 extra
  for (size_t i = 0; i < 16; ++i) zipped[data + i] = static_cast<char>(0xff);
  write_text(path("bad_deflate.npz"), zipped);
  auto bad = read_npz(path("bad_deflate.npz"));
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().str().find("member 'w.npy'"), std::string::npos) << bad.error().str();
}

// Truncating NumPy's archives anywhere is an error, and flipping a byte never crashes: it either gives an
// error or (in bytes nothing checks, such as timestamps) the original tensors. Every 5th position (every
// record and field is wider than 5 bytes or sits next to one that is tested), to keep the test fast.
TEST_F(NpzTest, TruncationsAndByteFlipsAreHandled) {
  constexpr size_t kStride = 5;
  for (const char* name : {"numpy_savez.npz", "numpy_savez_compressed.npz"}) {
    const std::string good = read_text(kFixtures + name);
    const auto expected = read_npz(kFixtures + name);
    ASSERT_TRUE(expected.has_value());
    for (size_t n = 0; n < good.size(); n += kStride) {
      write_text(path("t.npz"), good.substr(0, n));
      ASSERT_FALSE(read_npz(path("t.npz")).has_value()) << name << " cut to " << n << " bytes";
    }
    int errors = 0;
    for (size_t i = 0; i < good.size(); i += kStride) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ 0x21);
      write_text(path("f.npz"), bad);
      auto r = read_npz(path("f.npz"));
      if (!r) {
        ++errors;
        continue;
      }
      // Accepted: then it must have decoded to the same tensors (the flip hit an unchecked field) or differ
      // only in a member name (names are not checksummed).
      if (r->size() != expected->size()) continue;
      bool same_keys = true;
      for (const auto& [k, t] : *expected) same_keys = same_keys && r->contains(k);
      if (same_keys) expect_same(*expected, *r);
    }
    EXPECT_GT(errors, static_cast<int>(good.size() / kStride / 2)) << name;
  }
}

}  // namespace
}  // namespace lms
