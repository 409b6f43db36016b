// The op registry: builds the op table by calling every family's definition function explicitly, checks that
// each op in op_list.inc was defined exactly once, and implements the generic parts of the op interface
// (attribute normalization, arity checks before shape rules, defaults for attribute getters).
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "lms/ops/op_table.h"

namespace lms {

namespace ops {

OpDef& OpTable::define(Op op) {
  auto i = static_cast<size_t>(op);
  ++times_defined[i];
  OpDef& d = defs[i];
  d.op = op;
  return d;
}

Result<int> resolve_axis(const OpCall& c, std::string_view name, const TensorType& t) {
  int64_t a = c.i(name);
  int64_t r = a < 0 ? a + t.rank() : a;
  if (r < 0 || r >= t.rank())
    return fail("{} attribute '{}' = {} is out of range for {} (rank {})", c.def.name, name, a, to_string(t),
                t.rank());
  return static_cast<int>(r);
}

Result<void> gelu_approximation(const OpCall& c) {
  const std::string a = c.s("approximate");
  if (a != "none" && a != "tanh")
    return fail("{} attribute 'approximate' = \"{}\" must be \"none\" or \"tanh\"", c.def.name, a);
  return {};
}

Result<void> clamp_bounds(const OpCall& c) {
  const double lo = c.f("min"), hi = c.f("max");
  if (std::isnan(lo) || std::isnan(hi) || lo > hi)
    return fail("{} bounds min = {} and max = {} must be numbers with min <= max", c.def.name, lo, hi);
  return {};
}

int64_t total_bytes(std::span<const TensorType> ts) {
  int64_t b = 0;
  for (const TensorType& t : ts) b += t.bytes();
  return b;
}

Cost elementwise_cost(const OpCall& c, std::span<const TensorType> outs, double flops_per_output_element) {
  double n = 0;
  for (const TensorType& t : outs) n += static_cast<double>(t.num_elements());
  return Cost{flops_per_output_element * n, total_bytes(c.inputs), total_bytes(outs)};
}

}  // namespace ops

namespace {

constexpr std::array<std::string_view, kNumOps> kOpNames = {
#define LMS_OP(id) #id,
#include "lms/ops/op_list.inc"
#undef LMS_OP
};

const ops::OpTable& table() {
  static const ops::OpTable t = [] {
    ops::OpTable t;
    ops::define_source_ops(t);
    ops::define_conv_ops(t);
    ops::define_norm_ops(t);
    ops::define_elementwise_ops(t);
    ops::define_pool_ops(t);
    ops::define_linalg_ops(t);
    ops::define_loss_ops(t);
    ops::define_update_ops(t);
    ops::define_copy_ops(t);
    ops::define_grad_ops(t);
    for (int i = 0; i < kNumOps; ++i) {
      t.defs[i].name = kOpNames[i];
      if (t.times_defined[i] != 1 || t.defs[i].shape == nullptr || t.defs[i].cost == nullptr) {
        // An internal invariant of the op library, not a user error: fail loudly at first use.
        std::fprintf(stderr, "lms: internal error: op '%s' defined %d times (shape rule %s, cost %s)\n",
                     std::string(kOpNames[i]).c_str(), t.times_defined[i], t.defs[i].shape ? "set" : "missing",
                     t.defs[i].cost ? "set" : "missing");
        std::abort();
      }
    }
    return t;
  }();
  return t;
}

const AttrSpec* find_spec(const OpDef& d, std::string_view name) {
  for (const AttrSpec& s : d.attrs)
    if (s.name == name) return &s;
  return nullptr;
}

template <class T>
T attr_or_default(const OpCall& c, std::string_view name) {
  if (const Attribute* a = c.attrs.find(name))
    if (const T* v = std::get_if<T>(a)) return *v;
  const AttrSpec* s = find_spec(c.def, name);
  if (s && s->default_value)
    if (const T* v = std::get_if<T>(&*s->default_value)) return *v;
  return T{};  // shape rules check required attributes before reading them; see normalize_attrs
}

}  // namespace

const OpDef& op_def(Op op) { return table().defs[static_cast<size_t>(op)]; }

std::span<const OpDef> all_op_defs() { return table().defs; }

bool accepts_input_count(const OpDef& d, size_t n) {
  const size_t all = d.inputs.size(), least = all - static_cast<size_t>(d.optional_inputs);
  return d.variadic ? n >= all : n >= least && n <= all;
}

std::string input_count_text(const OpDef& d) {
  const size_t all = d.inputs.size(), least = all - static_cast<size_t>(d.optional_inputs);
  if (d.variadic) return fmt::format("at least {}", all);
  if (least == all) return fmt::format("{}", all);
  return least + 1 == all ? fmt::format("{} or {}", least, all) : fmt::format("{} to {}", least, all);
}

std::optional<Op> find_op(std::string_view name) {
  for (int i = 0; i < kNumOps; ++i)
    if (kOpNames[i] == name) return static_cast<Op>(i);
  return std::nullopt;
}

int64_t OpCall::i(std::string_view n) const { return attr_or_default<int64_t>(*this, n); }
double OpCall::f(std::string_view n) const { return attr_or_default<double>(*this, n); }

double number_attr(const OpDef& def, const Attributes& attrs, std::string_view name) {
  auto as_number = [](const Attribute& v) -> std::optional<double> {
    if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
    if (const auto* f = std::get_if<double>(&v)) return *f;
    return std::nullopt;
  };
  if (const Attribute* v = attrs.find(name))
    if (auto n = as_number(*v)) return *n;
  for (const AttrSpec& s : def.attrs)
    if (s.name == name && s.default_value)
      if (auto n = as_number(*s.default_value)) return *n;
  return std::numeric_limits<double>::quiet_NaN();
}
bool OpCall::b(std::string_view n) const { return attr_or_default<bool>(*this, n); }
std::string OpCall::s(std::string_view n) const { return attr_or_default<std::string>(*this, n); }
IntList OpCall::ints(std::string_view n) const { return attr_or_default<IntList>(*this, n); }

Result<Attributes> normalize_attrs(const OpDef& def, Attributes attrs) {
  return normalize_attributes(def.attrs, std::move(attrs), fmt::format("op '{}'", def.name), "attribute");
}

Result<std::vector<TensorType>> infer_types(Op op, std::span<const TensorType> inputs, const Attributes& attrs,
                                            std::span<const TensorType> declared) {
  const OpDef& d = op_def(op);
  if (!accepts_input_count(d, inputs.size()))
    return fail("op '{}' takes {} input{} ({}), got {}", d.name, input_count_text(d), d.inputs.size() == 1 ? "" : "s",
                fmt::join(d.inputs, ", "), inputs.size());
  // Shape rules may see attributes that were never normalized (a hand-made node reaching the verifier); the
  // getters would read a missing required attribute as zero, so say what is missing here, once for all ops.
  for (const AttrSpec& s : d.attrs)
    if (!s.default_value && !attrs.has(s.name)) return fail("op '{}' needs attribute '{}' ({})", d.name, s.name, s.doc);
  OpCall call{d, inputs, attrs, declared};
  auto types = d.shape(call);
  if (!types) return std::unexpected(types.error());
  if (types->size() != d.outputs.size())
    return fail("internal: shape rule of '{}' returned {} types for {} outputs", d.name, types->size(),
                d.outputs.size());
  return types;
}

Cost op_cost(Op op, std::span<const TensorType> inputs, const Attributes& attrs,
             std::span<const TensorType> outputs) {
  const OpDef& d = op_def(op);
  OpCall call{d, inputs, attrs, outputs};
  return d.cost(call, outputs);
}

}  // namespace lms
