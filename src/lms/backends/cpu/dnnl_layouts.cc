// The cpu backend's layout assignment: which values of a graph stay in a oneDNN blocked layout (e.g. nChw16c)
// rather than the IR's plain row-major one. oneDNN's direct convolutions run on blocked layouts only (on plain
// ones it falls back to im2col + gemm, 2-3x slower here), so with every value plain each convolution reorders
// its activations in and its result out, inside the node. Here a value is blocked when its producer writes a
// blocked layout anyway and it is an ordinary activation:
//   - a conv2d/conv3d output (dst) or conv_backward_data output (diff_src): the layout oneDNN picks for it;
//   - the output of a batch_norm, batch_norm_grad, relu, gelu, silu, sigmoid, tanh, clamp, sqrt, exp, log, their
//     grads, and add/mul whose
//     inputs all have the output's shape, and the copies swap_out and swap_in: the layout of its first
//     same-shape input that is blocked (these ops work element by element, or per channel in oneDNN's batch
//     norm, in any layout);
// and only if it is f32 of rank 4 or 5, not persistent, not a graph output (the executor reads those as plain
// bytes), not read by a view (a reshape: Note [Views] in plan/liveness.h; a concat or slice of which it is a part:
// Note [Parts]) or by copies feeding one, and the blocked layout is exactly as large as the plain one (channels a
// multiple of the block: padding would change the value's planned size). Everything else is plain. Each node's
// kernel reads its inputs in the layouts of wanted_layouts and reorders the others into its workspace first (Note
// [Layouts at a node], dnnl_kernels.cc), so any assignment is correct; this one removes the reorders along chains
// of convolution, batch norm, relu and add, and keeps them where a chain meets a plain-only op (pooling, reshape,
// global average pooling, losses).
// Precondition: the graph is in execution order (scheduled), as Backend::workspace_bytes and prepare receive
// it; an input produced later in storage order counts as plain when its consumer's output is decided. The
// assignment reads types, attributes and the graph's structure only, so the same graph always gets the same
// layouts, and a rewritten graph (swap, recompute) gives each clone and copy the layout of what it copies:
// results are bit-identical across plans.
#include "lms/backends/cpu/dnnl_util.h"
#include "lms/ops/op.h"
#include "lms/plan/liveness.h"

namespace lms::cpu {

class ValueLayouts {
 public:
  std::vector<memory::desc> of;  // by ValueId; zero: plain
};

void ValueLayoutsDeleter::operator()(ValueLayouts* l) const { delete l; }

namespace {

// Ops whose data operands (the inputs with the output's shape, and the output) share one layout.
bool follows_output(const KernelCall& call) {
  switch (call.op) {
    case Op::batch_norm:
    case Op::batch_norm_grad:
    case Op::relu:
    case Op::gelu:
    case Op::silu:
    case Op::sigmoid:
    case Op::tanh:
    case Op::clamp:
    case Op::sqrt:
    case Op::exp:
    case Op::log:
    case Op::relu_grad:
    case Op::gelu_grad:
    case Op::silu_grad:
    case Op::sigmoid_grad:
    case Op::tanh_grad:
    case Op::clamp_grad:
    case Op::sqrt_grad:
    case Op::log_grad:
    case Op::swap_out:
    case Op::swap_in: return true;
    case Op::add:
    case Op::mul:
      for (const TensorRef& r : call.inputs)
        if (r.type->shape != call.outputs[0].type->shape) return false;
      return true;
    default: return false;
  }
}

// `md` may hold value `v`: see the file comment.
bool blockable(const Graph& g, ValueId v, const memory::desc& md) {
  const TensorType& t = g.value(v).type;
  if (md.is_zero() || t.dtype != DType::f32 || (t.shape.size() != 4 && t.shape.size() != 5)) return false;
  if (t.num_elements() == 0 || g.is_persistent(v)) return false;
  for (ValueId o : g.outputs())
    if (o == v) return false;
  return static_cast<int64_t>(md.get_size()) == t.bytes() && md != plain(dims_of(t.shape));
}

}  // namespace

bool is_convolution(Op op) {
  switch (op) {
    case Op::conv1d:
    case Op::conv2d:
    case Op::conv3d:
    case Op::conv_transpose1d:
    case Op::conv_transpose2d:
    case Op::conv_transpose3d:
    case Op::conv_backward_data:
    case Op::conv_backward_filter: return true;
    default: return false;
  }
}

OperandLayouts operand_layouts(const ValueLayouts* layouts, const Node* node, const KernelCall& call) {
  OperandLayouts l;
  l.in.resize(call.inputs.size());
  l.out.resize(call.outputs.size());
  if (!layouts || !node) return l;
  for (size_t i = 0; i < node->inputs.size() && i < l.in.size(); ++i) l.in[i] = layouts->of[node->inputs[i].v];
  for (size_t i = 0; i < node->outputs.size() && i < l.out.size(); ++i) l.out[i] = layouts->of[node->outputs[i].v];
  return l;
}

OperandLayouts wanted_layouts(const KernelCall& call, const OperandLayouts& arena) {
  OperandLayouts want{std::vector<memory::desc>(call.inputs.size()), arena.out};
  if (is_convolution(call.op)) {
    want.in = arena.in;
  } else if (!call.outputs.empty() && follows_output(call)) {
    for (size_t i = 0; i < call.inputs.size(); ++i)
      if (call.inputs[i].type->shape == call.outputs[0].type->shape) want.in[i] = arena.out[0];
  }
  return want;
}

// Values a view may share a buffer with (Note [Views], plan/liveness.h): the input of a view op, a slice's input
// and a concat's inputs where they are parts (Note [Parts]), and what a copy chain (swap_out, swap_in) feeding one
// copies. They stay plain: a view of a blocked buffer would read its bytes in the wrong order, and reordering it
// in place would change them for the other readers.
std::vector<bool> viewed_values(const Graph& g) {
  std::vector<bool> viewed(g.num_values(), false);
  for (size_t i = g.num_nodes(); i-- > 0;) {  // readers after writers: a chain is marked back to its source
    const NodeId n{static_cast<uint32_t>(i)};
    const Node& node = g.node(n);
    const int k = op_def(node.op).view_input;
    if (k >= 0 && k < static_cast<int>(node.inputs.size())) viewed[node.inputs[static_cast<size_t>(k)].v] = true;
    for (size_t p = 0; p < node.inputs.size(); ++p)
      if (part_offset(g, n, p) >= 0) viewed[node.inputs[p].v] = true;
    if (op_def(node.op).traits.is_copy && node.outputs.size() == 1 && node.inputs.size() == 1 &&
        viewed[node.outputs[0].v])
      viewed[node.inputs[0].v] = true;
  }
  return viewed;
}

Result<ValueLayoutsPtr> assign_layouts(DnnlContext& ctx, const Graph& g) {
  ValueLayoutsPtr layouts(new ValueLayouts());
  layouts->of.resize(g.num_values());
  const std::vector<bool> viewed = viewed_values(g);
  std::vector<TensorRef> ins, outs;
  for (NodeId n : g.node_ids()) {
    const Node& node = g.node(n);
    if (node.outputs.empty()) continue;
    ins.clear();
    outs.clear();
    for (ValueId v : node.inputs) ins.push_back(TensorRef{&g.value(v).type, nullptr});
    for (ValueId v : node.outputs) outs.push_back(TensorRef{&g.value(v).type, nullptr});
    const KernelCall call{node.op, &node.attrs, ins, outs, nullptr, 0};
    memory::desc md;
    if (is_convolution(node.op)) {
      try {
        md = LMS_TRY(conv_output_layout(ctx, call));
      } catch (const dnnl::error& e) {
        return fail("cpu backend: oneDNN cannot build a primitive for {} ({}): {}", op_def(node.op).name,
                    to_string(*outs[0].type), e.what());
      }
    } else if (follows_output(call)) {
      for (size_t i = 0; i < node.inputs.size() && md.is_zero(); ++i)
        if (ins[i].type->shape == outs[0].type->shape) md = layouts->of[node.inputs[i].v];
    }
    if (!viewed[node.outputs[0].v] && blockable(g, node.outputs[0], md)) layouts->of[node.outputs[0].v] = md;
  }
  return layouts;
}

}  // namespace lms::cpu
