// argmax-pool: finds relu_grad(max_pool_grad(dp, y), y) whose max_pool_grad matches a forward max pooling of y,
// and rewrites it in place (the relu_grad node becomes the max_pool_grad_by_argmax, keeping its output's name
// and readers); keep_pool_input turns it back. See argmax_pool.h.
#include "lms/passes/argmax_pool.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lms/ir/verifier.h"
#include "lms/ops/pool_window.h"
#include "lms/passes/rewrite.h"

namespace lms {

namespace {

// The forward max pooling of y with max_pool_grad node `grad`'s window (full kernel/stride/pad lists, as
// autodiff writes them, and ceil_mode) and output type dp; nullopt when y has none.
std::optional<NodeId> forward_pool(const Graph& g, ValueId y, NodeId grad) {
  const Attributes& want = g.node(grad).attrs;
  const TensorType& dp = g.value(g.node(grad).inputs[0]).type;
  for (NodeId c : g.value(y).consumers) {
    const Node& n = g.node(c);
    if (!is_max_pool(n.op) || n.category != Category::fwd || g.value(n.outputs[0]).type != dp) continue;
    const IntList kernel = n.attrs.get_ints("kernel", {});
    IntList stride = n.attrs.get_ints("stride", {}), pad = n.attrs.get_ints("pad", {});
    if (stride.empty()) stride = kernel;
    if (pad.empty()) pad = IntList(kernel.size(), 0);
    if (kernel == want.get_ints("kernel", {}) && stride == want.get_ints("stride", {}) &&
        pad == want.get_ints("pad", {}) && n.attrs.get_bool("ceil_mode", false) == want.get_bool("ceil_mode", false))
      return c;
  }
  return std::nullopt;
}

struct Match {
  NodeId pool, grad, relu_grad;
};

std::vector<Match> matches(const Graph& g) {
  std::vector<Match> out;
  for (NodeId n : g.node_ids()) {
    const Node& grad = g.node(n);
    if (grad.op != Op::max_pool_grad || !grad.control_inputs.empty()) continue;
    const ValueId gx = grad.outputs[0], y = grad.inputs[1];
    const Value& gv = g.value(gx);
    if (gv.consumers.size() != 1 || std::ranges::find(g.outputs(), gx) != g.outputs().end()) continue;
    const NodeId rg = gv.consumers.front();
    const Node& relu_grad = g.node(rg);
    if (relu_grad.op != Op::relu_grad || relu_grad.inputs[0] != gx || relu_grad.inputs[1] != y) continue;
    if (g.node(g.value(y).producer).op != Op::relu) continue;
    if (auto pool = forward_pool(g, y, n)) out.push_back({*pool, n, rg});
  }
  return out;
}

// Puts the added nodes in place (rewrite.h), erases the nodes whose first output is named in `replaced` (by
// name: placing renumbers the nodes), and checks the result.
Result<void> finish(Graph& g, size_t original, const std::vector<std::vector<NodeId>>& before,
                    const std::vector<std::vector<NodeId>>& after, const std::set<std::string>& replaced,
                    std::string_view what) {
  LMS_TRY_VOID(place_new_nodes(g, original, before, after, what));
  std::vector<bool> dead(g.num_nodes(), false);
  for (NodeId n : g.node_ids()) dead[n.v] = replaced.contains(g.value(g.first_output(n)).name);
  g.erase_nodes(dead);
  if (auto v = verify(g); !v)
    return wrap(fmt::format("{}: internal error, the rewrite does not verify", what), v.error());
  return {};
}

}  // namespace

Result<int> use_pool_argmax(Graph& g) {
  const std::vector<Match> found = matches(g);
  if (found.empty()) return 0;
  const size_t original = g.num_nodes();
  std::vector<std::vector<NodeId>> before(original), after(original);
  std::set<std::string> replaced;  // the max_pool_grad outputs nothing reads any more
  for (const Match& m : found) {
    const Node grad = g.node(m.grad);  // copies: add_node may move the node storage
    const ValueId y = grad.inputs[1], dp = grad.inputs[0], p = g.first_output(m.pool);
    const TensorType positions{DType::i32, g.value(p).type.shape};
    const NodeId argmax = g.add_node(Op::max_pool_argmax, grad.attrs, std::span(&positions, 1),
                                     std::vector<std::string>{free_name(g, g.value(y).name, "argmax")}, Category::fwd);
    g.set_inputs(argmax, {y});
    const TensorType masked_type = g.value(dp).type;
    const NodeId masked =
        g.add_node(Op::relu_grad, {}, std::span(&masked_type, 1),
                   std::vector<std::string>{free_name(g, g.value(dp).name, "masked")}, Category::bwd);
    g.set_inputs(masked, {dp, p});
    Attributes by_argmax = grad.attrs;
    by_argmax.set("x_shape", g.value(y).type.shape);
    Node& rg = g.mutable_node(m.relu_grad);
    rg.op = Op::max_pool_grad_by_argmax;
    rg.attrs = std::move(by_argmax);
    g.set_inputs(m.relu_grad, {g.first_output(masked), g.first_output(argmax)});
    after[m.pool.v].push_back(argmax);
    before[m.relu_grad.v].push_back(masked);
    replaced.insert(g.value(grad.outputs[0]).name);
  }
  LMS_TRY_VOID(finish(g, original, before, after, replaced, "argmax-pool"));
  return static_cast<int>(found.size());
}

Result<int> keep_pool_input(Graph& g) {
  struct Pair {
    NodeId by_argmax, masked, argmax;
  };
  std::vector<Pair> found;
  for (NodeId n : g.node_ids()) {
    const Node& d = g.node(n);
    if (d.op != Op::max_pool_grad_by_argmax) continue;
    const NodeId m = g.value(d.inputs[0]).producer, a = g.value(d.inputs[1]).producer;
    if (g.node(m).op != Op::relu_grad || g.node(a).op != Op::max_pool_argmax) continue;
    if (g.value(d.inputs[0]).consumers.size() != 1 || g.value(d.inputs[1]).consumers.size() != 1) continue;
    found.push_back({n, m, a});
  }
  if (found.empty()) return 0;
  const size_t original = g.num_nodes();
  std::vector<std::vector<NodeId>> before(original), after(original);
  std::set<std::string> replaced;  // the argmax and masking outputs nothing reads any more
  for (const Pair& f : found) {
    const Node argmax = g.node(f.argmax), masked = g.node(f.masked);  // copies: add_node may move the storage
    const ValueId y = argmax.inputs[0], dp = masked.inputs[0];
    const TensorType y_type = g.value(y).type;
    const NodeId grad = g.add_node(Op::max_pool_grad, argmax.attrs, std::span(&y_type, 1),
                                   std::vector<std::string>{free_name(g, g.value(y).name, "grad")}, Category::bwd);
    g.set_inputs(grad, {dp, y});
    Node& d = g.mutable_node(f.by_argmax);
    d.op = Op::relu_grad;
    d.attrs = Attributes{};
    g.set_inputs(f.by_argmax, {g.first_output(grad), y});
    before[f.by_argmax.v].push_back(grad);
    replaced.insert(g.value(argmax.outputs[0]).name);
    replaced.insert(g.value(masked.outputs[0]).name);
  }
  LMS_TRY_VOID(finish(g, original, before, after, replaced, "keep-pool-input"));
  return static_cast<int>(found.size());
}

Result<void> run_argmax_pool_pass(Graph& g, const Attributes&) {
  LMS_TRY(use_pool_argmax(g));
  return {};
}

}  // namespace lms
