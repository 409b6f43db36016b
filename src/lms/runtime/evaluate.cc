// Evaluation graphs and accuracy (see evaluate.h).
#include "lms/runtime/evaluate.h"

#include <algorithm>

#include "lms/ir/builder.h"
#include "lms/passes/dce.h"

namespace lms {

Result<ValueId> logits_of(const Graph& g) {
  if (g.outputs().size() != 1)
    return fail("evaluation needs a forward graph with one output (the loss), got {} outputs", g.outputs().size());
  ValueId loss = g.outputs().front();
  NodeId producer = g.value(loss).producer;
  if (g.node(producer).op != Op::cross_entropy)
    return fail("evaluation needs the loss to be a cross_entropy of logits, but %{} is produced by {}",
                g.value(loss).name, g.def(producer).name);
  return g.node(producer).inputs.front();
}

namespace {

std::string running_name(const Graph& g, NodeId bn, const char* which) {
  return g.value(g.node(bn).outputs[0]).name + which;
}
constexpr const char* kRunningMean = ".running_mean";
constexpr const char* kRunningVar = ".running_var";

std::vector<NodeId> batch_norms(const Graph& g) {
  std::vector<NodeId> out;
  for (NodeId n : g.node_ids())
    if (g.node(n).op == Op::batch_norm) out.push_back(n);
  return out;
}

// Rewires the readers of batch_norm `bn`'s output to x·s + shift with s = gamma / sqrt(running_var + eps) and
// shift = beta − running_mean·s (both per channel, over axis 1); returns the new output.
Result<ValueId> normalize_with_running_statistics(Graph& g, NodeId bn) {
  const Node node = g.node(bn);
  const ValueId x = node.inputs[0], gamma = node.inputs[1], beta = node.inputs[2], out = node.outputs[0];
  const TensorType stat = g.value(gamma).type;  // [C]
  std::vector<TensorType> in_types, out_types;
  for (ValueId v : node.inputs) in_types.push_back(g.value(v).type);
  for (ValueId v : node.outputs) out_types.push_back(g.value(v).type);
  const double eps = OpCall{op_def(Op::batch_norm), in_types, node.attrs, out_types}.f("eps");  // its default too
  Builder b(g);
  const std::string name = g.value(out).name;
  ValueId mean = b.state(stat, running_name(g, bn, kRunningMean), "zeros");
  ValueId var = b.state(stat, running_name(g, bn, kRunningVar), "ones");
  ValueId eps_c = b.add(Op::constant, {}, attrs({{"value", eps}}), name + ".eval.eps", {stat}).at(0);
  ValueId s = b.op(Op::mul, {gamma, b.op(Op::reciprocal, {b.op(Op::sqrt, {b.op(Op::add, {var, eps_c})})})},
                   {}, name + ".eval.scale");
  ValueId shift = b.op(Op::add, {beta, b.op(Op::scale, {b.op(Op::mul, {mean, s})}, attrs({{"factor", -1.0}}))}, {},
                       name + ".eval.shift");
  IntList per_channel(g.value(x).type.shape.size(), 1);
  per_channel[1] = stat.shape[0];
  ValueId s_b = b.op(Op::reshape, {s}, attrs({{"shape", per_channel}}), name + ".eval.scale_b");
  ValueId y = b.op(Op::bias_add, {b.op(Op::mul, {x, s_b}), shift}, attrs({{"axis", int64_t{1}}}), name + ".eval");
  if (!b.ok()) return wrap(fmt::format("batch norm %{} with running statistics", name), *b.error());
  for (NodeId reader : std::vector<NodeId>(g.value(out).consumers)) {
    const std::vector<ValueId>& inputs = g.node(reader).inputs;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i] == out) g.replace_input(reader, i, y);
  }
  return y;
}

}  // namespace

Result<Graph> evaluation_graph(const Graph& forward, bool running_statistics) {
  ValueId logits = LMS_TRY(logits_of(forward));
  Graph g = forward;
  if (running_statistics)
    for (NodeId bn : batch_norms(forward)) {
      const ValueId y = LMS_TRY(normalize_with_running_statistics(g, bn));
      if (logits == g.node(bn).outputs[0]) logits = y;
    }
  g.set_outputs({logits});
  LMS_TRY(eliminate_dead_code(g));
  return g;
}

Result<int64_t> count_correct(const HostTensor& logits, const HostTensor& labels, int64_t rows) {
  const TensorType& lt = logits.type;
  if (lt.rank() < 2) return fail("accuracy: logits must have a batch and a class axis, got {}", to_string(lt));
  Shape expected = lt.shape;
  expected.erase(expected.begin() + 1);
  const TensorType& lb = labels.type;
  // A language model's logits: every position of every sample a row, sample by sample.
  const bool flattened = lt.rank() == 2 && lb.rank() >= 2 && lb.num_elements() == lt.shape[0];
  if (lb.shape != expected && !flattened)
    return fail("accuracy: labels {} do not match logits {} (expected shape {}, or [{}] positions)", to_string(lb),
                to_string(lt), to_string(expected), lt.shape[0]);
  const int64_t samples = lb.rank() == 0 ? 0 : lb.shape[0];
  if (rows < 0 || rows > samples) return fail("accuracy: {} rows requested of a batch of {}", rows, samples);
  const int64_t classes = lt.shape[1];
  const int64_t positions = flattened && samples > 0 ? lb.num_elements() / samples : 1;  // logits rows a sample
  if (flattened) rows *= positions;
  const int64_t batch = lt.shape[0];
  const int64_t inner = batch == 0 || classes == 0 ? 0 : lt.num_elements() / (batch * classes);
  int64_t correct = 0;
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t r = 0; r < inner; ++r) {
      int64_t best = 0;
      double best_value = 0;
      for (int64_t c = 0; c < classes; ++c) {
        double v = logits.get((n * classes + c) * inner + r);
        if (c == 0 || v > best_value) {
          best = c;
          best_value = v;
        }
      }
      if (static_cast<int64_t>(labels.get(n * inner + r)) == best) ++correct;
    }
  }
  return correct;
}

}  // namespace lms
