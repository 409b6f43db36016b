// The two offset-assignment algorithms (see assignment.h and docs/planner.md).
#include "lms/plan/assignment.h"

#include <algorithm>
#include <cmath>

namespace lms {

namespace {

// An already-placed buffer, as the gap search sees it.
struct Occupied {
  int first = 0, last = 0;  // interval (inclusive)
  int64_t offset = 0;       // start
  int64_t end = 0;          // offset + aligned size: the next buffer above may start here
};

bool overlaps(const BufferLife& a, const Occupied& b) { return !(a.last < b.first || b.last < a.first); }

// A pseudo-random number in [0, 1) from (k, i) (splitmix64's finalizer): the same for the same pair everywhere.
double unit_hash(uint64_t k, uint64_t i) {
  uint64_t z = k * 0x9E3779B97F4A7C15ULL + i + 0x632BE59BD9B4E019ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) / 9007199254740992.0;  // 2^53
}

// perturbed_by_area's order k (Note [Perturbed orders]); ties end on the buffer index.
void perturbed_order(uint32_t k, const std::vector<PlannedBuffer>& bufs, std::vector<size_t>& ids) {
  constexpr double kExponents = 5, kLowest = 0.25, kSpread = 0.3;
  const double e = kLowest + (1 - kLowest) * static_cast<double>(k % static_cast<uint32_t>(kExponents)) / (kExponents - 1);
  std::vector<double> key(bufs.size(), 0);
  for (size_t i : ids) {
    const BufferLife& b = bufs[i].life;
    const double length = std::max(1, b.last - b.first + 1);
    key[i] = static_cast<double>(align_up(b.bytes)) * std::pow(length, e) * (1 + kSpread * unit_hash(k, i));
  }
  std::sort(ids.begin(), ids.end(), [&](size_t i, size_t j) { return key[i] != key[j] ? key[i] > key[j] : i < j; });
}

// The placement order of each algorithm; every comparison ends on the buffer index (root value-id order, then
// workspaces in node order), so the order is total.
void sort_for(Assignment a, const std::vector<PlannedBuffer>& bufs, std::vector<size_t>& ids) {
  std::sort(ids.begin(), ids.end(), [&](size_t i, size_t j) {
    const BufferLife &x = bufs[i].life, &y = bufs[j].life;
    const int64_t sx = align_up(x.bytes), sy = align_up(y.bytes);
    if (a == Assignment::best_fit_by_lifetime) {
      if (x.first != y.first) return x.first < y.first;
      if (x.last != y.last) return x.last > y.last;  // the longer-lived one first: it constrains more
      if (sx != sy) return sx > sy;
      return i < j;
    }
    if (sx != sy) return sx > sy;
    if (x.first != y.first) return x.first < y.first;
    return i < j;
  });
}

// The offset for buffer `b` of aligned `size` given the placed buffers, sorted by offset (then end): only those
// whose intervals overlap b's clash with it. First fit takes the lowest gap that holds it; best fit the smallest
// such gap (ties: the lowest). Either falls back to the space above every clashing buffer.
int64_t choose_gap(bool first_fit, const std::vector<Occupied>& placed, const BufferLife& b, int64_t base,
                   int64_t size) {
  int64_t cursor = base;  // the lowest free offset above everything seen so far
  std::optional<int64_t> best;
  int64_t best_gap = 0;
  for (const Occupied& o : placed) {
    if (!overlaps(b, o)) continue;
    if (o.offset >= cursor + size) {  // the gap [cursor, o.offset) holds it
      if (first_fit) return cursor;
      const int64_t gap = o.offset - cursor;
      if (!best || gap < best_gap) best = cursor, best_gap = gap;
    }
    cursor = std::max(cursor, o.end);
  }
  return best.value_or(cursor);
}

}  // namespace

std::string_view assignment_name(Assignment a) {
  switch (a) {
    case Assignment::greedy_by_size: return "greedy_by_size";
    case Assignment::best_fit_by_lifetime: return "best_fit_by_lifetime";
    case Assignment::perturbed_by_area: return "perturbed_by_area";
  }
  return "?";
}

std::optional<Assignment> parse_assignment(std::string_view name) {
  for (Assignment a : kAllAssignments)
    if (assignment_name(a) == name) return a;
  return std::nullopt;
}

int64_t assign_offsets(std::vector<PlannedBuffer>& bufs, std::vector<size_t> ids, int64_t base, Assignment a,
                       uint32_t perturbation) {
  if (a == Assignment::perturbed_by_area) perturbed_order(perturbation, bufs, ids);
  else sort_for(a, bufs, ids);
  const bool first_fit = a == Assignment::greedy_by_size || (a == Assignment::perturbed_by_area && perturbation % 2 == 0);
  std::vector<Occupied> placed;  // sorted by offset, then end
  placed.reserve(ids.size());
  int64_t arena_end = base;
  for (size_t i : ids) {
    PlannedBuffer& b = bufs[i];
    const int64_t size = align_up(b.life.bytes);
    b.offset = base;
    if (size == 0) continue;  // empty tensors occupy nothing
    b.offset = choose_gap(first_fit, placed, b.life, base, size);
    const Occupied o{b.life.first, b.life.last, b.offset, b.offset + size};
    placed.insert(std::upper_bound(placed.begin(), placed.end(), o,
                                   [](const Occupied& x, const Occupied& y) {
                                     return x.offset != y.offset ? x.offset < y.offset : x.end < y.end;
                                   }),
                  o);
    arena_end = std::max(arena_end, b.offset + b.life.bytes);
  }
  return arena_end;
}

}  // namespace lms
