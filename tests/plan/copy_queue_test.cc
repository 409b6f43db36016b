// The auto planner's copy queue (plan/auto/copy_queue.h): its lateness, alone and with one copy more, is that of
// walking the copies earliest deadline first and taking the largest excess of the time due over the time available,
// on worked examples and on random queues with ties; and seconds round to picoseconds and back.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "lms/plan/auto/copy_queue.h"

namespace lms::autoplan {
namespace {

// The walk: every copy in key order (`extra`, when given, among them), each late by the durations due up to and
// including it less its time available (key - at); the largest, never below 0.
int64_t walk(std::vector<CopyQueue::Copy> copies, const CopyQueue::Copy* extra, int64_t at) {
  if (extra) copies.push_back(*extra);
  std::stable_sort(copies.begin(), copies.end(),
                   [](const CopyQueue::Copy& a, const CopyQueue::Copy& b) { return a.key < b.key; });
  int64_t due = 0, late = 0;
  for (const CopyQueue::Copy& c : copies) late = std::max(late, (due += c.duration) - (c.key - at));
  return late;
}

TEST(CopyQueue, AnEmptyQueueIsNeverLate) {
  const CopyQueue q;
  EXPECT_EQ(q.lateness(0), 0);
  EXPECT_EQ(q.lateness(1000), 0);
  // One copy alone: late by its duration less its time available.
  EXPECT_EQ(q.lateness_with({.key = 10, .duration = 15}, 0), 5);
  EXPECT_EQ(q.lateness_with({.key = 10, .duration = 15}, -10), 0);
}

// Copies due at 10, 20 and 30 taking 8 each: done at 8, 16 and 24, each in time. One more due at 15 taking 8 runs
// second: done at 16, 1 late, and the two after it at 24 and 32, 4 and 2 late.
TEST(CopyQueue, ACopyQueuedBeforeOthersMakesThemLate) {
  const CopyQueue q({{.key = 30, .duration = 8}, {.key = 10, .duration = 8}, {.key = 20, .duration = 8}});
  EXPECT_EQ(q.lateness(0), 0);
  EXPECT_EQ(q.lateness(7), 5);  // every deadline 7 sooner: the first is done at 8 with 3 available
  EXPECT_EQ(q.lateness_with({.key = 15, .duration = 8}, 0), 4);
  EXPECT_EQ(q.lateness_with({.key = 40, .duration = 8}, 0), 0);  // last, done at 32 by 40
  EXPECT_EQ(q.lateness_with({.key = 5, .duration = 8}, 0), 6);   // first: 3 late, and the one due at 10 done at 16
}

TEST(CopyQueue, AnswersAsTheWalkOnRandomQueuesWithTies) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    std::uniform_int_distribution<int64_t> key(-50, 50), duration(0, 30), at(-60, 60);
    std::vector<CopyQueue::Copy> copies(static_cast<size_t>(trial % 12));
    for (CopyQueue::Copy& c : copies) c = {key(rng), duration(rng)};
    const CopyQueue q(copies);
    for (int k = 0; k < 5; ++k) {
      const int64_t t = at(rng);
      const CopyQueue::Copy extra{trial % 3 == 0 && !copies.empty() ? copies[0].key : key(rng), duration(rng)};
      ASSERT_EQ(q.lateness(t), walk(copies, nullptr, t)) << "trial " << trial;
      ASSERT_EQ(q.lateness_with(extra, t), walk(copies, &extra, t)) << "trial " << trial;
    }
  }
}

TEST(CopyQueue, SecondsRoundToWholePicoseconds) {
  EXPECT_EQ(to_picoseconds(1.5e-3), 1'500'000'000);
  EXPECT_EQ(to_picoseconds(2.4e-12), 2);
  EXPECT_EQ(to_picoseconds(-3e-9), -3000);
  EXPECT_DOUBLE_EQ(to_seconds(1'500'000'000), 1.5e-3);
}

}  // namespace
}  // namespace lms::autoplan
