// ONNX models as plain data, and reading them from .onnx files. `read_onnx` (onnx_read.cc, the only file that
// includes the protobuf classes of Debian's libonnx-dev) turns a ModelProto into an `OnnxModel`: the main
// graph's nodes with their attributes, its initializers as host tensors, and its inputs and outputs with their
// element types and shapes. Nothing here interprets the operators; io/onnx_import.h maps them to LMS ops. In a
// build without libonnx-dev (the GPU machine has no Debian packages) `read_onnx` is an error saying so, and
// everything else still works (tests build OnnxModel values directly). docs/onnx.md is the user reference.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lms/runtime/tensor.h"
#include "lms/support/error.h"

namespace lms {

struct OnnxAttribute {
  enum class Kind { f, i, s, t, floats, ints, other };
  std::string name;
  Kind kind = Kind::other;
  double f = 0;                // Kind::f
  int64_t i = 0;               // Kind::i
  std::string s;               // Kind::s
  HostTensor t;                // Kind::t
  std::vector<double> floats;  // Kind::floats
  std::vector<int64_t> ints;   // Kind::ints
};

struct OnnxNode {
  std::string op_type;                    // "Conv", "Relu", ...
  std::string domain;                     // "" (or "ai.onnx") for the standard operators
  std::string name;                       // may be empty
  std::vector<std::string> inputs;        // "" marks an omitted optional input
  std::vector<std::string> outputs;
  std::vector<OnnxAttribute> attributes;

  const OnnxAttribute* attribute(std::string_view n) const {
    for (const OnnxAttribute& a : attributes)
      if (a.name == n) return &a;
    return nullptr;
  }
};

// A graph input or output. ONNX element types that LMS has no dtype for keep only their code.
struct OnnxValueInfo {
  std::string name;
  int32_t elem_type = 0;                     // ONNX TensorProto.DataType (1 = FLOAT, 7 = INT64, ...)
  std::vector<std::optional<int64_t>> dims;  // nullopt: a symbolic dimension (dim_param) or none given
  std::vector<std::string> dim_names;        // the dim_param of each dimension ("" where it is a number)
};

struct OnnxModel {
  std::string graph_name;
  int64_t opset = 0;  // the version of the default ("" / "ai.onnx") operator set
  std::vector<OnnxNode> nodes;  // in the file's (topological) order
  std::vector<std::pair<std::string, HostTensor>> initializers;
  std::vector<OnnxValueInfo> inputs;   // including initializers listed as inputs (older exporters do)
  std::vector<OnnxValueInfo> outputs;
};

// The LMS dtype of an ONNX element type code, or nullopt (uint8, bool, string, ...).
std::optional<DType> onnx_dtype(int32_t elem_type);
// Bytes per element of the integer and bool types the importer widens to i64 (0 for the others).
int onnx_small_int_bytes(int32_t elem_type);
// "FLOAT", "INT64", ... for messages ("type 9" for codes without a name here).
std::string onnx_type_name(int32_t elem_type);

// Reads an .onnx file. Errors (one line, naming the file): unreadable, not an ONNX model (protobuf parse
// failure), no graph, tensors with external data or unsupported element types (named), and builds without ONNX.
Result<OnnxModel> read_onnx(const std::string& path);

}  // namespace lms
