// The planning flags (see strategy_args.h).
#include "strategy_args.h"

#include <charconv>

#include "common.h"
#include "lms/sim/device_model.h"
#include "lms/support/size.h"

namespace lms::cli {

void add_strategy_options(CLI::App* app, StrategyArgs& a, bool budget_required) {
  auto* budget = app->add_option("--budget", a.budget, "Device memory for the step: 512MiB, 16GiB, 2GB or bytes" +
                                                           std::string(budget_required ? "" : " (default: unlimited)"));
  if (budget_required) budget->required();
  app->add_option("--host-budget", a.host_budget, "Host memory for swapped tensors (default: unlimited)");
  app->add_option("--strategy", a.strategy,
                  "Memory strategy: none (keep everything), tflms (TFLMS's swapping), auto (swap and recompute for "
                  "the predicted step time on --device-model)")
      ->capture_default_str();
  app->add_option("--tflms-params", a.tflms_params,
                  "tflms: use T,A,G,S (swapout_threshold, swapin_ahead, swapin_groupby, sync_mode) instead of "
                  "searching");
  app->add_option("--device-model", a.device_model,
                  "The device auto plans for, and step times are predicted on: v100-nvlink2, v100-pcie3, "
                  "a100-pcie4, h100-pcie5, h200-pcie5, gh200-c2c, cpu-here (docs/devices.md; auto's default: "
                  "cpu-here for --device cpu/reference, else h200-pcie5)");
  app->add_option("--profile", a.profile,
                  "Node times and copy rates measured by `lms profile`, replacing the device model's roofline where "
                  "they apply and its link rates");
  app->add_flag("--tf32", a.tf32,
                "cuda: run f32 convolutions and matmuls on TF32 tensor cores (faster, not bit-comparable with the "
                "reference) and predict with the device model's TF32 rate");
  app->add_flag("--no-buffer-reuse", a.no_buffer_reuse,
                "Give every tensor a buffer of its own: no element-wise op, softmax or reshape writes its output over "
                "an input it reads last, no reshape shares its input's buffer (docs/planner.md \"Buffer reuse\", "
                "\"Views\"; for comparisons)");
  app->add_option("--plan-threads", a.plan_threads,
                  "auto: threads its search runs on (default 0: one per hardware thread); the plan is the same for "
                  "any number")
      ->check(CLI::Range(0, 1024));
  add_backend_options(app, a.backend);
  app->add_flag("--verbose", a.verbose, "List every parameter set the tflms search simulates, every round of auto's search, and every size maxbatch/maxres probes (on stderr)");
}

Result<TflmsParams> parse_tflms_params(const std::string& text) {
  int values[4] = {};
  const char* p = text.data();
  const char* end = text.data() + text.size();
  for (int i = 0; i < 4; ++i) {
    auto [next, ec] = std::from_chars(p, end, values[i]);
    if (ec != std::errc{} || (i < 3 && (next == end || *next != ',')) || (i == 3 && next != end))
      return fail("--tflms-params: expected four integers T,A,G,S (e.g. 3,1,2,0), got '{}'", text);
    p = next + 1;
  }
  if (values[3] < 0 || values[3] > 3) return fail("--tflms-params: sync_mode must be 0, 1, 2 or 3, got {}", values[3]);
  TflmsParams params;
  params.swapout_threshold = values[0];
  params.swapin_ahead = values[1];
  params.swapin_groupby = values[2];
  params.sync_mode = static_cast<SyncMode>(values[3]);
  return params;
}

std::string_view default_device_model(std::string_view device) {
  return device == "cpu" || device == "reference" ? "cpu-here" : "h200-pcie5";
}

Result<StrategyOptions> resolve(const StrategyArgs& a, std::string_view default_model) {
  StrategyOptions o;
  if (!a.budget.empty()) {
    auto b = parse_size(a.budget);
    if (!b) return wrap("--budget", b.error());
    o.budget_bytes = *b;
  }
  if (!a.host_budget.empty()) {
    auto b = parse_size(a.host_budget);
    if (!b) return wrap("--host-budget", b.error());
    o.host_budget_bytes = *b;
  }
  o.strategy = LMS_TRY(parse_strategy(a.strategy));
  if (!a.tflms_params.empty()) {
    if (o.strategy != Strategy::tflms) return fail("--tflms-params needs --strategy tflms");
    o.tflms_fixed = LMS_TRY(parse_tflms_params(a.tflms_params));
  }
  if (a.verbose) o.on_trial = print_trial, o.on_auto_round = print_auto_round;
  o.reuse_buffers = !a.no_buffer_reuse;
  o.threads = a.plan_threads;
  if (!a.device_model.empty()) {
    auto m = device_model(a.device_model);
    if (!m) return wrap("--device-model", m.error());
    o.device_model = std::move(*m);
  }
  else if (o.strategy == Strategy::automatic) o.device_model = LMS_TRY(device_model(default_model));
  if (a.tf32 && o.device_model) {
    auto m = with_tf32(std::move(*o.device_model));
    if (!m) return wrap("--tf32", m.error());
    o.device_model = std::move(*m);
  }
  if (!a.profile.empty()) {
    if (!o.device_model) return fail("--profile needs --device-model (for the nodes the profile does not name)");
    MeasuredProfile profile = LMS_TRY(read_profile(a.profile));
    o.measured = std::move(profile.nodes);
    if (profile.d2h_bytes_per_s > 0) {
      o.device_model->d2h_bytes_per_s = profile.d2h_bytes_per_s;
      o.device_model->h2d_bytes_per_s = profile.h2d_bytes_per_s;
      o.device_model->source += fmt::format("; copy rates measured by lms profile ({})", a.profile);
    }
  }
  return o;
}

void add_backend_options(CLI::App* app, BackendFlags& flags) {
  app->add_option("--cuda-workspace", flags.workspace,
                  "cuda: the largest workspace one convolution's cuDNN algorithm may use (and, each, its gemms' "
                  "partial sums and column matrices), planned as a buffer (default 256MiB; a larger one may allow "
                  "faster algorithms, a batch whose algorithms all need more runs in chunks)");
  app->add_option("--cuda-conv-gemm", flags.conv_gemm,
                  "cuda: which convolutions run as cuBLAS gemms instead of cuDNN: off, 1x1 (the 1x1 unpadded ones, "
                  "any stride; the default), strided (those and every strided one). Deterministic either way, "
                  "different bits")
      ->check(CLI::IsMember({"off", "1x1", "strided"}));
  app->add_option("--cpu-layouts", flags.cpu_layouts,
                  "cpu: blocked (the default: activations between convolutions, batch norms and elementwise ops stay "
                  "in oneDNN's blocked layouts) or plain (every value in the IR's row-major layout, each convolution "
                  "reordering its operands; for comparison)")
      ->check(CLI::IsMember({"blocked", "plain"}));
}

Result<BackendOptions> backend_options(bool tf32, const BackendFlags& flags, std::string_view device) {
  if (tf32 && !device.empty() && device != "cuda")
    return fail("--tf32 applies to --device cuda (TF32 tensor cores), not '{}'", device);
  const std::string elsewhere =
      device.empty() ? std::string("planning without a backend") : fmt::format("'{}'", device);
  BackendOptions o{.allow_tf32 = tf32};
  if (!flags.conv_gemm.empty()) {
    if (device != "cuda") return fail("--cuda-conv-gemm applies to --device cuda, not {}", elsewhere);
    o.conv_gemm = flags.conv_gemm == "off" ? ConvGemm::off : flags.conv_gemm == "1x1" ? ConvGemm::one_by_one
                                                                                    : ConvGemm::strided;
  }
  if (!flags.workspace.empty()) {
    if (device != "cuda") return fail("--cuda-workspace applies to --device cuda, not {}", elsewhere);
    auto b = parse_size(flags.workspace);
    if (!b) return wrap("--cuda-workspace", b.error());
    o.max_workspace_bytes = *b;
  }
  if (!flags.cpu_layouts.empty()) {
    if (device != "cpu") return fail("--cpu-layouts applies to --device cpu, not {}", elsewhere);
    o.cpu_blocked_layouts = flags.cpu_layouts == "blocked";
  }
  return o;
}

std::string describe_tflms(const TflmsParams& p) {
  return fmt::format("T={} A={} G={} sync_mode={} (window {})", p.swapout_threshold, p.swapin_ahead,
                     p.swapin_groupby, static_cast<int>(p.sync_mode), p.trigger_window);
}

nlohmann::ordered_json tflms_json(const TflmsParams& p) {
  nlohmann::ordered_json j;
  j["swapout_threshold"] = p.swapout_threshold;
  j["swapin_ahead"] = p.swapin_ahead;
  j["swapin_groupby"] = p.swapin_groupby;
  j["sync_mode"] = static_cast<int>(p.sync_mode);
  j["trigger_window"] = p.trigger_window;
  return j;
}

void print_trial(const TflmsTrial& t) {
  fmt::print(stderr, "  try {:<8} {:<40} {:<9} simulated peak {}, {} tensors swapped\n", tflms_stage_name(t.stage),
             describe_tflms(t.params), t.fits ? "fits" : "too big", format_size(t.peak_device_bytes),
             t.swapped_tensors);
}

void print_auto_round(std::string_view schedule, const AutoRound& r) {
  std::string greedy(r.greedy);
  if (r.reuse_estimate) greedy += " reuse";
  if (r.past_stuck) greedy += fmt::format(" past {}", r.set_aside);
  if (r.pinned > 0) greedy += fmt::format(" +{} pinned", r.pinned);
  std::string result = r.fits ? fmt::format("fits, {:.4g} s", r.step_seconds) : std::string("too big");
  if (r.delayed_bytes > 0) result += fmt::format(", {} with prefetches delayed", format_size(r.delayed_bytes));
  const std::string planned_at = r.planned_at.empty() ? std::string() : " at " + r.planned_at;
  fmt::print(stderr, "  auto {:<11} {:<17} round {}: target {}, estimate {}{} at {}, planned {}{}: {} ({} swapped, {} "
             "recomputed)\n", schedule, greedy, r.round, format_size(r.target_bytes), format_size(r.estimate_bytes),
             r.reached ? "" : " (stuck)", r.estimate_at, format_size(r.planned_bytes), planned_at, result, r.swaps,
             r.recomputations);
}

}  // namespace lms::cli
