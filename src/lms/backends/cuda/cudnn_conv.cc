// cuDNN convolutions for the cuda backend (cuda_dnn_util.h): every convolution-family op as one pass of one plain
// convolution (conv_plan.h) in cuDNN's legacy API: cudnnConvolutionForward, cudnnConvolutionBackwardData or
// cudnnConvolutionBackwardFilter on packed NCHW/NCDHW tensors, an NCHW filter of the IR's weight layout (groups
// through cudnnSetConvolutionGroupCount, which takes exactly [Co, Ci/g, *k]), cross-correlation, compute type =
// data type. Algorithms: Note [Convolution algorithm choice]; batches whose workspace would pass the limit:
// Note [Convolutions in batch chunks] and Note [Batch chunks for the listed-first algorithm].
#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "lms/backends/cuda/conv_plan.h"
#include "lms/backends/cuda/cuda_dnn_util.h"
#include "lms/support/size.h"

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

// Note [Convolutions in batch chunks]: some algorithms' workspaces grow with the batch (on an H200 with cuDNN 9,
// resnet50's 1x1 stride-2 backward-filter at batch 111 needs more than 256 MiB in every deterministic FMA-only
// algorithm), so past some batch no candidate fits the limit. Such a convolution runs as several calls, each on
// a contiguous chunk of the batch (samples are contiguous in NC... tensors): forward and backward-data write
// their chunk of the output; backward-filter sums the chunks' weight gradients into dw (beta = 1 after the
// first), in chunk order, so the result is deterministic though not the bits of one call. The chunk size is the
// first of ceil(N/2), ceil(N/4), ... (or DnnOptions::max_conv_batch and its halvings, when set below N) whose
// calls have a candidate within the limit; a smaller last chunk gets its own descriptors and algorithm. The
// choice depends on the shapes and options alone, like the algorithms, and the node's workspace is the larger of
// the two calls'.

// Note [Batch chunks for the listed-first algorithm]: the workspace of some fast algorithms grows with the batch,
// so at a large batch the limit leaves a slower one (on an H200 with cuDNN 9, resnet50's 3x3 backward convolutions
// at batch 768 took 7-9 ms where batch 64's algorithm, 12 times over, would take 2.7). When the heuristics list
// an algorithm before every candidate and it was refused only for its workspace, the convolution runs in batch
// chunks (the chunk Note's mechanics) of the largest of ceil(N/2), ceil(N/4), ... down to kMinSpeedChunk
// samples whose calls run that very algorithm within the limit; when there is none, the whole batch runs the
// first candidate. Like every choice here it depends on the shapes and options alone.
constexpr int64_t kMinSpeedChunk = 16;  // smaller chunks would leave an H200's SMs idle

// The math mode a heuristic result runs in under the options, or nothing when it cannot keep their precision.
std::optional<cudnnMathType_t> run_math(cudnnMathType_t m, cudnnDataType_t t, bool allow_tf32) {
  if (m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return std::nullopt;  // may convert f32 operands to f16/bf16
  if (t == CUDNN_DATA_FLOAT && !allow_tf32) {  // tensor-op math may use TF32; default math runs FMA-only
    if (m == CUDNN_FMA_MATH || m == CUDNN_DEFAULT_MATH) return CUDNN_FMA_MATH;
    return std::nullopt;
  }
  return m;  // f32 with TF32 allowed; f64, whose tensor-core kernels (DMMA) are full f64 precision
}

// cuDNN's name of a pass's algorithm (its enum's constant without the common prefix).
std::string algo_name(ConvPass pass, int algo) {
  static constexpr std::string_view kForward[] = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT",
                                                  "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
  static constexpr std::string_view kData[] = {"ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD",
                                               "WINOGRAD_NONFUSED"};
  static constexpr std::string_view kFilter[] = {"ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD",
                                                 "WINOGRAD_NONFUSED", "FFT_TILING"};
  using Names = std::span<const std::string_view>;
  const Names names = pass == ConvPass::forward         ? Names(kForward)
                      : pass == ConvPass::backward_data ? Names(kData)
                                                        : Names(kFilter);
  return algo >= 0 && static_cast<size_t>(algo) < names.size() ? std::string(names[static_cast<size_t>(algo)])
                                                                : fmt::format("algorithm {}", algo);
}

std::string bytes_text(size_t bytes) { return format_size(static_cast<int64_t>(bytes)); }

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

  // Builds the descriptors of the plan and chooses the algorithm.
  Result<void> init(const ConvPlan& s) {
    const Shape &x = s.x, &w = s.w, &y = s.y;
    const std::vector<int64_t> &stride = s.stride, &pad = s.pad, &dil = s.dil;
    shapes_ = fmt::format("x {}, w {}, y {}, groups {}", to_string(x), to_string(w), to_string(y), s.groups);
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

  Result<void> run() override { return run_on(a_, b_, out_, false); }

  // e.g. "cuDNN backward-filter ALGO_1, FMA math, workspace 12.0 MiB (listed before it: WINOGRAD_NONFUSED:
  // workspace 900.0 MiB)": the algorithm running, and why the heuristics' earlier ones are not.
  std::string describe() const override {
    static constexpr std::string_view kPass[] = {"forward", "backward-data", "backward-filter"};
    const Candidate& c = candidates_[running_];
    const char* math = c.math == CUDNN_FMA_MATH ? "FMA" : c.math == CUDNN_DEFAULT_MATH ? "default" : "tensor-op";
    std::string s = fmt::format("cuDNN {} {}, {} math, workspace {}", kPass[static_cast<int>(pass_)],
                                algo_name(pass_, c.algo), math, bytes_text(c.bytes));
    if (!passed_over_.empty()) s += fmt::format(" (listed before it:{})", passed_over_);
    if (running_ > 0) s += fmt::format(" (after {} refused to run)", algo_name(pass_, candidates_.front().algo));
    if (!note_.empty()) s += " [" + note_ + "]";
    return s;
  }

  // The algorithm the node runs, and the first one the heuristics list that would be a candidate but for its
  // workspace (-1: none; Note [Batch chunks for the listed-first algorithm]).
  int chosen() const { return candidates_.front().algo; }
  int first_over_limit() const { return first_over_limit_; }
  // Appended to describe() in brackets (why batch chunks did not apply).
  void set_note(std::string note) { note_ = std::move(note); }

  // One call on these operands (a chunk's, Note [Convolutions in batch chunks]); `accumulate` adds the result to
  // `out` (beta = 1) instead of overwriting it.
  Result<void> run_on(const void* a, const void* b, void* out, bool accumulate) {
    for (;;) {
      const cudnnStatus_t status = launch(candidates_[running_], a, b, out, accumulate);
      Result<void> r = cudnn_ok(status, kPassCall[static_cast<int>(pass_)], op_);  // reads cuDNN's message
      if (r || CUDNN_STATUS_CATEGORY(status) != CUDNN_STATUS_NOT_SUPPORTED || !move_to_next_candidate()) return r;
    }
  }

 private:
  static constexpr std::string_view kPassCall[] = {"cudnnConvolutionForward", "cudnnConvolutionBackwardData",
                                                   "cudnnConvolutionBackwardFilter"};

  cudnnStatus_t launch(const Candidate& c, const void* a, const void* b, void* out, bool accumulate) {
    const Scaling s = scaling_for(dtype_);
    const void* beta = accumulate ? s.one : s.zero;
    void* ws = workspace_bytes_ > 0 ? aligned_workspace(workspace_) : nullptr;
    switch (pass_) {
      case ConvPass::forward:
        return cudnnConvolutionForward(ctx_.cudnn, s.one, x_.get(), a, w_.get(), b, conv_.get(),
                                       static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), ws, c.bytes, beta, y_.get(),
                                       out);
      case ConvPass::backward_data:  // a = dy (conv_transpose: its x), b = w, out = dx (conv_transpose: its out)
        return cudnnConvolutionBackwardData(ctx_.cudnn, s.one, w_.get(), b, y_.get(), a, conv_.get(),
                                            static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo), ws, c.bytes, beta,
                                            x_.get(), out);
      case ConvPass::backward_filter:  // a = x, b = dy, out = dw
        return cudnnConvolutionBackwardFilter(ctx_.cudnn, s.one, x_.get(), a, y_.get(), b, conv_.get(),
                                              static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), ws, c.bytes,
                                              beta, w_.get(), out);
    }
    return CUDNN_STATUS_BAD_PARAM;
  }

  // After a run refused as not supported: the next candidate whose workspace fits the planned one, for good
  // (the Note). False when there is none.
  bool move_to_next_candidate() {
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
    std::string why;  // each listed algorithm that is not a candidate, and why (for the error)
    for (const Perf& p : perfs) {
      const int algo = static_cast<int>(p.algo);
      if (p.status != CUDNN_STATUS_SUCCESS || p.determinism != CUDNN_DETERMINISTIC) {
        why += fmt::format(" {}: {};", algo_name(pass_, algo),
                           p.status != CUDNN_STATUS_SUCCESS ? "not supported" : "nondeterministic");
        continue;
      }
      const std::optional<cudnnMathType_t> math = run_math(p.mathType, dtype_, ctx_.opts.allow_tf32);
      if (math && static_cast<uint64_t>(p.memory) > limit && candidates_.empty() && first_over_limit_ < 0)
        first_over_limit_ = algo;
      if (!math || static_cast<uint64_t>(p.memory) > limit) {
        why += !math ? fmt::format(" {}: math type {};", algo_name(pass_, algo), static_cast<int>(p.mathType))
                     : fmt::format(" {}: workspace {};", algo_name(pass_, algo), bytes_text(p.memory));
        continue;
      }
      LMS_TRY_VOID(cudnn_ok(cudnnSetConvolutionMathType(conv_.get(), *math), "cudnnSetConvolutionMathType", op_));
      size_t bytes = 0;
      // A failing size query means the algorithm does not run in this math mode after all: not a candidate.
      if (workspace_of(p.algo, &bytes) != CUDNN_STATUS_SUCCESS) {
        clear_cudnn_error();
        why += fmt::format(" {}: no workspace size;", algo_name(pass_, algo));
        continue;
      }
      if (static_cast<uint64_t>(bytes) <= limit) {
        if (candidates_.empty() && !why.empty()) passed_over_ = why.substr(0, why.size() - 1);
        candidates_.push_back({algo, *math, bytes});
      } else {
        if (candidates_.empty() && first_over_limit_ < 0) first_over_limit_ = algo;
        why += fmt::format(" {}: workspace {};", algo_name(pass_, algo), bytes_text(bytes));
      }
    }
    if (!candidates_.empty()) return {};
    if (!why.empty()) why.pop_back();
    return fail("cuda backend: {} ({}): none of the {} algorithms {} lists is supported, deterministic, {} and "
                "within the workspace limit of {} bytes (algorithms:{})",
                op_name(op_), shapes_, perfs.size(), heuristic,
                dtype_ == CUDNN_DATA_FLOAT && !ctx_.opts.allow_tf32 ? "FMA-only (TF32 off)"
                : dtype_ == CUDNN_DATA_FLOAT                        ? "TF32 allowed"
                                                                    : "f64",
                ctx_.opts.max_workspace_bytes, why);
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
  int first_over_limit_ = -1;          // listed before every candidate, refused only for its workspace
  std::string passed_over_;            // the algorithms listed before the first candidate and why, for describe()
  std::string note_;                   // set_note's
  size_t workspace_bytes_ = 0;         // planned: the first candidate's
  std::string shapes_;          // for errors
};

// A convolution as calls on chunks of its batch (Note [Convolutions in batch chunks]): `body` runs `count`
// times on consecutive chunks, then `tail` (if any) on the rest.
class BatchChunks final : public PreparedKernel {
 public:
  BatchChunks(const KernelCall& call, const ConvPlan& plan, int64_t element_bytes, std::unique_ptr<ConvKernel> body,
              int64_t body_batch, int64_t count, std::unique_ptr<ConvKernel> tail)
      : pass_(plan.pass),
        a_(static_cast<const std::byte*>(call.inputs[0].data)),
        b_(static_cast<const std::byte*>(call.inputs[1].data)),
        out_(static_cast<std::byte*>(call.outputs[0].data)),
        count_(count),
        body_batch_(body_batch),
        tail_batch_(plan.x[0] - count * body_batch),
        body_(std::move(body)),
        tail_(std::move(tail)) {
    // bytes of one sample of the plain convolution's x and y; the filter (and dw) has no batch dimension
    const int64_t x = product(plan.x, 1, plan.x.size()) * element_bytes * body_batch;
    const int64_t y = product(plan.y, 1, plan.y.size()) * element_bytes * body_batch;
    switch (pass_) {
      case ConvPass::forward: step_a_ = x, step_out_ = y; break;        // (x, w) -> y
      case ConvPass::backward_data: step_a_ = y, step_out_ = x; break;  // (dy, w) -> dx
      case ConvPass::backward_filter: step_a_ = x, step_b_ = y; break;  // (x, dy) -> dw, summed over the chunks
    }
    workspace_needed_ = std::max(body_->workspace_needed(), tail_ ? tail_->workspace_needed() : 0);
  }

  // e.g. "3 calls of 256 samples and one of 48: cuDNN ..." (the last call's algorithm after "; the last: " when
  // it differs)
  std::string describe() const override {
    std::string s = fmt::format("{} call{} of {} sample{}", count_, count_ == 1 ? "" : "s", body_batch_,
                                body_batch_ == 1 ? "" : "s");
    if (tail_) s += fmt::format(" and one of {}", tail_batch_);
    s += ": " + body_->describe();
    if (tail_ && tail_->describe() != body_->describe()) s += "; the last: " + tail_->describe();
    return s;
  }

  Result<void> run() override {
    const bool sums = pass_ == ConvPass::backward_filter;
    for (int64_t i = 0; i <= count_; ++i) {
      ConvKernel* k = i < count_ ? body_.get() : tail_.get();
      if (!k) break;
      LMS_TRY_VOID(k->run_on(a_ + i * step_a_, b_ + i * step_b_, out_ + i * step_out_, sums && i > 0));
    }
    return {};
  }

 private:
  ConvPass pass_;
  const std::byte* a_;
  const std::byte* b_;
  std::byte* out_;
  int64_t step_a_ = 0, step_b_ = 0, step_out_ = 0;  // bytes from one chunk's operand to the next one's
  int64_t count_;
  int64_t body_batch_, tail_batch_;  // samples per call of body_, and of tail_
  std::unique_ptr<ConvKernel> body_, tail_;
};

}  // namespace

Result<PreparedPtr> build_conv(DnnContext& ctx, const KernelCall& call) {
  const cudnnDataType_t t = LMS_TRY(common_dnn_dtype(call));
  const ConvPlan plan = LMS_TRY(conv_plan(call));
  // cuDNN describes no empty tensor; an empty operand makes every output element an empty sum.
  if (any_empty(call)) return zero_fill_kernel(ctx, call);
  if (ctx.opts.conv_gemm != ConvGemm::off)
    if (PreparedPtr g = LMS_TRY(build_gemm_conv(ctx, call, plan, t))) return g;  // else cuDNN
  const int64_t batch = plan.x[0], most = ctx.opts.max_conv_batch;
  // The kernel of the plan with `n` samples per call.
  auto kernel_for = [&](int64_t n) -> Result<std::unique_ptr<ConvKernel>> {
    ConvPlan p = plan;
    p.x[0] = p.y[0] = n;
    auto k = std::make_unique<ConvKernel>(ctx, call, plan.pass, t);
    LMS_TRY_VOID(k->init(p));
    return k;
  };
  const int64_t element_bytes = t == CUDNN_DATA_DOUBLE ? 8 : 4;
  std::optional<Error> whole;  // why the whole batch in one call has no candidate, when that was tried
  if (most <= 0 || batch <= most) {
    auto k = kernel_for(batch);
    std::string tried;  // each chunk size tried and the algorithm it would run, for describe()
    if (k && (*k)->first_over_limit() >= 0)  // Note [Batch chunks for the listed-first algorithm]
      for (int64_t n = (batch + 1) / 2; n >= kMinSpeedChunk; n = (n + 1) / 2) {
        auto body = kernel_for(n);
        tried += fmt::format(" {}: {};", n, body ? algo_name(plan.pass, (*body)->chosen()) : "no candidate");
        if (!body || (*body)->chosen() != (*k)->first_over_limit()) continue;
        std::unique_ptr<ConvKernel> tail;
        if (batch % n != 0) {
          auto rest = kernel_for(batch % n);
          if (!rest) continue;
          tail = std::move(*rest);
        }
        return PreparedPtr(std::make_unique<BatchChunks>(call, plan, element_bytes, std::move(*body), n, batch / n,
                                                         std::move(tail)));
      }
    if (k) {
      if (!tried.empty())
        (*k)->set_note(fmt::format("{} listed first but over the limit; chunks of{}", algo_name(plan.pass,
                                   (*k)->first_over_limit()), tried.substr(0, tried.size() - 1)));
      return PreparedPtr(std::move(*k));
    }
    if (batch < 2) return std::unexpected(k.error());
    whole = k.error();
  }
  for (int64_t n = most > 0 && most < batch ? most : (batch + 1) / 2;; n = (n + 1) / 2) {
    auto body = kernel_for(n);
    std::unique_ptr<ConvKernel> tail;
    if (body && batch % n != 0) {
      auto rest = kernel_for(batch % n);
      if (rest) tail = std::move(*rest);
    }
    if (body && (batch % n == 0 || tail))
      return PreparedPtr(std::make_unique<BatchChunks>(call, plan, element_bytes, std::move(*body), n, batch / n,
                                                       std::move(tail)));
    if (n == 1) return std::unexpected(whole ? *whole : body.error());  // the whole batch's reason when known
  }
}

}  // namespace lms::cuda
