// Reads .onnx files (protobuf ModelProto) into OnnxModel (io/onnx.h). The only file that includes libonnx-dev's
// generated protobuf classes; compiled with LMS_HAVE_ONNX when CMake found them, else read_onnx is an error.
#include "lms/io/onnx.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <span>

#if LMS_HAVE_ONNX
#include <onnx/onnx_pb.h>
#endif

namespace lms {

namespace {
// ONNX TensorProto.DataType codes (onnx.proto).
enum OnnxType : int32_t {
  kFloat = 1, kUint8 = 2, kInt8 = 3, kUint16 = 4, kInt16 = 5, kInt32 = 6, kInt64 = 7, kString = 8, kBool = 9,
  kFloat16 = 10, kDouble = 11, kUint32 = 12, kUint64 = 13, kBfloat16 = 16,
};
}  // namespace

std::optional<DType> onnx_dtype(int32_t elem_type) {
  switch (elem_type) {
    case kFloat: return DType::f32;
    case kFloat16: return DType::f16;
    case kBfloat16: return DType::bf16;
    case kDouble: return DType::f64;
    case kInt32: return DType::i32;
    case kInt64: return DType::i64;
    default: return std::nullopt;
  }
}

std::string onnx_type_name(int32_t elem_type) {
  switch (elem_type) {
    case kFloat: return "FLOAT";
    case kUint8: return "UINT8";
    case kInt8: return "INT8";
    case kUint16: return "UINT16";
    case kInt16: return "INT16";
    case kInt32: return "INT32";
    case kInt64: return "INT64";
    case kString: return "STRING";
    case kBool: return "BOOL";
    case kFloat16: return "FLOAT16";
    case kDouble: return "DOUBLE";
    case kUint32: return "UINT32";
    case kUint64: return "UINT64";
    case kBfloat16: return "BFLOAT16";
    default: return fmt::format("type {}", elem_type);
  }
}

int onnx_small_int_bytes(int32_t elem_type) {
  switch (elem_type) {
    case kBool: case kInt8: case kUint8: return 1;
    case kInt16: case kUint16: return 2;
    case kUint32: return 4;
    case kUint64: return 8;
    default: return 0;
  }
}

#if LMS_HAVE_ONNX
namespace {

// Copies a repeated field into t.data as elements of type T (the field's own type for these dtypes).
template <class T, class Field>
void fill_from(HostTensor& t, const Field& field) {
  std::span<T> out = t.as<T>();
  for (int i = 0; i < field.size(); ++i) out[static_cast<size_t>(i)] = static_cast<T>(field.Get(i));
}

// A narrow integer tensor as i64: from raw little-endian data, or from int32_data (uint64_data for UINT64).
Result<HostTensor> widened(const onnx::TensorProto& p, HostTensor t, int bytes, const std::string& where) {
  const int64_t count = t.type.num_elements();
  std::span<int64_t> out = t.as<int64_t>();
  const bool is_signed = p.data_type() == kInt8 || p.data_type() == kInt16;
  if (p.has_raw_data()) {
    if (static_cast<int64_t>(p.raw_data().size()) != count * bytes)
      return fail_at(where, "raw data holds {} bytes, {} elements of {} need {}", p.raw_data().size(), count,
                     onnx_type_name(p.data_type()), count * bytes);
    const auto* raw = reinterpret_cast<const unsigned char*>(p.raw_data().data());
    for (int64_t i = 0; i < count; ++i) {
      uint64_t v = 0;
      for (int k = 0; k < bytes; ++k) v |= static_cast<uint64_t>(raw[i * bytes + k]) << (8 * k);
      if (is_signed && (v >> (8 * bytes - 1)) != 0) v |= ~uint64_t{0} << (8 * bytes);  // sign-extend
      out[static_cast<size_t>(i)] = static_cast<int64_t>(v);
    }
    return t;
  }
  const int64_t given = p.data_type() == kUint64 ? p.uint64_data_size() : p.int32_data_size();
  if (given != count) return fail_at(where, "holds {} values, {} needs {}", given, to_string(t.type), count);
  for (int i = 0; i < static_cast<int>(count); ++i)
    out[static_cast<size_t>(i)] =
        p.data_type() == kUint64 ? static_cast<int64_t>(p.uint64_data(i)) : static_cast<int64_t>(p.int32_data(i));
  return t;
}

Result<HostTensor> tensor_of(const onnx::TensorProto& p, const std::string& where) {
  if (p.data_location() == onnx::TensorProto::EXTERNAL)
    return fail_at(where, "the data is stored outside the model file (external data), which is not supported");
  std::optional<DType> dt = onnx_dtype(p.data_type());
  // Narrow integer and bool tensors (Dropout's training flag, shape arithmetic) are widened to i64: the importer
  // only folds them, never takes them as data.
  const int small_int_bytes = onnx_small_int_bytes(p.data_type());
  if (!dt && small_int_bytes > 0) dt = DType::i64;
  if (!dt) return fail_at(where, "element type {} is not supported", onnx_type_name(p.data_type()));
  Shape shape;
  int64_t count = 1;
  for (int64_t d : p.dims()) {
    if (d < 0 || (d > 0 && count > (int64_t{1} << 48) / d))
      return fail_at(where, "dimension {} is negative or too large", d);
    shape.push_back(d);
    count *= d;
  }
  TensorType type{*dt, shape};
  if (p.has_raw_data() && small_int_bytes == 0) {  // the common case: the bytes as they are (no zero fill first)
    const std::string& raw = p.raw_data();
    if (static_cast<int64_t>(raw.size()) != type.bytes())
      return fail_at(where, "raw data holds {} bytes, {} needs {}", raw.size(), to_string(type), type.bytes());
    HostTensor t;
    t.type = std::move(type);
    const auto* bytes = reinterpret_cast<const std::byte*>(raw.data());
    t.data.assign(bytes, bytes + raw.size());
    return t;
  }
  HostTensor t(std::move(type));
  if (small_int_bytes > 0) return widened(p, std::move(t), small_int_bytes, where);
  int64_t given = 0;
  switch (p.data_type()) {
    case kFloat: given = p.float_data_size(); break;
    case kDouble: given = p.double_data_size(); break;
    case kInt64: given = p.int64_data_size(); break;
    default: given = p.int32_data_size(); break;  // INT32, and FLOAT16/BFLOAT16 as their bits
  }
  if (given != count) return fail_at(where, "holds {} values, {} needs {}", given, to_string(t.type), count);
  switch (p.data_type()) {
    case kFloat: fill_from<float>(t, p.float_data()); break;
    case kDouble: fill_from<double>(t, p.double_data()); break;
    case kInt64: fill_from<int64_t>(t, p.int64_data()); break;
    case kInt32: fill_from<int32_t>(t, p.int32_data()); break;
    default: {  // FLOAT16 / BFLOAT16: the low 16 bits of each int32 are the element's bits
      auto bits = t.as<uint16_t>();
      for (int64_t i = 0; i < count; ++i) bits[i] = static_cast<uint16_t>(p.int32_data(static_cast<int>(i)));
    }
  }
  return t;
}

Result<OnnxAttribute> attribute_of(const onnx::AttributeProto& p, const std::string& where) {
  OnnxAttribute a;
  a.name = p.name();
  switch (p.type()) {
    case onnx::AttributeProto::FLOAT: a.kind = OnnxAttribute::Kind::f; a.f = p.f(); break;
    case onnx::AttributeProto::INT: a.kind = OnnxAttribute::Kind::i; a.i = p.i(); break;
    case onnx::AttributeProto::STRING: a.kind = OnnxAttribute::Kind::s; a.s = p.s(); break;
    case onnx::AttributeProto::TENSOR:
      a.kind = OnnxAttribute::Kind::t;
      a.t = LMS_TRY(tensor_of(p.t(), where + " attribute '" + a.name + "'"));
      break;
    case onnx::AttributeProto::FLOATS:
      a.kind = OnnxAttribute::Kind::floats;
      a.floats.assign(p.floats().begin(), p.floats().end());
      break;
    case onnx::AttributeProto::INTS:
      a.kind = OnnxAttribute::Kind::ints;
      a.ints.assign(p.ints().begin(), p.ints().end());
      break;
    default: a.kind = OnnxAttribute::Kind::other; break;  // graphs, strings lists, ...: refused where used
  }
  return a;
}

OnnxValueInfo value_info_of(const onnx::ValueInfoProto& p) {
  OnnxValueInfo v;
  v.name = p.name();
  if (!p.type().has_tensor_type()) return v;
  const auto& tt = p.type().tensor_type();
  v.elem_type = tt.elem_type();
  if (!tt.has_shape()) return v;
  for (const auto& d : tt.shape().dim()) {
    v.dims.push_back(d.has_dim_value() && d.dim_value() >= 0 ? std::optional<int64_t>(d.dim_value()) : std::nullopt);
    v.dim_names.push_back(d.has_dim_param() ? d.dim_param() : std::string());
  }
  return v;
}

}  // namespace

Result<OnnxModel> read_onnx(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return fail_at(path, "is a directory, not an ONNX model file");
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return fail_at(path, "cannot open the file: {}", ec.message());
  if (size == 0) return fail_at(path, "not an ONNX model (the file is empty)");
  // Parsed from the file itself: a ViT-B's file is 343 MB, and a copy of it in memory first costs a second.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail_at(path, "cannot open the file: {}", std::strerror(errno));
  onnx::ModelProto proto;
  const bool parsed = proto.ParseFromFileDescriptor(fd);
  ::close(fd);
  if (!parsed) return fail_at(path, "not an ONNX model (the protobuf ModelProto does not parse)");
  if (!proto.has_graph()) return fail_at(path, "the model has no graph");
  OnnxModel m;
  for (const auto& op_set : proto.opset_import())
    if (op_set.domain().empty() || op_set.domain() == "ai.onnx") m.opset = op_set.version();
  const onnx::GraphProto& g = proto.graph();
  m.graph_name = g.name();
  for (const auto& init : g.initializer())
    m.initializers.emplace_back(init.name(), LMS_TRY(tensor_of(init, path + ": initializer '" + init.name() + "'")));
  for (const auto& v : g.input()) m.inputs.push_back(value_info_of(v));
  for (const auto& v : g.output()) m.outputs.push_back(value_info_of(v));
  for (const auto& p : g.node()) {
    OnnxNode n;
    n.op_type = p.op_type();
    n.domain = p.domain();
    n.name = p.name();
    n.inputs.assign(p.input().begin(), p.input().end());
    n.outputs.assign(p.output().begin(), p.output().end());
    const std::string where = fmt::format("{}: node '{}' ({})", path, n.name, n.op_type);
    for (const auto& a : p.attribute()) n.attributes.push_back(LMS_TRY(attribute_of(a, where)));
    m.nodes.push_back(std::move(n));
  }
  return m;
}

#else

Result<OnnxModel> read_onnx(const std::string& path) {
  return fail_at(path, "this build of LMS cannot read ONNX files: it was configured without libonnx-dev "
                       "(install it and re-run cmake, or convert the model elsewhere)");
}

#endif

}  // namespace lms
