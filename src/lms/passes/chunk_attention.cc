// The chunk-attention pass (see chunk_attention.h).
#include "lms/passes/chunk_attention.h"

#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lms/ir/builder.h"
#include "lms/ir/verifier.h"
#include "lms/passes/rewrite.h"

namespace lms {

namespace {

// One attention core: s = matmul(q, k), t = scale(s) (or s itself), p = softmax(t), c = matmul(p, v).
struct Core {
  NodeId scores, scaled, softmax, context;  // `scaled` invalid when the scores are not scaled
  ValueId q, k, v;
  int64_t matrices = 0;                     // P: the product of the leading (batch) dimensions
};

bool read_only_by(const Graph& g, ValueId v, NodeId reader) {
  return g.value(v).consumers.size() == 1 && g.value(v).consumers.front() == reader;
}

// The core whose softmax is `n`, if it is one: every intermediate read only by the next op, no transposed left
// operand, q, k, v and the scores of one rank >= 3 with the same leading dimensions, softmax over the last axis.
std::optional<Core> core_at(const Graph& g, NodeId n) {
  const Node& sm = g.node(n);
  if (sm.op != Op::softmax) return std::nullopt;
  const ValueId p = sm.outputs[0];
  const int rank = g.value(p).type.rank();
  const int64_t axis = sm.attrs.get_int("axis", -1);
  if (rank < 3 || (axis != -1 && axis != rank - 1) || g.value(p).consumers.size() != 1) return std::nullopt;
  Core c;
  c.softmax = n;
  c.context = g.value(p).consumers.front();
  const Node& ctx = g.node(c.context);
  if (ctx.op != Op::matmul || ctx.inputs[0] != p || ctx.attrs.get_bool("transpose_a", false)) return std::nullopt;
  ValueId s = sm.inputs[0];
  if (g.node(g.value(s).producer).op == Op::scale) {
    c.scaled = g.value(s).producer;
    if (!read_only_by(g, s, n)) return std::nullopt;
    s = g.node(c.scaled).inputs[0];
  }
  c.scores = g.value(s).producer;
  const Node& sc = g.node(c.scores);
  if (sc.op != Op::matmul || sc.attrs.get_bool("transpose_a", false) ||
      !read_only_by(g, s, c.scaled.valid() ? c.scaled : n))
    return std::nullopt;
  c.q = sc.inputs[0];
  c.k = sc.inputs[1];
  c.v = ctx.inputs[1];
  const Shape& lead = g.value(s).type.shape;
  for (ValueId x : {c.q, c.k, c.v}) {
    const Shape& shape = g.value(x).type.shape;
    if (static_cast<int>(shape.size()) != rank || !std::equal(shape.begin(), shape.end() - 2, lead.begin()))
      return std::nullopt;
  }
  c.matrices = 1;
  for (int d = 0; d + 2 < rank; ++d) c.matrices *= lead[static_cast<size_t>(d)];
  return c;
}

// x [L..., m, n] viewed as [P, m, n] (x itself when it has one leading dimension).
ValueId flat(Builder& b, ValueId x, int64_t matrices) {
  const Shape& s = b.type(x).shape;
  if (s.size() == 3) return x;
  return b.op(Op::reshape, {x}, attrs({{"shape", IntList{matrices, s[s.size() - 2], s.back()}}}),
              free_name(b.graph(), b.graph().value(x).name, "flat"));
}

// Adds the blocks of `core` (new nodes, at the end) and turns its context node into their join: groups of whole
// attention matrices when `chunks` <= P, else each matrix alone with its query rows in ceil(chunks / P) blocks
// (causal: each against the keys and values up to its last row only, the rest being masked).
void split(Graph& g, const Core& core, int64_t chunks) {
  Builder b(g);
  b.set_category(Category::fwd);
  const int64_t P = core.matrices, groups = std::min(chunks, P), S = b.type(core.q).shape.end()[-2];
  const int64_t row_blocks = chunks > P ? std::min(S, (chunks + P - 1) / P) : 1;
  const ValueId q = flat(b, core.q, P), k = flat(b, core.k, P), v = flat(b, core.v, P);
  // Copied out: adding nodes may move the node storage.
  const Node sc = g.node(core.scores), sm = g.node(core.softmax), ctx = g.node(core.context);
  const std::optional<Node> scale = core.scaled.valid() ? std::optional<Node>(g.node(core.scaled)) : std::nullopt;
  auto name_of = [&](const Node& node) { return g.value(node.outputs[0]).name; };
  const std::string name = name_of(ctx);
  const bool causal = sm.attrs.get_bool("causal", false);
  // The key axis of k ([P, Sk, d] with transpose_b, else [P, d, Sk]) and of v ([P, Sk, dv], or transposed).
  const int64_t keys = sc.attrs.get_bool("transpose_b", false) ? 1 : 2;
  const int64_t values = ctx.attrs.get_bool("transpose_b", false) ? 2 : 1;
  const int64_t key_count = b.type(k).shape[static_cast<size_t>(keys)], offset = sm.attrs.get_int("causal_offset", 0);
  auto slice = [&](ValueId x, int64_t axis, int64_t start, int64_t end, std::string n) {
    return b.op(Op::slice, {x}, attrs({{"axis", axis}, {"start", start}, {"end", end}}), std::move(n));
  };
  // One block: the rows of qi against ki and vi; `first` is its first query row.
  auto block = [&](ValueId qi, ValueId ki, ValueId vi, int64_t first, const std::string& at) {
    ValueId t = b.op(Op::matmul, {qi, ki}, sc.attrs, name_of(sc) + at);
    if (scale) t = b.op(Op::scale, {t}, scale->attrs, name_of(*scale) + at);
    Attributes sa = sm.attrs;
    if (causal && first > 0) sa.set("causal_offset", Attribute{offset + first});
    return b.op(Op::matmul, {b.op(Op::softmax, {t}, sa, name_of(sm) + at), vi}, ctx.attrs, name + at);
  };
  std::vector<ValueId> joined;
  for (int64_t i = 0; i < groups; ++i) {
    const int64_t a = i * P / groups, e = (i + 1) * P / groups;
    const std::string at = fmt::format(".{}", i);
    auto part = [&](ValueId x, const char* what) { return groups == 1 ? x : slice(x, 0, a, e, name + what + at); };
    const ValueId qi = part(q, ".q"), ki = part(k, ".k"), vi = part(v, ".v");
    if (row_blocks == 1) {
      joined.push_back(block(qi, ki, vi, 0, at));
      continue;
    }
    std::vector<ValueId> rows;
    for (int64_t j = 0; j < row_blocks; ++j) {
      const int64_t r0 = j * S / row_blocks, r1 = (j + 1) * S / row_blocks;
      const std::string atj = fmt::format("{}.{}", at, j);
      // A causal block's rows see only the keys up to their last row (plus the offset): k and v cut there.
      ValueId kj = ki, vj = vi;
      if (causal && r1 + offset < key_count) {
        const int64_t seen = r1 + offset;
        kj = slice(ki, keys, 0, seen, name + ".k" + atj);
        vj = slice(vi, values, 0, seen, name + ".v" + atj);
      }
      rows.push_back(block(slice(qi, 1, r0, r1, name + ".q" + atj), kj, vj, r0, atj));
    }
    if (groups == 1) joined = std::move(rows);  // one matrix: its rows are the whole
    else joined.push_back(b.op(Op::concat, rows, attrs({{"axis", int64_t{1}}}), name + ".rows" + at));
  }
  const int64_t axis = groups == 1 ? 1 : 0;  // what `joined` tiles: matrices, or one matrix's rows
  const Shape shape = g.value(ctx.outputs[0]).type.shape;
  std::vector<ValueId> inputs = joined;
  if (shape.size() > 3) inputs = {b.op(Op::concat, joined, attrs({{"axis", axis}}), name + ".blocks")};
  Node& out = g.mutable_node(core.context);
  out.op = shape.size() == 3 ? Op::concat : Op::reshape;
  out.attrs = shape.size() == 3 ? attrs({{"axis", axis}}) : attrs({{"shape", IntList(shape.begin(), shape.end())}});
  g.set_inputs(core.context, std::move(inputs));
}

}  // namespace

Result<int> chunk_attention(Graph& g, int64_t chunks) {
  if (chunks < 1) return fail("chunks must be >= 1, got {}", chunks);
  if (chunks == 1) return 0;
  std::vector<Core> cores;
  for (NodeId n : g.node_ids())
    if (auto c = core_at(g, n); c && c->matrices * g.value(c->q).type.shape.end()[-2] > 1) cores.push_back(*c);
  if (cores.empty()) return 0;
  // The replaced nodes by their outputs' names (placing the new nodes renumbers everything).
  std::vector<std::string> replaced;
  for (const Core& c : cores)
    for (NodeId n : {c.scores, c.scaled, c.softmax})
      if (n.valid()) replaced.push_back(g.value(g.node(n).outputs[0]).name);
  const size_t original = g.num_nodes();
  std::vector<std::vector<NodeId>> before(original), after(original);
  for (const Core& c : cores) {
    const size_t first = g.num_nodes();
    split(g, c, chunks);
    for (size_t id = first; id < g.num_nodes(); ++id) before[c.context.v].push_back(NodeId{static_cast<uint32_t>(id)});
  }
  LMS_TRY_VOID(place_new_nodes(g, original, before, after, "chunk-attention"));
  std::vector<bool> dead(g.num_nodes(), false);
  for (const std::string& value : replaced) dead[g.value(*g.find_value(value)).producer.v] = true;
  g.erase_nodes(dead);
  if (auto v = verify(g); !v) return wrap("chunk-attention: internal: the result does not verify", v.error());
  return static_cast<int>(cores.size());
}

std::vector<AttrSpec> chunk_attention_options() {
  return {{"chunks", AttrKind::Int, Attribute{int64_t{4}},
           "blocks each core is computed in: groups of its attention matrices, or past one block per matrix, blocks "
           "of each matrix's query rows"}};
}

Result<void> run_chunk_attention_pass(Graph& g, const Attributes& options) {
  LMS_TRY(chunk_attention(g, options.get_int("chunks", 4)));
  return {};
}

}  // namespace lms
