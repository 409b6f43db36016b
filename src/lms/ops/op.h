// The op definition interface. Every op is defined once, as an `OpDef`: its inputs, typed attributes with
// defaults, shape rule, cost, traits and (later) gradient rule. Passes ask an op's traits; no pass keeps its
// own list of op names. `op_def(op)` is the registry lookup; the table behind it is built by an explicit call
// of each family's `define_*_ops` (ops/registry.cc), never by static initializers.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "lms/ir/attributes.h"
#include "lms/ir/types.h"
#include "lms/support/error.h"

namespace lms {

enum class Op : uint16_t {
#define LMS_OP(id) id,
#include "lms/ops/op_list.inc"
#undef LMS_OP
};
inline constexpr int kNumOps = 0
#define LMS_OP(id) +1
#include "lms/ops/op_list.inc"
#undef LMS_OP
    ;

enum class Placement : uint8_t { device, host };

struct Traits {
  bool recomputable = false;    // pure and cheap enough in principle to run again for a backward reader
  bool side_effecting = false;  // must run even if no output is read (never dead-code eliminated)
  bool in_place = false;        // writes some inputs in place; `OpDef::aliases` says which
  bool is_copy = false;         // moves a tensor between device and host unchanged
  bool source = false;          // no inputs; output type comes from the node's annotation
  bool persistent = false;      // outputs live for the whole program (parameters, optimizer state)
  bool random = false;          // draws random numbers (never recomputed)
};

// Everything a shape rule or cost function may look at.
struct OpCall {
  const struct OpDef& def;
  std::span<const TensorType> inputs;
  const Attributes& attrs;               // normalized: known names, declared kinds, declared order
  std::span<const TensorType> declared;  // the node's annotated output types (sources read these)

  // Attribute getters falling back to the op's declared default.
  int64_t i(std::string_view name) const;
  double f(std::string_view name) const;
  bool b(std::string_view name) const;
  std::string s(std::string_view name) const;
  IntList ints(std::string_view name) const;
};

// Work of one op execution: FLOPs count 2 per multiply-add; bytes are the tensor bytes read and written.
struct Cost {
  double flops = 0;
  int64_t bytes_read = 0;
  int64_t bytes_written = 0;
};

using ShapeFn = Result<std::vector<TensorType>> (*)(const OpCall&);
using CostFn = Cost (*)(const OpCall&, std::span<const TensorType> outputs);
struct GradContext;                              // defined by autodiff
using GradFn = Result<void> (*)(GradContext&);  // the gradient rule; filled in by autodiff's issue

struct OpDef {
  Op op{};
  std::string_view name;
  std::vector<std::string_view> inputs;  // input names, for errors and docs
  bool variadic = false;                 // the last input may repeat (>= 1 times)
  int optional_inputs = 0;               // the last this many inputs may be left out (not with `variadic`)
  std::vector<std::string_view> outputs;  // output names; their count is fixed
  std::vector<AttrSpec> attrs;
  Traits traits;
  std::vector<int> aliases;                     // in_place ops: output i aliases input aliases[i] (-1: fresh)
  int reusable_input = -1;  // the memory planner may give the first output this input's buffer when the op is
                            // that input's last reader and both have the same bytes (plan/liveness.h); every
                            // backend's kernel reads element i of it (for every output) before writing element i
                            // of the first output. -1: never
  int view_input = -1;  // the op only renames this input's bytes (a reshape): the memory planner may give the
                        // (single) output the input's buffer while the input is still read (Note [Views],
                        // plan/liveness.h); every backend's kernel then copies nothing. -1: never
  Placement input_placement = Placement::device;   // where every input must live
  Placement output_placement = Placement::device;  // where every output lives
  ShapeFn shape = nullptr;
  CostFn cost = nullptr;
  GradFn grad = nullptr;
  std::string_view doc;  // one line
};

const OpDef& op_def(Op op);

// Whether a node of `d` may have `n` inputs (`variadic`, `optional_inputs`), and the counts it may have in words
// ("2", "at least 1", "2 or 3"), for errors.
bool accepts_input_count(const OpDef& d, size_t n);
std::string input_count_text(const OpDef& d);

// A number attribute that may be given as an int or a float (momentum, eps, count), else the op's declared
// default; NaN when neither exists. For kernels, which read attributes without an OpCall.
double number_attr(const OpDef& def, const Attributes& attrs, std::string_view name);
std::optional<Op> find_op(std::string_view name);
std::span<const OpDef> all_op_defs();  // in Op order
inline std::string_view op_name(Op op) { return op_def(op).name; }

// Checks names and kinds against the op's declared attributes (an int literal is accepted for a float
// attribute), and reorders to the declared order. Does not fill in defaults.
Result<Attributes> normalize_attrs(const OpDef& def, Attributes attrs);

// Arity check plus the op's shape rule. `declared` is only read by source ops.
Result<std::vector<TensorType>> infer_types(Op op, std::span<const TensorType> inputs, const Attributes& attrs,
                                            std::span<const TensorType> declared = {});

// The op's cost for these input and output types.
Cost op_cost(Op op, std::span<const TensorType> inputs, const Attributes& attrs,
             std::span<const TensorType> outputs);

}  // namespace lms
