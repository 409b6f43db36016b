// Independent pieces of auto's search (its greedies, the refinement of each plan, each plan's prefetch advance)
// run at once on AutoOptions::threads threads. Each task gets its own copy of the options, whose progress
// callback records the task's rounds instead of printing them; the caller replays the logs of the tasks it keeps,
// in task order, and stops where running them one after another would have stopped. So the plan, the progress
// output and the reported rounds are the same for any number of threads.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "lms/plan/auto/auto_planner.h"

namespace lms {

template <class T>
struct AutoTask {
  T value;                        // what the task returned
  std::vector<AutoRound> rounds;  // the rounds it reported (empty without a progress callback)
};

// f(i, options) for every i in [0, n), on up to `o.threads` threads (0: one per hardware thread), each with its
// own copy of `o`. Results and logs in task order.
template <class T, class F>
std::vector<AutoTask<T>> run_auto_tasks(size_t n, const AutoOptions& o, F&& f) {
  std::vector<std::optional<T>> values(n);
  std::vector<std::vector<AutoRound>> logs(n);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) {
      AutoOptions own = o;
      if (o.on_round) own.on_round = [&logs, i](const AutoRound& r) { logs[i].push_back(r); };
      values[i].emplace(f(i, std::as_const(own)));
    }
  };
  const size_t hardware = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min(n, o.threads > 0 ? static_cast<size_t>(o.threads) : hardware);
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) {
    try {
      pool.emplace_back(work);
    } catch (const std::system_error&) {  // no more threads to be had: the ones running take the rest
      break;
    }
  }
  work();
  for (std::thread& t : pool) t.join();
  std::vector<AutoTask<T>> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back({std::move(*values[i]), std::move(logs[i])});
  return out;
}

}  // namespace lms
