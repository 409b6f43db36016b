// The graph verifier (see verifier.h for the list of checks).
#include "lms/ir/verifier.h"

#include <algorithm>

#include <fmt/format.h>

namespace lms {

std::string node_label(const Graph& g, NodeId n) {
  const Node& node = g.node(n);
  return node.outputs.empty() ? fmt::format("node #{}", n.v) : "%" + g.value(node.outputs.front()).name;
}

namespace {

std::string types_text(std::span<const TensorType> ts) {
  std::vector<std::string> parts;
  for (const TensorType& t : ts) parts.push_back(to_string(t));
  return fmt::format("{}", fmt::join(parts, ", "));
}

void check_node(const Graph& g, NodeId n, std::vector<Error>& errs) {
  const Node& node = g.node(n);
  const OpDef& d = op_def(node.op);
  std::string where = node_label(g, n);
  auto bad = [&](std::string what) { errs.push_back(Error{std::move(what), where}); };

  auto normalized = normalize_attrs(d, node.attrs);
  if (!normalized) bad(normalized.error().what);
  else if (*normalized != node.attrs) bad(fmt::format("attributes of '{}' are not in declared order", d.name));

  for (NodeId c : node.control_inputs)
    if (c.v >= g.num_nodes()) bad(fmt::format("control input #{} does not exist", c.v));
    else if (c == n) bad("node is its own control input");
  for (ValueId v : node.inputs)
    if (v.v >= g.num_values()) {
      bad(fmt::format("input value #{} does not exist", v.v));
      return;
    }

  if (node.outputs.size() != d.outputs.size())
    bad(fmt::format("'{}' has {} outputs, the node has {}", d.name, d.outputs.size(), node.outputs.size()));

  std::vector<TensorType> in_types, out_types;
  for (ValueId v : node.inputs) in_types.push_back(g.value(v).type);
  for (ValueId v : node.outputs) out_types.push_back(g.value(v).type);
  if (normalized) {
    auto inferred = infer_types(node.op, in_types, *normalized, out_types);
    if (!inferred) bad(inferred.error().what);
    else if (*inferred != out_types)
      bad(fmt::format("'{}' of ({}) gives {}, the node says {}", d.name, types_text(in_types),
                      types_text(*inferred), types_text(out_types)));
  }

  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const Value& v = g.value(node.inputs[i]);
    if (v.placement != d.input_placement)
      bad(fmt::format("input %{} is on the {}, '{}' reads from the {} (only copy ops cross device/host)", v.name,
                      placement_name(v.placement), d.name, placement_name(d.input_placement)));
  }
  for (ValueId out : node.outputs) {
    const Value& v = g.value(out);
    if (v.placement != d.output_placement)
      bad(fmt::format("output %{} is placed on the {}, '{}' writes to the {}", v.name, placement_name(v.placement),
                      d.name, placement_name(d.output_placement)));
  }
}

// Kahn's algorithm over data + control edges; returns the nodes left on cycles (empty when acyclic).
std::vector<NodeId> nodes_on_cycles(const Graph& g) {
  size_t n = g.num_nodes();
  std::vector<int> pending(n, 0);
  std::vector<std::vector<NodeId>> succ(n);
  for (NodeId id : g.node_ids()) {
    const Node& node = g.node(id);
    for (ValueId v : node.inputs) {
      succ[g.value(v).producer.v].push_back(id);
      ++pending[id.v];
    }
    for (NodeId c : node.control_inputs)
      if (c.v < n) {
        succ[c.v].push_back(id);
        ++pending[id.v];
      }
  }
  std::vector<NodeId> ready;
  for (NodeId id : g.node_ids())
    if (pending[id.v] == 0) ready.push_back(id);
  size_t done = 0;
  while (!ready.empty()) {
    NodeId id = ready.back();
    ready.pop_back();
    ++done;
    for (NodeId s : succ[id.v])
      if (--pending[s.v] == 0) ready.push_back(s);
  }
  std::vector<NodeId> left;
  if (done == n) return left;
  for (NodeId id : g.node_ids())
    if (pending[id.v] > 0) left.push_back(id);
  return left;
}

// One cycle among `left` (nodes with unsatisfied dependencies), walking predecessors until a node repeats.
std::vector<NodeId> one_cycle(const Graph& g, const std::vector<NodeId>& left) {
  std::vector<char> in_left(g.num_nodes(), 0);
  for (NodeId id : left) in_left[id.v] = 1;
  auto a_pred = [&](NodeId id) {
    const Node& node = g.node(id);
    for (ValueId v : node.inputs)
      if (in_left[g.value(v).producer.v]) return g.value(v).producer;
    for (NodeId c : node.control_inputs)
      if (c.v < g.num_nodes() && in_left[c.v]) return c;
    return NodeId{};
  };
  std::vector<int> seen_at(g.num_nodes(), -1);
  std::vector<NodeId> path;
  NodeId cur = left.front();
  while (cur.valid() && seen_at[cur.v] < 0) {
    seen_at[cur.v] = static_cast<int>(path.size());
    path.push_back(cur);
    cur = a_pred(cur);
  }
  if (!cur.valid()) return {};
  std::vector<NodeId> cycle(path.begin() + seen_at[cur.v], path.end());
  std::reverse(cycle.begin(), cycle.end());  // predecessor order -> execution order
  // Start at the smallest node id so the message does not depend on where the walk began.
  std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
  return cycle;
}

}  // namespace

std::vector<Error> verify_graph(const Graph& g) {
  std::vector<Error> errs;
  for (NodeId n : g.node_ids()) check_node(g, n, errs);
  for (ValueId v : g.outputs())
    if (v.v >= g.num_values()) errs.push_back(Error{fmt::format("graph output #{} does not exist", v.v), "return"});

  std::vector<NodeId> left = nodes_on_cycles(g);
  if (!left.empty()) {
    std::vector<NodeId> cycle = one_cycle(g, left);
    std::vector<std::string> names;
    for (NodeId id : cycle) names.push_back(node_label(g, id));
    if (!names.empty()) names.push_back(names.front());
    errs.push_back(Error{fmt::format("the graph has a cycle: {}", fmt::join(names, " -> ")),
                         names.empty() ? node_label(g, left.front()) : names.front()});
  }

  if (g.scheduled()) {
    for (NodeId id : g.node_ids()) {
      const Node& node = g.node(id);
      for (ValueId v : node.inputs)
        if (v.v < g.num_values() && g.value(v).producer >= id)
          errs.push_back(Error{fmt::format("reads %{} before it is defined (the graph is scheduled)",
                                           g.value(v).name),
                               node_label(g, id)});
      for (NodeId c : node.control_inputs)
        if (c >= id && c.v < g.num_nodes())
          errs.push_back(Error{fmt::format("runs after {}, which comes later (the graph is scheduled)",
                                           node_label(g, c)),
                               node_label(g, id)});
    }
  }
  return errs;
}

Result<void> verify(const Graph& g) {
  std::vector<Error> errs = verify_graph(g);
  if (errs.empty()) return {};
  Error first = errs.front();
  if (errs.size() > 1)
    first.what += fmt::format(" (and {} more problem{})", errs.size() - 1, errs.size() == 2 ? "" : "s");
  return std::unexpected(first);
}

}  // namespace lms
