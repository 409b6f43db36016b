// cuDNN convolutions for the cuda backend (cuda_dnn_util.h): conv1d/2d/3d (cudnnConvolutionForward),
// conv_backward_data (cudnnConvolutionBackwardData), conv_backward_filter (cudnnConvolutionBackwardFilter) and
// conv_transpose1d/2d/3d, which is the backward-data of the convolution out -> x with weight w (the reference's
// definition; w[Ci_t, Co_t/g, *k] is that convolution's [Co, Ci/g, *k]). Each is one plain convolution
// x[N,Ci,*in] * w[Co,Ci/g,*k] -> y[N,Co,*out] in cuDNN's legacy API: packed NCHW/NCDHW tensors, an NCHW filter
// of the IR's weight layout (groups through cudnnSetConvolutionGroupCount, which takes exactly [Co, Ci/g, *k]),
// cross-correlation, symmetric padding, compute type = data type. A 1-D convolution gets a trailing size-1
// dimension (kernel 1, stride 1, pad 0, dilation 1). Algorithms: Note [Convolution algorithm choice].
// Precondition: the call passed the op's shape rule; the geometry is rechecked here with the reference's checks,
// because the descriptors are built from it. Refused: a conv_transpose whose output_pad >= stride (allowed by the
// shape rule when output_pad < dilation) needs asymmetric padding, which the legacy descriptors cannot express.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lms/backends/cuda/cuda_dnn_util.h"

namespace lms::cuda {

namespace {

// Note [Convolution algorithm choice]: cuDNN's heuristics (cudnnGetConvolution*Algorithm_v7, never the timing
// cudnnFind*, so the choice depends on shapes, options, GPU and cuDNN version alone) list algorithms in expected
// speed order. The candidates are those that (1) cuDNN reports as supported, (2) are deterministic, (3) keep the
// precision the options ask for (run_math: an f32 result in cuDNN's default math runs FMA-only when TF32 is
// off, never with TF32), and (4) need at most DnnOptions::max_workspace_bytes, measured again with
// cudnnGetConvolution*WorkspaceSize once their math type is set on the descriptor. The node plans the first
// candidate's workspace (plus kLibraryWorkspaceAlignment) and runs it. The heuristics are known to list
// algorithms that then refuse to run (PyTorch issue 31336): when a run answers "not supported", the node moves
// for good to the next candidate whose workspace fits the planned one, so a given node on a given GPU always
// ends on the same algorithm. The descriptor starts in the math mode the options allow (FMA-only for f32
// without TF32, so the heuristics rank FMA kernels) and holds the running candidate's, which cuDNN needs
// together with the algorithm to pick its kernel.

// The plain convolution's shapes and window, before any padding to cuDNN's 4-D minimum.
struct ConvShapes {
  Shape x, w, y;
  std::vector<int64_t> stride, pad, dil;
  int64_t groups = 1;
};

enum class ConvPass { forward, backward_data, backward_filter };

// Checks x[N,Ci,*in] * w[Co,Ci/g,*k] -> y[N,Co,*out] as the reference does (same conditions): every size must
// agree with the convolution formula, since the descriptors are built from them.
Result<ConvShapes> conv_shapes(const KernelCall& call, const Shape& x, const Shape& w, const Shape& y) {
  const std::string_view name = op_name(call.op);
  const int rank = static_cast<int>(x.size()) - 2;
  if (rank < 1 || rank > 3 || w.size() != x.size() || y.size() != x.size())
    return fail("cuda backend: {} needs x, w and y of one rank 3..5, got {}, {} and {}", name, to_string(x),
                to_string(w), to_string(y));
  ConvShapes s{x, w, y, {}, {}, {}, call.attrs->get_int("groups", 1)};
  if (s.groups < 1) return fail("cuda backend: {} attribute 'groups' = {} must be at least 1", name, s.groups);
  const reference::Args args(call);
  s.stride = LMS_TRY(reference::spatial_attr(args, "stride", rank, 1));
  s.pad = LMS_TRY(reference::spatial_attr(args, "pad", rank, 0));
  s.dil = LMS_TRY(reference::spatial_attr(args, "dilation", rank, 1));
  if (y[0] != x[0] || x[1] % s.groups != 0 || y[1] % s.groups != 0 || w[0] != y[1] || w[1] * s.groups != x[1])
    return fail("cuda backend: {} channels do not agree: x {}, w {}, y {}, groups {}", name, to_string(x),
                to_string(w), to_string(y), s.groups);
  for (int i = 0; i < rank; ++i) {
    const size_t d = static_cast<size_t>(2 + i), a = static_cast<size_t>(i);
    if (s.stride[a] < 1 || s.dil[a] < 1 || s.pad[a] < 0 || w[d] < 1)
      return fail("cuda backend: {} stride {}, dilation {}, pad {}, kernel {} out of range along spatial dimension {}",
                  name, s.stride[a], s.dil[a], s.pad[a], w[d], i);
    const int64_t span = x[d] + 2 * s.pad[a] - s.dil[a] * (w[d] - 1) - 1;
    if (span < 0 || span / s.stride[a] + 1 != y[d])
      return fail("cuda backend: {} spatial dimension {}: input {} with kernel {}, stride {}, pad {}, dilation {} "
                  "does not give output {} (x {}, y {})",
                  name, i, x[d], w[d], s.stride[a], s.pad[a], s.dil[a], y[d], to_string(x), to_string(y));
  }
  return s;
}

// conv_transpose(x, w) -> out is the backward-data of the convolution out -> x. The reference checks that
// convolution on `out` without its output_pad trailing positions; cuDNN checks it on the whole `out` with the
// same floor division, which agrees while output_pad < stride. The positions output_pad adds are then computed by
// cuDNN exactly as by the reference (the last windows reach into them when pad > 0; elsewhere they are zero).
Result<ConvShapes> transpose_shapes(const KernelCall& call) {
  const Shape &x = in_shape(call, 0), &w = in_shape(call, 1), &out = out_shape(call, 0);
  const int rank = static_cast<int>(x.size()) - 2;
  if (rank < 1 || rank > 3 || out.size() != x.size())
    return fail("cuda backend: {} needs input and output of one rank 3..5, got {} and {}", op_name(call.op),
                to_string(x), to_string(out));
  const std::vector<int64_t> output_pad = LMS_TRY(reference::spatial_attr(reference::Args(call), "output_pad", rank, 0));
  Shape conv_in = out;
  for (int i = 0; i < rank; ++i) conv_in[static_cast<size_t>(2 + i)] -= output_pad[static_cast<size_t>(i)];
  ConvShapes s = LMS_TRY(conv_shapes(call, conv_in, w, x));
  for (int i = 0; i < rank; ++i) {
    const size_t d = static_cast<size_t>(2 + i), a = static_cast<size_t>(i);
    const int64_t span = out[d] + 2 * s.pad[a] - s.dil[a] * (w[d] - 1) - 1;
    if (span / s.stride[a] + 1 != x[d])
      return fail("cuda backend: {} output_pad {} >= stride {} along spatial dimension {} needs asymmetric padding, "
                  "which cuDNN's convolution descriptors cannot express (x {}, w {}, out {})",
                  op_name(call.op), output_pad[a], s.stride[a], i, to_string(x), to_string(w), to_string(out));
  }
  s.x = out;
  return s;
}

// The math mode a heuristic result runs in under the options, or nothing when it cannot keep their precision.
std::optional<cudnnMathType_t> run_math(cudnnMathType_t m, cudnnDataType_t t, bool allow_tf32) {
  if (m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return std::nullopt;  // may convert f32 operands to f16/bf16
  if (t == CUDNN_DATA_FLOAT && !allow_tf32) {  // tensor-op math may use TF32; default math runs FMA-only
    if (m == CUDNN_FMA_MATH || m == CUDNN_DEFAULT_MATH) return CUDNN_FMA_MATH;
    return std::nullopt;
  }
  return m;  // f32 with TF32 allowed; f64, whose tensor-core kernels (DMMA) are full f64 precision
}

// The math mode the descriptor has while the heuristics rank algorithms (see the Note).
cudnnMathType_t initial_math(cudnnDataType_t t, bool allow_tf32) {
  return t == CUDNN_DATA_FLOAT && !allow_tf32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
}

// One usable algorithm (the Note): cuDNN's algorithm enum of the pass, as an int, its math mode and workspace.
struct Candidate {
  int algo = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t bytes = 0;
};

class ConvKernel final : public PreparedKernel {
 public:
  ConvKernel(DnnContext& ctx, const KernelCall& call, ConvPass pass, cudnnDataType_t t)
      : ctx_(ctx),
        op_(call.op),
        pass_(pass),
        dtype_(t),
        a_(call.inputs[0].data),
        b_(call.inputs[1].data),
        out_(call.outputs[0].data),
        workspace_(call.workspace) {}

  // Builds the descriptors of `s` (padded to 4-D when 1-D) and chooses the algorithm.
  Result<void> init(const ConvShapes& s) {
    Shape x = s.x, w = s.w, y = s.y;
    std::vector<int64_t> stride = s.stride, pad = s.pad, dil = s.dil;
    if (x.size() == 3) {  // NCW -> NCW1 with a trivial second spatial dimension
      x.push_back(1);
      w.push_back(1);
      y.push_back(1);
      stride.push_back(1);
      pad.push_back(0);
      dil.push_back(1);
    }
    shapes_ = fmt::format("x {}, w {}, y {}, groups {}", to_string(s.x), to_string(s.w), to_string(s.y), s.groups);
    x_ = LMS_TRY(packed_tensor(x, dtype_, op_));
    y_ = LMS_TRY(packed_tensor(y, dtype_, op_));
    std::vector<int> wd(w.size());
    for (size_t i = 0; i < w.size(); ++i) wd[i] = LMS_TRY(to_int(w[i], "a weight dimension", op_));
    if (auto count = to_int(product(w, 0, w.size()), "the weight's element count", op_); !count)
      return std::unexpected(count.error());
    w_ = LMS_TRY(FilterDesc::make("cudnnCreateFilterDescriptor", op_));
    LMS_TRY_VOID(cudnn_ok(cudnnSetFilterNdDescriptor(w_.get(), dtype_, CUDNN_TENSOR_NCHW, static_cast<int>(wd.size()),
                                                     wd.data()),
                          "cudnnSetFilterNdDescriptor", op_));
    const size_t spatial = stride.size();
    std::vector<int> st(spatial), pd(spatial), dl(spatial);
    for (size_t i = 0; i < spatial; ++i) {
      st[i] = LMS_TRY(to_int(stride[i], "a stride", op_));
      pd[i] = LMS_TRY(to_int(pad[i], "a padding", op_));
      dl[i] = LMS_TRY(to_int(dil[i], "a dilation", op_));
    }
    conv_ = LMS_TRY(ConvolutionDesc::make("cudnnCreateConvolutionDescriptor", op_));
    LMS_TRY_VOID(cudnn_ok(cudnnSetConvolutionNdDescriptor(conv_.get(), static_cast<int>(spatial), pd.data(), st.data(),
                                                          dl.data(), CUDNN_CROSS_CORRELATION, dtype_),
                          "cudnnSetConvolutionNdDescriptor", op_));
    const int groups = LMS_TRY(to_int(s.groups, "the group count", op_));
    LMS_TRY_VOID(cudnn_ok(cudnnSetConvolutionGroupCount(conv_.get(), groups), "cudnnSetConvolutionGroupCount", op_));
    LMS_TRY_VOID(cudnn_ok(cudnnSetConvolutionMathType(conv_.get(), initial_math(dtype_, ctx_.opts.allow_tf32)),
                          "cudnnSetConvolutionMathType", op_));
    switch (pass_) {
      case ConvPass::forward: LMS_TRY_VOID(choose_forward()); break;
      case ConvPass::backward_data: LMS_TRY_VOID(choose_backward_data()); break;
      case ConvPass::backward_filter: LMS_TRY_VOID(choose_backward_filter()); break;
    }
    workspace_bytes_ = candidates_.front().bytes;
    LMS_TRY_VOID(cudnn_ok(cudnnSetConvolutionMathType(conv_.get(), candidates_.front().math),
                          "cudnnSetConvolutionMathType", op_));
    if (workspace_bytes_ > 0) workspace_needed_ = static_cast<int64_t>(workspace_bytes_) + kLibraryWorkspaceAlignment;
    return {};
  }

  Result<void> run() override {
    for (;;) {
      const cudnnStatus_t status = launch(candidates_[running_]);
      if (CUDNN_STATUS_CATEGORY(status) != CUDNN_STATUS_NOT_SUPPORTED || !move_to_next_candidate())
        return cudnn_ok(status, kPassCall[static_cast<int>(pass_)], op_);
    }
  }

 private:
  static constexpr std::string_view kPassCall[] = {"cudnnConvolutionForward", "cudnnConvolutionBackwardData",
                                                   "cudnnConvolutionBackwardFilter"};

  cudnnStatus_t launch(const Candidate& c) {
    const Scaling s = scaling_for(dtype_);
    void* ws = workspace_bytes_ > 0 ? aligned_workspace(workspace_) : nullptr;
    switch (pass_) {
      case ConvPass::forward:
        return cudnnConvolutionForward(ctx_.cudnn, s.one, x_.get(), a_, w_.get(), b_, conv_.get(),
                                       static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), ws, c.bytes, s.zero, y_.get(),
                                       out_);
      case ConvPass::backward_data:  // a = dy (conv_transpose: its x), b = w, out = dx (conv_transpose: its out)
        return cudnnConvolutionBackwardData(ctx_.cudnn, s.one, w_.get(), b_, y_.get(), a_, conv_.get(),
                                            static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo), ws, c.bytes, s.zero,
                                            x_.get(), out_);
      case ConvPass::backward_filter:  // a = x, b = dy, out = dw
        return cudnnConvolutionBackwardFilter(ctx_.cudnn, s.one, x_.get(), a_, y_.get(), b_, conv_.get(),
                                              static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), ws, c.bytes,
                                              s.zero, w_.get(), out_);
    }
    return CUDNN_STATUS_BAD_PARAM;
  }

  // After a run refused as not supported: the next candidate whose workspace fits the planned one, for good
  // (the Note). False when there is none.
  bool move_to_next_candidate() {
    clear_cudnn_error();
    for (size_t i = running_ + 1; i < candidates_.size(); ++i) {
      if (candidates_[i].bytes > workspace_bytes_) continue;
      if (cudnnSetConvolutionMathType(conv_.get(), candidates_[i].math) != CUDNN_STATUS_SUCCESS) {
        clear_cudnn_error();
        continue;
      }
      running_ = i;
      return true;
    }
    return false;
  }

  // candidates_: the heuristic results the Note accepts, in their order; `workspace_of(algo, &bytes)` measures
  // `algo` with its math type set on the descriptor.
  template <class Perf, class WorkspaceOf>
  Result<void> pick(const std::vector<Perf>& perfs, std::string_view heuristic, WorkspaceOf workspace_of) {
    const auto limit = static_cast<uint64_t>(ctx_.opts.max_workspace_bytes);
    for (const Perf& p : perfs) {
      if (p.status != CUDNN_STATUS_SUCCESS || p.determinism != CUDNN_DETERMINISTIC) continue;
      const std::optional<cudnnMathType_t> math = run_math(p.mathType, dtype_, ctx_.opts.allow_tf32);
      if (!math || static_cast<uint64_t>(p.memory) > limit) continue;
      LMS_TRY_VOID(cudnn_ok(cudnnSetConvolutionMathType(conv_.get(), *math), "cudnnSetConvolutionMathType", op_));
      size_t bytes = 0;
      // A failing size query means the algorithm does not run in this math mode after all: not a candidate.
      if (workspace_of(p.algo, &bytes) != CUDNN_STATUS_SUCCESS) {
        clear_cudnn_error();
        continue;
      }
      if (static_cast<uint64_t>(bytes) <= limit) candidates_.push_back({static_cast<int>(p.algo), *math, bytes});
    }
    if (!candidates_.empty()) return {};
    return fail("cuda backend: {} ({}): none of the {} algorithms {} lists is supported, deterministic, {} and "
                "within the workspace limit of {} bytes",
                op_name(op_), shapes_, perfs.size(), heuristic,
                dtype_ == CUDNN_DATA_FLOAT && !ctx_.opts.allow_tf32 ? "FMA-only (TF32 off)"
                : dtype_ == CUDNN_DATA_FLOAT                        ? "TF32 allowed"
                                                                    : "f64",
                ctx_.opts.max_workspace_bytes);
  }

  // The heuristics' results, best first: `max_count` asks how many there can be, `get` fills them in.
  template <class Perf, class MaxCount, class Get>
  Result<std::vector<Perf>> heuristics(std::string_view max_count_name, MaxCount max_count, std::string_view get_name,
                                       Get get) {
    int count = 0;
    LMS_TRY_VOID(cudnn_ok(max_count(ctx_.cudnn, &count), max_count_name, op_));
    std::vector<Perf> perfs(static_cast<size_t>(std::max(count, 0)));
    int returned = 0;
    LMS_TRY_VOID(cudnn_ok(get(count, &returned, perfs.data()), get_name, op_));
    perfs.resize(static_cast<size_t>(std::clamp(returned, 0, count)));
    return perfs;
  }

  Result<void> choose_forward() {
    constexpr std::string_view kGet = "cudnnGetConvolutionForwardAlgorithm_v7";
    auto perfs = LMS_TRY(heuristics<cudnnConvolutionFwdAlgoPerf_t>(
        "cudnnGetConvolutionForwardAlgorithmMaxCount", cudnnGetConvolutionForwardAlgorithmMaxCount, kGet,
        [&](int n, int* got, cudnnConvolutionFwdAlgoPerf_t* p) {
          return cudnnGetConvolutionForwardAlgorithm_v7(ctx_.cudnn, x_.get(), w_.get(), conv_.get(), y_.get(), n, got,
                                                        p);
        }));
    return pick(perfs, kGet, [&](cudnnConvolutionFwdAlgo_t a, size_t* bytes) {
      return cudnnGetConvolutionForwardWorkspaceSize(ctx_.cudnn, x_.get(), w_.get(), conv_.get(), y_.get(), a, bytes);
    });
  }

  Result<void> choose_backward_data() {
    constexpr std::string_view kGet = "cudnnGetConvolutionBackwardDataAlgorithm_v7";
    auto perfs = LMS_TRY(heuristics<cudnnConvolutionBwdDataAlgoPerf_t>(
        "cudnnGetConvolutionBackwardDataAlgorithmMaxCount", cudnnGetConvolutionBackwardDataAlgorithmMaxCount, kGet,
        [&](int n, int* got, cudnnConvolutionBwdDataAlgoPerf_t* p) {
          return cudnnGetConvolutionBackwardDataAlgorithm_v7(ctx_.cudnn, w_.get(), y_.get(), conv_.get(), x_.get(), n,
                                                             got, p);
        }));
    return pick(perfs, kGet, [&](cudnnConvolutionBwdDataAlgo_t a, size_t* bytes) {
      return cudnnGetConvolutionBackwardDataWorkspaceSize(ctx_.cudnn, w_.get(), y_.get(), conv_.get(), x_.get(), a,
                                                          bytes);
    });
  }

  Result<void> choose_backward_filter() {
    constexpr std::string_view kGet = "cudnnGetConvolutionBackwardFilterAlgorithm_v7";
    auto perfs = LMS_TRY(heuristics<cudnnConvolutionBwdFilterAlgoPerf_t>(
        "cudnnGetConvolutionBackwardFilterAlgorithmMaxCount", cudnnGetConvolutionBackwardFilterAlgorithmMaxCount, kGet,
        [&](int n, int* got, cudnnConvolutionBwdFilterAlgoPerf_t* p) {
          return cudnnGetConvolutionBackwardFilterAlgorithm_v7(ctx_.cudnn, x_.get(), y_.get(), conv_.get(), w_.get(),
                                                               n, got, p);
        }));
    return pick(perfs, kGet, [&](cudnnConvolutionBwdFilterAlgo_t a, size_t* bytes) {
      return cudnnGetConvolutionBackwardFilterWorkspaceSize(ctx_.cudnn, x_.get(), y_.get(), conv_.get(), w_.get(), a,
                                                            bytes);
    });
  }

  DnnContext& ctx_;
  Op op_;
  ConvPass pass_;
  cudnnDataType_t dtype_;
  // The call's operands in input order and its output: forward (x, w) -> y, backward_data (dy, w) -> dx,
  // backward_filter (x, dy) -> dw.
  const void* a_;
  const void* b_;
  void* out_;
  void* workspace_;
  TensorDesc x_, y_;  // the plain convolution's input and output (the data gradient's dx and dy)
  FilterDesc w_;
  ConvolutionDesc conv_;
  std::vector<Candidate> candidates_;  // the Note's, best first (never empty after init)
  size_t running_ = 0;                 // the candidate runs use
  size_t workspace_bytes_ = 0;         // planned: the first candidate's
  std::string shapes_;          // for errors
};

}  // namespace

Result<PreparedPtr> build_conv(DnnContext& ctx, const KernelCall& call) {
  const cudnnDataType_t t = LMS_TRY(common_dnn_dtype(call));
  const Shape &in0 = in_shape(call, 0), &in1 = in_shape(call, 1), &out = out_shape(call, 0);
  ConvShapes s;
  ConvPass pass = ConvPass::forward;
  switch (call.op) {
    case Op::conv1d:
    case Op::conv2d:
    case Op::conv3d: s = LMS_TRY(conv_shapes(call, in0, in1, out)); break;
    case Op::conv_backward_data:  // (dy, w) -> dx
      s = LMS_TRY(conv_shapes(call, out, in1, in0));
      pass = ConvPass::backward_data;
      break;
    case Op::conv_backward_filter:  // (x, dy) -> dw
      s = LMS_TRY(conv_shapes(call, in0, out, in1));
      pass = ConvPass::backward_filter;
      break;
    case Op::conv_transpose1d:
    case Op::conv_transpose2d:
    case Op::conv_transpose3d:
      s = LMS_TRY(transpose_shapes(call));
      pass = ConvPass::backward_data;
      break;
    default: return fail("cuda backend: {} is not a convolution", op_name(call.op));
  }
  // cuDNN describes no empty tensor; an empty operand makes every output element an empty sum.
  if (any_empty(call)) return zero_fill_kernel(ctx, call);
  auto k = std::make_unique<ConvKernel>(ctx, call, pass, t);
  LMS_TRY_VOID(k->init(s));
  return PreparedPtr(std::move(k));
}

}  // namespace lms::cuda
