// `lms stats (FILE | --model NAME ...) [--train OPT ...] [--json]`: parameters, FLOPs, node and level counts,
// activation bytes and the planned peak without LMS, of the forward graph or (with --train) of its training
// graph.
#include <memory>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "common.h"
#include "lms/analysis/levels.h"
#include "lms/analysis/stats.h"
#include "lms/plan/strategy.h"
#include "train_args.h"

namespace lms::cli {

namespace {
struct StatsCmd {
  std::string file;
  ModelArgs model;
  TrainArgs train;
  bool json = false;
};

int run(const StatsCmd& c) {
  auto forward = load_graph(c.file, c.model);
  if (!forward) return report(forward.error());
  auto g = apply_train(std::move(*forward), c.train);
  if (!g) return report(g.error());
  auto levels = compute_levels(*g);
  if (!levels) return report(levels.error());
  GraphStats s = graph_stats(*g);
  // The peak without LMS: the exact plan of strategy none (no workspaces, no budget).
  auto none = try_plan(*g, StrategyOptions{});
  if (!none) return report(none.error());
  if (c.json) {
    nlohmann::ordered_json j;
    j["graph"] = g->name();
    j["nodes"] = s.nodes;
    j["levels"] = levels->count();
    j["params"] = s.params;
    j["param_bytes"] = s.param_bytes;
    j["state_bytes"] = s.state_bytes;
    j["flops"] = s.flops;
    j["activation_bytes"] = s.activation_bytes;
    j["input_bytes"] = s.input_bytes;
    j["peak_bytes_none"] = none->memory.device_arena_bytes;
    j["min_budget_bytes"] = none->memory.min_budget_bytes;
    j["min_budget_op"] = largest_op(none->graph, none->memory);
    fmt::print("{}\n", j.dump(2));
    return kExitOk;
  }
  fmt::print("graph {}\n", g->name());
  fmt::print("  nodes             {}\n", format_count(s.nodes));
  fmt::print("  levels            {}\n", format_count(levels->count()));
  fmt::print("  parameters        {} ({})\n", format_count(s.params), format_size(s.param_bytes));
  fmt::print("  persistent state  {}\n", format_size(s.state_bytes));
  fmt::print("  FLOPs             {:.4g} ({:.4g} multiply-adds)\n", s.flops, s.flops / 2);
  fmt::print("  activations       {}\n", format_size(s.activation_bytes));
  fmt::print("  inputs            {}\n", format_size(s.input_bytes));
  fmt::print("  peak without LMS  {} (hard minimum {}: {})\n", format_size(none->memory.device_arena_bytes),
             format_size(none->memory.min_budget_bytes), largest_op(none->graph, none->memory));
  return kExitOk;
}
}  // namespace

void add_stats_command(CLI::App& root, int& exit_code) {
  auto c = std::make_shared<StatsCmd>();
  CLI::App* sub = root.add_subcommand("stats", "Summarize a graph: parameters, FLOPs, nodes, levels, activation bytes, peak without LMS.");
  sub->add_option("FILE", c->file, "Graph in the IR text format (- for stdin), or an ONNX model (.onnx); or use --model");
  add_model_options(sub, c->model, /*with_model_flag=*/true);
  add_train_options(sub, c->train);
  sub->add_flag("--json", c->json, "Print one JSON object instead of text");
  sub->callback([c, &exit_code] { exit_code = run(*c); });
}

}  // namespace lms::cli
