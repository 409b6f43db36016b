// The subcommands of `lms`. Each adds itself to the root app and, when chosen, runs and stores its exit code.
#pragma once

#include <CLI/CLI.hpp>

namespace lms::cli {

void add_model_command(CLI::App& root, int& exit_code);
void add_stats_command(CLI::App& root, int& exit_code);
void add_opt_command(CLI::App& root, int& exit_code);
void add_train_command(CLI::App& root, int& exit_code);
void add_plan_command(CLI::App& root, int& exit_code);
void add_maxbatch_command(CLI::App& root, int& exit_code);
void add_maxres_command(CLI::App& root, int& exit_code);
void add_profile_command(CLI::App& root, int& exit_code);

}  // namespace lms::cli
