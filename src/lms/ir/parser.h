// The IR text parser: reads the format print_graph writes (docs/ir.md is the reference) back into a Graph.
// It checks syntax, that ops exist, attribute names and kinds (through the op's normalize_attrs), that every
// value is defined once and every reference resolves, and that a node names as many results and gives as
// many types as its op has outputs. It does not run shape rules or check placements, acyclicity or
// definition order: that is the verifier's job (ir/verifier.h), so the parser can read graphs that are
// deliberately wrong, e.g. as inputs of verifier tests. References may point forward (to a later line).
#pragma once

#include <string_view>

#include "lms/ir/graph.h"
#include "lms/support/error.h"

namespace lms {

// Parses one graph. Errors are one line: `where` is "FILENAME:LINE:COL" (1-based; columns count bytes) and
// `what` says what was expected and what was found, e.g. "expected ')', got ':'". Never crashes, hangs or
// asserts on any input (a fuzzer checks this); time is linear in the input size.
Result<Graph> parse_graph(std::string_view text, std::string_view filename = "<input>");

}  // namespace lms
