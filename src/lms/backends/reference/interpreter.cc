// The reference interpreter (interpreter.h): verifies the graph, checks the feeds, orders the nodes, and runs
// each on the reference kernels with fresh HostTensors for its outputs.
#include "lms/backends/reference/interpreter.h"

#include <cstring>
#include <functional>
#include <queue>

#include <fmt/format.h>

#include "lms/backends/reference/kernels.h"
#include "lms/ir/verifier.h"

namespace lms {

namespace {

bool is_fed_source(Op op) { return op == Op::input || op == Op::param || op == Op::state; }

// Storage order for a scheduled graph (the verifier has checked that it defines values before use); otherwise
// Kahn's algorithm over data and control edges, taking the smallest ready node id first.
Result<std::vector<NodeId>> run_order(const Graph& g) {
  const size_t n = g.num_nodes();
  if (g.scheduled()) return g.node_ids();
  std::vector<int> waiting(n, 0);
  std::vector<std::vector<NodeId>> successors(n);
  for (NodeId id : g.node_ids()) {
    std::vector<NodeId> preds(g.node(id).control_inputs);
    for (ValueId v : g.node(id).inputs) preds.push_back(g.value(v).producer);
    for (NodeId p : preds) {
      successors[p.v].push_back(id);
      ++waiting[id.v];
    }
  }
  std::priority_queue<uint32_t, std::vector<uint32_t>, std::greater<>> ready;
  for (uint32_t i = 0; i < n; ++i)
    if (waiting[i] == 0) ready.push(i);
  std::vector<NodeId> order;
  while (!ready.empty()) {
    NodeId id{ready.top()};
    ready.pop();
    order.push_back(id);
    for (NodeId s : successors[id.v])
      if (--waiting[s.v] == 0) ready.push(s.v);
  }
  if (order.size() != n) return fail("the graph has a cycle ({} of {} nodes can run)", order.size(), n);
  return order;
}

// Every feed names a fed source value and has its type.
Result<void> check_feeds(const Graph& g, const std::map<std::string, HostTensor>& feeds) {
  for (const auto& [name, tensor] : feeds) {
    std::optional<ValueId> v = g.find_value(name);
    if (!v) return fail("feed '{}' names no value of graph {}", name, g.name());
    const Value& value = g.value(*v);
    Op op = g.node(value.producer).op;
    if (!is_fed_source(op))
      return fail("feed '{}' names a value computed by {}; only input, param and state values are fed", name,
                  op_name(op));
    if (tensor.type != value.type)
      return fail("feed '{}' is {} but the value is {}", name, to_string(tensor.type), to_string(value.type));
    if (tensor.data.size() != static_cast<size_t>(tensor.type.bytes()))
      return fail("feed '{}' holds {} bytes, its type {} needs {}", name, tensor.data.size(), to_string(tensor.type),
                  tensor.type.bytes());
  }
  return {};
}

// The value of an input, param or state node.
Result<HostTensor> source_value(const Graph& g, NodeId id, const std::map<std::string, HostTensor>& feeds) {
  const Node& node = g.node(id);
  const Value& out = g.value(node.outputs.front());
  if (auto it = feeds.find(out.name); it != feeds.end()) return it->second;
  if (node.op != Op::state)
    return fail("missing feed for {} %{} ({})", op_name(node.op), out.name, to_string(out.type));
  std::string init = node.attrs.get_string("init", "zeros");
  double fill = 0;
  if (init == "ones") fill = 1;
  else if (init != "zeros") return fail("state init '{}' is not zeros or ones", init);
  HostTensor t(out.type);
  for (int64_t i = 0; i < out.type.num_elements(); ++i) t.set(i, fill);
  return t;
}

// Runs one computing node: fresh output tensors, aliased inputs copied into their outputs first.
Result<void> run_node(const Graph& g, NodeId id, std::vector<HostTensor>& values) {
  const Node& node = g.node(id);
  const OpDef& def = op_def(node.op);
  for (ValueId v : node.outputs) values[v.v] = HostTensor(g.value(v).type);
  std::vector<TensorRef> ins, outs;
  for (ValueId v : node.inputs) ins.push_back({&values[v.v].type, values[v.v].data.data()});
  for (ValueId v : node.outputs) outs.push_back({&values[v.v].type, values[v.v].data.data()});
  if (def.traits.in_place)
    for (size_t o = 0; o < def.aliases.size() && o < outs.size(); ++o) {
      int a = def.aliases[o];
      if (a < 0) continue;
      const HostTensor& src = values[node.inputs[a].v];
      HostTensor& dst = values[node.outputs[o].v];
      if (src.data.size() != dst.data.size())
        return fail("in-place output {} ({}) does not match its input {} ({})", o, to_string(dst.type), a,
                    to_string(src.type));
      std::memcpy(dst.data.data(), src.data.data(), src.data.size());
      ins[a].data = dst.data.data();
    }
  KernelCall call{node.op, &node.attrs, ins, outs, nullptr, 0};
  return run_reference_kernel(call);
}

}  // namespace

Result<std::vector<HostTensor>> interpret(const Graph& g, const std::map<std::string, HostTensor>& feeds) {
  LMS_TRY_VOID(verify(g));
  LMS_TRY_VOID(check_feeds(g, feeds));
  std::vector<NodeId> order = LMS_TRY(run_order(g));
  std::vector<HostTensor> values(g.num_values());
  for (NodeId id : order) {
    const Node& node = g.node(id);
    if (is_fed_source(node.op)) {
      auto v = source_value(g, id, feeds);
      if (!v) return wrap(node_label(g, id), v.error());
      values[node.outputs.front().v] = std::move(*v);
      continue;
    }
    if (auto r = run_node(g, id, values); !r) return wrap(node_label(g, id), r.error());
  }
  return values;
}

}  // namespace lms
