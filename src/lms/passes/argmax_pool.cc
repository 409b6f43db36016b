// argmax-pool: finds relu_grad(max_pool_grad(dp, y), y) whose max_pool_grad matches a forward max pooling of y,
// and rewrites it in place (the relu_grad node becomes the max_pool_grad_by_argmax, keeping its output's name
// and readers); see argmax_pool.h.
#include "lms/passes/argmax_pool.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lms/ir/verifier.h"
#include "lms/passes/rewrite.h"

namespace lms {

namespace {

bool is_max_pool(Op op) { return op == Op::max_pool1d || op == Op::max_pool2d || op == Op::max_pool3d; }

// The forward max pooling of y with max_pool_grad node `grad`'s window (full kernel/stride/pad lists, as
// autodiff writes them) and output type dp; nullopt when y has none.
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
        pad == want.get_ints("pad", {}))
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
  LMS_TRY_VOID(place_new_nodes(g, original, before, after, "argmax-pool"));
  std::vector<bool> dead(g.num_nodes(), false);  // by name: place_new_nodes renumbered the nodes
  for (NodeId n : g.node_ids()) dead[n.v] = replaced.contains(g.value(g.first_output(n)).name);
  g.erase_nodes(dead);
  if (auto v = verify(g); !v) return wrap("argmax-pool: internal error, the rewrite does not verify", v.error());
  return static_cast<int>(found.size());
}

Result<void> run_argmax_pool_pass(Graph& g, const Attributes&) {
  LMS_TRY(use_pool_argmax(g));
  return {};
}

}  // namespace lms
