// Data-edge reachability by ancestor interval labels (Note [Ancestor interval labels]): one depth-first
// post-order numbering, then each node's ancestor set stored as sorted, disjoint intervals of that numbering,
// built in one sweep by merging the predecessors' lists. A query is one binary search.
//
// Note [Ancestor interval labels]
// A per-node bitset over all nodes is exact but costs n^2/8 bytes (1.25 GB at 100k nodes), and a search per
// query costs O(n) each, which the trigger search cannot afford. Instead (after Agrawal, Borgida and Jagadish,
// "Efficient management of transitive relationships", SIGMOD 1989) number the nodes by a depth-first
// post-order over data predecessors, starting from the sinks. In that numbering every node's ancestors reached
// through its own depth-first subtree form one contiguous interval ending just below the node's number; only
// ancestors shared with earlier-visited branches add further intervals. Training graphs are a forward chain
// (with residual skips) mirrored by a backward chain, so the lists stay short: measured on resnet152 and gpt
// training graphs by bench/reachability_bench.cc (memory_bytes()). Memory is 8 bytes per interval plus
// 16 bytes per node; the worst case (a dense random DAG, where ancestor sets have no structure) is O(n^2)
// intervals, so this is a bet on the shape of training graphs, stated here and measured in the benchmark.
// Queries are exact in every case: O(log k) for a node with k intervals, after an O(1) level test that
// rejects every pair whose level does not increase (a path strictly increases the level).
#include "lms/analysis/reachability.h"

#include <algorithm>

#include "lms/ir/verifier.h"

namespace lms {

size_t Reachability::memory_bytes() const {
  return level_.size() * sizeof(int) + post_.size() * sizeof(uint32_t) + offset_.size() * sizeof(uint64_t) +
         (lo_.size() + hi_.size()) * sizeof(uint32_t);
}

bool Reachability::reaches(NodeId a, NodeId b) const {
  if (a == b) return true;
  if (level_[a.v] >= level_[b.v]) return false;
  uint32_t p = post_[a.v];
  uint32_t pb = post_[b.v];
  auto first = lo_.begin() + static_cast<ptrdiff_t>(offset_[pb]);
  auto last = lo_.begin() + static_cast<ptrdiff_t>(offset_[pb + 1]);
  // The last interval starting at or below p is the only one that can hold it (intervals are disjoint).
  auto it = std::upper_bound(first, last, p);
  if (it == first) return false;
  size_t k = static_cast<size_t>(it - lo_.begin()) - 1;
  return p <= hi_[k];
}

namespace {

// Distinct producers of a node's data inputs, in input order.
std::vector<NodeId> data_preds(const Graph& g, NodeId n) {
  std::vector<NodeId> preds;
  for (ValueId v : g.node(n).inputs) {
    NodeId p = g.value(v).producer;
    if (std::find(preds.begin(), preds.end(), p) == preds.end()) preds.push_back(p);
  }
  return preds;
}

}  // namespace

Result<Reachability> compute_reachability(const Graph& g, const Levels& levels) {
  const size_t n = g.num_nodes();
  if (levels.of_node.size() != n)
    return fail("reachability: levels were computed for a graph of {} nodes, this one has {}",
                levels.of_node.size(), n);
  Reachability r;
  r.num_nodes_ = n;
  r.level_ = levels.of_node;

  // Post-order numbering, iteratively (training graphs are deep chains; recursion would overflow). Roots are
  // the sinks in id order, then any node not yet numbered (none in a DAG, kept for safety); predecessors are
  // entered in input order. Deterministic: no hash iteration.
  std::vector<std::vector<NodeId>> preds(n);
  for (NodeId id : g.node_ids()) preds[id.v] = data_preds(g, id);
  enum : uint8_t { kNew, kOpen, kDone };
  std::vector<uint8_t> state(n, kNew);
  r.post_.assign(n, 0);
  std::vector<NodeId> order;  // nodes in post-order: every node after all its predecessors
  order.reserve(n);
  std::vector<std::pair<NodeId, size_t>> stack;  // (node, next predecessor to enter)
  auto visit = [&](NodeId root) -> Result<void> {
    stack.push_back({root, 0});
    state[root.v] = kOpen;
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next < preds[node.v].size()) {
        NodeId p = preds[node.v][next++];
        if (state[p.v] == kOpen)
          return fail_at(node_label(g, p), "reachability: the graph has a cycle through this node");
        if (state[p.v] == kNew) {
          state[p.v] = kOpen;
          stack.push_back({p, 0});
        }
        continue;
      }
      state[node.v] = kDone;
      r.post_[node.v] = static_cast<uint32_t>(order.size());
      order.push_back(node);
      stack.pop_back();
    }
    return {};
  };
  for (int pass = 0; pass < 2; ++pass)
    for (NodeId id : g.node_ids()) {
      bool sink = true;
      for (ValueId v : g.node(id).outputs) sink = sink && g.value(v).consumers.empty();
      if (state[id.v] == kNew && (pass == 1 || sink)) LMS_TRY_VOID(visit(id));
    }

  // Labels in post-order, so every predecessor's list is final before it is merged; appended to the flat
  // arrays in that order, so offset_ is indexed by post-order number.
  r.offset_.assign(n + 1, 0);
  std::vector<std::pair<uint32_t, uint32_t>> scratch;
  for (NodeId b : order) {
    scratch.clear();
    for (NodeId p : preds[b.v]) {
      scratch.push_back({r.post_[p.v], r.post_[p.v]});
      for (uint64_t k = r.offset_[r.post_[p.v]]; k < r.offset_[r.post_[p.v] + 1]; ++k)
        scratch.push_back({r.lo_[k], r.hi_[k]});
    }
    std::sort(scratch.begin(), scratch.end());  // by (lo, hi); ties are identical intervals
    size_t first = r.lo_.size();
    for (auto [lo, hi] : scratch) {
      if (r.lo_.size() > first && lo <= r.hi_.back() + 1) {
        r.hi_.back() = std::max(r.hi_.back(), hi);
      } else {
        r.lo_.push_back(lo);
        r.hi_.push_back(hi);
      }
    }
    r.offset_[r.post_[b.v] + 1] = r.lo_.size();
  }
  return r;
}

}  // namespace lms
