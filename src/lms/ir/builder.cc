// Graph construction with shape inference and a sticky first error.
#include "lms/ir/builder.h"

#include <utility>

#include <fmt/format.h>

namespace lms {

Attributes attrs(std::initializer_list<std::pair<std::string, Attribute>> list) {
  Attributes a;
  for (const auto& [n, v] : list) a.set(n, v);
  return a;
}

std::vector<ValueId> Builder::add(Op op, std::vector<ValueId> inputs, Attributes attrs, std::string name,
                                  std::vector<TensorType> declared) {
  if (error_) return {};
  const OpDef& d = op_def(op);
  std::string full = prefix_ + (name.empty() ? std::string(d.name) : name);
  auto normalized = normalize_attrs(d, std::move(attrs));
  if (!normalized) {
    error_ = Error{normalized.error().what, "%" + full};
    return {};
  }
  std::vector<TensorType> in_types;
  for (ValueId v : inputs) {
    if (!v.valid()) {
      error_ = Error{"input is invalid (an earlier step failed)", "%" + full};
      return {};
    }
    in_types.push_back(g_.value(v).type);
  }
  auto types = infer_types(op, in_types, *normalized, declared);
  if (!types) {
    error_ = Error{types.error().what, "%" + full};
    return {};
  }
  std::vector<std::string> names;
  for (size_t i = 0; i < d.outputs.size(); ++i)
    names.push_back(i == 0 ? full : fmt::format("{}.{}", full, d.outputs[i]));
  NodeId n = g_.add_node(op, std::move(*normalized), *types, names, cat_);
  g_.set_inputs(n, std::move(inputs));
  return g_.node(n).outputs;
}

ValueId Builder::op(Op op, std::vector<ValueId> inputs, Attributes attrs, std::string name) {
  auto outs = add(op, std::move(inputs), std::move(attrs), std::move(name));
  return outs.empty() ? ValueId{} : outs.front();
}

ValueId Builder::input(TensorType t, std::string name) {
  auto outs = add(Op::input, {}, {}, std::move(name), {t});
  return outs.empty() ? ValueId{} : outs.front();
}

ValueId Builder::param(TensorType t, std::string name, std::string init) {
  Attributes a;
  if (!init.empty()) a.set("init", init);
  auto outs = add(Op::param, {}, std::move(a), std::move(name), {t});
  return outs.empty() ? ValueId{} : outs.front();
}

ValueId Builder::state(TensorType t, std::string name, std::string init) {
  auto outs = add(Op::state, {}, lms::attrs({{"init", init}}), std::move(name), {t});
  return outs.empty() ? ValueId{} : outs.front();
}

ValueId Builder::dropout(ValueId x, double p, std::string name) {
  if (p == 0 || !ok()) return x;
  constexpr std::string_view kKeyName = "dropout.key";
  const TensorType key_type{DType::i64, {}};
  std::optional<ValueId> key = g_.find_value(std::string(kKeyName));
  if (!key) {
    const std::string prefix = std::exchange(prefix_, "");
    key = state(key_type, std::string(kKeyName), "bits");
    prefix_ = prefix;
  } else if (g_.node(g_.value(*key).producer).op != Op::state || g_.value(*key).type != key_type) {
    error_ = Error{"the graph has a value of this name that is not an i64[] state", "%" + std::string(kKeyName)};
  }
  if (!ok()) return ValueId{};
  int64_t seed = 0;
  for (NodeId n : g_.node_ids()) seed += g_.node(n).op == Op::dropout ? 1 : 0;
  return op(Op::dropout, {x, *key}, lms::attrs({{"p", p}, {"seed", seed}}), std::move(name));
}

}  // namespace lms
