// The `swap` pass: swaps chosen values out to the host after the forward pass and back in for their late readers, each
// prefetch started by a chosen trigger op (the `auto` planner's swaps; TFLMS's are tflms-swap). For each chosen value
// %v: one swap_out (`%v.out`, category swap; `%v.out2`, ... when taken) reading %v, placed in node order right after
// %v's producer; one swap_in (`%v.in`, or `%v.in2`, ...) reading the swap_out, which every *late reader* of %v reads
// instead of %v. Late readers are %v's consumers in category `bwd` or `recompute` (backward ops and recompute clones);
// every other reader (fwd, upd, swap) and the graph's return keep reading %v, so %v dies after its last forward reader.
// With a trigger (`a:t`: the node making %t, normally named by its first output), the swap_in gets a control edge from
// the trigger and is placed in node order right after it, so the copy starts when the trigger has run; without one it
// is placed right before %v's first late reader (fetched just in time, synchronously). Swap-outs are not synchronised:
// the Program's buffer-reuse waits keep %v's space until its copy is done; an in-place op after the producer that
// overwrites %v's storage waits for the swap_out by a control edge (none in training graphs, where only persistent
// storage is overwritten). With a hold (`a@h`, `a@h:t`: the node making %h), the swap_out is placed right after the
// hold instead of the producer: the copy still starts when %v is ready (a stream runs a node once its inputs are), but
// %v's space stays allocated up to the hold, so the memory plan does not give it to the ops in between and they do not
// wait for the copy; the planner times the hold to the copy's end. Several swap_outs after one producer, and several
// swap_ins after one trigger or before one reader, follow value-id order (swap_outs first). Errors, naming the value:
// unknown names, a value given twice, a value that is persistent, on the host, made by a copy or by a source that makes
// it again (a constant; an input may be swapped), or has no late reader; an unknown trigger, a trigger that is a copy,
// or a trigger before %v's producer or not before its first late reader in node order (the producer itself may be the
// trigger); likewise for a hold, which must also not come after the trigger nor after an in-place writer of %v's
// storage. A *forward* swap (`forward`, `name:trigger` or `name@hold:trigger`) swaps %v out across a gap in the forward
// pass: its non-late readers after the trigger in node order (a U-Net decoder's concat reading the skip connection made
// at the start of the forward pass) read a swap_in of their own, triggered by the trigger and placed after it; so do
// its late readers unless %v is also among `swaps`, whose swap_in then reads the same swap_out (one copy to the host,
// two back). The trigger is required, must not come before the producer, must have a non-late reader of %v after it and
// (with a backward swap too) come before the first late reader; the hold, if any, must not come after the trigger; a
// value swapped both ways takes the forward hold (its backward hold must be empty). Precondition: acyclic, the value's
// producer has no swap ops attached yet; a graph whose node order is not a valid schedule is first put into schedule
// order (plan/schedule.h). Postcondition: node order is a valid schedule and the graph verifies. Undone by nothing;
// bypass_swaps (passes/tflms_triggers.h) recovers the graph without copies.
#pragma once

#include <string>
#include <vector>

#include "lms/ir/attributes.h"
#include "lms/ir/graph.h"
#include "lms/support/error.h"

namespace lms {

struct SwapChoice {
  std::string value;      // the value to swap (without '%')
  std::string trigger;    // the node (named by its first output, without '%') whose completion starts the
                          // swap-in; empty: none, the swap_in runs right before the first late reader
  std::string hold = {};  // the node (named likewise) up to which the value's space stays allocated: the
                          // swap_out is placed after it in node order; empty: right after the producer
};

struct SwapOptions {
  std::vector<SwapChoice> swaps;    // in any order; each value at most once
  std::vector<SwapChoice> forward = {};  // forward swaps (trigger required), in any order; each value at most once
};

struct SwapStats {
  int swapped = 0;            // values swapped (one swap_out each, and one swap_in each way they are swapped)
  int forward = 0;            // of them, values swapped across a forward gap
  int triggered = 0;          // swap_ins with a trigger
  int redirected = 0;         // readers moved to a swap_in
  int64_t bytes_each_way = 0;  // sum of the swapped values' bytes (each copied out once per step)
};

Result<SwapStats> insert_swaps(Graph& g, const SwapOptions& opts);

// True when `n` is a late reader: a backward op or a recompute clone (category bwd or recompute).
bool is_late_reader(const Graph& g, NodeId n);

// The pass options: `values`, a comma-separated list of `name`, `name:trigger`, `name@hold` or
// `name@hold:trigger` (a leading '%' on any name is dropped); `forward`, likewise, the forward swaps (a trigger
// required).
std::vector<AttrSpec> swap_options();
Result<void> run_swap_pass(Graph& g, const Attributes& options);

}  // namespace lms
