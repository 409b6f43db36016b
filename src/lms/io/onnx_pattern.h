// Internal to src/lms/io: what the ONNX fusions (onnx_gelu.cc, onnx_layer_norm.cc) ask of a node list while
// matching a decomposed operator: who produces and who reads each value, which values are scalar constants
// (initializers or Constant nodes), and whether an intermediate result is read by the chain alone. A value
// read by a graph output counts as having an extra reader, so a chain whose middle is a model output is never
// fused away. `fuse_chains` applies the matches: each chain's nodes are dropped and its replacement takes the
// place of the chain's last node, so the node list stays in topological order.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "lms/io/onnx.h"

namespace lms::onnx_pattern {

class NodeIndex {
 public:
  NodeIndex(const std::vector<OnnxNode>& nodes, const OnnxModel& model);

  const OnnxNode& node(size_t i) const { return nodes_[i]; }
  // The value of `name` when it is a one-element initializer or Constant.
  std::optional<double> scalar(const std::string& name) const;
  // The integer list of `name` when it is an integer initializer or Constant (ReduceMean's axes input).
  std::optional<std::vector<int64_t>> ints(const std::string& name) const;
  std::optional<double> scalar_input(const OnnxNode& n, size_t i) const {
    return i < n.inputs.size() ? scalar(n.inputs[i]) : std::nullopt;
  }
  // For a two-input node one of whose inputs is a scalar constant passing `ok`: the other input.
  template <class Ok>
  std::optional<std::string> other_than_scalar(const OnnxNode& n, Ok ok) const {
    if (n.inputs.size() != 2) return std::nullopt;
    for (size_t side : {size_t{1}, size_t{0}})
      if (auto c = scalar_input(n, side); c && ok(*c)) return n.inputs[1 - side];
    return std::nullopt;
  }
  // The node producing `name` when `name` has no reader but the chain's next node.
  std::optional<size_t> only_producer(const std::string& name) const;
  // The node producing `name` (any number of readers).
  std::optional<size_t> producer(const std::string& name) const;
  // The one node reading `name`, when there is exactly one and `name` is not a graph output.
  std::optional<size_t> only_reader(const std::string& name) const;
  // The nodes reading `name`; empty when a graph output reads it too.
  std::vector<size_t> readers_if_internal(const std::string& name) const;
  // Whether the node is `op_type` with one output (and, for a binary op, two inputs).
  bool is(size_t i, std::string_view op_type) const;

 private:
  const HostTensor* constant(const std::string& name) const;  // an initializer's or a Constant's tensor

  const std::vector<OnnxNode>& nodes_;
  std::map<std::string, const HostTensor*> initializers_;
  std::map<std::string, size_t> producer_;
  std::map<std::string, std::vector<size_t>> readers_;  // nodes_.size() marks a graph output
};

// |v - want| within a relative 1e-6 (exporters write constants like sqrt(2) in float).
inline bool near(std::optional<double> v, double want) {
  return v && (*v - want) * (*v - want) <= 1e-12 * want * want;
}

// Attributes of a fused node.
OnnxAttribute int_attribute(std::string name, int64_t v);
OnnxAttribute float_attribute(std::string name, double v);
OnnxAttribute string_attribute(std::string name, std::string v);

// A fused node and the indices of the nodes it replaces.
using Match = std::pair<OnnxNode, std::vector<size_t>>;
// `nodes` with the chains `match` finds replaced: `match` is tried at every node of type `start` (in order;
// a chain sharing a node with an earlier one is skipped).
using MatchFn = std::optional<Match> (*)(const NodeIndex&, size_t);
std::vector<OnnxNode> fuse_chains(const std::vector<OnnxNode>& nodes, const OnnxModel& model,
                                  std::span<const std::string_view> start, MatchFn match);

}  // namespace lms::onnx_pattern
