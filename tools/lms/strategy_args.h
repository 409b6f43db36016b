// The planning flags shared by `lms train`, `lms plan`, `lms maxbatch` and `lms maxres`: the device and host
// budgets, the strategy, fixed tflms parameters, and how a tflms parameter set is printed (text and JSON keys
// of DESIGN.md: swapout_threshold, swapin_ahead, swapin_groupby, sync_mode).
#pragma once

#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "lms/analysis/tflms_swaps.h"
#include "lms/plan/strategy.h"
#include "lms/runtime/backend.h"
#include "lms/sim/cost_model.h"
#include "lms/support/error.h"

namespace lms::cli {

// The backends' flags beside --tf32 (BackendOptions), on every command that makes a backend.
struct BackendFlags {
  std::string workspace;         // --cuda-workspace SIZE: the largest convolution workspace (empty: the default)
  std::string conv_gemm;         // --cuda-conv-gemm off|1x1|strided (empty: the default, 1x1)
  std::string cpu_layouts;       // --cpu-layouts blocked|plain (empty: the default, blocked)
};

struct StrategyArgs {
  std::string budget;         // --budget SIZE (empty: unlimited, unless `budget_required`)
  std::string host_budget;    // --host-budget SIZE (empty: unlimited)
  std::string strategy = "none";
  std::string tflms_params;   // --tflms-params T,A,G,S (empty: search)
  bool verbose = false;       // --verbose: every parameter set the tflms search tries
  bool no_buffer_reuse = false;  // --no-buffer-reuse: no output written over a dying input's buffer
  int plan_threads = 0;          // --plan-threads: threads auto's search runs on (0: one per hardware thread)
  bool tf32 = false;          // --tf32: cuda's f32 convolutions and matmuls on TF32 tensor cores, predicted so
  BackendFlags backend;          // --cuda-workspace, --cuda-conv-gemm, --cpu-layouts
  std::string device_model;   // --device-model NAME: the device auto plans for and times are predicted on
  std::string profile;        // --profile FILE: measured node times and copy rates (lms profile) overriding the
                              // device model's roofline and link rates
};

// Adds --budget (required when `budget_required`), --host-budget, --strategy, --tflms-params, --verbose,
// --device-model, --profile, --tf32, --no-buffer-reuse, --cuda-workspace, --cuda-conv-gemm.
void add_strategy_options(CLI::App* app, StrategyArgs& args, bool budget_required);

// The options the flags ask for (workspaces are the caller's). The device model is --device-model's, or for
// strategy auto without one `default_device_model` (the caller's choice for its device), at its TF32 rate with
// --tf32. Errors name the flag.
Result<StrategyOptions> resolve(const StrategyArgs& args, std::string_view default_device_model);

// The backend options the flags ask for on `device` (empty: planning without a backend). Errors: --tf32 or a
// cuda flag with a backend other than cuda, a bad --cuda-workspace size.
Result<BackendOptions> backend_options(bool tf32, const BackendFlags& flags, std::string_view device);
// Adds --cuda-workspace and --cuda-conv-gemm.
void add_backend_options(CLI::App* app, BackendFlags& flags);

// The device model auto plans for when --device-model is not given: cpu-here for the cpu and reference
// backends (measured here), h200-pcie5 for cuda and for plans made without a backend.
std::string_view default_device_model(std::string_view device);

// What `lms profile` measured on a backend.
struct MeasuredProfile {
  MeasuredTimes nodes;         // each profiled node's median seconds, by the name of its first output
  double d2h_bytes_per_s = 0;  // the backend's measured copy rates; 0: none measured (--copy-bytes 0)
  double h2d_bytes_per_s = 0;
};

// The profile `lms profile` wrote. Errors: unreadable, not a profile, a bad entry.
Result<MeasuredProfile> read_profile(const std::string& path);

// "T,A,G,S" -> parameters (ranges are checked by decide_tflms_swaps). Errors name --tflms-params.
Result<TflmsParams> parse_tflms_params(const std::string& text);
// "T=3 A=1 G=2 sync_mode=0 (window 10)".
std::string describe_tflms(const TflmsParams& p);
// {"swapout_threshold": T, "swapin_ahead": A, "swapin_groupby": G, "sync_mode": S, "trigger_window": W}.
nlohmann::ordered_json tflms_json(const TflmsParams& p);
// One line per search trial, for --verbose (on stderr, so --json stays one object on stdout).
void print_trial(const TflmsTrial& t);
// One line on stderr per round of auto's search (--verbose).
void print_auto_round(std::string_view schedule, const AutoRound& r);

}  // namespace lms::cli
