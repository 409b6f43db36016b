// IDX files (the MNIST family's format: a big-endian magic of 0x00 0x00 <type> <rank>, one big-endian u32 per
// dimension, then the elements), read through zlib so that the .gz files Debian ships are read directly
// (zlib also reads an uncompressed file as is). Only unsigned-byte elements (type 0x08), which is what the
// image and label files hold. Internal to src/lms/data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lms/support/error.h"

namespace lms::data {

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // product(dims) bytes, row-major
};

// Reads an unsigned-byte IDX file of rank `rank`. `what` names the contents in errors ("images", "labels").
// Errors (each naming the file): missing file, bad magic (with the expected value), a corrupt or truncated gzip
// stream, fewer element bytes than the dimensions promise ("truncated: expected N bytes of images, got M"),
// and trailing bytes after them.
Result<IdxArray> read_idx(const std::string& path, int rank, std::string_view what);

}  // namespace lms::data
