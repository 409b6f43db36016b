// Shared planning pieces of `lms plan`, `lms maxbatch` and `lms maxres` (see planning.h).
#include "planning.h"

#include <unistd.h>

#include <map>

#include "lms/runtime/backend_registry.h"
#include "lms/runtime/program.h"

namespace lms::cli {

void add_plan_options(CLI::App* app, PlanArgs& a, bool with_file) {
  if (with_file) {
    app->add_option("FILE", a.file, "Graph in the IR text format (- for stdin), or an ONNX model (.onnx); or use --model");
  }
  add_model_options(app, a.model, /*with_model_flag=*/true);
  add_train_options(app, a.train);
  add_strategy_options(app, a.strategy, /*budget_required=*/true);
  app->add_option("--device", a.device,
                  "Include this backend's kernel workspaces in the plan: reference, cpu, cuda (default: none)");
  app->add_flag("--json", a.json, "Print one JSON object instead of text");
}

void add_picture_options(CLI::App* app, PlanArgs& a) {
  app->add_option("--plot", a.plot,
                  "Write an SVG of device memory over one step: this plan, strategy none's (and tflms's for auto), "
                  "the budget, the swaps and recomputations");
  app->add_option("--trace", a.trace,
                  "Write the predicted step on the device model as a Chrome trace (Perfetto), in the format of "
                  "`lms train --trace`: every node on its stream at its predicted time, planned bytes in use");
}

Result<Graph> training_graph(const PlanArgs& a, const ModelArgs& model, const OnnxModel* onnx) {
  Graph g = LMS_TRY(load_graph(a.file, model, nullptr, onnx));
  TrainArgs train = a.train;
  // A model (built or imported) is planned for training; a text FILE as given.
  if ((a.file.empty() || is_onnx_file(a.file)) && train.optimizer.empty()) train.optimizer = "momentum";
  return apply_train(std::move(g), train);
}

Result<StrategyOptions> planning_options(const PlanArgs& a, std::unique_ptr<Backend>& backend) {
  StrategyOptions o = LMS_TRY(resolve(a.strategy, default_device_model(a.device)));
  const BackendOptions backend_opts = LMS_TRY(backend_options(a.strategy.tf32, a.strategy.backend, a.device));
  if (!a.device.empty()) {
    backend = LMS_TRY(make_backend(a.device, backend_opts));
    o.workspace_bytes = workspaces_of(*backend);
  }
  return o;
}

Result<int64_t> largest_fitting(int64_t limit, const std::function<Result<bool>(int64_t)>& fits) {
  if (limit < 1 || !LMS_TRY(fits(1))) return int64_t{0};
  int64_t good = 1, bad = limit + 1;
  while (good * 2 <= limit) {  // doubling: cheap probes while small
    if (!LMS_TRY(fits(good * 2))) {
      bad = good * 2;
      break;
    }
    good *= 2;
  }
  if (bad == limit + 1 && good < limit && !LMS_TRY(fits(limit))) bad = limit;
  else if (bad == limit + 1) return limit;
  while (bad - good > 1) {
    const int64_t mid = good + (bad - good) / 2;
    if (LMS_TRY(fits(mid))) good = mid;
    else bad = mid;
  }
  return good;
}

Result<Capacity> largest_model(const PlanArgs& a, int64_t limit, const std::string& what,
                               const std::function<int64_t(ModelArgs&, int64_t)>& apply) {
  if (a.model.name.empty() && !is_onnx_file(a.file))
    return fail("needs --model NAME or an ONNX FILE (the {} is a model option)", what);
  if (limit < 1) return fail("--limit must be >= 1, got {}", limit);
  std::unique_ptr<Backend> backend;
  StrategyOptions opts = LMS_TRY(planning_options(a, backend));
  StrategyOptions quiet = opts;
  quiet.on_trial = nullptr;  // --verbose shows the searches at the answer only
  quiet.on_auto_round = nullptr;
  quiet.fits_only = true;    // a probe asks whether a size fits; the answer is planned in full below
  std::optional<OnnxModel> onnx;  // an ONNX file is read once and imported at each size
  if (is_onnx_file(a.file)) onnx = LMS_TRY(read_onnx(a.file));
  const OnnxModel* read = onnx ? &*onnx : nullptr;
  Capacity c;
  int64_t skipped = 0;  // sizes below the smallest the model takes at all (the search's k = 1 is size skipped + 1)
  auto plan_at = [&](int64_t k, const StrategyOptions& o, int64_t& size) -> Result<Plan> {
    ModelArgs m = a.model;
    size = apply(m, k + skipped);
    Graph g = LMS_TRY(training_graph(a, m, read));
    return try_plan(g, o);
  };
  // A model may refuse its smallest size for a reason other than memory (training-mode batch norm over a 1x1
  // map, as in DeepLabV3's image pooling, needs two samples; PyTorch refuses batch 1 there too): the search
  // then starts at the next size.
  if (ModelArgs first = a.model, second = a.model; limit > 1) {
    const int64_t size1 = apply(first, 1), size2 = apply(second, 2);
    if (!training_graph(a, first, read) && training_graph(a, second, read)) {
      skipped = 1;
      --limit;
      if (a.strategy.verbose) fmt::print(stderr, "  {} {:>6}: refused, starting at {}\n", what, size1, size2);
    }
  }
  std::map<int64_t, std::string> refused;  // by k: the sizes refused outright, with the reason
  std::map<int64_t, std::string> failed;   // by k: the sizes planned that do not fit, with the reason
  // On a terminal, without --verbose or --json: one line on stderr, rewritten per probe (a search of a large
  // model plans dozens of sizes and takes seconds to minutes), erased at the end.
  const bool live = !a.json && !a.strategy.verbose && isatty(STDERR_FILENO) == 1;
  auto report_probe = [&](int64_t size, std::string_view result) {
    if (a.strategy.verbose) fmt::print(stderr, "  {} {:>6}: {}\n", what, size, result);
    if (live) fmt::print(stderr, "\r  probe {}: {} {} {}\x1b[K", c.probes, what, size, result);
  };
  auto fits = [&](int64_t k) -> Result<bool> {
    int64_t size = 0;
    if (live) {
      ModelArgs m = a.model;
      fmt::print(stderr, "\r  probe {}: planning {} {}\x1b[K", c.probes + 1, what, apply(m, k));
    }
    auto p = plan_at(k, quiet, size);
    ++c.probes;
    if (!p && k > 1) {  // refused outright: past the capacity, like a size that does not fit
      refused[k] = fmt::format("{} {}: {}", what, size, p.error().str());
      report_probe(size, fmt::format("refused ({})", p.error().str()));
      return false;
    }
    if (!p) return std::unexpected(p.error());
    report_probe(size, p->fits ? "fits" : "does not fit");
    if (!p->fits && p->why) failed[k] = fmt::format("{} {}: {}", what, size, p->why->str());
    return p->fits;
  };
  auto searched = largest_fitting(limit, fits);
  if (live) fmt::print(stderr, "\r\x1b[K");
  if (!searched) return std::unexpected(std::move(searched.error()));
  const int64_t k = *searched;
  c.plan = LMS_TRY(plan_at(std::max<int64_t>(k, 1), opts, c.size));
  c.probes += static_cast<int>(skipped);
  if (k == 0) return fail("does not fit even at {} {}: {}", what, c.size, c.plan.why->str());
  if (auto it = refused.find(k + 1); it != refused.end()) c.limited_by = it->second;
  if (auto it = failed.find(k + 1); it != failed.end()) c.next_fails = it->second;
  return c;
}

nlohmann::ordered_json capacity_json(const std::string& key, const Capacity& c) {
  const Plan& p = c.plan;
  nlohmann::ordered_json j;
  j[key] = c.size;
  j["strategy"] = strategy_name(p.strategy);
  j["budget_bytes"] = p.budget_bytes;
  j["peak_bytes"] = p.memory.device_arena_bytes;
  j["peak_bytes_none"] = p.peak_bytes_none;
  j["min_budget_bytes"] = p.memory.min_budget_bytes;
  j["min_budget_op"] = largest_op(p.graph, p.memory);
  j["swap_out_bytes"] = p.swap_out_bytes;
  if (p.tflms) j["tflms"] = tflms_json(*p.tflms);
  j["probes"] = c.probes;
  j["limited_by"] = c.limited_by.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(c.limited_by);
  j["next_does_not_fit"] = c.next_fails.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(c.next_fails);
  return j;
}

void print_capacity(const std::string& head, const std::string& model, const std::string& note, const Capacity& c) {
  const Plan& p = c.plan;
  fmt::print("{} for '{}' with strategy {} under {}{}: planned peak {} (without LMS {})\n", head, model,
             strategy_name(p.strategy), format_size(p.budget_bytes), note, format_size(p.memory.device_arena_bytes),
             format_size(p.peak_bytes_none));
  if (p.tflms) fmt::print("  tflms {}\n", describe_tflms(*p.tflms));
  if (!c.limited_by.empty()) fmt::print("  limited by a refusal, not by memory: {}\n", c.limited_by);
  if (!c.next_fails.empty()) fmt::print("  the next size does not fit: {}\n", c.next_fails);
}

}  // namespace lms::cli
