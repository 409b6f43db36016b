// The `tflms-serialize` pass (shared/TFLMS.md "Serialization"): chains the ops of chosen levels by control
// edges in node-id order, so that a wide level (parallel branches) does not run all at once. Chosen levels: the
// ones listed, plus (when min_bytes > 0) every level whose ops touch more than min_bytes bytes (the distinct
// values its ops read or write, each counted once per level; ours). Levels are those of the graph as it is when
// the pass runs; the edges join ops of one level (mutually independent) in ascending id order, so no cycle can
// form and node-id order stays a valid schedule if it was one. Levels are rebuilt by whoever needs them next.
// Precondition: acyclic. Undone by nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "lms/ir/attributes.h"
#include "lms/ir/graph.h"
#include "lms/support/error.h"

namespace lms {

struct SerializeOptions {
  std::vector<int64_t> levels;  // levels to chain; each must exist in the graph
  int64_t min_bytes = 0;        // also chain levels touching more than this many bytes; 0: off
};

// Returns the number of control edges added (a level of k ops adds k - 1).
Result<int> serialize_levels(Graph& g, const SerializeOptions& opts);

std::vector<AttrSpec> tflms_serialize_options();
Result<void> run_tflms_serialize_pass(Graph& g, const Attributes& options);

}  // namespace lms
