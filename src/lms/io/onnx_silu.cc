// Fusing Mul(x, Sigmoid(x)) (see onnx_silu.h): from each Sigmoid, its one reader must be a Mul whose other
// operand is the Sigmoid's own input.
#include "lms/io/onnx_silu.h"

#include <optional>

#include "lms/io/onnx_pattern.h"

namespace lms {

namespace {

std::optional<onnx_pattern::Match> match(const onnx_pattern::NodeIndex& g, size_t sigmoid) {
  const OnnxNode& s = g.node(sigmoid);
  if (s.inputs.size() != 1 || s.outputs.size() != 1) return std::nullopt;
  const std::optional<size_t> mul = g.only_reader(s.outputs[0]);
  if (!mul || !g.is(*mul, "Mul")) return std::nullopt;
  const OnnxNode& m = g.node(*mul);
  const std::string& other = m.inputs[0] == s.outputs[0] ? m.inputs[1] : m.inputs[0];
  if (other != s.inputs[0]) return std::nullopt;
  OnnxNode silu;
  silu.op_type = "Silu";
  silu.name = m.name;
  silu.inputs = {s.inputs[0]};
  silu.outputs = m.outputs;
  return onnx_pattern::Match(std::move(silu), {sigmoid, *mul});
}

}  // namespace

std::vector<OnnxNode> fuse_silu(const std::vector<OnnxNode>& nodes, const OnnxModel& model) {
  constexpr std::string_view kCores[] = {"Sigmoid"};
  return onnx_pattern::fuse_chains(nodes, model, kCores, match);
}

}  // namespace lms
