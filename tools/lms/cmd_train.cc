// `lms train (FILE | --model NAME ...) --device D [--budget SIZE] [--steps K | --epochs E] ...`: trains a model
// on a backend under a device budget (runtime/trainer.h does the work). On a terminal it redraws a progress
// bar in place; otherwise it prints about kProgressLines plain lines; with --json only the JSON object.
// Ctrl-C stops after the current step: the report covers the steps done, --save still writes, and the exit
// code is kExitInterrupted. --trace FILE writes a Chrome trace of the first steps and the last (docs/trace.md);
// the file is created before training, so a path that cannot be written is an error before any step runs.
// --save writes the checkpoint with its steps record, --save-every N also every N steps (through a temporary
// file), and --load of such a checkpoint resumes the data order after its steps (docs/checkpoints.md).
// --lr-schedule and its flags (train_args.h) give each step its learning rate (docs/cli.md).
#include <algorithm>
#include <csignal>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "common.h"
#include "strategy_args.h"
#include "train_args.h"
#include "lms/autodiff/optimizer.h"
#include "lms/io/npz.h"
#include "lms/runtime/trainer.h"
#include "lms/support/size.h"

namespace lms::cli {

namespace {

constexpr int kProgressLines = 20;          // plain progress lines over a run when stdout is not a terminal
constexpr int kBarWidth = 24;               // characters of the terminal progress bar
constexpr int kExitInterrupted = 130;       // 128 + SIGINT, as shells report it

struct TrainCmd {
  std::string file;
  ModelArgs model;
  std::string device = "reference";
  StrategyArgs planning;
  int64_t steps = 0, epochs = 0;  // 0: not given
  std::string data = "synthetic";
  std::string data_dir = kFashionMnistDir;
  uint64_t seed = 0;
  std::string optimizer = "momentum";
  double lr = 0, momentum = 0.9, weight_decay = 0;
  bool nesterov = false;
  bool no_argmax_pool = false;
  int64_t loss_chunks = 1, attention_chunks = 1;
  double clip_grad_norm = 0;  // 0: off
  LrScheduleArgs lr_schedule;
  std::string save, load;
  int64_t save_every = 0;  // 0: only at the end
  int64_t eval_every = 0;  // epochs; 0: only at the end
  std::string trace;  // empty: no trace
  bool json = false;
  CLI::Option *steps_opt = nullptr, *epochs_opt = nullptr, *lr_opt = nullptr, *weight_decay_opt = nullptr;
};

volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void on_sigint(int) { g_interrupted = 1; }

// "1h02m", "3m05s", "12s".
std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  auto s = static_cast<int64_t>(std::llround(seconds));
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, s / 60 % 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

// The progress text after a step: "step 120/1875  epoch 1/1  loss 0.5432  2345 samples/s  ETA 1m23s", with
// "lr 2.50e-04" after the loss when the rate follows a schedule.
std::string progress_text(const StepProgress& p, bool show_lr) {
  double rate = p.elapsed_seconds > 0 ? static_cast<double>(p.step * p.batch) / p.elapsed_seconds : 0;
  double eta = p.step > 0 ? p.elapsed_seconds / static_cast<double>(p.step) * static_cast<double>(p.total_steps - p.step) : 0;
  return fmt::format("step {}/{}  epoch {}/{}  loss {:.4f}{}  {:.0f} samples/s  ETA {}", p.step, p.total_steps,
                     p.epoch + 1, p.total_epochs, p.loss, show_lr ? fmt::format("  lr {:.2e}", p.lr) : std::string(),
                     rate, format_duration(eta));
}

Result<TrainOptions> options_from(const TrainCmd& c) {
  TrainOptions o;
  if (c.device.empty()) return fail("--device must name a device (reference, cpu, cuda)");
  o.device = c.device;
  StrategyOptions planning = LMS_TRY(resolve(c.planning, default_device_model(c.device)));
  o.budget_bytes = planning.budget_bytes;
  o.host_budget_bytes = planning.host_budget_bytes;
  o.strategy = planning.strategy;
  o.tflms = planning.tflms_fixed;
  o.on_trial = planning.on_trial;
  o.device_model = planning.device_model;
  o.measured = planning.measured;
  o.reuse_buffers = planning.reuse_buffers;
  const BackendOptions backend = LMS_TRY(backend_options(c.planning.tf32, c.planning.backend, c.device));
  o.allow_tf32 = backend.allow_tf32;
  o.max_workspace_bytes = backend.max_workspace_bytes;
  o.conv_gemm = backend.conv_gemm;
  o.cpu_blocked_layouts = backend.cpu_blocked_layouts;
  if (c.steps_opt->count() > 0) o.steps = c.steps;
  if (c.epochs_opt->count() > 0) o.epochs = c.epochs;
  auto kind = parse_optimizer(c.optimizer);
  if (!kind) return fail("unknown optimizer '{}' (optimizers: sgd, momentum, adam, adamw)", c.optimizer);
  o.training.optimizer.kind = *kind;
  if (c.lr_opt->count() > 0) o.training.optimizer.lr = c.lr;
  o.training.optimizer.momentum = c.momentum;
  if (c.weight_decay_opt->count() > 0) o.training.optimizer.weight_decay = c.weight_decay;
  o.training.optimizer.nesterov = c.nesterov;
  LMS_TRY_VOID(check_optimizer_options(o.training.optimizer));  // the schedule is checked against a valid lr
  o.lr_schedule = LMS_TRY(resolve_lr_schedule(c.lr_schedule, effective_lr(o.training.optimizer)));
  o.training.argmax_pool = !c.no_argmax_pool;
  o.training.loss_chunks = c.loss_chunks;
  o.training.attention_chunks = c.attention_chunks;
  o.training.clip_grad_norm = c.clip_grad_norm;
  // `--data FILE.npz` names the user's own arrays.
  const bool npz_file = c.data.ends_with(".npz");
  o.data.kind = npz_file ? "npz" : c.data;
  if (npz_file) o.data.file = c.data;
  if (o.data.kind == "npz" && !npz_file) return fail("--data npz: give the archive itself, --data FILE.npz");
  o.data.dir = c.data_dir;
  o.seed = c.seed;
  o.evaluate = o.data.kind != "synthetic";
  o.keep_values = !c.save.empty();
  if (c.save_every < 0) return fail("--save-every must be >= 1 steps, got {}", c.save_every);
  if (c.save_every > 0 && c.save.empty()) return fail("--save-every needs --save FILE.npz (where to write them)");
  o.checkpoint_every = c.save_every;
  if (c.eval_every != 0 && !o.evaluate)
    return fail("--eval-every needs data with a test split: --data fashion-mnist or an .npz with x_test, y_test");
  o.evaluate_every = c.eval_every;
  return o;
}

nlohmann::ordered_json report_json(const TrainCmd& c, const TrainReport& r) {
  nlohmann::ordered_json j;
  j["losses"] = r.losses;
  j["learning_rates"] = r.learning_rates;
  if (!r.grad_norms.empty()) j["grad_norms"] = r.grad_norms;
  j["peak_device_bytes"] = r.peak_device_bytes;
  j["planned_peak_bytes"] = r.planned_peak_bytes;
  j["budget_bytes"] = r.budget_bytes == kUnlimitedBytes ? nlohmann::ordered_json() : nlohmann::ordered_json(r.budget_bytes);
  j["swap_out_bytes"] = r.swap_out_bytes;
  j["swap_in_bytes"] = r.swap_in_bytes;
  j["step_seconds_median"] = r.step_seconds_median;
  j["predicted_step_seconds"] =
      r.predicted_step_seconds ? nlohmann::ordered_json(*r.predicted_step_seconds) : nlohmann::ordered_json();
  if (r.predicted_step_seconds) j["device_model"] = r.device_model;
  j["step_seconds"] = r.step_seconds;
  j["feed_seconds_median"] = r.feed_seconds_median;
  j["batch_pinned"] = r.batch_pinned;
  j["plan_seconds"] = r.plan_seconds;
  j["start_seconds"] = r.start_seconds;
  j["samples_per_second"] = r.samples_per_second;
  if (r.test_accuracy) j["test_accuracy"] = *r.test_accuracy;
  if (!r.evaluations.empty()) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const Evaluation& e : r.evaluations)
      list.push_back({{"epoch", e.epoch}, {"step", e.step}, {"accuracy", e.accuracy}});
    j["evaluations"] = list;
  }
  j["device"] = c.device;
  j["strategy"] = c.planning.strategy;
  j["steps"] = r.steps;
  j["first_step"] = r.first_step;
  j["batch"] = r.batch;
  j["lower_bound_bytes"] = r.lower_bound_bytes;
  j["min_budget_bytes"] = r.min_budget_bytes;
  j["param_bytes"] = r.persistent_bytes;
  j["max_live_bytes"] = r.max_live_bytes;
  j["peak_bytes_none"] = r.peak_bytes_none;
  j["lms_needed"] = r.lms_needed;
  j["swapped_tensors"] = r.swapped_tensors;
  j["recomputed_tensors"] = r.recomputed_tensors;
  j["recompute_flops"] = r.recompute_flops;
  if (r.tflms) j["tflms"] = tflms_json(*r.tflms);
  j["interrupted"] = r.interrupted;
  return j;
}

void print_summary(const TrainCmd& c, const std::string& graph, const TrainReport& r) {
  fmt::print("trained '{}' on {}: {} steps ({:.2g} epochs){}, batch {}\n", graph, c.device, r.steps,
             static_cast<double>(r.steps) / static_cast<double>(r.steps_per_epoch),
             r.first_step > 0 ? fmt::format(" after the checkpoint's {}", r.first_step) : std::string(), r.batch);
  if (!r.losses.empty()) fmt::print("  loss           {:.4f} -> {:.4f}\n", r.losses.front(), r.losses.back());
  if (r.lr_scheduled && !r.learning_rates.empty())
    fmt::print("  learning rate  {:.3g} -> {:.3g} ({} schedule{})\n", r.learning_rates.front(), r.learning_rates.back(),
               c.lr_schedule.schedule,
               c.lr_schedule.warmup_steps > 0 ? fmt::format(", {} warm-up steps", c.lr_schedule.warmup_steps)
                                              : std::string());
  if (!r.grad_norms.empty()) {
    const auto clipped = std::ranges::count_if(r.grad_norms, [&](double n) { return n > c.clip_grad_norm; });
    fmt::print("  gradient norm  {:.4g} -> {:.4g}, median {:.4g}; clipped to {} in {} of {} steps\n",
               r.grad_norms.front(), r.grad_norms.back(), median(r.grad_norms), c.clip_grad_norm, clipped,
               r.grad_norms.size());
  }
  fmt::print("  planned peak   {} (budget {}; liveness lower bound {}; minimum budget {})\n",
             format_size(r.planned_peak_bytes), r.budget_bytes == kUnlimitedBytes ? "unlimited" : format_size(r.budget_bytes),
             format_size(r.lower_bound_bytes), format_size(r.min_budget_bytes));
  fmt::print("  measured peak  {} (highest device arena byte written)\n", format_size(r.peak_device_bytes));
  if (r.tflms) {  // the graph was rewritten: the budget needed it, or --tflms-params forced it
    const std::string none = fmt::format("peak without LMS {} {} the budget", format_size(r.peak_bytes_none),
                                         r.lms_needed ? "does not fit" : "fits");
    if (r.swapped_tensors == 0)
      fmt::print("  plan           {}: {}; its reordered schedule alone fits (no tensor swapped)\n",
                 c.planning.strategy, none);
    else
      fmt::print("  plan           {}: {}; {} tensors swapped, {} out and {} in per step\n", c.planning.strategy,
                 none, r.swapped_tensors, format_size(r.swap_out_bytes), format_size(r.swap_in_bytes));
    fmt::print("  tflms          {}\n", describe_tflms(*r.tflms));
    if (!r.auto_source.empty()) fmt::print("  auto           took {}\n", r.auto_source);
  } else if (!r.auto_source.empty()) {
    fmt::print("  plan           auto: peak without LMS {} does not fit the budget; took {}; {} tensors swapped "
               "({} each way per step), {} recomputed ({:.3g} GFLOP per step)\n",
               format_size(r.peak_bytes_none), r.auto_source, r.swapped_tensors, format_size(r.swap_out_bytes),
               r.recomputed_tensors, r.recompute_flops / 1e9);
  } else if (c.planning.strategy != "none") {
    fmt::print("  plan           {}: LMS not needed (peak without LMS {} fits)\n", c.planning.strategy,
               format_size(r.peak_bytes_none));
  }
  // Milliseconds to 3 significant digits, without an exponent for long steps.
  auto ms = [](double s) { return s >= 1 ? fmt::format("{:.0f}", s * 1e3) : fmt::format("{:.3g}", s * 1e3); };
  fmt::print("  step time      {} ms median, {:.0f} samples/s{}; writing the batch {} ms of it\n",
             ms(r.step_seconds_median), r.samples_per_second,
             r.predicted_step_seconds
                 ? fmt::format(" (predicted {} ms on {})", ms(*r.predicted_step_seconds), r.device_model)
                 : std::string(),
             ms(r.feed_seconds_median));
  fmt::print("  start-up       planned in {:.2f} s; arenas and initial values in {:.2f} s\n", r.plan_seconds,
             r.start_seconds);
  if (r.test_accuracy) {
    std::string each;  // with --eval-every: the accuracies on the way
    for (const Evaluation& e : r.evaluations) each += fmt::format(" {:.4f}", e.accuracy);
    fmt::print("  test accuracy  {:.4f} ({} samples{})\n", *r.test_accuracy, r.test_samples,
               r.evaluations.size() > 1
                   ? fmt::format("; epochs {}..{}:{}", r.evaluations.front().epoch, r.evaluations.back().epoch, each)
                   : std::string());
  }
  if (!c.save.empty()) fmt::print("  saved          {}\n", c.save);
  if (!c.trace.empty()) fmt::print("  trace          {}\n", c.trace);
}

// Writes a checkpoint with its record (trainer.h), through a temporary file renamed over `path`, so that a run
// stopped while writing leaves the previous checkpoint whole.
Result<void> save_checkpoint(const std::string& path, std::map<std::string, HostTensor> values,
                             const CheckpointRecord& record) {
  put_checkpoint_record(values, record);
  const std::string partial = path + ".partial";
  LMS_TRY_VOID(write_npz(partial, values));
  std::error_code ec;
  std::filesystem::rename(partial, path, ec);
  if (ec) {
    std::filesystem::remove(partial, ec);
    return fail_at(path, "cannot replace it with {}: {}", partial, ec.message());
  }
  return {};
}

// --save's path, checked before training, so that a long run does not end unable to write its checkpoint.
Result<void> check_save_path(const std::string& path) {
  const std::filesystem::path p(path);
  std::error_code ec;
  if (std::filesystem::is_directory(p, ec)) return fail("--save {}: is a directory, not a file", path);
  if (p.has_parent_path() && !std::filesystem::is_directory(p.parent_path(), ec))
    return fail("--save {}: the directory {} does not exist", path, p.parent_path().string());
  return {};
}

// The checkpoint record of this run after `steps` steps: the batch (the leading dim of the input %x the data feed)
// and the seed of the data order (a seed of 2^63 or more is not recorded: the record holds i64s).
CheckpointRecord record_of(const TrainCmd& c, const Graph& forward, int64_t steps) {
  CheckpointRecord r{steps, {}, {}};
  if (auto x = forward.find_value("x"); x && forward.value(*x).type.rank() > 0)
    r.batch = forward.value(*x).type.shape[0];
  if (c.seed <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) r.seed = static_cast<int64_t>(c.seed);
  return r;
}

int run(const TrainCmd& c) {
  auto opts = options_from(c);
  if (!opts) return report(opts.error());
  if (!c.save.empty())
    if (auto ok = check_save_path(c.save); !ok) return report(ok.error());
  std::map<std::string, HostTensor> weights;  // an imported model's (a checkpoint given with --load wins)
  auto forward = load_graph(c.file, c.model, &weights);
  if (!forward) return report(forward.error());
  if (!weights.empty()) opts->given_values = &weights;
  std::map<std::string, HostTensor> checkpoint;
  CheckpointRecord loaded_record;
  if (!c.load.empty()) {
    auto values = read_npz(c.load);
    if (!values) return report(values.error());
    checkpoint = std::move(*values);
    auto record = take_checkpoint_record(checkpoint, c.load);
    if (!record) return report(record.error());
    loaded_record = *record;
    opts->resumed = &loaded_record;
    opts->first_step = record->steps;
    opts->on_warning = [&c](const std::string& line) { fmt::print(stderr, "lms: warning: {}: {}\n", c.load, line); };
    opts->initial_values = &checkpoint;
  }
  std::optional<TraceWriter> trace;
  if (!c.trace.empty()) {
    if (auto ok = check_trace_path(c.trace); !ok) return report(ok.error());
    opts->trace = &trace.emplace();
  }

  const bool tty = !c.json && isatty(STDOUT_FILENO) == 1;
  const bool show_lr = is_scheduled(opts->lr_schedule);
  bool bar_drawn = false;
  ProgressCallback progress = [&](const StepProgress& p) {
    if (tty) {
      int filled = static_cast<int>(static_cast<double>(kBarWidth) * static_cast<double>(p.step) /
                                    static_cast<double>(p.total_steps));
      std::string bar = std::string(filled, '=') + std::string(kBarWidth - filled, ' ');
      fmt::print("\r[{}] {}\x1b[K", bar, progress_text(p, show_lr));
      std::fflush(stdout);
      bar_drawn = true;
    } else if (!c.json) {
      int64_t every = std::max<int64_t>(1, (p.total_steps + kProgressLines - 1) / kProgressLines);
      if (p.step % every == 0 || p.step == p.total_steps) fmt::print("{}\n", progress_text(p, show_lr));
      std::fflush(stdout);
    }
    return g_interrupted == 0;
  };

  if (!c.json)
    opts->on_start_up = [](const std::string& line) {
      fmt::print("{}\n", line);
      std::fflush(stdout);
    };
  opts->on_evaluation = [&](const Evaluation& e, int64_t samples) {
    if (c.json) return;
    fmt::print("{}epoch {}: test accuracy {:.4f} ({} samples, after step {})\n", tty ? "\r\x1b[K" : "", e.epoch,
               e.accuracy, samples, e.step);
    std::fflush(stdout);
  };
  opts->on_checkpoint = [&](std::map<std::string, HostTensor> values, int64_t steps) -> Result<void> {
    LMS_TRY_VOID(save_checkpoint(c.save, std::move(values), record_of(c, *forward, steps)));
    if (!c.json) {
      fmt::print("{}saved {} after step {}\n", tty ? "\r\x1b[K" : "", c.save, steps);
      std::fflush(stdout);
    }
    return {};
  };

  // Ctrl-C once stops after the step; the handler resets itself, so a second one ends the process.
  struct sigaction action {}, previous {};
  action.sa_handler = on_sigint;
  action.sa_flags = SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  g_interrupted = 0;
  sigaction(SIGINT, &action, &previous);
  auto result = train(*forward, *opts, progress);
  sigaction(SIGINT, &previous, nullptr);
  if (bar_drawn) fmt::print("\n");
  if (!result) {
    if (trace) std::filesystem::remove(c.trace);  // not left behind empty: it was created only as a check
    return report(result.error());
  }
  if (trace) {
    if (auto w = trace->write(c.trace); !w) return report(w.error());
  }

  if (!c.save.empty()) {
    if (auto w = save_checkpoint(c.save, std::move(result->values),
                                 record_of(c, *forward, result->first_step + result->steps));
        !w)
      return report(w.error());
  }
  if (c.json) {
    fmt::print("{}\n", report_json(c, *result).dump(2));
  } else {
    print_summary(c, forward->name(), *result);
  }
  if (result->interrupted) {
    report(Error{fmt::format("interrupted after {} of {} steps", result->steps, result->planned_steps), {}});
    return kExitInterrupted;
  }
  return kExitOk;
}

}  // namespace

void add_train_command(CLI::App& root, int& exit_code) {
  auto c = std::make_shared<TrainCmd>();
  c->model.batch = kDefaultTrainBatch;
  CLI::App* sub = root.add_subcommand(
      "train", "Train a model on a device under a memory budget: losses, planned and measured peak, step time.");
  sub->add_option("FILE", c->file, "Forward graph in the IR text format (- for stdin), or an ONNX model (.onnx); or use --model");
  add_model_options(sub, c->model, /*with_model_flag=*/true);
  sub->add_option("--device", c->device, "Backend: reference (plain loops), cpu, cuda")->capture_default_str();
  add_strategy_options(sub, c->planning, /*budget_required=*/false);
  c->steps_opt = sub->add_option("--steps", c->steps, "Train this many steps");
  c->epochs_opt = sub->add_option("--epochs", c->epochs, "Train this many passes over the data (default: 1)");
  sub->add_option("--data", c->data, "Data: synthetic, fashion-mnist, or FILE.npz (x_train, y_train [, x_test, y_test])")
      ->capture_default_str();
  sub->add_option("--data-dir", c->data_dir, "Directory of the Fashion-MNIST IDX files")->capture_default_str();
  sub->add_option("--seed", c->seed, "Seed of the initial values and the data order")->capture_default_str();
  sub->add_option("--optimizer", c->optimizer, "sgd, momentum, adam or adamw (decoupled weight decay)")
      ->capture_default_str();
  c->lr_opt = sub->add_option("--lr", c->lr, "Learning rate (default 0.01; adam and adamw 0.001)");
  sub->add_option("--momentum", c->momentum, "Momentum factor (momentum optimizer)")->capture_default_str();
  sub->add_flag("--nesterov", c->nesterov, "Nesterov momentum (momentum optimizer)");
  c->weight_decay_opt = sub->add_option(
      "--weight-decay", c->weight_decay,
      "L2 penalty added to the gradient; adamw: the parameter's decay, w *= 1 - lr*wd (default 0; adamw 0.01)");
  sub->add_flag("--no-argmax-pool", c->no_argmax_pool, kNoArgmaxPoolHelp);
  add_lr_schedule_options(sub, c->lr_schedule);
  sub->add_option("--clip-grad-norm", c->clip_grad_norm, kClipGradNormHelp);
  add_chunk_options(sub, c->loss_chunks, c->attention_chunks);
  sub->add_option("--save", c->save, "Write the trained parameters and state to this .npz file");
  sub->add_option("--save-every", c->save_every, "With --save: also write it every N steps (each replacing the last)");
  sub->add_option("--eval-every", c->eval_every,
                  "Also measure the test accuracy after every N epochs (default 0: only at the end; the training "
                  "arenas are released for it and remade)");
  sub->add_option("--load", c->load,
                  "Start from the parameters and state in this .npz file (one from --save: the data order goes on "
                  "after its steps)");
  sub->add_option("--trace", c->trace,
                  fmt::format("Write a Chrome trace (Perfetto) of the first {} steps and the last to this file",
                              kTracedFirstSteps));
  sub->add_flag("--json", c->json, "Print one JSON object instead of progress and text");
  sub->callback([c, &exit_code] { exit_code = run(*c); });
}

}  // namespace lms::cli
