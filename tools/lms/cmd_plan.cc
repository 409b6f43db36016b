// `lms plan (FILE | --model NAME ...) --budget SIZE [--strategy none|tflms|auto] [--device D] [--device-model M]
// [--profile P] [--plot F.svg] [--trace F.json] [--json]`: the pre-flight report. Plans the training step without
// running it and says whether it fits the budget: the planned peak with the strategy and without any, the hard
// minimum, parameter bytes, host bytes, bytes swapped each way, FLOPs recomputed, for tflms the parameters chosen
// (and with --verbose every parameter set the search simulated), for auto which plan it took and the tensors that
// cost most; with a device model (--device-model, or auto's default) the step time the plan predicts on that device
// (roofline or profiled op times, three-stream time simulation with the plan's buffer-reuse waits) and the time lost
// waiting for copies; --plot draws memory over the step, --trace writes the predicted step as a Chrome trace
// (sim/predicted_trace.h). A plan that does not fit prints its report (fits: false) and exits 1 with the reason as
// the one error line.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "lms/sim/predicted_trace.h"
#include "lms/sim/time_sim.h"
#include "planning.h"
#include "plot.h"

namespace lms::cli {

namespace {

// The step time the plan predicts on --device-model (roofline op times, three-stream simulation).
struct Prediction {
  DeviceModel model;
  TimeSimResult sim;
  bool measured = false;  // node times from --profile where it names them
};

nlohmann::ordered_json plan_json(const Plan& p, const std::optional<Prediction>& pred) {
  nlohmann::ordered_json j;
  j["fits"] = p.fits;
  j["strategy"] = strategy_name(p.strategy);
  j["budget_bytes"] = p.budget_bytes == kUnlimitedBytes ? nlohmann::ordered_json() : nlohmann::ordered_json(p.budget_bytes);
  j["peak_bytes"] = p.memory.device_arena_bytes;
  j["peak_bytes_none"] = p.peak_bytes_none;
  j["param_bytes"] = p.memory.persistent_bytes;
  j["min_budget_bytes"] = p.memory.min_budget_bytes;
  j["min_budget_op"] = largest_op(p.graph, p.memory);
  j["lower_bound_bytes"] = p.memory.lower_bound_bytes;
  j["reused_buffers"] = p.memory.reused_buffers;
  j["host_bytes"] = p.memory.host_arena_bytes;
  j["swap_out_bytes"] = p.swap_out_bytes;
  j["swap_in_bytes"] = p.swap_in_bytes;
  j["swapped_tensors"] = p.swapped_tensors;
  j["recompute_flops"] = p.recompute_flops;
  j["predicted_step_seconds"] = pred ? nlohmann::ordered_json(pred->sim.step_seconds) : nlohmann::ordered_json();
  if (pred) {
    j["device_model"] = pred->model.name;
    j["predicted_compute_seconds"] = pred->sim.busy_seconds[static_cast<int>(StreamId::compute)];
    j["predicted_stall_seconds"] = pred->sim.stall_seconds[static_cast<int>(StreamId::compute)];
  }
  j["lms_needed"] = p.lms_needed;
  if (p.tflms) {
    nlohmann::ordered_json t = tflms_json(*p.tflms);
    t["simulated_peak_bytes"] = p.sim_peak_bytes;
    t["levels"] = p.levels;
    t["trials"] = p.trials.size();
    t["rounds"] = p.tflms_rounds;
    j["tflms"] = t;
  }
  if (p.strategy == Strategy::automatic && p.lms_needed) {
    nlohmann::ordered_json a;
    a["source"] = p.auto_source;
    a["rounds"] = p.auto_rounds;
    a["swapped"] = p.swapped_tensors;
    a["recomputed"] = p.recomputed_tensors;
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const AutoChoice& c : p.choices) {
      nlohmann::ordered_json e;
      e["value"] = c.value;
      e["kind"] = c.kind == AutoChoice::Kind::swap ? "swap" : "recompute";
      e["bytes"] = c.bytes;
      e["added_seconds"] = c.seconds;
      e["gap_seconds"] = c.gap_seconds;
      if (c.kind == AutoChoice::Kind::swap) {
        e["forward"] = c.forward;
        e["trigger"] = c.trigger;
        e["hold"] = c.hold;
      } else {
        e["chain"] = c.chain;
        if (!c.remade_from.empty()) e["remade_from"] = c.remade_from;
      }
      list.push_back(e);
    }
    a["choices"] = list;
    j["auto"] = a;
  }
  if (p.why) j["error"] = p.why->str();
  return j;
}

// Auto's choices: counts, then the ones that cost most (added time, then bytes; ties by position).
void print_costliest(const Plan& p) {
  fmt::print("  swapped         {} tensors: {} out, {} in per step; host memory {}\n", p.swapped_tensors,
             format_size(p.swap_out_bytes), format_size(p.swap_in_bytes), format_size(p.memory.host_arena_bytes));
  fmt::print("  recomputed      {} tensors: {:.4g} GFLOP per step run again\n", p.recomputed_tensors,
             p.recompute_flops / 1e9);
  std::vector<size_t> order(p.choices.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const AutoChoice &x = p.choices[a], &y = p.choices[b];
    return x.seconds != y.seconds ? x.seconds > y.seconds : x.bytes > y.bytes;
  });
  constexpr size_t kShown = 5;  // the costliest few; --json lists every choice
  fmt::print("  costliest       (estimated added time; --json lists all {})\n", p.choices.size());
  for (size_t i = 0; i < std::min(kShown, order.size()); ++i) {
    const AutoChoice& c = p.choices[order[i]];
    if (c.kind == AutoChoice::Kind::swap)
      fmt::print("    swap{}  %{:<28} {:>10}  +{:.3g} s  (gap {:.3g} s; {}prefetch after %{})\n",
                 c.forward ? " fwd" : "    ", c.value,
                 format_size(c.bytes), c.seconds, c.gap_seconds,
                 c.hold.empty() ? "" : fmt::format("held through %{}; ", c.hold), c.trigger);
    else
      fmt::print("    recompute %{:<28} {:>10}  +{:.3g} s  (gap {:.3g} s{})\n", c.value, format_size(c.bytes),
                 c.seconds, c.gap_seconds,
                 !c.remade_from.empty() ? fmt::format("; remade from %{} by {} ops", c.remade_from, c.chain.size() + 1)
                 : c.chain.empty()      ? ""
                                        : fmt::format("; with %{}", fmt::join(c.chain, ", %")));
  }
}

void print_plan(const std::string& graph, const Plan& p, const std::optional<Prediction>& pred) {
  fmt::print("plan for '{}' with strategy {}: {}\n", graph, strategy_name(p.strategy), p.fits ? "fits" : "does NOT fit");
  fmt::print("  budget          {}\n", p.budget_bytes == kUnlimitedBytes ? "unlimited" : format_size(p.budget_bytes));
  fmt::print("  planned peak    {}\n", format_size(p.memory.device_arena_bytes));
  fmt::print("  without LMS     {}\n", format_size(p.peak_bytes_none));
  fmt::print("  hard minimum    {} (parameters and state {} plus the largest op: {})\n",
             format_size(p.memory.min_budget_bytes), format_size(p.memory.persistent_bytes),
             largest_op(p.graph, p.memory));
  if (p.memory.reused_buffers > 0)
    fmt::print("  buffer reuse    {} outputs written over the buffer of an input they read last or viewing it, "
               "or parts in place\n",
               p.memory.reused_buffers);
  if (p.tflms) {  // the graph was rewritten
    fmt::print("  swapped         {} tensors: {} out, {} in per step; host memory {}\n", p.swapped_tensors,
               format_size(p.swap_out_bytes), format_size(p.swap_in_bytes), format_size(p.memory.host_arena_bytes));
    fmt::print("  tflms           {}; simulated peak {}; {} parameter sets simulated over {} levels\n",
               describe_tflms(*p.tflms), format_size(p.sim_peak_bytes), p.trials.size(), p.levels);
  } else if (p.fits && p.strategy != Strategy::none && !p.lms_needed) {
    fmt::print("  LMS not needed: everything fits without swapping\n");
  }
  // auto_source is empty when the budget was refused before auto planned (below the hard minimum)
  if (p.strategy == Strategy::automatic && p.lms_needed && !p.auto_source.empty()) {
    fmt::print("  auto            took {}\n", p.auto_source);
    if (!p.choices.empty()) print_costliest(p);
  }
  if (pred) {
    const auto compute = static_cast<int>(StreamId::compute);
    fmt::print("  predicted step  {:.4g} s on {} ({:.4g} s of compute, {:.4g} s waiting for copies; {})\n",
               pred->sim.step_seconds, pred->model.name, pred->sim.busy_seconds[compute],
               pred->sim.stall_seconds[compute], pred->measured ? "measured node times" : "roofline");
  }
}

// The --plot SVG: this plan's memory curve and strategy none's (x: predicted time with a device model, else
// schedule position).
Result<void> write_plot(const PlanArgs& a, const Graph& training, const StrategyOptions& opts, const Plan& plan,
                        const std::optional<Prediction>& pred, const MeasuredTimes* measured) {
  auto curve = [](const Plan& p, std::vector<double> start, std::string color) {
    return memory_curve(p.graph, p.memory, start,
                        fmt::format("{} (planned peak {})", strategy_name(p.strategy),
                                    format_size(p.memory.device_arena_bytes)),
                        std::move(color));
  };
  std::vector<MemoryCurve> curves;
  auto other = [&](Strategy s, const char* color) -> Result<void> {
    StrategyOptions o = opts;
    o.strategy = s;
    o.on_trial = nullptr;
    Plan p = LMS_TRY(try_plan(training, o));
    std::vector<double> start;
    if (pred) start = LMS_TRY(simulate_time(p.graph, pred->model, measured, &p.memory)).start;
    curves.push_back(curve(p, std::move(start), color));
    return {};
  };
  if (plan.strategy != Strategy::none) LMS_TRY_VOID(other(Strategy::none, "#888888"));
  if (plan.strategy == Strategy::automatic && plan.lms_needed) LMS_TRY_VOID(other(Strategy::tflms, "#d08020"));
  curves.push_back(curve(plan, pred ? pred->sim.start : std::vector<double>{}, "#1f5fbf"));
  const std::string title = fmt::format("'{}': device memory over one training step{}", training.name(),
                                        pred ? fmt::format(" (time on {})", pred->model.name) : std::string());
  return write_text(a.plot, memory_svg(title, curves, plan.budget_bytes));
}

// On a terminal, without --json or --verbose: auto's search (seconds to minutes on a large graph) counted on one
// stderr line, rewritten at most every 0.2 s from whichever search thread made a plan, erased when it is done.
struct LiveSearch {
  std::mutex mutex;
  int plans = 0;
  bool shown = false;
  const std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last = start;

  void plan_made() {
    const std::lock_guard lock(mutex);
    ++plans;
    const auto now = std::chrono::steady_clock::now();
    if (now - last < std::chrono::milliseconds(200)) return;
    last = now;
    shown = true;
    fmt::print(stderr, "\r  auto: {} plans tried, {:.0f} s\x1b[K", plans,
               std::chrono::duration<double>(now - start).count());
  }
  ~LiveSearch() {
    if (shown) fmt::print(stderr, "\r\x1b[K");
  }
};

int run(const PlanArgs& a) {
  auto g = training_graph(a, a.model);
  if (!g) return report(g.error());
  std::unique_ptr<Backend> backend;
  auto opts = planning_options(a, backend);
  if (!opts) return report(opts.error());
  const std::optional<DeviceModel>& model = opts->device_model;
  if (!a.trace.empty() && !model)
    return report(Error{"--trace: a predicted trace needs a device model (--device-model)", {}});
  std::optional<MeasuredTimes> measured;
  if (!opts->measured.empty()) measured = opts->measured;
  std::optional<LiveSearch> live;
  if (!a.json && !a.strategy.verbose && isatty(STDERR_FILENO) == 1) {
    live.emplace();
    opts->on_auto_plan = [&live] { live->plan_made(); };
  }
  auto plan = try_plan(*g, *opts);
  opts->on_auto_plan = nullptr;  // the plot's comparison plans run silently
  live.reset();
  if (!plan) return report(plan.error());
  std::optional<Prediction> pred;
  if (model) {
    auto sim = simulate_time(plan->graph, *model, measured ? &*measured : nullptr, &plan->memory);
    if (!sim) return report(sim.error());
    pred = Prediction{*model, std::move(*sim), measured.has_value()};
  }
  if (!a.plot.empty()) {
    auto w = write_plot(a, *g, *opts, *plan, pred, measured ? &*measured : nullptr);
    if (!w) return report(w.error());
  }
  if (!a.trace.empty()) {
    auto trace = predicted_trace(plan->graph, plan->memory, pred->sim,
                                 fmt::format("lms plan: {} predicted on {}", strategy_name(plan->strategy),
                                             pred->model.name));
    if (!trace) return report(trace.error());
    if (auto w = trace->write(a.trace); !w) return report(w.error());
  }
  if (a.json) {
    fmt::print("{}\n", plan_json(*plan, pred).dump(2));
  } else {
    print_plan(g->name(), *plan, pred);
  }
  if (!plan->fits) return report(*plan->why);
  return kExitOk;
}

}  // namespace

void add_plan_command(CLI::App& root, int& exit_code) {
  auto a = std::make_shared<PlanArgs>();
  a->model.batch = kDefaultTrainBatch;
  CLI::App* sub = root.add_subcommand(
      "plan", "Plan a training step under a budget without running it: does it fit, peak with and without LMS.");
  add_plan_options(sub, *a, /*with_file=*/true);
  add_picture_options(sub, *a);
  sub->callback([a, &exit_code] { exit_code = run(*a); });
}

}  // namespace lms::cli
