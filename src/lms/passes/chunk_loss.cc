// The chunk-loss pass (see chunk_loss.h).
#include "lms/passes/chunk_loss.h"

#include <string>
#include <vector>

#include <fmt/format.h>

#include "lms/ir/builder.h"
#include "lms/ir/verifier.h"

namespace lms {

namespace {

// The loss's head as found, by name (erasing the old nodes renumbers the values).
struct Head {
  std::string loss, logits, h, w, labels;  // value names
  std::string bias;                        // the bias added to the logits' last axis, if any
  Attributes matmul;                       // the projection's attributes (transposes)
  int64_t rows = 0, width = 0;             // N and K: the logits' rows, h's last dimension
  std::vector<bool> dead;                  // the nodes replaced: the loss, the projection, a reshape, a bias_add
};

bool read_once(const Graph& g, ValueId v) { return g.value(v).consumers.size() == 1; }

Result<Head> find_head(const Graph& g) {
  if (g.outputs().size() != 1) return fail("the graph has {} outputs, not one loss", g.outputs().size());
  const ValueId loss = g.outputs().front();
  const Node& ce = g.node(g.value(loss).producer);
  if (ce.op != Op::cross_entropy)
    return fail("the loss %{} is {}, not cross_entropy", g.value(loss).name, op_name(ce.op));
  ValueId logits = ce.inputs[0];
  const int64_t rows = g.value(logits).type.shape[0];
  if (g.value(logits).type.rank() != 2)
    return fail("the loss's logits %{} are {}, not [N, classes]", g.value(logits).name,
                to_string(g.value(logits).type));
  Head head;
  head.loss = g.value(loss).name;
  head.logits = g.value(logits).name;
  head.labels = g.value(ce.inputs[1]).name;
  head.rows = rows;
  head.dead.assign(g.num_nodes(), false);
  head.dead[g.value(loss).producer.v] = true;
  auto not_projected = [&] {
    return fail("the loss's logits %{} are not a matmul of [N, K] rows (or of [..., K] reshaped to N rows) by a "
                "[K, classes] matrix (and a bias) read by nothing else",
                head.logits);
  };
  if (!read_once(g, logits) || g.value(loss).consumers.size() > 0) return not_projected();
  // Back through a reshape to N rows and a bias over the classes, in either order, each read by the next only.
  for (bool reshaped = false, biased = false;;) {
    const NodeId p = g.value(logits).producer;
    const Node& node = g.node(p);
    // (bias_add's axis defaults to 1: the classes of [N, V] logits, not of [B, S, V] ones.)
    const int64_t last = g.value(logits).type.rank() - 1, axis = node.attrs.get_int("axis", 1);
    if (node.op == Op::reshape && !reshaped) {
      reshaped = true;
    } else if (node.op == Op::bias_add && !biased && (axis == -1 || axis == last)) {
      biased = true;
      head.bias = g.value(node.inputs[1]).name;
    } else {
      break;
    }
    head.dead[p.v] = true;
    logits = node.inputs[0];
    if (!read_once(g, logits)) return not_projected();
  }
  const NodeId mm = g.value(logits).producer;
  const Node& m = g.node(mm);
  if (m.op != Op::matmul || m.attrs.get_bool("transpose_a", false)) return not_projected();
  const TensorType &a = g.value(m.inputs[0]).type, &w = g.value(m.inputs[1]).type;
  const int64_t leading = a.num_elements() / a.shape.back();
  if (w.rank() != 2 || leading != rows) return not_projected();
  head.dead[mm.v] = true;
  head.h = g.value(m.inputs[0]).name;
  head.w = g.value(m.inputs[1]).name;
  head.matmul = m.attrs;
  head.width = a.shape.back();
  return head;
}

}  // namespace

Result<void> chunk_loss(Graph& g, int64_t chunks) {
  if (chunks < 1) return fail("chunks must be >= 1, got {}", chunks);
  if (chunks == 1) return {};
  Head head = LMS_TRY(find_head(g));
  if (chunks > head.rows)
    return fail("{} chunks for the {} rows of the logits %{}: at most one chunk per row", chunks,
                head.rows, head.logits);
  g.set_outputs({});
  g.erase_nodes(head.dead);  // frees the names of the loss and the logits for the blocks' values

  Builder b(g);
  b.set_category(Category::fwd);
  ValueId h = *g.find_value(head.h), w = *g.find_value(head.w), labels = *g.find_value(head.labels);
  const ValueId bias = head.bias.empty() ? ValueId{} : *g.find_value(head.bias);
  if (g.value(h).type.rank() != 2)
    h = b.op(Op::reshape, {h}, attrs({{"shape", IntList{head.rows, head.width}}}), head.logits + ".rows");
  ValueId loss;
  for (int64_t i = 0; i < chunks; ++i) {  // block i: rows [i N / chunks, (i + 1) N / chunks)
    const int64_t start = i * head.rows / chunks, end = (i + 1) * head.rows / chunks;
    const Attributes rows = attrs({{"axis", int64_t{0}}, {"start", start}, {"end", end}});
    const std::string suffix = fmt::format(".{}", i);
    ValueId block = b.op(Op::slice, {h}, rows, head.logits + suffix + ".in");
    ValueId z = b.op(Op::matmul, {block, w}, head.matmul, head.logits + suffix + (bias.valid() ? ".matmul" : ""));
    if (bias.valid()) z = b.op(Op::bias_add, {z, bias}, attrs({{"axis", int64_t{-1}}}), head.logits + suffix);
    ValueId part = b.op(Op::cross_entropy, {z, b.op(Op::slice, {labels}, rows, head.labels + suffix)}, {},
                        head.loss + suffix);
    const double weight = static_cast<double>(end - start) / static_cast<double>(head.rows);
    part = b.op(Op::scale, {part}, attrs({{"factor", weight}}), head.loss + suffix + ".weighted");
    loss = loss.valid() ? b.op(Op::add, {loss, part}, {}, i + 1 == chunks ? head.loss : head.loss + ".acc") : part;
  }
  if (!b.ok()) return fail("internal: {}", b.error()->what);
  g.set_outputs({loss});
  if (auto v = verify(g); !v) return wrap("internal: the result does not verify", v.error());
  return {};
}

std::vector<AttrSpec> chunk_loss_options() {
  return {{"chunks", AttrKind::Int, Attribute{int64_t{8}}, "blocks of rows the loss is computed over"}};
}

Result<void> run_chunk_loss_pass(Graph& g, const Attributes& options) {
  return chunk_loss(g, options.get_int("chunks", 8));
}

}  // namespace lms
