// The training graph: a forward graph plus its backward graph (autodiff.h) plus one optimizer update per
// trainable parameter and, for every batch_norm, the update of its running statistics. Updates write
// parameters and state in place, so every other reader of a parameter is ordered before its update by a
// control edge. docs/autodiff.md describes the construction; `lms model --train` and `lms stats --train` print
// and summarize the result, and the `train` pass of `lms opt` runs it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "lms/ir/attributes.h"
#include "lms/ir/graph.h"
#include "lms/support/error.h"

namespace lms {

enum class OptimizerKind : uint8_t { sgd, momentum, adam, adamw };
std::string_view optimizer_name(OptimizerKind k);                   // "sgd", "momentum", "adam", "adamw"
std::optional<OptimizerKind> parse_optimizer(std::string_view name);  // inverse of optimizer_name

// torch.optim semantics (docs/ops.md, "Optimizer updates"); weight decay is L2 added to the gradient, but for
// adamw, which decays the parameter itself (torch.optim.AdamW).
struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::momentum;  // the update op: sgd_update, momentum_update or adam_update
                                                 // (adamw: adam_update with decoupled_weight_decay)
  std::optional<double> lr;   // learning rate, >= 0; unset: kDefaultLr, or kDefaultAdamLr for adam and adamw
  double momentum = 0.9;      // momentum factor, >= 0 (momentum only)
  std::optional<double> weight_decay;  // >= 0; unset: 0, or kDefaultAdamwWeightDecay for adamw
  bool nesterov = false;      // Nesterov momentum; needs momentum > 0 (momentum only)
  double beta1 = 0.9;         // Adam's first-moment decay, in [0, 1)
  double beta2 = 0.999;       // Adam's second-moment decay, in [0, 1)
  double eps = 1e-8;          // Adam's denominator term, >= 0
  bool lr_scale = false;      // every update also reads the f32[] graph input %lr_scale and steps with lr x its
                              // value: a learning-rate schedule fed each step (runtime/lr_schedule.h)
};

// The name of the learning-rate scale input (OptimizerOptions::lr_scale).
inline constexpr const char* kLrScaleName = "lr_scale";

// Learning rates when none is given: the usual SGD starting point, and torch.optim.Adam's default.
inline constexpr double kDefaultLr = 0.01;
inline constexpr double kDefaultAdamLr = 0.001;
double effective_lr(const OptimizerOptions& o);
// torch.optim.AdamW's default weight decay (the other optimizers default to none).
inline constexpr double kDefaultAdamwWeightDecay = 0.01;
double effective_weight_decay(const OptimizerOptions& o);

struct TrainingOptions {
  OptimizerOptions optimizer;     // how parameters are updated
  bool bn_running_stats = true;   // add running mean/var state and a bn_running_update per batch_norm
  bool argmax_pool = true;        // run the argmax-pool pass (passes/argmax_pool.h): bit-identical, less memory
  int64_t loss_chunks = 1;        // > 1: the loss over this many blocks of its logits' rows (passes/chunk_loss.h);
                                  // less memory with recomputation, not bit-identical to 1
  int64_t attention_chunks = 1;   // > 1: every attention core over this many blocks of its attention matrices
                                  // (passes/chunk_attention.h); less memory with recomputation
  double clip_grad_norm = 0;      // > 0: every gradient scaled by min(1, this / (norm + kClipEps)), norm the 2-norm
                                  // of all of them, before the updates (torch.nn.utils.clip_grad_norm_); the norm
                                  // becomes the graph's second output. Every gradient then lives until all are done
};

// The term torch.nn.utils.clip_grad_norm_ adds to the norm before dividing by it.
inline constexpr double kClipEps = 1e-6;
// The name of the gradients' norm output (TrainingOptions::clip_grad_norm).
inline constexpr const char* kGradNormName = "grad_norm";

// Checks the options' ranges; errors name the option as the command line spells it ("lr", "weight-decay").
Result<void> check_optimizer_options(const OptimizerOptions& o);

// Builds the training graph of `forward` (whose single output is the scalar loss): the forward nodes (kept,
// categories fwd), the gradients of every floating-point `param` (bwd), then per parameter with a gradient an
// update node (upd) with its zero-initialized state values ("<param>.momentum"; Adam's and AdamW's "<param>.m",
// "<param>.v", "<param>.t") and, with `lr_scale`, the input %lr_scale, ordered after every other reader of the
// parameter; and per batch_norm "<bn>.running_mean" (zeros), "<bn>.running_var" (ones) and a bn_running_update
// (upd). Parameters the loss does not depend on get
// no update. With `argmax_pool`, a relu followed by a max pooling keeps the pooling's argmax positions for the
// backward pass instead of the relu's output (passes/argmax_pool.h); with `loss_chunks` > 1 the loss is first
// split into blocks of rows (passes/chunk_loss.h), and with `attention_chunks` > 1 every attention core into blocks
// of its attention matrices (passes/chunk_attention.h). With `clip_grad_norm`, the updates read the clipped
// gradients "<param>.grad.clipped". The outputs are [loss], or [loss, grad_norm] when clipping. The result verifies.
Result<Graph> build_training_graph(const Graph& forward, const TrainingOptions& opts);

// The `train` pass's options (docs/autodiff.md): optimizer, lr, momentum, weight_decay, nesterov, beta1, beta2,
// eps, lr_scale, bn_running_stats, argmax_pool, loss_chunks, attention_chunks, clip_grad_norm; and reading them
// (normalized) back into TrainingOptions.
std::vector<AttrSpec> training_option_specs();
Result<TrainingOptions> training_options_from(const Attributes& options);

}  // namespace lms
