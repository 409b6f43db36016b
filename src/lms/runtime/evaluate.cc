// Evaluation graphs and accuracy (see evaluate.h).
#include "lms/runtime/evaluate.h"

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

Result<Graph> evaluation_graph(const Graph& forward) {
  ValueId logits = LMS_TRY(logits_of(forward));
  Graph g = forward;
  g.set_outputs({logits});
  LMS_TRY(eliminate_dead_code(g));
  return g;
}

Result<int64_t> count_correct(const HostTensor& logits, const HostTensor& labels, int64_t rows) {
  const TensorType& lt = logits.type;
  if (lt.rank() < 2) return fail("accuracy: logits must have a batch and a class axis, got {}", to_string(lt));
  Shape expected = lt.shape;
  expected.erase(expected.begin() + 1);
  if (labels.type.shape != expected)
    return fail("accuracy: labels {} do not match logits {} (expected shape {})", to_string(labels.type),
                to_string(lt), to_string(expected));
  if (rows < 0 || rows > lt.shape[0]) return fail("accuracy: {} rows requested of a batch of {}", rows, lt.shape[0]);
  const int64_t classes = lt.shape[1];
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
