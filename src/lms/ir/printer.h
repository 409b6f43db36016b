// The IR text printer: turns a Graph into its canonical text (docs/ir.md is the reference of the format).
// The text is part of the API: `parse_graph(print_graph(g))` rebuilds a graph that prints to the same bytes,
// so golden tests, `lms opt` output and diffs between runs are stable. The printer never invents names: it
// prints the stored value names, nodes in storage order, attributes in their stored (normalized) order.
#pragma once

#include <span>
#include <string>

#include "lms/ir/graph.h"

namespace lms {

// The whole graph: `graph NAME [scheduled] {`, one line per node, an optional `return` line, `}`, and a final
// newline. Requires value names matching [A-Za-z0-9_.-]+ and a graph name matching [A-Za-z_][A-Za-z0-9_.-]*
// (what builders, passes and the parser produce); other names print as they are and will not parse back.
std::string print_graph(const Graph& g);

// The same text with `  // NOTE` after each node line whose note (by NodeId; empty or shorter: none) is not
// empty. Comments parse away, so the result still parses to the same graph (`lms opt --annotate levels`).
std::string print_graph(const Graph& g, std::span<const std::string> notes);

// One node's line without indentation or newline, e.g. `%y = relu(%x) : f32[8,16] #fwd` (for error messages
// and debugging; the same spelling print_graph uses).
std::string print_node(const Graph& g, NodeId n);

}  // namespace lms
