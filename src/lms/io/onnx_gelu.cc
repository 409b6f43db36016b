// Fusing GELU chains (see onnx_gelu.h). One walk over the Erf and Tanh nodes; each match is checked from the
// core node outwards: its input (the head) is x scaled by 1/sqrt(2), or sqrt(2/pi) * (x + 0.044715 x^3); its
// only reader adds 1, and the result times x times 0.5 (as (x * a) * 0.5 or (x * 0.5) * a) ends the chain.
#include "lms/io/onnx_gelu.h"

#include <cmath>
#include <numbers>
#include <optional>

#include "lms/io/onnx_pattern.h"

namespace lms {

namespace {

using onnx_pattern::near;
using onnx_pattern::NodeIndex;

constexpr double kGeluTanhCubic = 0.044715;

struct Head {
  std::string x;              // GELU's input
  std::vector<size_t> nodes;  // the nodes from x up to the core node's input
};

// x / sqrt(2) or x * (1/sqrt(2)) writing `scaled`.
std::optional<Head> erf_head(const NodeIndex& g, const std::string& scaled) {
  const std::optional<size_t> d = g.only_producer(scaled);
  if (!d) return std::nullopt;
  const OnnxNode& n = g.node(*d);
  std::optional<std::string> x;
  if (g.is(*d, "Div") && near(g.scalar_input(n, 1), std::numbers::sqrt2)) x = n.inputs[0];
  if (g.is(*d, "Mul")) x = g.other_than_scalar(n, [](double c) { return near(c, 1 / std::numbers::sqrt2); });
  if (!x) return std::nullopt;
  return Head{*x, {*d}};
}

// Whether `cube` is x^3 as Pow(x, 3), Mul(x, Mul(x, x)) or Mul(Mul(x, x), x); adds its nodes to `nodes`.
bool is_cube(const NodeIndex& g, const std::string& cube, const std::string& x, std::vector<size_t>& nodes) {
  const std::optional<size_t> c = g.only_producer(cube);
  if (!c) return false;
  const OnnxNode& n = g.node(*c);
  if (g.is(*c, "Pow") && n.inputs[0] == x && g.scalar_input(n, 1) == 3.0) {
    nodes.push_back(*c);
    return true;
  }
  if (!g.is(*c, "Mul")) return false;
  for (size_t side : {size_t{0}, size_t{1}}) {
    if (n.inputs[side] != x) continue;
    const std::optional<size_t> sq = g.only_producer(n.inputs[1 - side]);
    if (sq && g.is(*sq, "Mul") && g.node(*sq).inputs[0] == x && g.node(*sq).inputs[1] == x) {
      nodes.insert(nodes.end(), {*sq, *c});
      return true;
    }
  }
  return false;
}

// sqrt(2/pi) * (x + 0.044715 * x^3) writing `inner`.
std::optional<Head> tanh_head(const NodeIndex& g, const std::string& inner) {
  const std::optional<size_t> scale = g.only_producer(inner);
  if (!scale || !g.is(*scale, "Mul")) return std::nullopt;
  const double beta = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;
  const std::optional<std::string> sum = g.other_than_scalar(g.node(*scale), [&](double c) { return near(c, beta); });
  const std::optional<size_t> add = sum ? g.only_producer(*sum) : std::nullopt;
  if (!add || !g.is(*add, "Add")) return std::nullopt;
  for (size_t side : {size_t{0}, size_t{1}}) {
    const std::string& x = g.node(*add).inputs[side];
    const std::optional<size_t> cubic = g.only_producer(g.node(*add).inputs[1 - side]);
    if (!cubic || !g.is(*cubic, "Mul")) continue;
    const std::optional<std::string> cube =
        g.other_than_scalar(g.node(*cubic), [](double c) { return near(c, kGeluTanhCubic); });
    Head h{x, {}};
    if (cube && is_cube(g, *cube, x, h.nodes)) {
      h.nodes.insert(h.nodes.end(), {*cubic, *add, *scale});
      return h;
    }
  }
  return std::nullopt;
}

// The Gelu replacing the chain through core node `core` (Erf or Tanh), and the chain's nodes, or nullopt.
std::optional<onnx_pattern::Match> match(const NodeIndex& g, size_t core) {
  const OnnxNode& e = g.node(core);
  if (e.inputs.size() != 1 || e.outputs.size() != 1) return std::nullopt;
  const bool erf = e.op_type == "Erf";
  const std::optional<Head> head = erf ? erf_head(g, e.inputs[0]) : tanh_head(g, e.inputs[0]);
  if (!head) return std::nullopt;
  const std::string& x = head->x;
  const std::optional<size_t> plus = g.only_reader(e.outputs[0]);
  if (!plus || !g.is(*plus, "Add")) return std::nullopt;
  const OnnxNode& a = g.node(*plus);
  if (g.other_than_scalar(a, [](double c) { return c == 1.0; }) != e.outputs[0]) return std::nullopt;
  const std::optional<size_t> times = g.only_reader(a.outputs[0]);
  if (!times || !g.is(*times, "Mul")) return std::nullopt;
  const OnnxNode& p = g.node(*times);
  const std::string& other = p.inputs[0] == a.outputs[0] ? p.inputs[1] : p.inputs[0];
  std::vector<size_t> chain = head->nodes;
  chain.insert(chain.end(), {core, *plus, *times});
  size_t last = *times;
  const auto is_half = [](double c) { return c == 0.5; };
  if (other == x) {  // (x * a) * 0.5
    const std::optional<size_t> half = g.only_reader(p.outputs[0]);
    if (!half || !g.is(*half, "Mul") || g.other_than_scalar(g.node(*half), is_half) != p.outputs[0])
      return std::nullopt;
    chain.push_back(last = *half);
  } else {  // (x * 0.5) * a
    const std::optional<size_t> half = g.only_producer(other);
    if (!half || !g.is(*half, "Mul") || g.other_than_scalar(g.node(*half), is_half) != x) return std::nullopt;
    chain.push_back(*half);
  }
  OnnxNode gelu;
  gelu.op_type = "Gelu";
  gelu.name = g.node(last).name;
  gelu.inputs = {x};
  gelu.outputs = g.node(last).outputs;
  gelu.attributes = {onnx_pattern::string_attribute("approximate", erf ? "none" : "tanh")};
  return onnx_pattern::Match(std::move(gelu), std::move(chain));
}

}  // namespace

std::vector<OnnxNode> fuse_gelu(const std::vector<OnnxNode>& nodes, const OnnxModel& model) {
  constexpr std::string_view kCores[] = {"Erf", "Tanh"};
  return onnx_pattern::fuse_chains(nodes, model, kCores, match);
}

}  // namespace lms
