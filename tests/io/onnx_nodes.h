// Building ONNX nodes, attributes, tensors and value infos in tests (OnnxModel values, io/onnx.h), and counting
// ops of an imported graph; shared by the importer's tests.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lms/io/onnx.h"
#include "lms/io/onnx_pattern.h"
#include "lms/ir/graph.h"

namespace lms {

inline OnnxAttribute int_attr(std::string name, int64_t v) { return onnx_pattern::int_attribute(std::move(name), v); }
inline OnnxAttribute float_attr(std::string name, double v) {
  return onnx_pattern::float_attribute(std::move(name), v);
}
inline OnnxAttribute string_attr(std::string name, std::string v) {
  return onnx_pattern::string_attribute(std::move(name), std::move(v));
}
inline OnnxAttribute ints_attr(std::string name, std::vector<int64_t> v) {
  OnnxAttribute a;
  a.name = std::move(name);
  a.kind = OnnxAttribute::Kind::ints;
  a.ints = std::move(v);
  return a;
}

inline OnnxNode node(std::string op, std::vector<std::string> in, std::vector<std::string> out,
                     std::vector<OnnxAttribute> attributes = {}) {
  OnnxNode n;
  n.op_type = std::move(op);
  n.name = n.op_type + "_" + out.at(0);
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  n.attributes = std::move(attributes);
  return n;
}

inline HostTensor tensor(DType dt, Shape shape, std::vector<double> v) {
  HostTensor t(TensorType{dt, std::move(shape)});
  for (size_t i = 0; i < v.size(); ++i) t.set(static_cast<int64_t>(i), v[i]);
  return t;
}
inline std::vector<double> values(const HostTensor& t) {
  std::vector<double> out;
  for (int64_t i = 0; i < t.type.num_elements(); ++i) out.push_back(t.get(i));
  return out;
}
inline OnnxValueInfo info(std::string name, std::vector<std::optional<int64_t>> dims, int32_t elem_type = 1) {
  OnnxValueInfo v;
  v.name = std::move(name);
  v.elem_type = elem_type;
  v.dims = std::move(dims);
  v.dim_names.assign(v.dims.size(), "");
  return v;
}
inline int count_op(const Graph& g, Op op) {
  int n = 0;
  for (NodeId id : g.node_ids()) n += g.node(id).op == op;
  return n;
}

}  // namespace lms
