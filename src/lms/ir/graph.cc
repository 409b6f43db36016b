// Graph storage: node and value creation, consumer bookkeeping, erasure and reordering.
#include "lms/ir/graph.h"

#include <algorithm>
#include <array>
#include <cassert>

#include <fmt/format.h>

namespace lms {

namespace {
constexpr std::array<std::string_view, kNumCategories> kCategoryNames = {"fwd", "bwd", "upd", "swap",
                                                                         "recompute"};

template <class Id>
void insert_sorted_unique(std::vector<Id>& v, Id x) {
  auto it = std::lower_bound(v.begin(), v.end(), x);
  if (it == v.end() || *it != x) v.insert(it, x);
}
}  // namespace

std::string_view category_name(Category c) { return kCategoryNames[static_cast<int>(c)]; }

std::optional<Category> parse_category(std::string_view s) {
  for (int i = 0; i < kNumCategories; ++i)
    if (kCategoryNames[i] == s) return static_cast<Category>(i);
  return std::nullopt;
}

std::string_view placement_name(Placement p) { return p == Placement::device ? "device" : "host"; }

std::vector<NodeId> Graph::node_ids() const {
  std::vector<NodeId> ids(nodes_.size());
  for (uint32_t i = 0; i < ids.size(); ++i) ids[i] = NodeId{i};
  return ids;
}

std::string Graph::unique_name(std::string_view hint) {
  std::string base(hint);
  if (!by_name_.contains(base)) return base;
  uint32_t& k = next_suffix_[base];
  std::string candidate;
  do candidate = fmt::format("{}.{}", base, ++k);
  while (by_name_.contains(candidate));
  return candidate;
}

NodeId Graph::add_node(Op op, Attributes attrs, std::span<const TensorType> out_types,
                       std::span<const std::string> out_names, Category cat) {
  NodeId id{static_cast<uint32_t>(nodes_.size())};
  Node n;
  n.op = op;
  n.attrs = std::move(attrs);
  n.category = cat;
  const OpDef& d = op_def(op);
  for (size_t i = 0; i < out_types.size(); ++i) {
    ValueId vid{static_cast<uint32_t>(values_.size())};
    Value v;
    std::string_view hint = i < out_names.size() && !out_names[i].empty() ? std::string_view(out_names[i])
                                                                           : d.name;
    v.name = unique_name(hint);
    v.type = out_types[i];
    v.producer = id;
    v.output_index = static_cast<int>(i);
    v.placement = d.output_placement;
    by_name_.emplace(v.name, vid);
    values_.push_back(std::move(v));
    n.outputs.push_back(vid);
  }
  nodes_.push_back(std::move(n));
  return id;
}

void Graph::set_inputs(NodeId n, std::vector<ValueId> inputs) {
  Node& node = nodes_[n.v];
  for (ValueId old : node.inputs) std::erase(values_[old.v].consumers, n);
  node.inputs = std::move(inputs);
  for (ValueId in : node.inputs) insert_sorted_unique(values_[in.v].consumers, n);
}

void Graph::replace_input(NodeId n, size_t index, ValueId v) {
  Node& node = nodes_[n.v];
  ValueId old = node.inputs[index];
  node.inputs[index] = v;
  if (std::find(node.inputs.begin(), node.inputs.end(), old) == node.inputs.end())
    std::erase(values_[old.v].consumers, n);
  insert_sorted_unique(values_[v.v].consumers, n);
}

void Graph::add_control_input(NodeId n, NodeId before) { insert_sorted_unique(nodes_[n.v].control_inputs, before); }

std::optional<ValueId> Graph::find_value(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

ValueId Graph::storage_root(ValueId v) const {
  for (;;) {
    const Value& val = values_[v.v];
    const Node& p = nodes_[val.producer.v];
    const OpDef& d = op_def(p.op);
    if (!d.traits.in_place || val.output_index >= static_cast<int>(d.aliases.size())) return v;
    int in = d.aliases[val.output_index];
    if (in < 0 || in >= static_cast<int>(p.inputs.size())) return v;
    v = p.inputs[in];
  }
}

bool Graph::is_persistent(ValueId v) const {
  ValueId root = storage_root(v);
  return op_def(nodes_[values_[root.v].producer.v].op).traits.persistent;
}

namespace {
// Builds a graph holding `order`'s nodes in that order, with the same names, attributes and edges.
Graph rebuild(const Graph& g, std::span<const NodeId> order) {
  Graph out(g.name());
  out.set_scheduled(g.scheduled());
  std::vector<ValueId> vmap(g.num_values());
  std::vector<NodeId> nmap(g.num_nodes());
  for (NodeId old : order) {
    const Node& n = g.node(old);
    std::vector<TensorType> types;
    std::vector<std::string> names;
    for (ValueId v : n.outputs) {
      types.push_back(g.value(v).type);
      names.push_back(g.value(v).name);
    }
    NodeId nn = out.add_node(n.op, n.attrs, types, names, n.category);
    nmap[old.v] = nn;
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      vmap[n.outputs[i].v] = out.node(nn).outputs[i];
      out.set_placement(out.node(nn).outputs[i], g.value(n.outputs[i]).placement);
    }
  }
  for (NodeId old : order) {
    const Node& n = g.node(old);
    std::vector<ValueId> ins;
    for (ValueId v : n.inputs) {
      assert(vmap[v.v].valid() && "erased node's output still read");
      ins.push_back(vmap[v.v]);
    }
    out.set_inputs(nmap[old.v], std::move(ins));
    for (NodeId c : n.control_inputs)
      if (nmap[c.v].valid()) out.add_control_input(nmap[old.v], nmap[c.v]);
  }
  std::vector<ValueId> outs;
  for (ValueId v : g.outputs())
    if (vmap[v.v].valid()) outs.push_back(vmap[v.v]);
  out.set_outputs(std::move(outs));
  return out;
}
}  // namespace

void Graph::erase_nodes(const std::vector<bool>& dead) {
  std::vector<NodeId> keep;
  for (uint32_t i = 0; i < nodes_.size(); ++i)
    if (!dead[i]) keep.push_back(NodeId{i});
  *this = rebuild(*this, keep);
}

void Graph::reorder(std::span<const NodeId> order) {
  assert(order.size() == nodes_.size());
  *this = rebuild(*this, order);
}

}  // namespace lms
