// `lms model NAME [options] [-o FILE]`: builds a model's forward graph and prints it in the IR text format.
#include <memory>

#include "commands.h"
#include "common.h"
#include "lms/ir/printer.h"

namespace lms::cli {

namespace {
struct ModelCmd {
  ModelArgs model;
  std::string output;
};

int run(const ModelCmd& c) {
  auto opts = resolve(c.model);
  if (!opts) return report(opts.error());
  auto g = build_model(c.model.name, *opts);
  if (!g) return report(g.error());
  auto w = write_text(c.output, print_graph(*g));
  return w ? kExitOk : report(w.error());
}
}  // namespace

void add_model_command(CLI::App& root, int& exit_code) {
  auto c = std::make_shared<ModelCmd>();
  std::string names;
  for (const ModelInfo& m : model_list()) names += fmt::format("\n  {:<10} {}", m.name, m.summary);
  CLI::App* sub = root.add_subcommand("model", "Print a model's forward graph in the IR text format.\nModels:" + names);
  sub->add_option("NAME", c->model.name, "Model name")->required();
  add_model_options(sub, c->model, /*with_model_flag=*/false);
  sub->add_option("-o,--output", c->output, "Write to FILE instead of stdout");
  sub->callback([c, &exit_code] { exit_code = run(*c); });
}

}  // namespace lms::cli
