// Graph statistics: one pass over the nodes, classifying each output by its producer's traits (source,
// persistent) and summing each node's op_cost. Linear in the graph size.
#include "lms/analysis/stats.h"

#include <vector>

namespace lms {

Cost node_cost(const Graph& g, const Node& n) {
  std::vector<TensorType> ins, outs;
  ins.reserve(n.inputs.size());
  outs.reserve(n.outputs.size());
  for (ValueId v : n.inputs) ins.push_back(g.value(v).type);
  for (ValueId v : n.outputs) outs.push_back(g.value(v).type);
  return op_cost(n.op, ins, n.attrs, outs);
}

namespace {

// The ops whose multiply-adds `matmul_conv_macs` counts.
bool is_conv_or_matmul(Op op) {
  switch (op) {
    case Op::conv1d:
    case Op::conv2d:
    case Op::conv3d:
    case Op::conv_transpose1d:
    case Op::conv_transpose2d:
    case Op::conv_transpose3d:
    case Op::matmul:
      return true;
    default:
      return false;
  }
}

}  // namespace

GraphStats graph_stats(const Graph& g) {
  GraphStats s;
  s.nodes = static_cast<int64_t>(g.num_nodes());
  for (size_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(NodeId{static_cast<uint32_t>(i)});
    const Traits& t = op_def(n.op).traits;
    s.flops += node_cost(g, n).flops;
    for (ValueId v : n.outputs) {
      const int64_t bytes = g.value(v).type.bytes();
      if (t.source && t.persistent) {
        if (n.op == Op::param) {
          s.params += g.value(v).type.num_elements();
          s.param_bytes += bytes;
        } else {
          s.state_bytes += bytes;
        }
      } else if (t.source) {
        s.input_bytes += bytes;
      } else if (!g.is_persistent(v)) {
        s.activation_bytes += bytes;
      }
    }
  }
  return s;
}

double matmul_conv_macs(const Graph& g) {
  double flops = 0;
  for (size_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(NodeId{static_cast<uint32_t>(i)});
    if (is_conv_or_matmul(n.op)) flops += node_cost(g, n).flops;
  }
  return flops / 2;
}

}  // namespace lms
