// Offset assignment: given buffers with liveness intervals, a static offset for each so that no two buffers
// whose intervals overlap share a byte. Two algorithms (docs/planner.md "Assignment"), both deterministic:
//   - greedy_by_size: largest aligned size first, each at the lowest aligned offset that clashes with no
//     placed buffer whose interval overlaps its own (first fit);
//   - best_fit_by_lifetime: in order of first live position (what a runtime allocator sees), each into the
//     smallest gap between interval-overlapping placed buffers that holds it, else above all of them;
//   - perturbed_by_area (a search, not a default): order k of a deterministic family, Note [Perturbed orders].
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
  perturbed_by_area,     // the k-th perturbed order by size and lifetime (Note [Perturbed orders])
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

// Note [Perturbed orders]: the fixed algorithms pack big equal-sized blocks with long, staggered lifetimes (the
// stem and first-stage activations of a CNN at a large batch, their swap-ins and clones) poorly at times: 15-25%
// above the liveness bound on auto's resnet50 plans near 16 GiB. Which order packs well there is hard to say
// ahead, but among orders by aligned size x lifetime^e (e from 0.25 to 1, longer-lived first among equals) with a
// pseudo-random factor in [1, 1.3) per buffer, some pack close to the bound (resnet50 b1194 at 16 GiB: auto's
// plan packs at 15.8 GiB, 4% above its 15.1 GiB bound, where the fixed orders were 23% above). Order k uses e = 0.25 + 0.1875 * (k mod 5), the factor
// hash(k, buffer index), first fit for even k and best fit for odd k: deterministic for a given k.

// Sets the offsets of the buffers `ids` (indices into `bufs`, all of one arena) at or above `base` (a multiple
// of kArenaAlignment) with algorithm `a` (`perturbation`: perturbed_by_area's k). Empty buffers get `base` and
// occupy nothing. Returns the arena end: the highest unpadded buffer end, or `base` when nothing is placed.
int64_t assign_offsets(std::vector<PlannedBuffer>& bufs, std::vector<size_t> ids, int64_t base, Assignment a,
                       uint32_t perturbation = 0);

}  // namespace lms
