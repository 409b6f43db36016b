// Fusing the erf form of GELU (see onnx_gelu.h). One walk over the Erf nodes; each match is checked from the
// Erf outwards: its input is x scaled by 1/sqrt(2), its only reader adds 1, and the result times x times 0.5
// (as (x * a) * 0.5 or (x * 0.5) * a) ends the chain.
#include "lms/io/onnx_gelu.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

namespace lms {

namespace {

class Chains {
 public:
  explicit Chains(const OnnxModel& m) : m_(m) {
    for (size_t i = 0; i < m.nodes.size(); ++i) {
      for (const std::string& out : m.nodes[i].outputs) producer_[out] = i;
      for (const std::string& in : m.nodes[i].inputs) readers_[in].push_back(i);
    }
    for (const OnnxValueInfo& out : m.outputs) readers_[out.name].push_back(m.nodes.size());  // a graph output
    for (const auto& [name, t] : m.initializers)
      if (t.type.num_elements() == 1) scalars_[name] = t.get(0);
  }

  // The Gelu replacing the chain through Erf node `erf`, and the chain's nodes, or nullopt.
  std::optional<std::pair<OnnxNode, std::vector<size_t>>> match(size_t erf) const {
    const OnnxNode& e = m_.nodes[erf];
    if (e.inputs.size() != 1 || e.outputs.size() != 1) return std::nullopt;
    const std::optional<size_t> scaled = only_producer(e.inputs[0]);
    if (!scaled) return std::nullopt;
    const OnnxNode& d = m_.nodes[*scaled];
    const double root2 = std::sqrt(2.0);
    std::optional<std::string> x;
    if (d.op_type == "Div" && near(scalar_input(d, 1), root2)) x = d.inputs[0];
    if (d.op_type == "Mul") x = other_than_scalar(d, [&](double c) { return std::abs(c * root2 - 1) < 1e-6; });
    if (!x) return std::nullopt;
    const std::optional<size_t> plus = only_reader(e.outputs[0]);
    if (!plus || m_.nodes[*plus].op_type != "Add") return std::nullopt;
    const OnnxNode& a = m_.nodes[*plus];
    if (other_than_scalar(a, [](double c) { return c == 1.0; }) != e.outputs[0]) return std::nullopt;
    const std::optional<size_t> times = only_reader(a.outputs[0]);
    if (!times || m_.nodes[*times].op_type != "Mul") return std::nullopt;
    const OnnxNode& p = m_.nodes[*times];
    if (p.inputs.size() != 2) return std::nullopt;
    const std::string& other = p.inputs[0] == a.outputs[0] ? p.inputs[1] : p.inputs[0];
    std::vector<size_t> chain = {*scaled, erf, *plus, *times};
    size_t last = *times;
    if (other == *x) {  // (x * a) * 0.5
      const std::optional<size_t> half = only_reader(p.outputs[0]);
      if (!half || m_.nodes[*half].op_type != "Mul" ||
          other_than_scalar(m_.nodes[*half], [](double c) { return c == 0.5; }) != p.outputs[0])
        return std::nullopt;
      chain.push_back(last = *half);
    } else {  // (x * 0.5) * a
      const std::optional<size_t> half = only_producer(other);
      if (!half || m_.nodes[*half].op_type != "Mul" ||
          other_than_scalar(m_.nodes[*half], [](double c) { return c == 0.5; }) != *x)
        return std::nullopt;
      chain.push_back(*half);
    }
    OnnxNode gelu;
    gelu.op_type = "Gelu";
    gelu.name = m_.nodes[last].name;
    gelu.inputs = {*x};
    gelu.outputs = m_.nodes[last].outputs;
    return std::pair(std::move(gelu), std::move(chain));
  }

 private:
  static bool near(std::optional<double> v, double want) { return v && std::abs(*v - want) <= 1e-6 * want; }

  std::optional<double> scalar(const std::string& name) const {
    if (auto it = scalars_.find(name); it != scalars_.end()) return it->second;
    auto p = producer_.find(name);
    if (p == producer_.end() || m_.nodes[p->second].op_type != "Constant") return std::nullopt;
    const OnnxNode& c = m_.nodes[p->second];
    if (const OnnxAttribute* v = c.attribute("value"); v && v->kind == OnnxAttribute::Kind::t)
      return v->t.type.num_elements() == 1 ? std::optional(v->t.get(0)) : std::nullopt;
    if (const OnnxAttribute* v = c.attribute("value_float"); v && v->kind == OnnxAttribute::Kind::f) return v->f;
    return std::nullopt;
  }
  std::optional<double> scalar_input(const OnnxNode& n, size_t i) const {
    return i < n.inputs.size() ? scalar(n.inputs[i]) : std::nullopt;
  }
  // For a binary node one of whose inputs is a scalar constant passing `ok`: the other input.
  template <class Ok>
  std::optional<std::string> other_than_scalar(const OnnxNode& n, Ok ok) const {
    if (n.inputs.size() != 2) return std::nullopt;
    for (size_t side : {size_t{1}, size_t{0}})
      if (auto c = scalar_input(n, side); c && ok(*c)) return n.inputs[1 - side];
    return std::nullopt;
  }
  // The node producing `name` when `name` has no reader but the chain's next node.
  std::optional<size_t> only_producer(const std::string& name) const {
    auto p = producer_.find(name);
    auto r = readers_.find(name);
    if (p == producer_.end() || r == readers_.end() || r->second.size() != 1) return std::nullopt;
    return p->second;
  }
  // The one node reading `name`, when there is exactly one and `name` is not a graph output.
  std::optional<size_t> only_reader(const std::string& name) const {
    auto r = readers_.find(name);
    if (r == readers_.end() || r->second.size() != 1 || r->second[0] == m_.nodes.size()) return std::nullopt;
    return r->second[0];
  }

  const OnnxModel& m_;
  std::map<std::string, size_t> producer_;
  std::map<std::string, std::vector<size_t>> readers_;
  std::map<std::string, double> scalars_;
};

}  // namespace

std::vector<OnnxNode> fuse_erf_gelu(const OnnxModel& model) {
  const Chains chains(model);
  std::map<size_t, OnnxNode> replaced;  // the last node of each chain -> its Gelu
  std::set<size_t> removed;
  for (size_t i = 0; i < model.nodes.size(); ++i) {
    if (model.nodes[i].op_type != "Erf") continue;
    auto m = chains.match(i);
    if (!m) continue;
    for (size_t k : m->second) removed.insert(k);
    const size_t last = *std::max_element(m->second.begin(), m->second.end());
    replaced.emplace(last, std::move(m->first));
  }
  std::vector<OnnxNode> out;
  for (size_t i = 0; i < model.nodes.size(); ++i) {
    if (auto r = replaced.find(i); r != replaced.end()) {
      out.push_back(std::move(r->second));
    } else if (!removed.contains(i)) {
      out.push_back(model.nodes[i]);
    }
  }
  return out;
}

}  // namespace lms
