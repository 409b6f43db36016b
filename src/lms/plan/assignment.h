// Offset assignment: given buffers with liveness intervals, a static offset for each so that no two buffers
// whose intervals overlap share a byte. Two algorithms (docs/planner.md "Assignment"), both deterministic:
//   - greedy_by_size: largest aligned size first, each at the lowest aligned offset that clashes with no
//     placed buffer whose interval overlaps its own (first fit);
//   - best_fit_by_lifetime: in order of first live position (what a runtime allocator sees), each into the
//     smallest gap between interval-overlapping placed buffers that holds it, else above all of them.
// The memory planner (memory_planner.h) calls this for the non-persistent buffers of each arena.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "lms/plan/liveness.h"

namespace lms {

enum class Assignment : uint8_t {
  greedy_by_size,        // largest first, lowest gap (first fit)
  best_fit_by_lifetime,  // earliest first use first, smallest gap that fits (best fit)
};

inline constexpr std::array<Assignment, 2> kAllAssignments = {Assignment::greedy_by_size,
                                                              Assignment::best_fit_by_lifetime};

std::string_view assignment_name(Assignment a);                   // "greedy_by_size", "best_fit_by_lifetime"
std::optional<Assignment> parse_assignment(std::string_view name);  // inverse of assignment_name

struct PlannedBuffer {
  BufferLife life;     // root, placement, bytes, persistence and interval
  int64_t offset = 0;  // in its placement's arena; a multiple of kArenaAlignment
};

// Every buffer starts at a multiple of this (cache lines; vector loads; what cudaMalloc and oneDNN expect).
inline constexpr int64_t kArenaAlignment = 64;

// Rounds up to the next multiple of kArenaAlignment.
inline int64_t align_up(int64_t bytes) { return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }

// Sets the offsets of the buffers `ids` (indices into `bufs`, all of one arena) at or above `base` (a multiple
// of kArenaAlignment) with algorithm `a`. Empty buffers get `base` and occupy nothing. Returns the arena end:
// the highest unpadded buffer end, or `base` when nothing is placed.
int64_t assign_offsets(std::vector<PlannedBuffer>& bufs, std::vector<size_t> ids, int64_t base, Assignment a);

}  // namespace lms
