// A race check for Programs: proves, from the Program alone, that every cross-stream ordering the plan relies on
// is enforced by its waits and records, so a missing wait is caught deterministically instead of by luck on a
// particular machine. It computes a vector clock per node (what each stream has certainly finished when the node
// starts: its own stream's earlier nodes, plus, through each waited event, everything the recording node had
// seen), then checks two rules:
//   1. every dependency (data or control input) has finished before its consumer starts;
//   2. a buffer's first writer starts only after every node that touched an earlier occupant of any of its bytes
//      (DESIGN.md "Memory planner": reuse waits for every reader of the previous occupant, on every stream).
// build_program produces race-free Programs by construction; this check is the independent witness that tests,
// the executor's validation mode and anyone editing the Program builder rely on. Cost: O(nodes x streams) for
// the clocks plus the buffer pairs that share bytes.
#pragma once

#include "lms/runtime/program.h"
#include "lms/support/error.h"

namespace lms {

// Ok, or an error naming the first race found (in node order): the two nodes, their streams and the value or
// buffer they race on.
Result<void> check_program_races(const Program& program);

}  // namespace lms
