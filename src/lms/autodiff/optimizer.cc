// The training graph (see optimizer.h): gradients of every parameter, one in-place update per parameter
// ordered after the parameter's other readers, batch norm's running statistics, and one rng_advance per
// dropout key ordered after every dropout that reads it.
#include "lms/autodiff/optimizer.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "lms/autodiff/autodiff.h"
#include "lms/autodiff/emit.h"
#include "lms/ir/builder.h"
#include "lms/ir/verifier.h"
#include "lms/passes/argmax_pool.h"
#include "lms/passes/chunk_attention.h"
#include "lms/passes/chunk_loss.h"

namespace lms {

namespace {

constexpr std::array<std::string_view, 4> kOptimizerNames = {"sgd", "momentum", "adam", "adamw"};

// The updated values are named after what they overwrite: "<param>.new", "<param>.momentum.new", ...
std::vector<std::string> new_names(const Graph& g, std::span<const ValueId> overwritten) {
  std::vector<std::string> names;
  for (ValueId v : overwritten) names.push_back(g.value(v).name + ".new");
  return names;
}

// Adds the update of parameter `p` with gradient `grad` (and `lr_scale` if valid), its optimizer state, and the
// control edges that make every other reader of `p` finish before the update overwrites it.
Result<void> add_update(Graph& g, ValueId p, ValueId grad, ValueId lr_scale, const OptimizerOptions& o) {
  Builder b(g);
  b.set_category(Category::upd);
  const std::string name = g.value(p).name;
  const TensorType type = g.value(p).type;
  std::vector<ValueId> inputs = {p};
  Attributes a;
  a.set("lr", effective_lr(o));
  Op op = Op::sgd_update;
  switch (o.kind) {
    case OptimizerKind::sgd:
      break;
    case OptimizerKind::momentum:
      op = Op::momentum_update;
      inputs.push_back(b.state(type, name + ".momentum", "zeros"));
      a.set("momentum", o.momentum);
      a.set("nesterov", o.nesterov);
      break;
    case OptimizerKind::adam:
    case OptimizerKind::adamw:
      op = Op::adam_update;
      inputs.push_back(b.state(type, name + ".m", "zeros"));
      inputs.push_back(b.state(type, name + ".v", "zeros"));
      inputs.push_back(b.state(TensorType{DType::f32, {}}, name + ".t", "zeros"));
      a.set("beta1", o.beta1);
      a.set("beta2", o.beta2);
      a.set("eps", o.eps);
      break;
  }
  a.set("weight_decay", effective_weight_decay(o));
  if (o.kind == OptimizerKind::adamw) a.set("decoupled_weight_decay", true);
  if (!b.ok()) return std::unexpected(*b.error());
  std::vector<std::string> names = new_names(g, inputs);
  inputs.push_back(grad);
  if (lr_scale.valid()) inputs.push_back(lr_scale);
  auto outs = LMS_TRY(autodiff::add_named(g, Category::upd, op, std::move(inputs), std::move(a), names));
  NodeId update = g.value(outs.front()).producer;
  for (NodeId reader : std::vector<NodeId>(g.value(p).consumers))
    if (reader != update) g.add_control_input(update, reader);
  return {};
}

// Adds "<bn>.running_mean" (zeros), "<bn>.running_var" (ones) and their bn_running_update for batch_norm `bn`.
Result<void> add_running_update(Graph& g, NodeId bn) {
  const Node node = g.node(bn);
  std::vector<TensorType> in_types, out_types;
  for (ValueId v : node.inputs) in_types.push_back(g.value(v).type);
  for (ValueId v : node.outputs) out_types.push_back(g.value(v).type);
  OpCall call{op_def(Op::batch_norm), in_types, node.attrs, out_types};
  const Shape& x = in_types[0].shape;
  int64_t count = x[0];
  for (size_t i = 2; i < x.size(); ++i) count *= x[i];
  const std::string name = g.value(node.outputs[0]).name;
  Builder b(g);
  b.set_category(Category::upd);
  ValueId mean = b.state(out_types[1], name + ".running_mean", "zeros");
  ValueId var = b.state(out_types[1], name + ".running_var", "ones");
  if (!b.ok()) return std::unexpected(*b.error());
  std::vector<ValueId> stats = {mean, var};
  Attributes a = attrs({{"momentum", call.f("momentum")}, {"eps", call.f("eps")}, {"count", count}});
  auto r = autodiff::add_named(g, Category::upd, Op::bn_running_update, {mean, var, node.outputs[1], node.outputs[2]},
                               std::move(a), new_names(g, stats));
  if (!r) return wrap(fmt::format("running statistics of batch norm %{}", name), r.error());
  return {};
}

// Scales every valid gradient of `grads` by min(1, max_norm / (norm + kClipEps)), norm = sqrt of the sum over the
// gradients, in order, of the sum of their squares (category bwd), replacing each by its "<grad>.clipped"; returns
// the norm. The gradients must share one dtype (the norm's).
Result<ValueId> clip_gradients(Graph& g, std::vector<ValueId>& grads, double max_norm) {
  Builder b(g);
  b.set_category(Category::bwd);
  ValueId total;
  for (ValueId grad : grads) {
    if (!grad.valid()) continue;
    const std::string name = g.value(grad).name;
    if (total.valid() && g.value(grad).type.dtype != g.value(total).type.dtype)
      return fail("gradient clipping needs gradients of one dtype: %{} is {}, the first was {}", name,
                  dtype_name(g.value(grad).type.dtype), dtype_name(g.value(total).type.dtype));
    ValueId squares = b.op(Op::reduce_sum, {b.op(Op::mul, {grad, grad}, {}, name + ".squared")}, {}, name + ".sumsq");
    total = total.valid() ? b.op(Op::add, {total, squares}, {}, std::string(kGradNormName) + ".sumsq") : squares;
  }
  if (!total.valid()) return fail("gradient clipping: no parameter has a gradient");
  const TensorType scalar = g.value(total).type;
  const std::string name = kGradNormName;
  ValueId norm = b.op(Op::sqrt, {total}, {}, name);
  ValueId eps = b.add(Op::constant, {}, attrs({{"value", kClipEps}}), name + ".eps", {scalar}).at(0);
  ValueId inverse = b.op(Op::reciprocal, {b.op(Op::add, {norm, eps}, {}, name + ".plus_eps")}, {}, name + ".inverse");
  ValueId coef = b.op(Op::scale, {inverse}, attrs({{"factor", max_norm}}), name + ".coef");
  ValueId clamped = b.op(Op::clamp, {coef}, attrs({{"max", 1.0}}), name + ".clip");
  for (ValueId& grad : grads)
    if (grad.valid()) grad = b.op(Op::mul, {grad, clamped}, {}, g.value(grad).name + ".clipped");
  if (!b.ok()) return std::unexpected(*b.error());
  return norm;
}

// Adds "<key>.new" = rng_advance(key) for dropout key `key`, after every node that reads the key (the forward
// dropouts and their backward twins), so that every one of them sees this step's value.
Result<void> add_rng_advance(Graph& g, ValueId key) {
  const NodeId producer = g.value(key).producer;
  if (g.node(producer).op != Op::state)
    return fail_at(fmt::format("%{}", g.value(key).name),
                   "a dropout key must be a state value (persistent, advanced every step), not the output of {}",
                   g.def(producer).name);
  const std::vector<ValueId> keys = {key};
  auto outs = LMS_TRY(autodiff::add_named(g, Category::upd, Op::rng_advance, keys, {}, new_names(g, keys)));
  const NodeId advance = g.value(outs.front()).producer;
  for (NodeId reader : std::vector<NodeId>(g.value(key).consumers))
    if (reader != advance) g.add_control_input(advance, reader);
  return {};
}

}  // namespace

std::string_view optimizer_name(OptimizerKind k) { return kOptimizerNames[static_cast<size_t>(k)]; }

std::optional<OptimizerKind> parse_optimizer(std::string_view name) {
  for (size_t i = 0; i < kOptimizerNames.size(); ++i)
    if (kOptimizerNames[i] == name) return static_cast<OptimizerKind>(i);
  return std::nullopt;
}

double effective_lr(const OptimizerOptions& o) {
  const bool adam = o.kind == OptimizerKind::adam || o.kind == OptimizerKind::adamw;
  return o.lr.value_or(adam ? kDefaultAdamLr : kDefaultLr);
}

double effective_weight_decay(const OptimizerOptions& o) {
  return o.weight_decay.value_or(o.kind == OptimizerKind::adamw ? kDefaultAdamwWeightDecay : 0);
}

Result<void> check_optimizer_options(const OptimizerOptions& o) {
  auto nonnegative = [](std::string_view name, double v) -> Result<void> {
    if (!(v >= 0)) return fail("optimizer option '{}' = {} must be >= 0", name, v);
    return {};
  };
  auto decay = [](std::string_view name, double v) -> Result<void> {
    if (!(v >= 0 && v < 1)) return fail("optimizer option '{}' = {} must be in [0, 1)", name, v);
    return {};
  };
  LMS_TRY_VOID(nonnegative("lr", effective_lr(o)));
  LMS_TRY_VOID(nonnegative("momentum", o.momentum));
  LMS_TRY_VOID(nonnegative("weight-decay", effective_weight_decay(o)));
  LMS_TRY_VOID(nonnegative("eps", o.eps));
  LMS_TRY_VOID(decay("beta1", o.beta1));
  LMS_TRY_VOID(decay("beta2", o.beta2));
  if (o.kind == OptimizerKind::momentum && o.nesterov && o.momentum == 0)
    return fail("optimizer option 'nesterov' needs momentum > 0, got momentum {}", o.momentum);
  return {};
}

Result<Graph> build_training_graph(const Graph& forward, const TrainingOptions& opts) {
  LMS_TRY_VOID(check_optimizer_options(opts.optimizer));
  if (!(opts.clip_grad_norm >= 0)) return fail("--clip-grad-norm must be > 0 (0: off), got {}", opts.clip_grad_norm);
  Graph g = forward;
  if (auto r = chunk_loss(g, opts.loss_chunks); !r) return wrap("loss chunks", r.error());
  if (auto r = chunk_attention(g, opts.attention_chunks); !r) return wrap("attention chunks", r.error());
  ValueId loss = LMS_TRY(loss_of(g));
  std::vector<ValueId> params;
  std::vector<NodeId> batch_norms;
  for (NodeId n : g.node_ids()) {
    const Node& node = g.node(n);
    if (node.op == Op::param && is_float(g.value(node.outputs[0]).type.dtype)) params.push_back(node.outputs[0]);
    if (node.op == Op::batch_norm) batch_norms.push_back(n);
  }
  std::vector<ValueId> grads = LMS_TRY(append_gradients(g, params));
  std::vector<ValueId> outputs = {loss};
  if (opts.clip_grad_norm > 0) outputs.push_back(LMS_TRY(clip_gradients(g, grads, opts.clip_grad_norm)));
  ValueId lr_scale;
  if (opts.optimizer.lr_scale) {
    if (g.find_value(kLrScaleName))
      return fail("the learning-rate schedule's input %{} is also a value of graph '{}'", kLrScaleName, g.name());
    Builder b(g);
    lr_scale = b.input(TensorType{DType::f32, {}}, kLrScaleName);
    if (!b.ok()) return std::unexpected(*b.error());
  }
  for (size_t i = 0; i < params.size(); ++i)
    if (grads[i].valid()) {
      auto r = add_update(g, params[i], grads[i], lr_scale, opts.optimizer);
      if (!r) return wrap(fmt::format("update of %{}", g.value(params[i]).name), r.error());
    }
  if (opts.bn_running_stats)
    for (NodeId bn : batch_norms) LMS_TRY_VOID(add_running_update(g, bn));
  std::vector<ValueId> keys;  // in order of first use
  for (NodeId n : g.node_ids())
    if (g.node(n).op == Op::dropout && std::ranges::find(keys, g.node(n).inputs[1]) == keys.end())
      keys.push_back(g.node(n).inputs[1]);
  for (ValueId key : keys) LMS_TRY_VOID(add_rng_advance(g, key));
  g.set_outputs(outputs);
  if (opts.argmax_pool) LMS_TRY(use_pool_argmax(g));  // renumbers nodes and values
  if (auto v = verify(g); !v) return wrap("training graph: internal: it does not verify", v.error());
  return g;
}

std::vector<AttrSpec> training_option_specs() {
  const OptimizerOptions d;
  return {
      {"optimizer", AttrKind::String, Attribute{std::string(optimizer_name(d.kind))}, "sgd, momentum, adam or adamw"},
      {"lr", AttrKind::Float, Attribute{kDefaultLr}, "learning rate (default 0.01; 0.001 for adam and adamw)"},
      {"momentum", AttrKind::Float, Attribute{d.momentum}, "momentum factor (momentum only)"},
      {"weight_decay", AttrKind::Float, Attribute{0.0},
       "L2 penalty added to the gradient; adamw: the decay of the parameter (default 0; 0.01 for adamw)"},
      {"nesterov", AttrKind::Bool, Attribute{d.nesterov}, "Nesterov momentum (momentum only)"},
      {"beta1", AttrKind::Float, Attribute{d.beta1}, "Adam's first-moment decay"},
      {"beta2", AttrKind::Float, Attribute{d.beta2}, "Adam's second-moment decay"},
      {"eps", AttrKind::Float, Attribute{d.eps}, "Adam's denominator term"},
      {"lr_scale", AttrKind::Bool, Attribute{d.lr_scale},
       "every update also reads the f32[] input %lr_scale and steps with lr x its value (a schedule)"},
      {"bn_running_stats", AttrKind::Bool, Attribute{true}, "update batch norm running statistics"},
      {"argmax_pool", AttrKind::Bool, Attribute{true},
       "keep a relu-then-max-pool's argmax positions, not the relu's output, for the backward pass"},
      {"loss_chunks", AttrKind::Int, Attribute{int64_t{1}},
       "compute the loss over this many blocks of its logits' rows (chunk-loss pass; not bit-identical)"},
      {"attention_chunks", AttrKind::Int, Attribute{int64_t{1}},
       "compute every attention core over this many blocks of its attention matrices (chunk-attention pass)"},
      {"clip_grad_norm", AttrKind::Float, Attribute{0.0},
       "> 0: scale the gradients by min(1, this / their 2-norm) before the updates (0: off)"},
  };
}

Result<TrainingOptions> training_options_from(const Attributes& a) {
  TrainingOptions t;
  OptimizerOptions& o = t.optimizer;
  std::string kind = a.get_string("optimizer", std::string(optimizer_name(o.kind)));
  auto k = parse_optimizer(kind);
  if (!k) return fail("unknown optimizer '{}' (optimizers: sgd, momentum, adam, adamw)", kind);
  o.kind = *k;
  if (a.has("lr")) o.lr = a.get_float("lr", kDefaultLr);
  o.momentum = a.get_float("momentum", o.momentum);
  if (a.has("weight_decay")) o.weight_decay = a.get_float("weight_decay", 0);
  o.nesterov = a.get_bool("nesterov", o.nesterov);
  o.beta1 = a.get_float("beta1", o.beta1);
  o.beta2 = a.get_float("beta2", o.beta2);
  o.eps = a.get_float("eps", o.eps);
  o.lr_scale = a.get_bool("lr_scale", o.lr_scale);
  t.bn_running_stats = a.get_bool("bn_running_stats", t.bn_running_stats);
  t.argmax_pool = a.get_bool("argmax_pool", t.argmax_pool);
  t.loss_chunks = a.get_int("loss_chunks", t.loss_chunks);
  t.attention_chunks = a.get_int("attention_chunks", t.attention_chunks);
  t.clip_grad_norm = a.get_float("clip_grad_norm", t.clip_grad_norm);
  LMS_TRY_VOID(check_optimizer_options(o));
  return t;
}

}  // namespace lms
