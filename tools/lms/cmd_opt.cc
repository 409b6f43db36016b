// `lms opt FILE --passes PIPELINE`: parses a graph, runs a pass pipeline on it and prints the result.
#include <memory>

#include "commands.h"
#include "common.h"
#include "lms/analysis/levels.h"
#include "lms/ir/printer.h"
#include "lms/passes/pass.h"

namespace lms::cli {

namespace {
struct OptCmd {
  std::string file;
  std::string passes;
  std::string output;
  bool verify_each = false;
  bool list = false;
  std::string annotate;  // --annotate: "levels" (or empty)
  ModelArgs model;       // ONNX models: --batch, --frozen, --input-value, --dim
};

// The printed result, with each node's level as a trailing comment when --annotate levels.
Result<std::string> print_result(const Graph& g, const std::string& annotate) {
  if (annotate.empty()) return print_graph(g);
  if (annotate != "levels") return fail("--annotate: unknown annotation '{}' (annotations: levels)", annotate);
  Levels levels = LMS_TRY(compute_levels(g));
  std::vector<std::string> notes;
  for (NodeId n : g.node_ids()) notes.push_back(fmt::format("level {}", levels[n]));
  return print_graph(g, notes);
}

int list_passes() {
  for (const PassInfo& p : pass_registry()) {
    fmt::print("{:<16} {}\n", p.name, p.doc);
    for (const AttrSpec& o : p.options)
      fmt::print("    {}={} ({}) {}\n", o.name, o.default_value ? to_string(*o.default_value) : "required",
                 attr_kind_name(o.kind), o.doc);
  }
  return kExitOk;
}

int run(const OptCmd& c) {
  if (c.list) return list_passes();
  if (c.file.empty()) return report(Error{"give a graph FILE (- for stdin)", ""});
  auto pipeline = parse_pipeline(c.passes);
  if (!pipeline) return report(pipeline.error());
  auto g = load_graph(c.file, c.model);
  if (!g) return report(g.error());
  auto r = run_pipeline(*g, *pipeline, PipelineOptions{.verify_each = c.verify_each});
  if (!r) return report(r.error());
  auto text = print_result(*g, c.annotate);
  if (!text) return report(text.error());
  auto w = write_text(c.output, *text);
  return w ? kExitOk : report(w.error());
}
}  // namespace

void add_opt_command(CLI::App& root, int& exit_code) {
  auto c = std::make_shared<OptCmd>();
  CLI::App* sub = root.add_subcommand("opt", "Run a pass pipeline on a graph and print the result.");
  sub->add_option("FILE", c->file, "Graph in the IR text format (- for stdin), or an ONNX model (.onnx)");
  sub->add_option("--passes", c->passes, "Pipeline, e.g. 'dce,verify' or 'pass{option=value},verify'");
  sub->add_flag("--verify-each", c->verify_each, "Run the verifier after every pass");
  sub->add_flag("--list-passes", c->list, "List the passes and their options, then exit");
  sub->add_option("-o,--output", c->output, "Write to FILE instead of stdout");
  sub->add_option("--annotate", c->annotate, "Print each node's level as a trailing comment: levels");
  sub->add_option("--batch", c->model.batch, "ONNX models: the batch (default: the file's; 1 for a symbolic one)")
      ->each([c](const std::string&) { c->model.batch_given = true; });
  add_onnx_options(sub, c->model);
  sub->callback([c, &exit_code] { exit_code = run(*c); });
}

}  // namespace lms::cli
