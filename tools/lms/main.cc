// `lms`: the command line of LMS. Dispatches to one subcommand per file (cmd_*.cc). Usage errors print one line
// and exit 2; command failures print one line and exit 1; nothing escapes as an exception or a core dump.
#include <exception>
#include <string>

#include <fmt/core.h>

#include "commands.h"
#include "common.h"

int main(int argc, char** argv) {
  using namespace lms::cli;
  CLI::App app{
      "lms: plans and runs training steps whose memory needs exceed the accelerator's memory.\n"
      "Run `lms COMMAND --help` for the options of a command.",
      "lms"};
  app.require_subcommand(1);
  app.fallthrough(false);
  int exit_code = kExitOk;
  add_model_command(app, exit_code);
  add_stats_command(app, exit_code);
  add_opt_command(app, exit_code);
  add_train_command(app, exit_code);
  add_plan_command(app, exit_code);
  add_maxbatch_command(app, exit_code);
  add_maxres_command(app, exit_code);
  add_profile_command(app, exit_code);
  std::string known;
  bool found = false;
  for (const CLI::App* sub : app.get_subcommands({})) {
    known += (known.empty() ? "" : ", ") + sub->get_name();
    found = found || (argc > 1 && sub->get_name() == argv[1]);
  }
  if (argc > 1 && argv[1][0] != '-' && !found) {
    fmt::print(stderr, "lms: error: unknown command '{}' (commands: {})\n", argv[1], known);
    return kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    fmt::print("{}", app.help());
    return kExitOk;
  } catch (const CLI::CallForAllHelp&) {
    fmt::print("{}", app.help("", CLI::AppFormatMode::All));
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    // Help on a subcommand arrives as CallForHelp thrown from the subcommand; CLI11 handles it in exit().
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    fmt::print(stderr, "lms: error: {} (see lms --help)\n", e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    fmt::print(stderr, "lms: error: internal: {}\n", e.what());
    return kExitError;
  }
  return exit_code;
}
