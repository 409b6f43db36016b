// What the rewriting passes (recompute, swap, tflms-swap) share: fresh names for the values they add, the
// in-place writers whose overwrites new readers must be ordered against, and placing new nodes in node order
// around the nodes that were there. Plain functions; nothing here is a pass.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lms/ir/graph.h"
#include "lms/support/error.h"

namespace lms {

// `base.suffix`, or `base.suffix2`, `base.suffix3`, ... when taken.
std::string free_name(const Graph& g, const std::string& base, std::string_view suffix);

// (storage root, node) for every input an in-place op overwrites, in node order.
std::vector<std::pair<ValueId, NodeId>> in_place_overwrites(const Graph& g);

// Puts the nodes added after the first `original` ones into node order: `before[i]` right before node i,
// `after[i]` right after it, each list in its own order. Every added node must be in exactly one list. Error
// (naming `pass`) when the result is not a valid schedule: the rewrite placed something wrongly.
Result<void> place_new_nodes(Graph& g, size_t original, const std::vector<std::vector<NodeId>>& before,
                             const std::vector<std::vector<NodeId>>& after, std::string_view pass);

}  // namespace lms
