// Fusing decomposed layer norms (see onnx_layer_norm.h). One walk over the ReduceMean nodes; each is tried as
// the chain's first node (the mean of x), and the rest is checked forwards: the Subs reading the mean, the
// variance's square and ReduceMean over the same axis, + eps, Sqrt, the division, * gamma and + beta.
#include "lms/io/onnx_layer_norm.h"

#include <algorithm>
#include <cstdint>
#include <optional>

#include "lms/io/onnx_pattern.h"

namespace lms {

namespace {

using onnx_pattern::NodeIndex;

// The single reduced axis of ReduceMean node `i` with keepdims set (attribute before opset 18, input after).
std::optional<int64_t> single_axis(const NodeIndex& g, size_t i) {
  const OnnxNode& n = g.node(i);
  if (n.outputs.size() != 1 || n.inputs.empty()) return std::nullopt;
  if (const OnnxAttribute* k = n.attribute("keepdims"); k && k->i == 0) return std::nullopt;
  std::optional<std::vector<int64_t>> axes;
  if (const OnnxAttribute* a = n.attribute("axes"); a && a->kind == OnnxAttribute::Kind::ints) axes = a->ints;
  if (n.inputs.size() > 1) axes = g.ints(n.inputs[1]);
  if (!axes || axes->size() != 1) return std::nullopt;
  return (*axes)[0];
}

// The other input of two-input node `i` when one of them is `v`.
std::optional<std::string> other_input(const NodeIndex& g, size_t i, const std::string& v) {
  const OnnxNode& n = g.node(i);
  if (n.inputs.size() != 2) return std::nullopt;
  if (n.inputs[0] == v) return n.inputs[1];
  if (n.inputs[1] == v) return n.inputs[0];
  return std::nullopt;
}

// The one node reading `v` when it is `op_type`.
std::optional<size_t> next(const NodeIndex& g, const std::string& v, std::string_view op_type) {
  const std::optional<size_t> r = g.only_reader(v);
  return r && g.is(*r, op_type) ? r : std::nullopt;
}

std::optional<onnx_pattern::Match> match(const NodeIndex& g, size_t mean_node) {
  const std::optional<int64_t> axis = single_axis(g, mean_node);
  if (!axis) return std::nullopt;
  const std::string& x = g.node(mean_node).inputs[0];
  const std::string& mean = g.node(mean_node).outputs[0];
  // The mean is read by one or two Subs x - mean; their results by the square and the division.
  const std::vector<size_t> subs = g.readers_if_internal(mean);
  if (subs.empty() || subs.size() > 2) return std::nullopt;
  for (size_t s : subs)
    if (!g.is(s, "Sub") || g.node(s).inputs[0] != x || g.node(s).inputs[1] != mean) return std::nullopt;
  std::vector<size_t> chain = {mean_node};
  chain.insert(chain.end(), subs.begin(), subs.end());
  std::vector<size_t> readers;  // of the centred values
  for (size_t s : subs)
    for (size_t r : g.readers_if_internal(g.node(s).outputs[0])) readers.push_back(r);
  // Two readers: the square (Pow(d, 2), or Mul(d, d) which reads d twice) and the division (Div(d, std), or
  // Mul(d, 1/std) in either order).
  const auto centred = [&](const std::string& v) {
    return std::ranges::any_of(subs, [&](size_t k) { return g.node(k).outputs[0] == v; });
  };
  std::optional<size_t> square, divide;
  for (size_t r : readers) {
    const OnnxNode& n = g.node(r);
    if (g.is(r, "Pow") && centred(n.inputs[0]) && g.scalar_input(n, 1) == 2.0) {
      square = r;
    } else if (g.is(r, "Mul") && n.inputs[0] == n.inputs[1] && centred(n.inputs[0])) {
      square = r;
    } else if (g.is(r, "Div") && centred(n.inputs[0])) {
      divide = r;
    } else if (g.is(r, "Mul") && centred(n.inputs[0]) != centred(n.inputs[1])) {
      divide = r;
    }
  }
  std::erase(readers, square.value_or(SIZE_MAX));  // Mul(d, d) appears twice
  if (!square || !divide || readers.size() != 1 || readers[0] != *divide) return std::nullopt;
  chain.insert(chain.end(), {*square, *divide});
  // var = ReduceMean(square) over the same axis, then + eps and Sqrt.
  const std::optional<size_t> var = next(g, g.node(*square).outputs[0], "ReduceMean");
  if (!var || single_axis(g, *var) != axis) return std::nullopt;
  const std::optional<size_t> plus = next(g, g.node(*var).outputs[0], "Add");
  if (!plus) return std::nullopt;
  const std::optional<std::string> eps_name = other_input(g, *plus, g.node(*var).outputs[0]);
  const std::optional<double> eps = eps_name ? g.scalar(*eps_name) : std::nullopt;
  if (!eps || *eps < 0) return std::nullopt;
  const std::optional<size_t> root = next(g, g.node(*plus).outputs[0], "Sqrt");
  if (!root) return std::nullopt;
  chain.insert(chain.end(), {*var, *plus, *root});
  // d / std, or d * Reciprocal(std).
  std::string denominator = g.node(*root).outputs[0];
  if (g.is(*divide, "Mul")) {
    const std::optional<size_t> inv = next(g, denominator, "Reciprocal");
    if (!inv) return std::nullopt;
    chain.push_back(*inv);
    denominator = g.node(*inv).outputs[0];
  } else if (g.node(*divide).inputs[1] != denominator) {
    return std::nullopt;
  }
  if (g.only_reader(denominator) != divide || !other_input(g, *divide, denominator)) return std::nullopt;
  // * gamma, + beta.
  const std::optional<size_t> scale = next(g, g.node(*divide).outputs[0], "Mul");
  if (!scale) return std::nullopt;
  const std::optional<size_t> shift = next(g, g.node(*scale).outputs[0], "Add");
  if (!shift) return std::nullopt;
  const std::optional<std::string> gamma = other_input(g, *scale, g.node(*divide).outputs[0]);
  const std::optional<std::string> beta = other_input(g, *shift, g.node(*scale).outputs[0]);
  if (!gamma || !beta) return std::nullopt;
  chain.insert(chain.end(), {*scale, *shift});

  OnnxNode ln;
  ln.op_type = "LayerNormalization";
  ln.name = g.node(*shift).name;
  ln.inputs = {x, *gamma, *beta};
  ln.outputs = g.node(*shift).outputs;
  ln.attributes = {onnx_pattern::int_attribute("axis", *axis), onnx_pattern::float_attribute("epsilon", *eps)};
  return onnx_pattern::Match(std::move(ln), std::move(chain));
}

}  // namespace

std::vector<OnnxNode> fuse_layer_norm(const std::vector<OnnxNode>& nodes, const OnnxModel& model) {
  constexpr std::string_view kMean[] = {"ReduceMean"};
  return onnx_pattern::fuse_chains(nodes, model, kMean, match);
}

}  // namespace lms
