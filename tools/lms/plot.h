// `lms plan --plot FILE.svg`: device memory in use over one training step, as a plain SVG that any browser shows.
// One curve per plan (the strategy's and, for comparison, strategy none's), the budget as a dashed line, and a
// tick under the axis where each swap-out starts (d2h) and each swap-in starts (h2d). The x axis is the
// fraction of the step: predicted time when a device model gave node times, else the position in the schedule.
// Deterministic text (fixed number formatting), so tests can check it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lms/ir/graph.h"
#include "lms/plan/memory_planner.h"

namespace lms::cli {

struct MemoryCurve {
  std::string label;             // legend text, e.g. "tflms (planned peak 15.9 GiB)"
  std::string color;             // an SVG color
  std::vector<double> x;         // fraction of the step, in [0, 1], non-decreasing
  std::vector<int64_t> bytes;    // device bytes in use at x (same length)
  std::vector<double> swap_out;  // fractions where swap-outs start
  std::vector<double> swap_in;   // fractions where swap-ins start
};

// Device bytes live at each position of a plan's schedule (parameters and state included), from the plan's
// buffer intervals; `start` (by NodeId, may be empty) gives each node's predicted start time, else the
// position is used. x is normalized to [0, 1].
MemoryCurve memory_curve(const Graph& scheduled, const MemoryPlan& plan, const std::vector<double>& start,
                         std::string label, std::string color);

// The SVG document.
std::string memory_svg(const std::string& title, const std::vector<MemoryCurve>& curves, int64_t budget_bytes);

}  // namespace lms::cli
