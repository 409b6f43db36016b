// One direction of the host link as the auto planner's greedy prices it (Note [Auto estimate] in
// plan/auto/auto_planner.cc): the chosen swaps' copies queued earliest deadline first, and the queue's lateness,
// the largest excess over any deadline of the copy time due by then over the time available, alone and with one
// copy more. The greedy asks the second for every candidate at every step; walking the queue for each made it
// the planner's costliest loop (a third of a resnet152 plan at a batch that does not fit), so the queue keeps
// prefix sums and the running maxima before and after each position, and answers in O(log n). Times are whole
// picoseconds, so that sums are exact in any order and the answer is the walk's. Internal to the auto planner.
#pragma once

#include <cstdint>
#include <vector>

namespace lms::autoplan {

// Seconds as whole picoseconds (the queue's unit), and back.
int64_t to_picoseconds(double seconds);
double to_seconds(int64_t picoseconds);

class CopyQueue {
 public:
  // One copy: the time available to it is `key` - the lateness call's `at` (a prefetch: key = its first reader's
  // start, at = the peak's start; a copy out: key = minus its producer's end, at = minus the peak's start), and it
  // takes `duration`.
  struct Copy {
    int64_t key = 0;
    int64_t duration = 0;
  };

  // The queue of `copies` (any order; run by key, earliest first).
  explicit CopyQueue(std::vector<Copy> copies = {});

  // The lateness of the queue when the time available to each copy is its key - `at` (never below 0).
  int64_t lateness(int64_t at) const;
  // The same with `extra` queued at its place too.
  int64_t lateness_with(const Copy& extra, int64_t at) const;

 private:
  std::vector<Copy> copies_;       // by key
  std::vector<int64_t> due_;       // due_[i]: the durations of copies_[0, i) summed (size n + 1)
  std::vector<int64_t> head_max_;  // head_max_[i]: max over k < i of due_[k + 1] - key_k (kNone when none)
  std::vector<int64_t> tail_max_;  // tail_max_[i]: max over k >= i of the same (kNone when none)
};

}  // namespace lms::autoplan
