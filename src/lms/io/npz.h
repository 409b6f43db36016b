// NumPy's .npy (one array) and .npz (a zip of NAME.npy members) formats: how LMS saves and loads checkpoints
// (parameter and state values keyed by the graph's value names) and reads test fixtures made with NumPy or
// PyTorch. Supported dtypes: '<f2' (f16), '<f4' (f32), '<f8' (f64), '<i4' (i32), '<i8' (i64), C order only;
// training data (NpyArray) may also hold '|b1', '|u1', '|i1', '<u2' and '<i2' (masks, 8-bit images, 16-bit scans).
// Writing produces .npy version 1.0 (2.0 when the header needs it) and stored zip members with CRC-32, which
// numpy.load reads; reading accepts versions 1.0-3.0 and stored or deflated members (numpy.savez_compressed).
// docs/checkpoints.md is the user reference.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lms/runtime/tensor.h"
#include "lms/support/error.h"

namespace lms {

// The bytes of an .npy file holding `t`. Errors: bf16 (NumPy has no such dtype).
Result<std::vector<std::byte>> encode_npy(const HostTensor& t);
// Parses the bytes of an .npy file. `where` names it in errors (a path, or "archive.npz: member 'w.npy'").
// Errors: bad magic, unsupported version, malformed header, unsupported dtype (named), big-endian data,
// Fortran order, truncated data, trailing bytes.
Result<HostTensor> parse_npy(std::span<const std::byte> bytes, const std::string& where);

Result<HostTensor> read_npy(const std::string& path);

// An array's element type as an .npy header names it: LMS's dtypes plus the narrower ones that data files hold
// (bool masks, uint8 images, int16 CT scans), which are no LMS dtype and are converted where they are read.
enum class NpyElement : uint8_t { b1, u1, i1, u2, i2, i4, i8, f2, f4, f8 };

// An array as an .npy file stores it (data sources read these; checkpoints use HostTensor).
struct NpyArray {
  NpyElement element = NpyElement::f4;
  std::string descr;            // as the header spells it: "|u1", "<f4", ...
  Shape shape;
  std::vector<std::byte> data;  // row-major, little-endian
  int64_t size() const;         // elements
  int64_t element_bytes() const;
  bool is_integer() const;      // b1 and the integer types
  // The LMS dtype with the same bytes, if any ('<f4' is f32; '|u1' has none).
  std::optional<DType> dtype() const;
  double get(int64_t i) const;  // element i as double (exact except for i8 values past 2^53)
};

// Parses an .npy file's bytes into an NpyArray, reusing their storage. Errors as parse_npy's, with the data
// element types listed in the unsupported-dtype one.
Result<NpyArray> parse_npy_array(std::vector<std::byte> bytes, const std::string& where);
// Reads every member of an .npz archive as NpyArrays (keys as read_npz's).
Result<std::map<std::string, NpyArray>> read_npz_arrays(const std::string& path);
Result<void> write_npy(const std::string& path, const HostTensor& t);

// Reads every member of an .npz archive; keys are member names without the ".npy" suffix. Errors: missing
// file, not a zip archive, corrupt or truncated members (named), duplicate names, and parse_npy's errors.
Result<std::map<std::string, HostTensor>> read_npz(const std::string& path);
// Writes `tensors` as an .npz archive with one stored member "<key>.npy" each, in key order. Errors: empty
// or too-long keys, bf16 tensors, and I/O errors.
Result<void> write_npz(const std::string& path, const std::map<std::string, HostTensor>& tensors);

}  // namespace lms
