// Node creation with one name per output (see emit.h).
#include "lms/autodiff/emit.h"

#include <fmt/format.h>

namespace lms::autodiff {

Result<std::vector<ValueId>> add_named(Graph& g, Category cat, Op op, std::vector<ValueId> inputs, Attributes attrs,
                                       std::span<const std::string> names) {
  const OpDef& d = op_def(op);
  std::string where = "%" + (names.empty() ? std::string(d.name) : names.front());
  if (names.size() != d.outputs.size())
    return fail_at(where, "internal: {} names for the {} outputs of '{}'", names.size(), d.outputs.size(), d.name);
  auto normalized = normalize_attrs(d, std::move(attrs));
  if (!normalized) return fail_at(where, "{}", normalized.error().what);
  std::vector<TensorType> in_types;
  for (ValueId v : inputs) {
    if (!v.valid()) return fail_at(where, "input is invalid (an earlier step failed)");
    in_types.push_back(g.value(v).type);
  }
  auto types = infer_types(op, in_types, *normalized);
  if (!types) return fail_at(where, "{}", types.error().what);
  NodeId n = g.add_node(op, std::move(*normalized), *types, names, cat);
  g.set_inputs(n, std::move(inputs));
  return g.node(n).outputs;
}

}  // namespace lms::autodiff
