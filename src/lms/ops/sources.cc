// Source ops: graph inputs, parameters, persistent state and constants. They have no inputs; their type is
// the node's annotation. Parameters and state are persistent (alive for the whole program).
#include "lms/ops/op_table.h"

namespace lms::ops {

namespace {
Result<std::vector<TensorType>> annotated(const OpCall& c) {
  if (c.declared.size() != 1) return fail("'{}' needs exactly one type annotation", c.def.name);
  for (int64_t d : c.declared[0].shape)
    if (d < 0) return fail("'{}' has a negative dimension in {}", c.def.name, to_string(c.declared[0]));
  return std::vector<TensorType>{c.declared[0]};
}

Cost no_cost(const OpCall&, std::span<const TensorType>) { return {}; }

Cost fill_cost(const OpCall&, std::span<const TensorType> outs) { return Cost{0, 0, total_bytes(outs)}; }
}  // namespace

void define_source_ops(OpTable& t) {
  {
    OpDef& d = t.define(Op::input);
    d.outputs = {"out"};
    d.traits.source = true;
    d.shape = annotated;
    d.cost = no_cost;
    d.doc = "a graph input (data or labels), fed before each step";
  }
  {
    OpDef& d = t.define(Op::param);
    d.outputs = {"out"};
    d.attrs = {{"init", AttrKind::String, Attribute{std::string()},
                "initializer: he, zeros, ones, normal(std), uniform(bound); empty: chosen by the model"}};
    d.traits.source = true;
    d.traits.persistent = true;
    d.shape = annotated;
    d.cost = no_cost;
    d.doc = "a trainable parameter; persistent";
  }
  {
    OpDef& d = t.define(Op::state);
    d.outputs = {"out"};
    d.attrs = {{"init", AttrKind::String, Attribute{std::string("zeros")}, "initializer: zeros or ones"}};
    d.traits.source = true;
    d.traits.persistent = true;
    d.shape = annotated;
    d.cost = no_cost;
    d.doc = "non-trainable persistent state (optimizer moments, running statistics)";
  }
  {
    OpDef& d = t.define(Op::constant);
    d.outputs = {"out"};
    d.attrs = {{"value", AttrKind::Float, Attribute{0.0}, "the fill value"}};
    d.traits.source = true;
    d.traits.recomputable = true;
    d.shape = annotated;
    d.cost = fill_cost;
    d.doc = "a tensor filled with one value";
  }
}

}  // namespace lms::ops
