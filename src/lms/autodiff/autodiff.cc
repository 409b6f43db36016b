// Reverse-mode differentiation (see autodiff.h and docs/autodiff.md). Three sweeps over one deterministic
// topological order: forward, mark the values that depend on a differentiated value; backward, mark the nodes
// to differentiate and count the gradient contributions each value will receive (so names can be chosen
// before the nodes exist); backward again, run the rule of every marked node and add each contribution to its
// value's running sum as it arrives. A value read only by slices that tile one of its axes (a fused qkv
// projection split into q, k and v; a loss computed in chunks) gets the concat of their gradients instead: no
// zero-padded slice_grad per reader, no sum of them.
#include "lms/autodiff/autodiff.h"

#include <algorithm>
#include <functional>
#include <queue>

#include <fmt/format.h>

#include "lms/autodiff/grad_context.h"
#include "lms/ir/builder.h"
#include "lms/ir/verifier.h"

namespace lms {

namespace {

bool is_float_value(const Graph& g, ValueId v) { return is_float(g.value(v).type.dtype); }

// What the first two sweeps decide about the forward graph (indexed by the forward's ids).
struct Plan {
  std::vector<char> depends;        // value depends on a wrt value and is floating point
  std::vector<char> differentiate;  // node gets its gradient rule run
  std::vector<int> contributions;   // per value: how many (consumer, input) pairs will send it a gradient
  std::vector<int> tiled_axis;      // per value: the axis its slices tile (its gradient is their concat), or -1
};

// The axis along which the differentiated readers of `v` are slices whose ranges tile it exactly (at least
// two of them, no gap, no overlap), or -1.
int tiled_axis(const Graph& g, const Plan& p, ValueId v) {
  if (p.contributions[v.v] < 2) return -1;
  int axis = -1;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (NodeId c : g.value(v).consumers) {
    if (!p.differentiate[c.v]) continue;
    const Node& node = g.node(c);
    if (node.op != Op::slice) return -1;
    int a = static_cast<int>(node.attrs.get_int("axis", 0));
    if (a < 0) a += g.value(v).type.rank();
    if (axis >= 0 && a != axis) return -1;
    axis = a;
    ranges.emplace_back(node.attrs.get_int("start", 0), node.attrs.get_int("end", 0));
  }
  std::sort(ranges.begin(), ranges.end());
  int64_t next = 0;
  for (auto [start, end] : ranges) {
    if (start != next) return -1;
    next = end;
  }
  return next == g.value(v).type.shape[static_cast<size_t>(axis)] ? axis : -1;
}

Result<Plan> plan_sweeps(const Graph& g, ValueId loss, std::span<const ValueId> wrt,
                         const std::vector<NodeId>& order) {
  Plan p;
  p.depends.assign(g.num_values(), 0);
  p.differentiate.assign(g.num_nodes(), 0);
  p.contributions.assign(g.num_values(), 0);
  for (ValueId v : wrt) p.depends[v.v] = 1;
  for (NodeId n : order) {
    const Node& node = g.node(n);
    bool any = std::any_of(node.inputs.begin(), node.inputs.end(), [&](ValueId v) { return p.depends[v.v] != 0; });
    if (any)
      for (ValueId out : node.outputs)
        if (is_float_value(g, out)) p.depends[out.v] = 1;
  }
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const Node& node = g.node(*it);
    bool has_grad = std::any_of(node.outputs.begin(), node.outputs.end(),
                                [&](ValueId v) { return v == loss || p.contributions[v.v] > 0; });
    bool wanted = std::any_of(node.inputs.begin(), node.inputs.end(), [&](ValueId v) { return p.depends[v.v] != 0; });
    if (!has_grad || !wanted) continue;
    if (g.def(*it).grad == nullptr)
      return fail_at(node_label(g, *it), "op '{}' has no gradient rule, but the loss's gradient flows through it",
                     op_name(node.op));
    p.differentiate[it->v] = 1;
    for (ValueId v : node.inputs)
      if (p.depends[v.v]) ++p.contributions[v.v];
  }
  p.tiled_axis.assign(g.num_values(), -1);
  for (size_t v = 0; v < g.num_values(); ++v)
    if (p.depends[v]) p.tiled_axis[v] = tiled_axis(g, p, ValueId{static_cast<uint32_t>(v)});
  return p;
}

std::string grad_name(const Graph& g, ValueId v) { return g.value(v).name + ".grad"; }

// The name hint for the contribution of input `index` of node `n` to its value v: "<v>.grad" when it is the
// only one, else "<v>.grad.<k>" with k counting v's contributions from 1 in (consumer id, input index) order
// (they arrive, and are summed, in the reverse order).
std::string part_name(const Graph& g, const Plan& p, NodeId n, size_t index) {
  ValueId v = g.node(n).inputs[index];
  // A multi-output gradient op may compute a gradient nobody needs (batch_norm_grad's dx for an input x).
  if (!p.depends[v.v]) return grad_name(g, v) + ".unused";
  if (p.contributions[v.v] == 1) return grad_name(g, v);
  int rank = 1;
  for (NodeId c : g.value(v).consumers) {
    if (c > n) break;
    if (!p.differentiate[c.v]) continue;
    const std::vector<ValueId>& ins = g.node(c).inputs;
    size_t end = c == n ? index : ins.size();
    rank += static_cast<int>(std::count(ins.begin(), ins.begin() + static_cast<std::ptrdiff_t>(end), v));
  }
  return fmt::format("{}.{}", grad_name(g, v), rank);
}

// A value's gradient as its contributions arrive: each is added to the running sum as soon as its rule has run,
// so at most the sum and the newest contributions are live, however many readers the value has (a backbone's
// output read by five heads, ASPP's: summing at the end kept all five gradients live at once).
struct Accumulator {
  ValueId sum;      // the sum of the contributions so far (invalid: none yet)
  int received = 0; // contributions summed into `sum`
  std::vector<std::pair<int64_t, ValueId>> slabs;  // a tiled value's: (start, gradient of that slice) so far
};

// Adds `part`, the contribution of input `index` of node `n`, to the running sum of `v`'s gradient; the sum
// of the last of its `total` contributions is named "<v>.grad", the partial sums "<v>.grad.acc".
void accumulate(Builder& b, ValueId v, int total, Accumulator& acc, ValueId part) {
  ++acc.received;
  if (!acc.sum.valid()) {
    acc.sum = part;
    return;
  }
  const std::string name = grad_name(b.graph(), v);
  acc.sum = b.op(Op::add, {acc.sum, part}, {}, acc.received == total ? name : name + ".acc");
}

// The slice `n` of a tiled value v hands its output's gradient over as v's slab at its start; the last slab
// makes v's gradient, their concat in range order.
void collect_slab(Builder& b, NodeId n, const Plan& p, const std::vector<ValueId>& grads,
                  std::vector<Accumulator>& sums) {
  const Graph& g = b.graph();
  const ValueId v = g.node(n).inputs[0];
  Accumulator& acc = sums[v.v];
  acc.slabs.emplace_back(g.node(n).attrs.get_int("start", 0), grads[g.node(n).outputs[0].v]);
  if (static_cast<int>(acc.slabs.size()) < p.contributions[v.v]) return;
  std::sort(acc.slabs.begin(), acc.slabs.end());
  std::vector<ValueId> parts;
  for (const auto& slab : acc.slabs) parts.push_back(slab.second);
  const std::string name = grad_name(g, v);
  acc.sum = b.op(Op::concat, parts, attrs({{"axis", int64_t{p.tiled_axis[v.v]}}}), name);
  acc.slabs.clear();
}

// Runs node `n`'s gradient rule and records the contributions it hands back.
Result<void> run_rule(Builder& b, NodeId n, const Plan& p, const std::vector<ValueId>& grads,
                      std::vector<Accumulator>& sums) {
  Graph& g = b.graph();
  const Node& node = g.node(n);  // copied out below: rules add nodes, which may move the node storage
  if (node.op == Op::slice && p.tiled_axis[node.inputs[0].v] >= 0) {
    collect_slab(b, n, p, grads, sums);
    if (!b.ok()) return wrap(fmt::format("gradient of {} (slice)", node_label(g, n)), *b.error());
    return {};
  }
  GradContext ctx{.b = b, .node = n, .op = node.op, .attrs = node.attrs, .inputs = node.inputs,
                  .outputs = node.outputs};
  for (ValueId v : ctx.inputs) {
    ctx.input_types.push_back(g.value(v).type);
    ctx.wants.push_back(p.depends[v.v] != 0);
  }
  for (size_t i = 0; i < ctx.inputs.size(); ++i) ctx.grad_names.push_back(part_name(g, p, n, i));
  for (ValueId v : ctx.outputs) {
    ctx.output_types.push_back(g.value(v).type);
    ctx.output_grads.push_back(grads[v.v]);
  }
  ctx.input_grads.assign(ctx.inputs.size(), ValueId{});
  std::string where = fmt::format("gradient of {} ({})", node_label(g, n), op_name(ctx.op));
  auto r = op_def(ctx.op).grad(ctx);
  if (!r) return wrap(where, r.error());
  if (!b.ok()) return wrap(where, *b.error());
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    if (!ctx.wants[i]) continue;
    ValueId gi = ctx.input_grads[i];
    if (!gi.valid())
      return fail_at(where, "internal: the rule gave no gradient for input {} (%{})", i, g.value(ctx.inputs[i]).name);
    if (g.value(gi).type != ctx.input_types[i])
      return fail_at(where, "internal: the rule's gradient for input {} is {}, the input is {}", i,
                     to_string(g.value(gi).type), to_string(ctx.input_types[i]));
    accumulate(b, ctx.inputs[i], p.contributions[ctx.inputs[i].v], sums[ctx.inputs[i].v], gi);
    if (!b.ok()) return wrap(where, *b.error());
  }
  return {};
}

}  // namespace

Result<std::vector<NodeId>> topological_order(const Graph& g) {
  size_t n = g.num_nodes();
  std::vector<int> pending(n, 0);
  std::vector<std::vector<NodeId>> succ(n);
  for (NodeId id : g.node_ids()) {
    for (ValueId v : g.node(id).inputs) {
      succ[g.value(v).producer.v].push_back(id);
      ++pending[id.v];
    }
    for (NodeId c : g.node(id).control_inputs) {
      succ[c.v].push_back(id);
      ++pending[id.v];
    }
  }
  std::priority_queue<NodeId, std::vector<NodeId>, std::greater<>> ready;
  for (NodeId id : g.node_ids())
    if (pending[id.v] == 0) ready.push(id);
  std::vector<NodeId> order;
  while (!ready.empty()) {
    NodeId id = ready.top();
    ready.pop();
    order.push_back(id);
    for (NodeId s : succ[id.v])
      if (--pending[s.v] == 0) ready.push(s);
  }
  if (order.size() != n)
    for (NodeId id : g.node_ids())
      if (pending[id.v] > 0) return fail_at(node_label(g, id), "the graph has a cycle through this node");
  return order;
}

Result<ValueId> loss_of(const Graph& g) {
  if (g.outputs().size() != 1)
    return fail("autodiff needs a graph with exactly one output (the scalar loss), got {}", g.outputs().size());
  ValueId loss = g.outputs().front();
  const TensorType& t = g.value(loss).type;
  if (t.rank() != 0 || !is_float(t.dtype))
    return fail("autodiff needs a floating-point scalar loss, but the output %{} is {}", g.value(loss).name,
                to_string(t));
  return loss;
}

Result<std::vector<ValueId>> append_gradients(Graph& g, std::span<const ValueId> wrt) {
  // Rules index inputs and read attributes as the shape rules guarantee them, so the graph must be well formed.
  if (auto v = verify(g); !v) return wrap("autodiff: the forward graph does not verify", v.error());
  ValueId loss = LMS_TRY(loss_of(g));
  for (size_t i = 0; i < wrt.size(); ++i) {
    if (!wrt[i].valid() || wrt[i].v >= g.num_values()) return fail("autodiff: value #{} does not exist", wrt[i].v);
    if (!is_float_value(g, wrt[i]))
      return fail("autodiff: %{} is {}; only floating-point values have gradients", g.value(wrt[i]).name,
                  to_string(g.value(wrt[i]).type));
    if (std::count(wrt.begin(), wrt.begin() + static_cast<std::ptrdiff_t>(i) + 1, wrt[i]) > 1)
      return fail("autodiff: %{} is listed twice", g.value(wrt[i]).name);
  }
  std::vector<NodeId> order = LMS_TRY(topological_order(g));
  Plan p = LMS_TRY(plan_sweeps(g, loss, wrt, order));

  std::vector<ValueId> grads(g.num_values());  // final gradients, indexed by the forward's value ids
  std::vector<Accumulator> sums(g.num_values());
  Builder b(g);
  b.set_category(Category::bwd);
  if (p.depends[loss.v]) {
    auto seed = b.add(Op::constant, {}, attrs({{"value", 1.0}}), grad_name(g, loss), {g.value(loss).type});
    if (!b.ok()) return std::unexpected(*b.error());
    grads[loss.v] = seed.front();
  }
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    for (ValueId out : g.node(*it).outputs)
      if (out != loss) grads[out.v] = sums[out.v].sum;
    if (p.differentiate[it->v]) LMS_TRY_VOID(run_rule(b, *it, p, grads, sums));
  }
  std::vector<ValueId> result;
  for (ValueId v : wrt) result.push_back(grads[v.v]);
  return result;
}

Result<Graph> build_gradient_graph(const Graph& forward, std::span<const std::string> wrt) {
  Graph g = forward;
  std::vector<ValueId> ids;
  if (wrt.empty()) {
    for (NodeId n : g.node_ids())
      if (g.node(n).op == Op::param && is_float_value(g, g.first_output(n))) ids.push_back(g.first_output(n));
  }
  for (const std::string& name : wrt) {
    auto v = g.find_value(name);
    if (!v) return fail("autodiff: no value named %{} to differentiate with respect to", name);
    ids.push_back(*v);
  }
  std::vector<ValueId> grads = LMS_TRY(append_gradients(g, ids));
  ValueId loss = g.outputs().front();
  std::vector<ValueId> outputs = {loss};
  Builder b(g);
  b.set_category(Category::bwd);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (grads[i].valid()) {
      outputs.push_back(grads[i]);
      continue;
    }
    // The loss does not depend on this value: its gradient is zero.
    auto zero = b.add(Op::constant, {}, attrs({{"value", 0.0}}), grad_name(g, ids[i]), {g.value(ids[i]).type});
    if (!b.ok()) return std::unexpected(*b.error());
    outputs.push_back(zero.front());
  }
  g.set_outputs(std::move(outputs));
  if (auto v = verify(g); !v) return wrap("autodiff: internal: the gradient graph does not verify", v.error());
  return g;
}

}  // namespace lms
