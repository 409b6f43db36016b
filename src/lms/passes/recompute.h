// The `recompute` pass: for each chosen value v, clones v's producer (same op, same attributes, category
// `recompute`, outputs `%v.re` and, for an op with several, `%w.re` for each other output w) right before v's
// first backward (`#bwd`) reader in node order and makes every backward reader read the clone; forward (and
// update, swap, recompute) readers keep reading v, so v can die after the forward pass. The clone reads the
// producer's inputs, except that an input that is itself chosen is read through its clone (chains: choosing
// [a, b] with b = relu(a) recomputes a from its inputs, then b from a's clone; a chosen value read only by
// another chosen value's clone is fine). A *segment* is recomputed whole for its last value's backward readers:
// its values are cloned together, right before the first of those readers (or of the clones reading it), each
// clone reading the segment's own clones, and those other clones are read by nothing else, whatever else is
// chosen for their values (nested recomputation: a block's output remade from the block's input at the start of
// the next block's backward pass, while the block's insides are recomputed again, separately, for their own
// backward readers). In-place ops that overwrite a clone's input (optimizer updates of a parameter the clone
// reads) are made to wait for the clone by a control edge. Errors, naming the value: unknown names, names given
// twice, a producer that is not recomputable or is a source, persistent, random, side-effecting, in-place or a
// copy, two outputs of one producer chosen, a value no backward op and no other clone reads, a segment's value
// no later value of it reads, and an input overwritten in place before the clone would run. Precondition: a
// training graph with `#fwd`/`#bwd` categories, acyclic; a graph whose node order is not a valid schedule is
// first put into schedule order (plan/schedule.h). Postcondition: the graph verifies and its node order is a
// valid schedule. Nothing undoes it (dce removes nothing: every clone is read); redirecting each clone's
// readers back to the value it copies and erasing the clones would. It does not choose which values to
// recompute (the planner does), nor check that the clones' inputs are still resident then.
#pragma once

#include <string>
#include <vector>

#include "lms/ir/attributes.h"
#include "lms/ir/graph.h"
#include "lms/support/error.h"

namespace lms {

struct RecomputeOptions {
  std::vector<std::string> values;  // names of the values to recompute (without '%'), in any order
  std::vector<std::vector<std::string>> segments = {};  // each: values recomputed together for the backward
                                                        // readers of the last-produced one (its target), in any
                                                        // order; a target is in no other segment nor `values`
};

struct RecomputeStats {
  int clones = 0;      // recompute nodes added (one per chosen value and per segment value)
  int redirected = 0;  // backward readers moved from a chosen value to its clone
  double flops = 0;    // FLOPs of running every clone once (op cost model)
};

Result<RecomputeStats> insert_recompute(Graph& g, const RecomputeOptions& opts);

// Why an op of this kind cannot be cloned for a backward reader ("a source", "in-place", ...); empty when it
// can (the rule above, for planners choosing values).
std::string_view not_recomputable(const OpDef& d);

// The pass options: `values` (a comma-separated string of value names; a leading '%' is dropped) and
// `segments` (the same, segments separated by ';').
std::vector<AttrSpec> recompute_options();
Result<void> run_recompute_pass(Graph& g, const Attributes& options);

}  // namespace lms
