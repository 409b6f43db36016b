// The --train flags (see train_args.h).
#include "train_args.h"

#include <fmt/format.h>

namespace lms::cli {

void add_train_options(CLI::App* app, TrainArgs& a) {
  // --optimizer as `lms train` spells it, so that a plan and the run it predicts take the same flags.
  app->add_option("--train,--optimizer", a.optimizer,
                  "Build the training graph with this optimizer: sgd, momentum, adam or adamw (default: momentum for "
                  "--model, the forward graph of a FILE)");
  app->add_option_function<double>("--lr", [&a](const double& v) { a.lr = v; },
                                    "--train: learning rate (default 0.01; 0.001 for adam and adamw)");
  app->add_option_function<double>("--momentum", [&a](const double& v) { a.momentum = v; },
                                    "--train momentum: momentum factor (default 0.9)");
  app->add_option_function<double>(
      "--weight-decay", [&a](const double& v) { a.weight_decay = v; },
      "--train: L2 penalty added to the gradient; adamw: the parameter's decay (default 0; 0.01 for adamw)");
  app->add_flag("--no-argmax-pool", a.no_argmax_pool, kNoArgmaxPoolHelp);
  add_chunk_options(app, a.loss_chunks, a.attention_chunks);
  add_lr_schedule_options(app, a.lr_schedule);
  app->add_option("--clip-grad-norm", a.clip_grad_norm, kClipGradNormHelp);
}

void add_lr_schedule_options(CLI::App* app, LrScheduleArgs& a) {
  app->add_option("--lr-schedule", a.schedule,
                  "The learning rate over the steps: constant, linear or cosine (decay to --min-lr at --decay-steps), "
                  "or step (times --lr-gamma every --lr-step-every steps); after --warmup-steps")
      ->capture_default_str();
  app->add_option("--warmup-steps", a.warmup_steps,
                  "Ramp the learning rate linearly over the first N steps: step s trains at lr * (s + 1) / N")
      ->capture_default_str();
  app->add_option_function<int64_t>("--decay-steps", [&a](const int64_t& v) { a.decay_steps = v; },
                                    "linear, cosine: the step at which the rate reaches --min-lr, counted from the "
                                    "first step ever trained (default: the step the run ends at)");
  app->add_option_function<double>("--min-lr", [&a](const double& v) { a.min_lr = v; },
                                   "linear, cosine: the final learning rate (default 0)");
  app->add_option_function<int64_t>("--lr-step-every", [&a](const int64_t& v) { a.step_every = v; },
                                    "step: multiply the rate by --lr-gamma every N steps after the warm-up");
  app->add_option("--lr-milestones", a.milestones,
                  "step: multiply the rate by --lr-gamma at each of these steps (comma-separated, increasing, counted "
                  "from the first step ever trained), instead of every --lr-step-every")
      ->delimiter(',');
  app->add_option_function<double>("--lr-gamma", [&a](const double& v) { a.gamma = v; },
                                   "step: the factor, in (0, 1] (default 0.1)");
}

Result<LrSchedule> resolve_lr_schedule(const LrScheduleArgs& a, double lr) {
  LrSchedule s;
  auto decay = parse_lr_decay(a.schedule);
  if (!decay) return fail("--lr-schedule must be constant, linear, cosine or step, got '{}'", a.schedule);
  s.decay = *decay;
  s.warmup_steps = a.warmup_steps;
  s.decay_steps = a.decay_steps;
  s.min_lr = a.min_lr.value_or(0);
  s.step_every = a.step_every.value_or(0);
  s.milestones = a.milestones;
  if (a.min_lr && s.decay != LrDecay::linear && s.decay != LrDecay::cosine)
    return fail("--min-lr applies to --lr-schedule linear or cosine");
  if (a.gamma && s.decay != LrDecay::step) return fail("--lr-gamma applies to --lr-schedule step");
  if (a.gamma) s.gamma = *a.gamma;
  LMS_TRY_VOID(check_lr_schedule(s, lr));
  return s;
}

void add_chunk_options(CLI::App* app, int64_t& loss_chunks, int64_t& attention_chunks) {
  const CLI::Range chunks(int64_t{1}, int64_t{1} << 20);
  app->add_option("--loss-chunks", loss_chunks, kLossChunksHelp)->check(chunks);
  app->add_option("--attention-chunks", attention_chunks, kAttentionChunksHelp)->check(chunks);
}

namespace {
bool any_given(const LrScheduleArgs& a) {
  return a.schedule != LrScheduleArgs{}.schedule || a.warmup_steps != 0 || a.decay_steps || a.min_lr ||
         a.step_every || !a.milestones.empty() || a.gamma;
}
}  // namespace

Result<std::optional<TrainingOptions>> resolve_train(const TrainArgs& a) {
  if (a.optimizer.empty()) {
    if (a.lr || a.momentum || a.weight_decay || a.no_argmax_pool || a.loss_chunks != 1 || a.attention_chunks != 1 ||
        any_given(a.lr_schedule) || a.clip_grad_norm != 0)
      return fail("--lr, --momentum, --weight-decay, --no-argmax-pool, --loss-chunks, --attention-chunks, "
                  "--clip-grad-norm and the learning-rate schedule's flags need --train sgd|momentum|adam|adamw");
    return std::optional<TrainingOptions>{};
  }
  auto kind = parse_optimizer(a.optimizer);
  if (!kind) return fail("--train must be sgd, momentum, adam or adamw, got '{}'", a.optimizer);
  TrainingOptions t;
  t.optimizer.kind = *kind;
  t.optimizer.lr = a.lr;
  if (a.momentum) {
    if (*kind != OptimizerKind::momentum)
      return fail("--momentum applies to --train momentum, not --train {}", a.optimizer);
    t.optimizer.momentum = *a.momentum;
  }
  if (a.weight_decay) t.optimizer.weight_decay = *a.weight_decay;
  t.argmax_pool = !a.no_argmax_pool;
  t.loss_chunks = a.loss_chunks;
  t.attention_chunks = a.attention_chunks;
  t.clip_grad_norm = a.clip_grad_norm;
  if (auto ok = check_optimizer_options(t.optimizer); !ok) return std::unexpected(ok.error());
  // Only whether the rate changes shapes the graph; the schedule is checked as `lms train` would check it.
  t.optimizer.lr_scale = is_scheduled(LMS_TRY(resolve_lr_schedule(a.lr_schedule, effective_lr(t.optimizer))));
  return std::optional<TrainingOptions>{t};
}

Result<Graph> apply_train(Graph forward, const TrainArgs& a) {
  std::optional<TrainingOptions> t = LMS_TRY(resolve_train(a));
  if (!t) return forward;
  return build_training_graph(forward, *t);
}

}  // namespace lms::cli
