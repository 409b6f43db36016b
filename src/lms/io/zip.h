// Minimal ZIP archives (PKWARE APPNOTE 6.3.x), just enough for NumPy's .npz files: writing stored (uncompressed)
// members, and reading stored or deflated members, with ZIP64 records when sizes or offsets pass 4 GiB (NumPy
// itself always puts a ZIP64 extra field in its local headers). Internal to src/lms/io; npz.h is the API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "lms/support/error.h"

namespace lms::zip {

// One member to write: its name and its contents as consecutive pieces (an .npy header, then the tensor's
// bytes, without copying them into one buffer).
struct WriteMember {
  std::string name;
  std::vector<std::span<const std::byte>> pieces;
};

struct WriteOptions {
  // Sizes and offsets at or above this are written with ZIP64 records; the format's own limit is the default.
  // Tests lower it to exercise the ZIP64 path without writing 4 GiB.
  uint64_t zip64_threshold = 0xffffffffull;
};

// Writes `members`, in order, as an archive at `path` (replacing it). Timestamps are fixed (1980-01-01), so
// the same members give the same bytes. Errors: the file cannot be written, a name longer than 65535 bytes.
Result<void> write_archive(const std::string& path, std::span<const WriteMember> members,
                           const WriteOptions& options = {});

// A member as the central directory describes it.
struct Entry {
  std::string name;
  uint16_t method = 0;  // 0 stored, 8 deflated
  uint32_t crc32 = 0;
  uint64_t compressed_size = 0;
  uint64_t size = 0;  // uncompressed
  uint64_t local_header_offset = 0;
};

// An archive opened for reading: the central directory is parsed up front; members are read on demand.
class Reader {
 public:
  // Errors: missing file, not a zip archive, a central directory that is truncated or points outside the file,
  // encrypted members, unsupported compression methods, multi-disk archives.
  static Result<Reader> open(const std::string& path);

  const std::vector<Entry>& entries() const { return entries_; }
  // The uncompressed contents of a member, CRC-checked. Errors name the member: bad local header, truncated
  // data, corrupt deflate stream, size or CRC mismatch.
  Result<std::vector<std::byte>> read(const Entry& e);

 private:
  std::string path_;
  std::ifstream file_;
  uint64_t file_size_ = 0;
  std::vector<Entry> entries_;
};

}  // namespace lms::zip
