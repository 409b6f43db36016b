// GradContext: what a gradient rule (OpDef::grad) sees and how it answers. Autodiff builds one context per
// forward node that lies on a path from a differentiated value to the loss, calls the op's rule, and collects
// the input gradients the rule hands back. A rule reads the forward node (op, normalized attributes through
// OpCall getters that apply the op's defaults, input and output values and types), the incoming gradient of
// each output, and which inputs want a gradient; it adds backward nodes through `b` (category bwd) and calls
// `set_grad` once for every input that wants one, with a value of exactly that input's type. Rules never
// accumulate: when a value feeds several consumers, autodiff sums their contributions (autodiff.h).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "lms/ir/builder.h"
#include "lms/ops/op.h"

namespace lms {

struct GradContext {
  Builder& b;                             // adds backward nodes; its category is bwd
  NodeId node;                            // the forward node being differentiated
  Op op{};                                // its op
  Attributes attrs;                       // its normalized attributes (read them through call())
  std::vector<ValueId> inputs = {};            // its data inputs
  std::vector<ValueId> outputs = {};           // its outputs
  std::vector<TensorType> input_types = {};    // types of `inputs`
  std::vector<TensorType> output_types = {};   // types of `outputs`
  std::vector<ValueId> output_grads = {};      // incoming gradient of each output; invalid where none arrives
  std::vector<bool> wants = {};                // per input: whether autodiff needs its gradient
  std::vector<std::string> grad_names = {};    // per input: its gradient's name hint ("<input>.grad", or
                                              // "<input>.grad.<k>" for the k-th of several contributions)
  std::vector<ValueId> input_grads = {};       // per input: what the rule handed back (invalid until set)

  // The forward node's attributes with the op's defaults, as shape rules read them.
  OpCall call() const { return OpCall{op_def(op), input_types, attrs, output_types}; }
  bool needs(size_t input) const { return wants[input]; }
  // The incoming gradient of output `i` (invalid if none).
  ValueId dy(size_t output = 0) const { return output_grads[output]; }
  const TensorType& in_type(size_t input) const { return input_types[input]; }
  const TensorType& out_type(size_t output = 0) const { return output_types[output]; }
  // The name hint for input `i`'s gradient; intermediate values append a suffix ("<input>.grad.full").
  const std::string& name(size_t input) const { return grad_names[input]; }
  std::string name(size_t input, std::string_view suffix) const {
    return grad_names[input] + "." + std::string(suffix);
  }
  // Hands back the gradient of input `i`.
  void set_grad(size_t input, ValueId g) { input_grads[input] = g; }
  // Shorthand for b.op with this rule's category.
  ValueId emit(Op o, std::vector<ValueId> ins, Attributes a, std::string name) {
    return b.op(o, std::move(ins), std::move(a), std::move(name));
  }
};

}  // namespace lms
