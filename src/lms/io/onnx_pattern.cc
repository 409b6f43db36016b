// The node index and chain replacement the ONNX fusions share (see onnx_pattern.h).
#include "lms/io/onnx_pattern.h"

#include <algorithm>
#include <set>

namespace lms::onnx_pattern {

NodeIndex::NodeIndex(const std::vector<OnnxNode>& nodes, const OnnxModel& model) : nodes_(nodes) {
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const std::string& out : nodes[i].outputs) producer_[out] = i;
    for (const std::string& in : nodes[i].inputs) readers_[in].push_back(i);
  }
  for (const OnnxValueInfo& out : model.outputs) readers_[out.name].push_back(nodes.size());
  for (const auto& [name, t] : model.initializers) initializers_.emplace(name, &t);
}

const HostTensor* NodeIndex::constant(const std::string& name) const {
  if (auto it = initializers_.find(name); it != initializers_.end()) return it->second;
  auto p = producer_.find(name);
  if (p == producer_.end() || nodes_[p->second].op_type != "Constant") return nullptr;
  const OnnxAttribute* v = nodes_[p->second].attribute("value");
  return v && v->kind == OnnxAttribute::Kind::t ? &v->t : nullptr;
}

std::optional<double> NodeIndex::scalar(const std::string& name) const {
  if (const HostTensor* t = constant(name))
    return t->type.num_elements() == 1 ? std::optional(t->get(0)) : std::nullopt;
  auto p = producer_.find(name);
  if (p == producer_.end() || nodes_[p->second].op_type != "Constant") return std::nullopt;
  const OnnxAttribute* v = nodes_[p->second].attribute("value_float");
  return v && v->kind == OnnxAttribute::Kind::f ? std::optional(v->f) : std::nullopt;
}

std::optional<std::vector<int64_t>> NodeIndex::ints(const std::string& name) const {
  const HostTensor* t = constant(name);
  if (t == nullptr || is_float(t->type.dtype) || t->type.rank() > 1) return std::nullopt;
  std::vector<int64_t> out;
  for (int64_t i = 0; i < t->type.num_elements(); ++i) out.push_back(static_cast<int64_t>(t->get(i)));
  return out;
}

std::optional<size_t> NodeIndex::only_producer(const std::string& name) const {
  auto r = readers_.find(name);
  if (r == readers_.end() || r->second.size() != 1) return std::nullopt;
  return producer(name);
}

std::optional<size_t> NodeIndex::producer(const std::string& name) const {
  auto p = producer_.find(name);
  return p == producer_.end() ? std::nullopt : std::optional(p->second);
}

std::optional<size_t> NodeIndex::only_reader(const std::string& name) const {
  std::vector<size_t> r = readers_if_internal(name);
  return r.size() == 1 ? std::optional(r[0]) : std::nullopt;
}

std::vector<size_t> NodeIndex::readers_if_internal(const std::string& name) const {
  auto r = readers_.find(name);
  if (r == readers_.end() || std::ranges::find(r->second, nodes_.size()) != r->second.end()) return {};
  return r->second;
}

bool NodeIndex::is(size_t i, std::string_view op_type) const {
  const OnnxNode& n = nodes_[i];
  const bool binary = op_type == "Add" || op_type == "Sub" || op_type == "Mul" || op_type == "Div" || op_type == "Pow";
  return n.op_type == op_type && n.outputs.size() == 1 && (!binary || n.inputs.size() == 2);
}

OnnxAttribute int_attribute(std::string name, int64_t v) {
  OnnxAttribute a;
  a.name = std::move(name);
  a.kind = OnnxAttribute::Kind::i;
  a.i = v;
  return a;
}

OnnxAttribute float_attribute(std::string name, double v) {
  OnnxAttribute a;
  a.name = std::move(name);
  a.kind = OnnxAttribute::Kind::f;
  a.f = v;
  return a;
}

OnnxAttribute string_attribute(std::string name, std::string v) {
  OnnxAttribute a;
  a.name = std::move(name);
  a.kind = OnnxAttribute::Kind::s;
  a.s = std::move(v);
  return a;
}

std::vector<OnnxNode> fuse_chains(const std::vector<OnnxNode>& nodes, const OnnxModel& model,
                                  std::span<const std::string_view> start, MatchFn match) {
  const NodeIndex g(nodes, model);
  std::map<size_t, OnnxNode> replaced;  // the last node of each chain -> its replacement
  std::set<size_t> removed;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (std::ranges::find(start, nodes[i].op_type) == start.end()) continue;
    std::optional<Match> m = match(g, i);
    if (!m) continue;
    auto& [fused, chain] = *m;
    if (std::ranges::any_of(chain, [&](size_t k) { return removed.contains(k); })) continue;
    removed.insert(chain.begin(), chain.end());
    replaced.emplace(*std::ranges::max_element(chain), std::move(fused));
  }
  std::vector<OnnxNode> out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (auto r = replaced.find(i); r != replaced.end()) {
      out.push_back(std::move(r->second));
    } else if (!removed.contains(i)) {
      out.push_back(nodes[i]);
    }
  }
  return out;
}

}  // namespace lms::onnx_pattern
