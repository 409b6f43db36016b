// Optimizer updates with torch.optim semantics, applied in place to a parameter and its state: sgd_update
// (w, g), momentum_update (w, v, g) and adam_update (w, m, v, t, g) with t a per-parameter f32[] step count;
// and rng_advance (key), which moves a dropout key (an i64[] state) to the next step's masks. Each update may take
// one more input, lr_scale (f32[]): the step then uses the learning rate lr x lr_scale (the product in double),
// so that a schedule changes it every step without a new graph (runtime/lr_schedule.h).
// Weight decay is L2 added to the gradient (g + wd*w), as torch.optim.SGD and torch.optim.Adam do; adam_update
// with decoupled_weight_decay decays the parameter instead, w *= 1 - lr*wd, as torch.optim.AdamW does. These are
// the IR's only mutations: each output aliases the input it overwrites (`OpDef::aliases`), and the ops are
// side-effecting, so they run although nothing reads their outputs.
#include <fmt/format.h>

#include "lms/ops/op_table.h"

namespace lms::ops {

namespace {

// FLOPs per parameter element (a multiply-add counts 2):
// sgd: d = g + wd*w (2), w -= lr*d (2).
constexpr double kSgdFlopsPerElement = 4;
// momentum: d = g + wd*w (2), v = momentum*v + d (2), w -= lr*v (2), or for Nesterov d + momentum*v first (2).
constexpr double kMomentumFlopsPerElement = 8;
// adam: d = g + wd*w (2; AdamW's w*(1 - lr*wd) the same), m = b1*m + (1-b1)*d (3), v = b2*v + (1-b2)*d*d (4),
// bias-corrected m and v (2), sqrt (1), + eps (1), divide (1), w -= lr*... (2).
constexpr double kAdamFlopsPerElement = 16;

// Fails unless float attribute `name` is >= 0 (torch.optim's check for learning rates, decays, eps).
Result<void> check_nonnegative(const OpCall& c, std::string_view name) {
  double v = c.f(name);
  if (!(v >= 0)) return fail("{} attribute '{}' = {} must be >= 0", c.def.name, name, v);
  return {};
}

// Fails unless float attribute `name` is in [0, 1): a decay rate of 1 would never forget.
Result<void> check_decay_rate(const OpCall& c, std::string_view name) {
  double v = c.f(name);
  if (!(v >= 0 && v < 1)) return fail("{} attribute '{}' = {} must be in [0, 1)", c.def.name, name, v);
  return {};
}

// Checks the tensors: w is floating-point; input `step` (if >= 0) is the f32[] step counter, and the optional
// last input lr_scale an f32[] too; every other input (gradient, moments) has exactly w's type, since the update is
// elementwise and in place. Returns the aliased inputs' types, which are the outputs' types.
Result<std::vector<TensorType>> check_tensors(const OpCall& c, int step) {
  const TensorType& w = c.inputs[0];
  if (!is_float(w.dtype)) return fail("{} needs a floating-point parameter w, got {}", c.def.name, to_string(w));
  for (size_t i = 1; i < c.inputs.size(); ++i) {
    if (static_cast<int>(i) == step || i + 1 == c.def.inputs.size()) {
      if (c.inputs[i] != TensorType{DType::f32, {}})
        return fail("{} {} {} must be f32[], got {}", c.def.name,
                    static_cast<int>(i) == step ? "step counter" : "input", c.def.inputs[i], to_string(c.inputs[i]));
    } else if (c.inputs[i] != w) {
      return fail("{} {} is {} but w is {}; they must have identical types", c.def.name, c.def.inputs[i],
                  to_string(c.inputs[i]), to_string(w));
    }
  }
  std::vector<TensorType> out;
  for (int a : c.def.aliases) out.push_back(c.inputs[a]);
  return out;
}

Result<std::vector<TensorType>> sgd_shape(const OpCall& c) {
  LMS_TRY_VOID(check_nonnegative(c, "lr"));
  LMS_TRY_VOID(check_nonnegative(c, "weight_decay"));
  return check_tensors(c, -1);
}

Result<std::vector<TensorType>> momentum_shape(const OpCall& c) {
  LMS_TRY_VOID(check_nonnegative(c, "lr"));
  LMS_TRY_VOID(check_nonnegative(c, "momentum"));
  LMS_TRY_VOID(check_nonnegative(c, "weight_decay"));
  // As torch.optim.SGD: Nesterov momentum with zero momentum is a mistake, not plain SGD.
  if (c.b("nesterov") && c.f("momentum") == 0)
    return fail("momentum_update with nesterov = true needs momentum > 0, got {}", c.f("momentum"));
  return check_tensors(c, -1);
}

Result<std::vector<TensorType>> adam_shape(const OpCall& c) {
  LMS_TRY_VOID(check_nonnegative(c, "lr"));
  LMS_TRY_VOID(check_decay_rate(c, "beta1"));
  LMS_TRY_VOID(check_decay_rate(c, "beta2"));
  LMS_TRY_VOID(check_nonnegative(c, "eps"));
  LMS_TRY_VOID(check_nonnegative(c, "weight_decay"));
  return check_tensors(c, /*step=*/3);
}

Result<std::vector<TensorType>> rng_advance_shape(const OpCall& c) {
  if (c.inputs[0] != TensorType{DType::i64, {}})
    return fail("rng_advance key must be i64[], got {}", to_string(c.inputs[0]));
  return std::vector<TensorType>{c.inputs[0]};
}

Cost rng_advance_cost(const OpCall& c, std::span<const TensorType> outs) {
  return Cost{0, total_bytes(c.inputs), total_bytes(outs)};
}

template <const double& FlopsPerElement>
Cost update_cost(const OpCall& c, std::span<const TensorType> outs) {
  return Cost{FlopsPerElement * static_cast<double>(c.inputs[0].num_elements()), total_bytes(c.inputs),
              total_bytes(outs)};
}

// The attributes every update shares.
AttrSpec lr_spec() { return {"lr", AttrKind::Float, std::nullopt, "learning rate, >= 0"}; }
AttrSpec weight_decay_spec() {
  return {"weight_decay", AttrKind::Float, Attribute{0.0}, "L2 penalty added to the gradient (g + wd*w), >= 0"};
}

OpDef& update(OpDef& d, std::vector<std::string_view> inputs, std::vector<std::string_view> outputs,
              std::vector<int> aliases, std::string_view doc) {
  d.inputs = std::move(inputs);
  d.outputs = std::move(outputs);
  d.aliases = std::move(aliases);
  d.traits.in_place = true;
  d.traits.side_effecting = true;
  d.doc = doc;
  return d;
}

// An optimizer's update: `update` of `inputs` and then the optional lr_scale.
OpDef& optimizer_update(OpDef& d, std::vector<std::string_view> inputs, std::vector<std::string_view> outputs,
                        std::vector<int> aliases, std::string_view doc) {
  inputs.push_back("lr_scale");
  update(d, std::move(inputs), std::move(outputs), std::move(aliases), doc).optional_inputs = 1;
  return d;
}

}  // namespace

void define_update_ops(OpTable& t) {
  {
    OpDef& d = optimizer_update(t.define(Op::sgd_update), {"w", "g"}, {"w_new"}, {0}, "w -= lr * (g + wd*w)");
    d.attrs = {lr_spec(), weight_decay_spec()};
    d.shape = sgd_shape;
    d.cost = update_cost<kSgdFlopsPerElement>;
  }
  {
    OpDef& d = optimizer_update(
        t.define(Op::momentum_update), {"w", "v", "g"}, {"w_new", "v_new"}, {0, 1},
        "v = momentum*v + (g + wd*w); w -= lr*v (Nesterov: w -= lr*((g + wd*w) + momentum*v))");
    d.attrs = {
        lr_spec(),
        {"momentum", AttrKind::Float, Attribute{0.9}, "momentum factor, >= 0"},
        weight_decay_spec(),
        {"nesterov", AttrKind::Bool, Attribute{false}, "use Nesterov momentum (needs momentum > 0)"},
    };
    d.shape = momentum_shape;
    d.cost = update_cost<kMomentumFlopsPerElement>;
  }
  {
    OpDef& d = optimizer_update(t.define(Op::adam_update), {"w", "m", "v", "t", "g"},
                                {"w_new", "m_new", "v_new", "t_new"}, {0, 1, 2, 3},
                                "Adam (torch.optim.Adam, L2 in the gradient; AdamW with decoupled_weight_decay); t "
                                "counts steps and is incremented");
    d.attrs = {
        lr_spec(),
        {"beta1", AttrKind::Float, Attribute{0.9}, "decay of the first moment m, in [0, 1)"},
        {"beta2", AttrKind::Float, Attribute{0.999}, "decay of the second moment v, in [0, 1)"},
        {"eps", AttrKind::Float, Attribute{1e-8}, "added to sqrt(v_hat) in the denominator, >= 0"},
        weight_decay_spec(),
        {"decoupled_weight_decay", AttrKind::Bool, Attribute{false},
         "AdamW: w *= 1 - lr*wd before the step, instead of wd*w added to the gradient"},
    };
    d.shape = adam_shape;
    d.cost = update_cost<kAdamFlopsPerElement>;
  }
  {
    OpDef& d = update(t.define(Op::rng_advance), {"key"}, {"key_new"}, {0},
                      "key += 1 (wrapping): every dropout reading the key draws new masks next step");
    d.shape = rng_advance_shape;
    d.cost = rng_advance_cost;
  }
}

}  // namespace lms::ops
