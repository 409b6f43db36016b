// Convolutions in PyTorch's NC... layout: conv1d/2d/3d (x[N,Cin,*sp], w[Cout,Cin/groups,*k]) and
// conv_transpose1d/2d/3d (x[N,Cin,*sp], w[Cin,Cout/groups,*k]), with per-dimension stride, symmetric padding
// and dilation, and channel groups. One shape rule and one cost serve every spatial rank: they are templates
// on the rank, instantiated once per op, so the three ranks cannot drift apart. All convolutions are
// recomputable: pure, and in a memory-bound plan often cheaper to run again than to keep.
#include <fmt/format.h>

#include "lms/autodiff/rules.h"
#include "lms/ops/op_table.h"

namespace lms::ops {

namespace {

// Floor division for a possibly negative numerator (C++ '/' truncates toward zero).
int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// Reads the int-list attribute `name`: it must have one entry per spatial dimension, each at least `min`.
Result<IntList> spatial_list(const OpCall& c, std::string_view name, int rank, int64_t min) {
  IntList v = c.ints(name);
  if (static_cast<int>(v.size()) != rank)
    return fail("{} attribute '{}' = {} needs {} entries (one per spatial dimension), got {}", c.def.name, name,
                to_string(Attribute{v}), rank, v.size());
  for (int64_t e : v)
    if (e < min)
      return fail("{} attribute '{}' = {} has entry {} below the minimum {}", c.def.name, name,
                  to_string(Attribute{v}), e, min);
  return v;
}

// Checks what plain and transposed convolutions share: ranks, dtypes, groups, kernel sizes. Returns groups.
Result<int64_t> check_operands(const OpCall& c, int rank) {
  const TensorType &x = c.inputs[0], &w = c.inputs[1];
  if (x.rank() != rank + 2)
    return fail("{} input must have rank {} (N, C and {} spatial), got {}", c.def.name, rank + 2, rank,
                to_string(x));
  if (w.rank() != rank + 2)
    return fail("{} weight must have rank {} (2 channel dims and {} kernel dims), got {}", c.def.name, rank + 2,
                rank, to_string(w));
  if (!is_float(x.dtype)) return fail("{} needs a floating-point input, got {}", c.def.name, to_string(x));
  if (x.dtype != w.dtype)
    return fail("{} input and weight differ in dtype: {} and {}", c.def.name, to_string(x), to_string(w));
  for (int i = 0; i < rank; ++i)
    if (w.shape[2 + i] < 1)
      return fail("{} weight {} has kernel size {} along spatial dimension {}", c.def.name, to_string(w),
                  w.shape[2 + i], i);
  int64_t groups = c.i("groups");
  if (groups < 1) return fail("{} attribute 'groups' = {} must be at least 1", c.def.name, groups);
  return groups;
}

template <int Rank>
Result<std::vector<TensorType>> conv_shape(const OpCall& c) {
  const TensorType &x = c.inputs[0], &w = c.inputs[1];
  int64_t groups = LMS_TRY(check_operands(c, Rank));
  IntList stride = LMS_TRY(spatial_list(c, "stride", Rank, 1));
  IntList pad = LMS_TRY(spatial_list(c, "pad", Rank, 0));
  IntList dilation = LMS_TRY(spatial_list(c, "dilation", Rank, 1));
  int64_t in_channels = x.shape[1], out_channels = w.shape[0];
  if (w.shape[1] * groups != in_channels)
    return fail("{} input channels {} do not match weight's {}*groups={} (input {}, weight {})", c.def.name,
                in_channels, w.shape[1], w.shape[1] * groups, to_string(x), to_string(w));
  if (out_channels % groups != 0)
    return fail("{} output channels {} (weight {}) are not divisible by groups={}", c.def.name, out_channels,
                to_string(w), groups);
  Shape out = {x.shape[0], out_channels};
  for (int i = 0; i < Rank; ++i) {
    int64_t in = x.shape[2 + i], k = w.shape[2 + i];
    int64_t size = floor_div(in + 2 * pad[i] - dilation[i] * (k - 1) - 1, stride[i]) + 1;
    if (size <= 0)
      return fail("{} output size {} <= 0 along spatial dimension {}: input {}, pad {}, dilation {}, kernel {}, "
                  "stride {} (input {}, weight {})",
                  c.def.name, size, i, in, pad[i], dilation[i], k, stride[i], to_string(x), to_string(w));
    out.push_back(size);
  }
  return std::vector<TensorType>{TensorType{x.dtype, out}};
}

template <int Rank>
Result<std::vector<TensorType>> conv_transpose_shape(const OpCall& c) {
  const TensorType &x = c.inputs[0], &w = c.inputs[1];
  int64_t groups = LMS_TRY(check_operands(c, Rank));
  IntList stride = LMS_TRY(spatial_list(c, "stride", Rank, 1));
  IntList pad = LMS_TRY(spatial_list(c, "pad", Rank, 0));
  IntList output_pad = LMS_TRY(spatial_list(c, "output_pad", Rank, 0));
  IntList dilation = LMS_TRY(spatial_list(c, "dilation", Rank, 1));
  int64_t in_channels = x.shape[1];
  if (w.shape[0] != in_channels)
    return fail("{} input channels {} do not match weight's first dimension {} (input {}, weight {})", c.def.name,
                in_channels, w.shape[0], to_string(x), to_string(w));
  if (in_channels % groups != 0)
    return fail("{} input channels {} (input {}) are not divisible by groups={}", c.def.name, in_channels,
                to_string(x), groups);
  Shape out = {x.shape[0], w.shape[1] * groups};
  for (int i = 0; i < Rank; ++i) {
    // PyTorch's rule: output padding only picks among the sizes that stride or dilation make ambiguous.
    if (output_pad[i] >= stride[i] && output_pad[i] >= dilation[i])
      return fail("{} output_pad {} along spatial dimension {} must be smaller than stride {} or dilation {}",
                  c.def.name, output_pad[i], i, stride[i], dilation[i]);
    int64_t in = x.shape[2 + i], k = w.shape[2 + i];
    int64_t size = (in - 1) * stride[i] - 2 * pad[i] + dilation[i] * (k - 1) + output_pad[i] + 1;
    if (size <= 0)
      return fail("{} output size {} <= 0 along spatial dimension {}: input {}, stride {}, pad {}, dilation {}, "
                  "kernel {}, output_pad {} (input {}, weight {})",
                  c.def.name, size, i, in, stride[i], pad[i], dilation[i], k, output_pad[i], to_string(x),
                  to_string(w));
    out.push_back(size);
  }
  return std::vector<TensorType>{TensorType{x.dtype, out}};
}

// Product of the weight's dimensions after the first: (channels per group) x prod(kernel), the multiply-adds
// that produce one output element (plain) or consume one input element (transposed).
double macs_per_point(const TensorType& w) {
  double n = 1;
  for (int i = 1; i < w.rank(); ++i) n *= static_cast<double>(w.shape[i]);
  return n;
}

// Plain: 2 * N*Cout*prod(out_sp) * (Cin/groups)*prod(k).
Cost conv_cost(const OpCall& c, std::span<const TensorType> outs) {
  double flops = 2.0 * static_cast<double>(outs[0].num_elements()) * macs_per_point(c.inputs[1]);
  return Cost{flops, total_bytes(c.inputs), total_bytes(outs)};
}

// Transposed: every input element is scattered into (Cout/groups)*prod(k) outputs:
// 2 * N*Cin*prod(in_sp) * (Cout/groups)*prod(k).
Cost conv_transpose_cost(const OpCall& c, std::span<const TensorType> outs) {
  double flops = 2.0 * static_cast<double>(c.inputs[0].num_elements()) * macs_per_point(c.inputs[1]);
  return Cost{flops, total_bytes(c.inputs), total_bytes(outs)};
}

template <int Rank>
void define_conv(OpDef& d, std::string_view doc) {
  d.inputs = {"x", "w"};
  d.outputs = {"out"};
  d.attrs = {
      {"stride", AttrKind::IntList, Attribute{IntList(Rank, 1)}, "step per spatial dimension"},
      {"pad", AttrKind::IntList, Attribute{IntList(Rank, 0)}, "zero padding on both sides, per spatial dimension"},
      {"dilation", AttrKind::IntList, Attribute{IntList(Rank, 1)}, "kernel element spacing per spatial dimension"},
      {"groups", AttrKind::Int, Attribute{int64_t{1}}, "channel groups; Cin and Cout are divisible by it"},
  };
  d.traits.recomputable = true;
  d.shape = conv_shape<Rank>;
  d.cost = conv_cost;
  d.grad = autodiff::grad_conv;
  d.doc = doc;
}

template <int Rank>
void define_conv_transpose(OpDef& d, std::string_view doc) {
  d.inputs = {"x", "w"};
  d.outputs = {"out"};
  d.attrs = {
      {"stride", AttrKind::IntList, Attribute{IntList(Rank, 1)}, "step per spatial dimension (upsampling factor)"},
      {"pad", AttrKind::IntList, Attribute{IntList(Rank, 0)}, "rows cropped from both sides, per spatial dimension"},
      {"output_pad", AttrKind::IntList, Attribute{IntList(Rank, 0)},
       "extra size on one side, per spatial dimension; < stride or < dilation"},
      {"dilation", AttrKind::IntList, Attribute{IntList(Rank, 1)}, "kernel element spacing per spatial dimension"},
      {"groups", AttrKind::Int, Attribute{int64_t{1}}, "channel groups; Cin and Cout are divisible by it"},
  };
  d.traits.recomputable = true;
  d.shape = conv_transpose_shape<Rank>;
  d.cost = conv_transpose_cost;
  d.grad = autodiff::grad_conv_transpose;
  d.doc = doc;
}

}  // namespace

void define_conv_ops(OpTable& t) {
  define_conv<1>(t.define(Op::conv1d), "1-D convolution (cross-correlation) of x[N,Cin,L] with w[Cout,Cin/g,K]");
  define_conv<2>(t.define(Op::conv2d), "2-D convolution of x[N,Cin,H,W] with w[Cout,Cin/g,KH,KW]");
  define_conv<3>(t.define(Op::conv3d), "3-D convolution of x[N,Cin,D,H,W] with w[Cout,Cin/g,KD,KH,KW]");
  define_conv_transpose<1>(t.define(Op::conv_transpose1d),
                           "1-D transposed convolution (gradient of conv1d wrt its input); w[Cin,Cout/g,K]");
  define_conv_transpose<2>(t.define(Op::conv_transpose2d),
                           "2-D transposed convolution (gradient of conv2d wrt its input); w[Cin,Cout/g,KH,KW]");
  define_conv_transpose<3>(t.define(Op::conv_transpose3d),
                           "3-D transposed convolution (gradient of conv3d wrt its input); w[Cin,Cout/g,KD,KH,KW]");
}

}  // namespace lms::ops
