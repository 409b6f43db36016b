// The pass registry: every pass usable in a pipeline, listed explicitly, each with a thin wrapper that reads its
// options and calls the plain function doing the work.
#include <array>

#include "lms/autodiff/optimizer.h"
#include "lms/autodiff/passes.h"
#include "lms/ir/verifier.h"
#include "lms/passes/argmax_pool.h"
#include "lms/passes/chunk_attention.h"
#include "lms/passes/chunk_loss.h"
#include "lms/passes/dce.h"
#include "lms/passes/pass.h"
#include "lms/passes/recompute.h"
#include "lms/passes/swap.h"
#include "lms/passes/tflms_serialize.h"
#include "lms/passes/tflms_swap.h"
#include "lms/passes/tflms_triggers.h"

namespace lms {

namespace {

Result<void> run_verify(Graph& g, const Attributes&) { return verify(g); }

Result<void> run_dce(Graph& g, const Attributes&) {
  LMS_TRY(eliminate_dead_code(g));
  return {};
}

const std::vector<PassInfo>& registry() {
  static const std::vector<PassInfo> passes = {
      {"verify", "checks the graph (types, shapes, placement, acyclicity, schedule order); changes nothing", {},
       run_verify},
      {"dce", "removes nodes that no graph output or side-effecting node needs", {}, run_dce},
      {"autodiff", "replaces the graph by its gradient graph: outputs [loss, d(loss)/d(each wrt value)]",
       autodiff_pass_options(), run_autodiff_pass},
      {"train", "replaces the graph by its training graph: gradients, optimizer updates, running statistics",
       training_option_specs(), run_train_pass},
      {"argmax-pool",
       "keeps a relu-then-max-pool's argmax positions for the backward pass instead of the relu's output "
       "(bit-identical gradients)",
       {}, run_argmax_pool_pass},
      {"chunk-loss",
       "computes a cross-entropy loss of a projection's logits over blocks of rows, each block's logits a value of "
       "its own (not bit-identical: the blocks' means are weighted)",
       chunk_loss_options(), run_chunk_loss_pass},
      {"chunk-attention",
       "computes every attention core (softmax of q k^T, times v) over blocks of its batched attention matrices",
       chunk_attention_options(), run_chunk_attention_pass},
      {"tflms-swap", "inserts TFLMS swap_out/swap_in pairs for tensors read far away (docs/tflms.md)",
       tflms_swap_options(), run_tflms_swap_pass},
      {"tflms-triggers", "adds each untriggered swap_in's TFLMS trigger edge and moves it after the trigger",
       tflms_triggers_options(), run_tflms_triggers_pass},
      {"tflms-serialize", "chains the ops of chosen levels by control edges in id order",
       tflms_serialize_options(), run_tflms_serialize_pass},
      {"recompute", "clones chosen values' producers for their backward readers (docs/recompute.md)",
       recompute_options(), run_recompute_pass},
      {"swap",
       "swaps chosen values out after the forward pass and back in for their backward readers, prefetch started by "
       "a trigger (docs/swap.md)",
       swap_options(), run_swap_pass},
  };
  return passes;
}

}  // namespace

std::span<const PassInfo> pass_registry() { return registry(); }

const PassInfo* find_pass(std::string_view name) {
  for (const PassInfo& p : registry())
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace lms
