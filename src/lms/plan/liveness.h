// Liveness over a schedule: for every buffer (a storage root: in-place outputs share their input's buffer),
// the span of schedule positions during which it must hold its contents. A scheduled graph's position of a
// node is its id. Rules (docs/planner.md):
//   - a buffer is live from its producer to its last toucher (any node reading or in-place writing it);
//   - inputs are fed before the step, so they are live from position 0;
//   - persistent buffers (parameters, state) are live for the whole program;
//   - graph outputs are read after the step, so they stay live to the last position;
//   - a buffer nobody reads is still live while its producer runs;
//   - a node's workspace (scratch space its kernel needs, e.g. a oneDNN scratchpad: bytes given per node by the
//     backend) is a device buffer of its own, live only at that node's position.
// Intervals are inclusive: an op's inputs and outputs are all live at its position, so an output never shares
// space with an input unless the op declares the alias, or (Note [Buffer reuse]) the op may write over that input
// (OpDef::reusable_input) and is the last node touching its buffer: the output is then written into the same
// buffer, which lives on to the output's last toucher (one buffer holds x, relu(x), then relu(x) + y, ...), or
// (Note [Views]) the output is a view of the input (a reshape) and shares its buffer.
//
// Note [Buffer reuse]
// An op with OpDef::reusable_input = k writes its first output (its only one; batch_norm_grad's and
// layer_norm_grad's dx over dy) into the buffer B of its input k when: that output is a fresh storage root with
// that input's dtype and bytes; B is a device buffer, not persistent, not a graph input or output; the op is B's
// last toucher in schedule order; and no copy op reads anything B holds. Every other reader then runs before the
// op on the compute stream, in order (a swap-out on a copy stream could still be reading when the op writes, so
// a buffer a copy reads is never reused). Each backend's kernel for such an op reads element i of that input,
// for every output, before writing element i, so the values are those of a fresh buffer, bit for bit
// (tests/backends/buffer_reuse_test.cc). Undone by `reuse = false`.
//
// Note [Views]
// An op with OpDef::view_input = k (a reshape: the same bytes under another shape) and one output takes the
// buffer B of its input k when: the output is a fresh storage root with that input's dtype and bytes; B is a
// device buffer, not persistent; and neither value is a graph output or read by a copy op. Unlike reuse, the
// input may still be read afterwards: the op writes nothing (every backend skips a copy onto itself), so B keeps
// the input's bytes, and B lives on to the last toucher of either value. A later op may write over B (Note
// [Buffer reuse]) only after every reader of both; so that sharing never keeps such a write from happening, a
// buffer a copy reads (never written over) is not shared. Then one buffer over the union of the two lives is
// never larger, at any position, than the two buffers were. The cpu backend keeps a view's input in the plain
// layout (backends/cpu/dnnl_layouts.cc). Undone by `reuse = false`, with buffer reuse.
//
// Note [Parts]
// Where every dimension before the axis is 1 (a batch of one, or axis 0), a concat's input is one contiguous byte
// range of its output and a slice's output one contiguous range of its input: a part of the whole (part_offset).
// A buffer may then hold a part at an offset (Liveness::offset_of_value): a concat input that dies at the concat
// is written by its producer directly in its place in the output (the concat copies only the other inputs: a 3D
// U-Net's upsampled decoder features at batch 1, whose concat sets its hard minimum), and a slice's output is a
// view of its range of the input (that concat's gradient, split in two). The conditions are those of a view (both
// device buffers, not persistent, no copy reads either, neither a graph output, the same dtype; but a concat's
// output may be read by a copy: a swap-out reads the whole after the concat), and: the concat input fills a
// buffer of its own whose first writer runs on the compute stream, like the concat (so every write into the
// joined buffer is ordered by that stream after the waits the Program places on the first); and the join does
// not raise the live bytes anywhere above those at the op's position before it (the whole's buffer now lives
// from the concat input's producer on, or to the slice output's last reader: the first slice of a long-lived
// gradient would hold the whole to its end). Every backend's concat skips an input already in place and its
// slice a range onto itself, and the cpu backend keeps parts plain (backends/cpu/dnnl_layouts.cc). Undone by
// `reuse = false`, with buffer reuse.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "lms/ir/graph.h"
#include "lms/support/error.h"

namespace lms {

struct BufferLife {
  ValueId root;                          // the storage root (its producer allocates the buffer; later values
                                         // written over it, Note [Buffer reuse], follow); invalid for a workspace
  NodeId writer;                         // the node that first writes it: the root's producer, or the node
                                         // whose workspace it is
  bool workspace = false;                // scratch space of `writer`, live only while it runs
  Placement placement = Placement::device;
  int64_t bytes = 0;                     // the root's tensor bytes
  bool persistent = false;               // parameter or state: live for the whole program
  bool input = false;                    // fed before the step
  int first = 0;                         // first live position (inclusive)
  int last = 0;                          // last live position (inclusive)
};

struct Liveness {
  std::vector<BufferLife> buffers;       // one per storage root that does not reuse another's buffer, in root
                                         // value-id order, then the workspaces
  std::vector<int32_t> buffer_of_value;  // index into `buffers`, by ValueId (every value has one)
  std::vector<int64_t> offset_of_value;  // bytes from its buffer's start, by ValueId (Note [Parts]; else 0)
  std::vector<int32_t> workspace_of_node;  // index into `buffers`, by NodeId; -1: the node needs no workspace
  int num_positions = 0;                 // the graph's node count
  int reused = 0;                        // outputs written over the buffer of an input (Note [Buffer reuse]),
                                         // sharing it as a view (Note [Views]), or parts placed in their whole's
                                         // buffer (Note [Parts])

  const BufferLife& of(ValueId v) const { return buffers[buffer_of_value[v.v]]; }
};

// Precondition checked: node-id order is a valid schedule (check_schedule_order); the error names the node.
// `workspace_bytes` (by NodeId; empty: none) adds a workspace buffer after the value buffers for every node
// with a positive entry; its size must match the node count. `reuse`: outputs take their input's buffer where
// Note [Buffer reuse], Note [Views] and Note [Parts] allow (false: every storage root has a buffer of its own).
Result<Liveness> compute_liveness(const Graph& scheduled, std::span<const int64_t> workspace_bytes = {},
                                  bool reuse = true);

// Note [Parts]: the byte offset of input k of concat node `n` inside its output, or of slice node `n`'s output
// inside its input (k = 0), when that part is one contiguous byte range; -1 otherwise (another op, or a dimension
// before the axis is not 1).
int64_t part_offset(const Graph& g, NodeId n, size_t k = 0);

// Bytes of `placement` buffers live at each position.
std::vector<int64_t> live_bytes(const Liveness& lv, Placement placement);

}  // namespace lms
