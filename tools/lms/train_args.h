// The `--train` flags shared by `lms model` and `lms stats`: which optimizer turns the forward graph into a
// training graph (lms/autodiff/optimizer.h), and its hyperparameters. Without --train the commands work on the
// forward graph, and giving a hyperparameter anyway is an error rather than silently ignored.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "lms/autodiff/optimizer.h"
#include "lms/runtime/lr_schedule.h"
#include "lms/ir/graph.h"
#include "lms/support/error.h"

namespace lms::cli {

// The learning-rate schedule flags of `lms train`, also taken by the commands that plan its training graph
// (a schedule adds the graph's %lr_scale input).
struct LrScheduleArgs {
  std::string schedule = "constant";    // --lr-schedule constant|linear|cosine|step
  int64_t warmup_steps = 0;             // --warmup-steps
  std::optional<int64_t> decay_steps;   // --decay-steps (linear, cosine)
  std::optional<double> min_lr;         // --min-lr (linear, cosine)
  std::optional<int64_t> step_every;    // --lr-step-every (step)
  std::vector<int64_t> milestones;      // --lr-milestones (step)
  std::optional<double> gamma;          // --lr-gamma (step)
};

void add_lr_schedule_options(CLI::App* app, LrScheduleArgs& args);
// The schedule the flags ask for, checked against the base learning rate `lr`; a flag that does not apply to the
// schedule is an error naming it.
Result<LrSchedule> resolve_lr_schedule(const LrScheduleArgs& args, double lr);

struct TrainArgs {
  std::string optimizer;              // --train sgd|momentum|adam|adamw; empty: keep the forward graph
  std::optional<double> lr;           // --lr (default: the optimizer's, optimizer.h)
  std::optional<double> momentum;     // --momentum (momentum only)
  std::optional<double> weight_decay;  // --weight-decay
  bool no_argmax_pool = false;        // --no-argmax-pool: TrainingOptions::argmax_pool off
  int64_t loss_chunks = 1;            // --loss-chunks: TrainingOptions::loss_chunks
  int64_t attention_chunks = 1;       // --attention-chunks: TrainingOptions::attention_chunks
  LrScheduleArgs lr_schedule;         // a schedule gives the training graph its %lr_scale input
  double clip_grad_norm = 0;          // --clip-grad-norm: TrainingOptions::clip_grad_norm
};

// The help of --no-argmax-pool (also a flag of `lms train`).
inline constexpr const char* kNoArgmaxPoolHelp =
    "Keep a relu-then-max-pool's relu output for the backward pass (as PyTorch does) instead of the pooling's "
    "argmax positions (the argmax-pool pass; bit-identical results either way)";

// The help of --loss-chunks (also a flag of `lms train`).
inline constexpr const char* kLossChunksHelp =
    "Compute the cross-entropy of a language model's head (or any loss of a matmul's logits) over N blocks of "
    "tokens, each block's logits a tensor of its own that auto can remake in the backward pass instead of "
    "keeping all of them (the chunk-loss pass; close to the unchunked loss, not bit-identical; default 1: off)";

// The help of --attention-chunks (also a flag of `lms train`).
inline constexpr const char* kAttentionChunksHelp =
    "Compute every attention core (softmax(q k^T) v) over N blocks of its attention matrices (batch x heads; past "
    "one block per matrix, blocks of each matrix's query rows), each block's scores and probabilities tensors of "
    "their own that auto can remake in the backward pass (the chunk-attention pass; the same ops on the same rows; "
    "default 1: off)";

// The help of --clip-grad-norm (also a flag of `lms train`).
inline constexpr const char* kClipGradNormHelp =
    "Scale all gradients by min(1, X / their 2-norm) before the updates, as torch.nn.utils.clip_grad_norm_ (every "
    "gradient then lives until the last is computed, which can raise the peak; default 0: off)";

void add_train_options(CLI::App* app, TrainArgs& args);
// --loss-chunks and --attention-chunks (also flags of `lms train`), each in [1, 2^20].
void add_chunk_options(CLI::App* app, int64_t& loss_chunks, int64_t& attention_chunks);

// The training options the flags ask for, or nullopt without --train. Errors name the flag.
Result<std::optional<TrainingOptions>> resolve_train(const TrainArgs& args);

// `forward` itself without --train, else its training graph.
Result<Graph> apply_train(Graph forward, const TrainArgs& args);

}  // namespace lms::cli
