// The --train flags (see train_args.h).
#include "train_args.h"

#include <fmt/format.h>

namespace lms::cli {

void add_train_options(CLI::App* app, TrainArgs& a) {
  // --optimizer as `lms train` spells it, so that a plan and the run it predicts take the same flags.
  app->add_option("--train,--optimizer", a.optimizer,
                  "Build the training graph with this optimizer: sgd, momentum or adam (default: momentum for "
                  "--model, the forward graph of a FILE)");
  app->add_option_function<double>("--lr", [&a](const double& v) { a.lr = v; },
                                    "--train: learning rate (default 0.01; 0.001 for adam)");
  app->add_option_function<double>("--momentum", [&a](const double& v) { a.momentum = v; },
                                    "--train momentum: momentum factor (default 0.9)");
  app->add_option_function<double>("--weight-decay", [&a](const double& v) { a.weight_decay = v; },
                                    "--train: L2 penalty added to the gradient (default 0)");
  app->add_flag("--no-argmax-pool", a.no_argmax_pool, kNoArgmaxPoolHelp);
  add_chunk_options(app, a.loss_chunks, a.attention_chunks);
}

void add_chunk_options(CLI::App* app, int64_t& loss_chunks, int64_t& attention_chunks) {
  const CLI::Range chunks(int64_t{1}, int64_t{1} << 20);
  app->add_option("--loss-chunks", loss_chunks, kLossChunksHelp)->check(chunks);
  app->add_option("--attention-chunks", attention_chunks, kAttentionChunksHelp)->check(chunks);
}

Result<std::optional<TrainingOptions>> resolve_train(const TrainArgs& a) {
  if (a.optimizer.empty()) {
    if (a.lr || a.momentum || a.weight_decay || a.no_argmax_pool || a.loss_chunks != 1 || a.attention_chunks != 1)
      return fail("--lr, --momentum, --weight-decay, --no-argmax-pool, --loss-chunks and --attention-chunks need "
                  "--train sgd|momentum|adam");
    return std::optional<TrainingOptions>{};
  }
  auto kind = parse_optimizer(a.optimizer);
  if (!kind) return fail("--train must be sgd, momentum or adam, got '{}'", a.optimizer);
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
  if (auto ok = check_optimizer_options(t.optimizer); !ok) return std::unexpected(ok.error());
  return std::optional<TrainingOptions>{t};
}

Result<Graph> apply_train(Graph forward, const TrainArgs& a) {
  std::optional<TrainingOptions> t = LMS_TRY(resolve_train(a));
  if (!t) return forward;
  return build_training_graph(forward, *t);
}

}  // namespace lms::cli
