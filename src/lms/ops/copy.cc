// The two copy ops that move a tensor between device and host memory unchanged: swap_out (device to host,
// on the device-to-host copy stream) and swap_in (host to device). They are the only ops whose inputs and
// outputs live in different places; the verifier enforces that.
#include "lms/ops/op_table.h"

namespace lms::ops {

namespace {
Result<std::vector<TensorType>> same_type(const OpCall& c) { return std::vector<TensorType>{c.inputs[0]}; }

Cost copy_cost(const OpCall& c, std::span<const TensorType> outs) {
  return Cost{0, total_bytes(c.inputs), total_bytes(outs)};
}
}  // namespace

void define_copy_ops(OpTable& t) {
  {
    OpDef& d = t.define(Op::swap_out);
    d.inputs = {"x"};
    d.outputs = {"out"};
    d.traits.is_copy = true;
    d.input_placement = Placement::device;
    d.output_placement = Placement::host;
    d.shape = same_type;
    d.cost = copy_cost;
    d.doc = "copies a device tensor to host memory";
  }
  {
    OpDef& d = t.define(Op::swap_in);
    d.inputs = {"x"};
    d.outputs = {"out"};
    d.traits.is_copy = true;
    d.input_placement = Placement::host;
    d.output_placement = Placement::device;
    d.shape = same_type;
    d.cost = copy_cost;
    d.doc = "copies a host tensor back to device memory";
  }
}

}  // namespace lms::ops
