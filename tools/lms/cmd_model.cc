// `lms model NAME [options] [--train OPT ...] [-o FILE]`: builds a model's forward graph (or, with --train, its
// training graph) and prints it in the IR text format.
#include <memory>

#include "commands.h"
#include "common.h"
#include "lms/ir/printer.h"
#include "train_args.h"

namespace lms::cli {

namespace {
struct ModelCmd {
  ModelArgs model;
  TrainArgs train;
  std::string output;
};

int run(const ModelCmd& c) {
  auto opts = resolve(c.model);
  if (!opts) return report(opts.error());
  auto forward = build_model(c.model.name, *opts);
  if (!forward) return report(forward.error());
  auto g = apply_train(std::move(*forward), c.train);
  if (!g) return report(g.error());
  auto w = write_text(c.output, print_graph(*g));
  return w ? kExitOk : report(w.error());
}
}  // namespace

void add_model_command(CLI::App& root, int& exit_code) {
  auto c = std::make_shared<ModelCmd>();
  std::string names;
  for (const ModelInfo& m : model_list()) names += fmt::format("\n  {:<10} {}", m.name, m.summary);
  CLI::App* sub = root.add_subcommand(
      "model",
      "Print a model's forward graph (with --train, its training graph) in the IR text format.\nModels:" + names);
  sub->add_option("NAME", c->model.name, "Model name")->required();
  add_model_options(sub, c->model, /*with_model_flag=*/false);
  add_train_options(sub, c->train);
  sub->add_option("-o,--output", c->output, "Write to FILE instead of stdout");
  sub->callback([c, &exit_code] { exit_code = run(*c); });
}

}  // namespace lms::cli
