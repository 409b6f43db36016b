// Swapping changes where tensors live, never what is computed: training with the tflms strategy gives bit-identical
// losses and parameters to training without it, for every sync mode and a spread of T, A and G (fixed parameters force
// the swaps even where everything fits), on the reference backend and on the cpu backend (whose copies run on their own
// stream threads), and on the cuda backend when a GPU is present. Under a budget the no-swap plan exceeds, the searched
// plan fits, the measured peak stays within it, and the losses are still those of the unconstrained run. The same for
// auto (its swaps and recomputations, the segments that remake block outputs, backward values swapped, a skip
// connection swapped across its forward gap, and a plan of greedies going past peaks they could not lower), for
// outputs written over their inputs' buffers, and for a loss and attention computed in blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "backends/gpu_presence.h"
#include "lms/io/onnx.h"
#include "lms/io/onnx_import.h"
#include "lms/models/models.h"
#include "lms/autodiff/optimizer.h"
#include "lms/plan/strategy.h"
#include "lms/runtime/backend_registry.h"
#include "lms/runtime/program.h"
#include "lms/runtime/trainer.h"
#include "lms/sim/device_model.h"

namespace lms {
namespace {

struct Case {
  std::string model;
  ModelOptions options;
};

Case mlp() {
  Case c{"mlp", {}};
  c.options.batch = 16;
  c.options.hidden = {64, 32};
  return c;
}

Case resnet() {
  Case c{"resnet18", {}};
  c.options.batch = 2;
  c.options.image = {8};
  c.options.classes = 10;
  c.options.small_stem = true;
  return c;
}

// resnet18 with the standard stem (7x7/2 convolution, max pooling): the argmax-pool pass gives the backward pass
// i32 positions, which swap like any tensor (T = 1 swaps them: they are read at the very end).
Case resnet_stem() {
  Case c{"resnet18", {}};
  c.options.batch = 2;
  c.options.image = {8};
  c.options.classes = 10;
  return c;
}

// A two-layer GPT whose activations outweigh its parameters: a budget can sit well below the no-swap peak.
Case gpt() {
  Case c{"gpt", {}};
  c.options.batch = 8;
  c.options.layers = 2;
  c.options.hidden_size = 64;
  c.options.heads = 4;
  c.options.seq = 64;
  c.options.vocab = 100;
  return c;
}

// A 3D U-Net at batch 1, 16 channels at the top level (the cpu backend's blocked layouts apply): its decoder's
// concats have parts (Note [Parts] in plan/liveness.h).
Case unet() {
  Case c{"unet3d", {}};
  c.options.batch = 1;
  c.options.image = {8};
  c.options.depth = 2;
  c.options.base_filters = 16;
  return c;
}

// `steps` steps of `forward` on `device` from seed 7, keeping the trained values.
TrainReport train_forward(const Graph& forward, const std::string& device, TrainOptions opts, int steps = 3) {
  opts.device = device;
  opts.steps = steps;
  opts.seed = 7;
  opts.keep_values = true;
  auto r = train(forward, opts);
  EXPECT_TRUE(r.has_value()) << forward.name() << " on " << device << ": " << r.error().str();
  return r ? std::move(*r) : TrainReport{};
}

TrainReport train_case(const Case& c, const std::string& device, TrainOptions opts) {
  auto forward = build_model(c.model, c.options);
  EXPECT_TRUE(forward.has_value()) << forward.error().str();
  return forward ? train_forward(*forward, device, std::move(opts)) : TrainReport{};
}

void expect_identical(const TrainReport& got, const TrainReport& want, const std::string& what) {
  ASSERT_EQ(got.losses.size(), want.losses.size()) << what;
  EXPECT_EQ(got.losses, want.losses) << what;
  ASSERT_EQ(got.values.size(), want.values.size()) << what;
  for (const auto& [name, t] : want.values) {
    auto it = got.values.find(name);
    ASSERT_NE(it, got.values.end()) << what << ": " << name;
    EXPECT_EQ(it->second.data, t.data) << what << ": " << name;
  }
}

// What train() plans `c` with on `device` under `o`: the training graph, and strategy options with `o`'s strategy,
// device model and budget and the backend's kernel workspaces (the backend lives here for them).
struct TrainPlanning {
  std::unique_ptr<Backend> backend;
  Graph training;
  StrategyOptions options;
};

std::optional<TrainPlanning> train_planning(const Case& c, const std::string& device, const TrainOptions& o) {
  auto backend = make_backend(device);
  EXPECT_TRUE(backend.has_value()) << backend.error().str();
  auto training = build_training_graph(*build_model(c.model, c.options), o.training);
  EXPECT_TRUE(training.has_value()) << training.error().str();
  if (!backend || !training) return std::nullopt;
  TrainPlanning t{std::move(*backend), std::move(*training), {}};
  t.options.strategy = o.strategy;
  t.options.device_model = o.device_model;
  t.options.budget_bytes = o.budget_bytes;
  t.options.workspace_bytes = workspaces_of(*t.backend);
  return t;
}

TflmsParams params(int t, int a, int g, SyncMode mode) {
  TflmsParams p;
  p.swapout_threshold = t;
  p.swapin_ahead = a;
  p.swapin_groupby = g;
  p.sync_mode = mode;
  p.min_bytes = 0;  // swap the small tensors too: more swaps, more chances to get one wrong
  return p;
}

void expect_swaps_are_invisible(const Case& c, const std::vector<TflmsParams>& settings) {
  for (const std::string& device : training_devices()) {
    const TrainReport base = train_case(c, device, TrainOptions{});
    for (const TflmsParams& p : settings) {
      TrainOptions o;
      o.strategy = Strategy::tflms;
      o.tflms = p;
      const TrainReport swapped = train_case(c, device, o);
      const std::string what = c.model + " on " + device + " T=" + std::to_string(p.swapout_threshold) +
                               " A=" + std::to_string(p.swapin_ahead) + " G=" + std::to_string(p.swapin_groupby) +
                               " sync_mode=" + std::to_string(static_cast<int>(p.sync_mode));
      EXPECT_GT(swapped.swapped_tensors, 0) << what << ": the parameters were chosen to swap";
      EXPECT_GT(swapped.swap_in_bytes, 0) << what;
      EXPECT_LE(swapped.peak_device_bytes, swapped.planned_peak_bytes) << what;
      expect_identical(swapped, base, what);
    }
  }
}

TEST(TflmsTraining, MlpSwapsAreBitIdentical) {
  expect_swaps_are_invisible(mlp(), {params(1, 1, 0, SyncMode::async), params(2, 2, 1, SyncMode::async),
                                     params(1, 3, 2, SyncMode::sync_out), params(1, 1, 0, SyncMode::sync_in),
                                     params(2, 1, 0, SyncMode::sync_both)});
}

TEST(TflmsTraining, ResnetSwapsAreBitIdentical) {
  expect_swaps_are_invisible(resnet(), {params(1, 1, 0, SyncMode::async), params(3, 2, 2, SyncMode::sync_out),
                                        params(2, 1, 0, SyncMode::sync_both)});
}

TEST(TflmsTraining, ResnetStemSwapsAreBitIdentical) {
  expect_swaps_are_invisible(resnet_stem(), {params(1, 1, 0, SyncMode::async)});
}

TEST(TflmsTraining, GptSwapsAreBitIdentical) {
  expect_swaps_are_invisible(gpt(), {params(1, 1, 0, SyncMode::async), params(2, 2, 3, SyncMode::sync_in)});
}

TEST(TflmsTraining, UnderABudgetTheSearchedPlanFitsAndTrainsTheSame) {
  const Case c = gpt();
  for (const std::string& device : training_devices()) {
    const TrainReport base = train_case(c, device, TrainOptions{});
    TrainOptions o;
    o.strategy = Strategy::tflms;
    // A third of the way up from the hard minimum to the no-swap peak: reordering alone does not fit it.
    o.budget_bytes = base.min_budget_bytes + (base.planned_peak_bytes - base.min_budget_bytes) / 3;
    const TrainReport swapped = train_case(c, device, o);
    EXPECT_TRUE(swapped.lms_needed) << device;
    EXPECT_EQ(swapped.peak_bytes_none, base.planned_peak_bytes) << device;
    EXPECT_LE(swapped.planned_peak_bytes, o.budget_bytes) << device;
    EXPECT_LE(swapped.peak_device_bytes, o.budget_bytes) << device << ": measured";
    EXPECT_GT(swapped.swapped_tensors, 0) << device;
    expect_identical(swapped, base, "gpt under budget on " + device);
  }
}

// auto swaps and recomputes; neither changes what is computed. Under budgets the no-swap plan exceeds, on a
// PCIe device model (recomputes) and a C2C one (swaps), the plan fits, the measured peak equals the planned
// peak, and losses and parameters are those of the unconstrained run.
TEST(AutoTraining, UnderABudgetSwapsAndRecomputationsAreBitIdentical) {
  for (const Case& c : {resnet(), gpt()}) {
    for (const std::string& device : training_devices()) {
      const TrainReport base = train_case(c, device, TrainOptions{});
      for (auto [model, third] : {std::pair{"v100-pcie3", 1}, std::pair{"gh200-c2c", 2}}) {
        {
          TrainOptions o;
          o.strategy = Strategy::automatic;
          o.device_model = *device_model(model);
          o.budget_bytes = base.min_budget_bytes + (base.planned_peak_bytes - base.min_budget_bytes) * third / 3;
          const TrainReport r = train_case(c, device, o);
          const std::string what = c.model + " on " + device + " planned for " + model + " at " +
                                   std::to_string(third) + "/3; took " + r.auto_source;
          EXPECT_TRUE(r.lms_needed) << what;
          EXPECT_LE(r.planned_peak_bytes, o.budget_bytes) << what;
          EXPECT_EQ(r.peak_device_bytes, r.planned_peak_bytes) << what << ": measured";
          // resnet18 at 8x8 is parameter-bound: TFLMS's level order alone fits it, and auto says so.
          if (c.model == "gpt") {
            EXPECT_GT(r.swapped_tensors + r.recomputed_tensors, 0) << what;
          }
          expect_identical(r, base, what);
        }
      }
    }
  }
}

// Outputs written over the buffers of inputs they read last (Note [Buffer reuse]) change where values live,
// never what is computed: losses and parameters are those of a plan that gives every value a buffer of its own,
// the planned peak is no higher (lower for the GPT and the U-Net on the reference backend, whose own buffers peak
// in the backward pass, at a copy and at the last gradient sum; the small MLP, the 8x8 resnet18 and, on cpu with
// its kernels' workspaces, the GPT and the U-Net peak as their backward passes start or at a convolution's
// workspace, before anything is reused), and the measured peak is the planned one.
TEST(BufferReuseTraining, GivesTheBitsOfOwnBuffers) {
  for (const Case& c : {mlp(), resnet(), gpt(), unet()}) {
    for (const std::string& device : training_devices()) {
      TrainOptions own;
      own.reuse_buffers = false;
      const TrainReport base = train_case(c, device, own);
      const TrainReport r = train_case(c, device, TrainOptions{});
      const std::string what = c.model + " on " + device;
      EXPECT_LE(r.planned_peak_bytes, base.planned_peak_bytes) << what;
      if ((c.model == "gpt" || c.model == "unet3d") && device == "reference") {
        EXPECT_LT(r.planned_peak_bytes, base.planned_peak_bytes) << what;
      }
      EXPECT_EQ(r.peak_device_bytes, r.planned_peak_bytes) << what << ": measured";
      EXPECT_EQ(base.peak_device_bytes, base.planned_peak_bytes) << what << ": measured, own buffers";
      expect_identical(r, base, what);
    }
  }
}

// Note [Parts]: the U-Net of BufferReuseTraining writes its upsampled features in their place in each decoder
// concat's output (and may view a half of the concat's gradient at its offset).
TEST(BufferReuseTraining, UnetConcatInputsArePlacedInTheirOutput) {
  const Case c = unet();
  auto training = build_training_graph(*build_model(c.model, c.options), TrainingOptions{});
  ASSERT_TRUE(training.has_value()) << training.error().str();
  auto program = compile(*training);
  ASSERT_TRUE(program.has_value()) << program.error().str();
  const Graph& g = program->graph();
  int placed = 0;
  for (NodeId n : g.node_ids())
    if (g.node(n).op == Op::concat) {
      const ValueId up = g.node(n).inputs.back();
      placed += program->location(up).offset == program->location(g.node(n).outputs[0]).offset +
                                                    g.value(g.node(n).outputs[0]).type.bytes() / 2;
    }
  EXPECT_EQ(placed, *c.options.depth - 1) << "every decoder level's concat has its upsampled half in place";
}

// auto's segments (docs/planner.md "Segments"): a block's output remade from the block's input, the block's
// insides cloned a second time. resnet50 at 96x96, batch 32, planned for h200-pcie5 at the first of 45%, 48%,
// 42% and 50% of its unconstrained peak whose plan remakes a block output (which budgets do depends on the
// backend's kernel workspaces: on cpu 42% and 48% do, 45% not; on cuda 45% did, 2026-12-04), and training gives
// the unconstrained run's losses and parameters. On the cpu and cuda backends (the reference backend's loops
// would take minutes for this model).
TEST(AutoTraining, BlockOutputsRemadeBySegmentsAreBitIdentical) {
  Case c{"resnet50", {}};
  c.options.batch = 32;
  c.options.image = {96};
  c.options.classes = 10;
  for (const std::string& device : training_devices()) {
    if (device == "reference") continue;
    const TrainReport base = train_case(c, device, TrainOptions{});
    TrainOptions o;
    o.strategy = Strategy::automatic;
    o.device_model = *device_model("h200-pcie5");
    // The plan train() makes: the same training graph, strategy options and backend workspaces.
    std::optional<TrainPlanning> t = train_planning(c, device, o);
    ASSERT_TRUE(t.has_value());
    StrategyOptions& so = t->options;
    std::optional<Plan> plan;
    for (int percent : {45, 48, 42, 50}) {
      so.budget_bytes = base.planned_peak_bytes * percent / 100;
      auto p = make_plan(t->training, so);
      ASSERT_TRUE(p.has_value()) << p.error().str();
      if (std::ranges::any_of(p->choices, [](const AutoChoice& ch) { return !ch.remade_from.empty(); })) {
        plan = std::move(*p);
        break;
      }
    }
    ASSERT_TRUE(plan.has_value()) << device << ": no plan remakes a block output";
    o.budget_bytes = so.budget_bytes;

    const TrainReport r = train_case(c, device, o);
    const std::string what = "resnet50 96x96 on " + device + "; took " + r.auto_source;
    EXPECT_EQ(r.recomputed_tensors, plan->recomputed_tensors) << what;
    EXPECT_EQ(r.peak_device_bytes, r.planned_peak_bytes) << what << ": measured";
    EXPECT_LE(r.planned_peak_bytes, o.budget_bytes) << what;
    expect_identical(r, base, what);
  }
}

// auto swaps backward values too (docs/planner.md "The auto strategy", step 1): the U-Net's skip-connection
// gradient, made by the decoder's backward pass and read again only by the encoder's, goes to the host and back.
// The batch-1 U-Net of BufferReuseTraining a sixteenth of the way from its hard minimum to its unconstrained
// peak, planned for v100-pcie3 with each backend's workspaces: the plan fits, swaps the skip gradient (on the
// reference backend, without workspaces, for certain; the cpu backend's workspaces may change the choices),
// the measured peak is the planned one, and training gives the unconstrained run's losses and parameters. (An
// eighth of the way until graph inputs could be swapped: auto then swaps the input instead.)
TEST(AutoTraining, SwappedBackwardValuesAreBitIdentical) {
  const Case c = unet();
  for (const std::string& device : training_devices()) {
    const TrainReport base = train_case(c, device, TrainOptions{});
    TrainOptions o;
    o.strategy = Strategy::automatic;
    o.device_model = *device_model("v100-pcie3");
    o.budget_bytes = base.min_budget_bytes + (base.planned_peak_bytes - base.min_budget_bytes) / 16;
    std::optional<TrainPlanning> t = train_planning(c, device, o);
    ASSERT_TRUE(t.has_value());
    auto plan = make_plan(t->training, t->options);
    ASSERT_TRUE(plan.has_value()) << plan.error().str();
    const Graph& g = t->training;
    const bool backward_swapped = std::ranges::any_of(plan->choices, [&](const AutoChoice& ch) {
      const auto v = g.find_value(ch.value);
      return ch.kind == AutoChoice::Kind::swap && v && g.node(g.value(*v).producer).category == Category::bwd;
    });
    if (device == "reference") {
      EXPECT_TRUE(backward_swapped) << "the skip connection's gradient is swapped";
    }

    const TrainReport r = train_case(c, device, o);
    const std::string what = "unet3d on " + device + "; took " + r.auto_source +
                             (backward_swapped ? "; a backward value swapped" : "");
    EXPECT_GT(r.swapped_tensors, 0) << what;
    EXPECT_EQ(r.peak_device_bytes, r.planned_peak_bytes) << what << ": measured";
    EXPECT_LE(r.planned_peak_bytes, o.budget_bytes) << what;
    expect_identical(r, base, what);
  }
}

// A U-Net's skip connection swapped across its forward gap (Note [Forward gaps] in plan/auto/candidates.cc): at the
// smallest budget auto fits (found by bisection to 16 KiB), the full-resolution skip connection is copied out after
// the encoder's pooling and back for the decoder's concat, and training there gives the unconstrained run's losses
// and parameters bit for bit, with the measured peak the planned one. Planned for h100-pcie5 as at full size (unet3d
// at 344^3 on 16 GiB needs this swap); on the reference backend, whose kernels have no workspaces.
TEST(AutoTraining, ASkipConnectionSwappedAcrossItsForwardGapIsBitIdentical) {
  Case c{"unet3d", {}};
  c.options.batch = 1;
  c.options.image = {24};
  c.options.depth = 3;
  c.options.base_filters = 8;
  const std::string device = "reference";
  const TrainReport base = train_case(c, device, TrainOptions{});
  TrainOptions o;
  o.strategy = Strategy::automatic;
  o.device_model = *device_model("h100-pcie5");
  std::optional<TrainPlanning> t = train_planning(c, device, o);
  ASSERT_TRUE(t.has_value());
  int64_t lo = base.min_budget_bytes, hi = base.planned_peak_bytes;  // lo does not fit (or is the minimum), hi fits
  while (hi - lo > (int64_t{16} << 10)) {
    t->options.budget_bytes = lo + (hi - lo) / 2;
    auto plan = make_plan(t->training, t->options);
    (plan.has_value() && plan->fits ? hi : lo) = t->options.budget_bytes;
  }
  t->options.budget_bytes = hi;
  auto plan = make_plan(t->training, t->options);
  ASSERT_TRUE(plan.has_value() && plan->fits);
  const auto skip_forward = [](const AutoChoice& ch) { return ch.forward && ch.value == "enc0.relu2"; };
  EXPECT_TRUE(std::ranges::any_of(plan->choices, skip_forward))
      << "the skip connection %enc0.relu2 is swapped across its forward gap at " << hi << " bytes";

  o.budget_bytes = hi;
  const TrainReport r = train_case(c, device, o);
  const std::string what = "unet3d 24^3 on " + device + " at " + std::to_string(hi) + " bytes; took " + r.auto_source;
  EXPECT_EQ(r.peak_device_bytes, r.planned_peak_bytes) << what << ": measured";
  EXPECT_LE(r.planned_peak_bytes, hi) << what;
  expect_identical(r, base, what);
}

// The loss over blocks of tokens (passes/chunk_loss.h), then attention over blocks of its matrices too
// (passes/chunk_attention.h): a GPT whose head's logits set the unchunked graph's hard minimum (and, once the loss is
// in blocks, whose attention probabilities set it) trains under a budget one byte below the previous graph's hard
// minimum: auto remakes or swaps blocks, the
// measured peak is the planned one, and the losses and parameters are those of the same chunked graph without a
// budget (bit for bit), whose losses are the unchunked graph's within rounding.
TEST(AutoTraining, ChunkedLossAndAttentionFitBelowTheUnchunkedMinimum) {
  Case c = gpt();
  c.options.vocab = 2000;
  c.options.seq = 256;
  c.options.batch = 2;
  for (const std::string& device : training_devices()) {
    const TrainReport whole = train_case(c, device, TrainOptions{});
    TrainReport previous = whole;
    // Then 8 loss and 16 attention chunks: the 8 attention matrices in 2 blocks of query rows each, whose minimum
    // the MLP already sets (it need not drop further), planned a quarter of the way from it to the peak.
    for (auto [loss_chunks, attention_chunks] : {std::pair{8, 1}, std::pair{8, 4}, std::pair{8, 16}}) {
      const std::string what = fmt::format("gpt with {} loss and {} attention chunks on {}", loss_chunks,
                                           attention_chunks, device);
      TrainOptions chunked;
      chunked.training.loss_chunks = loss_chunks;
      chunked.training.attention_chunks = attention_chunks;
      const TrainReport base = train_case(c, device, chunked);
      ASSERT_EQ(base.losses.size(), whole.losses.size());
      for (size_t i = 0; i < whole.losses.size(); ++i)
        EXPECT_NEAR(base.losses[i], whole.losses[i], 1e-5 * std::abs(whole.losses[i])) << what << ", step " << i;
      const bool rows = attention_chunks > c.options.batch * *c.options.heads;
      if (!rows) {
        EXPECT_LT(base.min_budget_bytes, previous.min_budget_bytes) << what;
      }

      TrainOptions o = chunked;
      o.strategy = Strategy::automatic;
      o.device_model = *device_model("h100-pcie5");
      o.budget_bytes = rows ? base.min_budget_bytes + (base.planned_peak_bytes - base.min_budget_bytes) / 4
                            : previous.min_budget_bytes - 1;
      const TrainReport r = train_case(c, device, o);
      EXPECT_GT(r.recomputed_tensors + r.swapped_tensors, 0) << what << "; took " << r.auto_source;
      EXPECT_EQ(r.peak_device_bytes, r.planned_peak_bytes) << what << ": measured";
      EXPECT_LE(r.planned_peak_bytes, o.budget_bytes) << what;
      expect_identical(r, base, what);
      previous = base;
    }
  }
}

#if LMS_HAVE_ONNX_FILES
// Auto's last stage (Note [Past a stuck peak] in plan/auto/auto_planner.h): torchvision's SwinTransformer (the
// onnx_swin fixture) at batch 26 and 1 MiB on h100-pcie5, where no plan of the earlier stages fits (every greedy
// stops at a peak its estimate cannot lower; batch 24 was the capacity before). Going past those peaks, auto's
// plan fits, and training under it gives the unconstrained run's losses and parameters bit for bit, with the
// measured peak the planned one; on the reference backend, whose kernels have no workspaces.
TEST(AutoTraining, GreediesGoingPastAStuckPeakFitAndAreBitIdentical) {
  auto model = read_onnx(std::string(LMS_SOURCE_DIR) + "/tests/fixtures/onnx_swin.onnx");
  ASSERT_TRUE(model.has_value()) << model.error().str();
  OnnxImportOptions io;
  io.batch = 26;
  auto imported = import_onnx(*model, "onnx_swin", io);
  ASSERT_TRUE(imported.has_value()) << imported.error().str();
  TrainOptions o;
  o.given_values = &imported->weights;
  const TrainReport base = train_forward(imported->forward, "reference", o, 2);
  o.strategy = Strategy::automatic;
  o.device_model = *device_model("h100-pcie5");
  o.budget_bytes = int64_t{1} << 20;
  const TrainReport r = train_forward(imported->forward, "reference", o, 2);
  const std::string what = "onnx_swin batch 26 at 1 MiB; took " + r.auto_source;
  EXPECT_NE(r.auto_source.find("going past the peaks"), std::string::npos) << what;
  EXPECT_GT(r.swapped_tensors, 0) << what;
  EXPECT_EQ(r.peak_device_bytes, r.planned_peak_bytes) << what << ": measured";
  EXPECT_LE(r.planned_peak_bytes, o.budget_bytes) << what;
  expect_identical(r, base, what);
}
#endif

}  // namespace
}  // namespace lms
