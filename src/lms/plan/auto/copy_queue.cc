// The greedy's copy queues (see copy_queue.h).
#include "lms/plan/auto/copy_queue.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace lms::autoplan {

namespace {

constexpr int64_t kNone = std::numeric_limits<int64_t>::min();

}  // namespace

int64_t to_picoseconds(double seconds) { return std::llround(seconds * 1e12); }
double to_seconds(int64_t picoseconds) { return static_cast<double>(picoseconds) * 1e-12; }

CopyQueue::CopyQueue(std::vector<Copy> copies) : copies_(std::move(copies)) {
  std::sort(copies_.begin(), copies_.end(), [](const Copy& a, const Copy& b) { return a.key < b.key; });
  const size_t n = copies_.size();
  due_.assign(n + 1, 0);
  head_max_.assign(n + 1, kNone);
  tail_max_.assign(n + 1, kNone);
  for (size_t i = 0; i < n; ++i) {
    due_[i + 1] = due_[i] + copies_[i].duration;
    head_max_[i + 1] = std::max(head_max_[i], due_[i + 1] - copies_[i].key);
  }
  for (size_t i = n; i-- > 0;) tail_max_[i] = std::max(tail_max_[i + 1], due_[i + 1] - copies_[i].key);
}

int64_t CopyQueue::lateness(int64_t at) const {
  return head_max_.back() == kNone ? 0 : std::max<int64_t>(0, head_max_.back() + at);
}

int64_t CopyQueue::lateness_with(const Copy& extra, int64_t at) const {
  // `extra` runs after the copies whose key is not later than its own: those before it are as late as without
  // it, it is due after their durations and its own, and every copy after it is later by its duration.
  const size_t p = static_cast<size_t>(
      std::upper_bound(copies_.begin(), copies_.end(), extra.key, [](int64_t k, const Copy& c) { return k < c.key; }) -
      copies_.begin());
  int64_t late = std::max<int64_t>(0, due_[p] + extra.duration - extra.key + at);
  if (head_max_[p] != kNone) late = std::max(late, head_max_[p] + at);
  if (tail_max_[p] != kNone) late = std::max(late, tail_max_[p] + extra.duration + at);
  return late;
}

}  // namespace lms::autoplan
