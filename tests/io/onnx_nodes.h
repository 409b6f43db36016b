// Building ONNX nodes and attributes in tests (OnnxModel values, io/onnx.h), shared by the importer's tests.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lms/io/onnx.h"

namespace lms {

inline OnnxAttribute int_attr(std::string name, int64_t v) {
  OnnxAttribute a;
  a.name = std::move(name);
  a.kind = OnnxAttribute::Kind::i;
  a.i = v;
  return a;
}
inline OnnxAttribute float_attr(std::string name, double v) {
  OnnxAttribute a;
  a.name = std::move(name);
  a.kind = OnnxAttribute::Kind::f;
  a.f = v;
  return a;
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

}  // namespace lms
