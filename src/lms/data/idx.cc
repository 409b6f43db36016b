// IDX reading through zlib's gz* interface (idx.h). The element buffer grows as data arrives instead of being
// sized from the header up front, so a corrupt header promising terabytes gives a "truncated" error, not an
// allocation failure.
#include "lms/data/idx.h"

#include <algorithm>
#include <array>
#include <memory>
#include <string_view>

#include <zlib.h>

namespace lms::data {

namespace {

constexpr uint8_t kUnsignedByteType = 0x08;
constexpr size_t kMagicBytes = 4;
constexpr size_t kDimBytes = 4;
constexpr size_t kReadChunk = size_t{1} << 20;

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};
using GzPtr = std::unique_ptr<gzFile_s, GzCloser>;

// zlib's error for `f` without the "path: " it prefixes; a stream cut short is reported as such.
std::unexpected<Error> gz_error(gzFile f, const std::string& path) {
  int errnum = 0;
  std::string_view msg = gzerror(f, &errnum);
  if (auto colon = msg.rfind(": "); colon != std::string_view::npos) msg.remove_prefix(colon + 2);
  if (errnum == Z_BUF_ERROR) return fail_at(path, "truncated gzip stream ({})", msg);
  return fail_at(path, "corrupt gzip data ({})", msg.empty() ? "zlib error" : msg);
}

// Reads up to `n` bytes; fewer only at the end of the stream. Errors for corrupt or truncated gzip data.
Result<size_t> read_some(gzFile f, uint8_t* out, size_t n, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    const auto want = static_cast<unsigned>(std::min(n - done, kReadChunk));
    const int got = gzread(f, out + done, want);
    if (got < 0) return gz_error(f, path);
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  // gzread reports a stream cut short (no gzip trailer) only through gzerror.
  int errnum = 0;
  gzerror(f, &errnum);
  if (errnum != Z_OK && errnum != Z_STREAM_END) return gz_error(f, path);
  return done;
}

uint32_t big_endian(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

Result<IdxArray> read_idx(const std::string& path, int rank, std::string_view what) {
  GzPtr f(gzopen(path.c_str(), "rb"));
  if (!f) return fail_at(path, "cannot open {} file (missing or unreadable)", what);
  std::array<uint8_t, kMagicBytes> magic{};
  if (LMS_TRY(read_some(f.get(), magic.data(), magic.size(), path)) != magic.size())
    return fail_at(path, "truncated: the {} file ends inside its header", what);
  const uint32_t expected = (uint32_t{kUnsignedByteType} << 8) | static_cast<uint32_t>(rank);
  if (big_endian(magic.data()) != expected)
    return fail_at(path, "bad magic 0x{:08x} (expected 0x{:08x}: unsigned bytes, {} dimensions, for {})",
                   big_endian(magic.data()), expected, rank, what);
  IdxArray a;
  uint64_t count = 1;
  for (int i = 0; i < rank; ++i) {
    std::array<uint8_t, kDimBytes> d{};
    if (LMS_TRY(read_some(f.get(), d.data(), d.size(), path)) != d.size())
      return fail_at(path, "truncated: the {} file ends inside its header", what);
    a.dims.push_back(big_endian(d.data()));
    if (__builtin_mul_overflow(count, uint64_t{big_endian(d.data())}, &count))
      return fail_at(path, "{} dimensions overflow 64 bits (corrupt header)", what);
  }
  while (a.data.size() < count) {
    const size_t old = a.data.size();
    const size_t want = static_cast<size_t>(std::min<uint64_t>(count - old, kReadChunk));
    a.data.resize(old + want);
    const size_t got = LMS_TRY(read_some(f.get(), a.data.data() + old, want, path));
    if (got < want)
      return fail_at(path, "truncated: expected {} bytes of {}, got {}", count, what, old + got);
  }
  uint8_t extra = 0;
  if (LMS_TRY(read_some(f.get(), &extra, 1, path)) != 0)
    return fail_at(path, "unexpected bytes after the {} {} promised by the header", count, what);
  return a;
}

}  // namespace lms::data
