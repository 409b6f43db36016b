// The cuda backend's own kernels as element functions: each struct below computes the outputs of one index
// `i` of its launch (an element, a row, a channel, a column; one `i` for the few sequential pieces), with every
// operand and geometry in plain fields. The same code runs on the GPU (cuda_kernels.cu launches it over a grid)
// and on the host (tests run the whole own-kernel dispatcher, cuda_ops.cc, in host mode against the reference
// backend), so the index arithmetic and numerics CI checks are the ones the GPU runs. Plain C++20, no CUDA
// headers and no LMS headers but ops/dropout_mask.h and ops/hardswish.h (themselves plain C++20): nvcc compiles
// it as C++20, g++ as C++23. The pooling kernels are in pool_fns.h.
// Numerics follow Note [Reference accumulation]: each element is computed in double from its operands and
// rounded once; each sum runs sequentially in one thread in the reference's order, in double (but batch_norm_grad's
// channel sums, in lanes: BnGradLanes). That makes the own kernels bit-identical to the reference on most ops (the
// tests say which), and deterministic everywhere: no atomics, no order that depends on scheduling.
// Invalid ids or labels (outside [0, bound)) cannot be returned from a kernel: the element writes 0 and stores
// a code into `*status` (host-mapped memory the backend checks after each step; see cuda_backend.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "lms/ops/dropout_mask.h"
#include "lms/ops/hardswish.h"

#ifdef __CUDACC__
#define LMS_HD __host__ __device__
#else
#define LMS_HD
#endif

namespace lms::cuda {

inline constexpr int kMaxDims = 8;  // tensor rank the strided functions handle (the dispatcher checks it)

// Status codes a kernel may store into `*status` (0: fine).
enum StatusCode : int32_t { kStatusOk = 0, kStatusBadId = 1, kStatusBadLabel = 2 };

// A row-major index space of up to kMaxDims dimensions and two stride sets over it (elements, not bytes).
struct Strided {
  int rank = 0;
  bool narrow = false;       // every index fits 32 bits: the divisions run on uint32 (several times cheaper)
  int64_t shape[kMaxDims] = {};
  int64_t a[kMaxDims] = {};  // strides of operand a (0 along broadcast dimensions)
  int64_t b[kMaxDims] = {};  // strides of operand b
  // The offsets of element `i` of `shape` (row-major) in a and b.
  LMS_HD void offsets(int64_t i, int64_t& oa, int64_t& ob) const {
    if (rank == 1) {  // the common case once the dispatcher has merged dimensions: no division
      oa = i * a[0];
      ob = i * b[0];
      return;
    }
    if (narrow) {
      walk(static_cast<uint32_t>(i), oa, ob);
    } else {
      walk(i, oa, ob);
    }
  }
  template <class I>
  LMS_HD void walk(I i, int64_t& oa, int64_t& ob) const {
    oa = 0;
    ob = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const I n = static_cast<I>(shape[d]);
      const int64_t idx = static_cast<int64_t>(i % n);
      i /= n;
      oa += idx * a[d];
      ob += idx * b[d];
    }
  }
};

// An id or label tensor, i32 or i64.
struct Ids {
  const void* data = nullptr;
  bool is64 = false;
  LMS_HD int64_t at(int64_t i) const {
    return is64 ? static_cast<const int64_t*>(data)[i] : static_cast<const int32_t*>(data)[i];
  }
};

// A float scalar read or written in its own dtype (f32 or f64).
struct Scalar {
  void* data = nullptr;
  bool is64 = false;
  LMS_HD double load() const {
    return is64 ? *static_cast<const double*>(data) : static_cast<double>(*static_cast<const float*>(data));
  }
  LMS_HD void store(double v) const {
    if (is64)
      *static_cast<double*>(data) = v;
    else
      *static_cast<float*>(data) = static_cast<float>(v);
  }
};

// Phi(x) and phi(x), written as the reference writes them (the same doubles, so the same roundings).
LMS_HD inline double normal_cdf(double x) { return 0.5 * (1 + erf(x / 1.4142135623730951)); }  // sqrt(2)
LMS_HD inline double normal_pdf(double x) { return exp(-0.5 * x * x) / sqrt(2 * 3.141592653589793); }
// PyTorch's tanh gelu and its derivative, as the reference writes them (the same double for sqrt(2/pi)).
inline constexpr double kSqrt2OverPi = 0.79788456080286541;
inline constexpr double kGeluTanhCubic = 0.044715;
// PyTorch's softplus threshold (beta 1): above it softplus is x and its gradient dy.
inline constexpr double kSoftplusThreshold = 20;
LMS_HD inline double gelu_tanh(double x) {
  return 0.5 * x * (1 + tanh(kSqrt2OverPi * (x + kGeluTanhCubic * x * x * x)));
}
// std::min(std::max(v, lo), hi) as the reference computes it (the same comparisons, so the same signed zeros).
LMS_HD inline double clamp(double v, double lo, double hi) {
  const double m = v < lo ? lo : v;
  return hi < m ? hi : m;
}
LMS_HD inline double gelu_tanh_derivative(double x) {
  const double t = tanh(kSqrt2OverPi * (x + kGeluTanhCubic * x * x * x));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * kSqrt2OverPi * (1 + 3 * kGeluTanhCubic * x * x);
}

// ---- fills, elementwise ----

// y[i] = value (any dtype of size sizeof(E); `value` already converted to it).
template <class E>
struct Fill {
  E* y;
  E value;
  LMS_HD void operator()(int64_t i) const { y[i] = value; }
};

enum class UnaryKind : int32_t {
  relu, gelu, gelu_tanh, silu, hardswish, sigmoid, tanh, clamp, sqrt, reciprocal, exp, log, softplus, scale
};
// y[i] = f(x[i]); may run in place.
template <class T>
struct Unary {
  const T* x;
  T* y;
  UnaryKind kind;
  double p0, p1;  // scale: the factor; clamp: min and max
  LMS_HD void operator()(int64_t i) const {
    const double v = static_cast<double>(x[i]);
    double r = 0;
    switch (kind) {
      case UnaryKind::relu: r = v != v ? v : (v > 0 ? v : 0); break;  // NaN propagates
      case UnaryKind::gelu: r = v * normal_cdf(v); break;
      case UnaryKind::gelu_tanh: r = gelu_tanh(v); break;
      case UnaryKind::silu: r = v / (1 + exp(-v)); break;
      case UnaryKind::hardswish: r = hardswish_value(v); break;
      case UnaryKind::sigmoid: r = 1 / (1 + exp(-v)); break;
      case UnaryKind::tanh: r = tanh(v); break;
      case UnaryKind::clamp: r = v != v ? v : clamp(v, p0, p1); break;
      case UnaryKind::sqrt: r = sqrt(v); break;
      case UnaryKind::reciprocal: r = 1 / v; break;
      case UnaryKind::exp: r = exp(v); break;
      case UnaryKind::log: r = log(v); break;
      case UnaryKind::softplus: r = v > kSoftplusThreshold ? v : log1p(exp(v)); break;
      case UnaryKind::scale: r = v * p0; break;
    }
    y[i] = static_cast<T>(r);
  }
};

// y = x * (kept ? 1/(1-p) : 0), the mask of ops/dropout_mask.h. The key is read here, on the device, so one
// prepared kernel serves every step while rng_advance moves the key.
template <class T>
struct Dropout {
  const T* x;
  const int64_t* key;
  T* y;
  DropoutMask mask;
  LMS_HD void operator()(int64_t i) const {
    const uint64_t stream = mask.stream(static_cast<uint64_t>(*key));
    y[i] = static_cast<T>(mask.apply(stream, i, static_cast<double>(x[i])));
  }
};

// One sequential step (launch size 1): key_out = key + 1, wrapping (rng_advance).
struct KeyAdvance {
  const int64_t* key;
  int64_t* key_out;
  LMS_HD void operator()(int64_t) const { *key_out = static_cast<int64_t>(static_cast<uint64_t>(*key) + 1); }
};

enum class GradKind : int32_t {
  relu, gelu, gelu_tanh, silu, hardswish, sigmoid, tanh, clamp, sqrt, reciprocal, log, softplus
};
// dx[i] = dy[i] * f'(at[i]) for same-shaped operands (relu_grad, sigmoid_grad, tanh_grad, sqrt_grad and
// reciprocal_grad read y; gelu_grad, silu_grad, hardswish_grad, clamp_grad, log_grad and softplus_grad read x).
template <class T>
struct ActivationGrad {
  const T* dy;
  const T* at;
  T* dx;
  GradKind kind;
  double lo, hi;  // clamp's bounds
  LMS_HD void operator()(int64_t i) const {
    const double d = static_cast<double>(dy[i]), v = static_cast<double>(at[i]);
    double r = 0;
    switch (kind) {
      case GradKind::relu: r = v > 0 ? d : 0; break;
      case GradKind::gelu: r = d * (normal_cdf(v) + v * normal_pdf(v)); break;
      case GradKind::gelu_tanh: r = d * gelu_tanh_derivative(v); break;
      case GradKind::silu: {
        const double s = 1 / (1 + exp(-v));
        r = d * s * (1 + v * (1 - s));
        break;
      }
      case GradKind::hardswish: r = hardswish_derivative(d, v); break;
      case GradKind::sigmoid: r = d * v * (1 - v); break;
      case GradKind::tanh: r = d * (1 - v * v); break;
      case GradKind::clamp: r = lo < v && v < hi ? d : 0; break;
      case GradKind::sqrt: r = d / (2 * v); break;
      case GradKind::reciprocal: r = -d * v * v; break;
      case GradKind::log: r = d / v; break;
      case GradKind::softplus: r = v > kSoftplusThreshold ? d : d / (1 + exp(-v)); break;
    }
    dx[i] = static_cast<T>(r);
  }
};

enum class BinaryKind : int32_t { add, mul };
// y = a (op) b under NumPy broadcasting; geometry.shape is y's shape.
template <class T>
struct BroadcastBinary {
  const T* a;
  const T* b;
  T* y;
  BinaryKind kind;
  Strided geometry;
  LMS_HD void operator()(int64_t i) const {
    int64_t oa = 0, ob = 0;
    geometry.offsets(i, oa, ob);
    const double p = static_cast<double>(a[oa]), q = static_cast<double>(b[ob]);
    y[i] = static_cast<T>(kind == BinaryKind::add ? p + q : p * q);
  }
};

// Four f32s moved as one 16-byte access.
struct alignas(16) Float4 {
  float v[4];
};

enum class PackedKind : int32_t { relu, relu_grad, add, mul };
// relu, relu_grad and the same-shape add and mul on f32, four elements per index through 16-byte loads and
// stores (the dispatcher takes it when every operand is 16-byte aligned and the count is a multiple of 4; on an
// H200 the one-element functions above moved 1.8-1.9 TB/s). Bit-identical to Unary, ActivationGrad and
// BroadcastBinary: a single f32 addition or multiplication rounds as the double one rounded to f32 does (double
// has more than 2 * 24 + 2 bits), and relu and its gradient only select. relu and relu_grad read b only for the
// gradient (b = relu's output y, a = dy). May run in place.
struct Packed4 {
  const Float4* a;
  const Float4* b;
  Float4* y;
  PackedKind kind;
  LMS_HD void operator()(int64_t i) const {
    const Float4 p = a[i];
    const Float4 q = kind == PackedKind::relu ? p : b[i];
    Float4 r;
    for (int k = 0; k < 4; ++k) {
      const float u = p.v[k], w = q.v[k];
      switch (kind) {
        case PackedKind::relu: r.v[k] = u != u ? u : (u > 0 ? u : 0.0f); break;
        case PackedKind::relu_grad: r.v[k] = w > 0 ? u : 0.0f; break;
        case PackedKind::add: r.v[k] = u + w; break;
        case PackedKind::mul: r.v[k] = u * w; break;
      }
    }
    y[i] = r;
  }
};

// y = x + bias along one axis of x viewed as [outer, dim, inner].
template <class T>
struct BiasAdd {
  const T* x;
  const T* bias;
  T* y;
  int64_t dim, inner;
  LMS_HD void operator()(int64_t i) const {
    y[i] = static_cast<T>(static_cast<double>(x[i]) + static_cast<double>(bias[(i / inner) % dim]));
  }
};

// ---- data movement ----

// out[offset_b(i)] = in[offset_a(i)] over the index space `geometry` (elements of sizeof(E) bytes): transpose,
// broadcast_to, slice, slice_grad's placement, one input of a concat.
template <class E>
struct StridedCopy {
  const E* in;
  E* out;
  Strided geometry;
  LMS_HD void operator()(int64_t i) const {
    int64_t oa = 0, ob = 0;
    geometry.offsets(i, oa, ob);
    out[ob] = in[oa];
  }
};

// y[i] = table[ids[i / width], i % width] (elements of sizeof(E) bytes).
template <class E>
struct EmbeddingGather {
  const E* table;
  Ids ids;
  E* y;
  int64_t width, vocab;
  int32_t* status;
  LMS_HD void operator()(int64_t i) const {
    const int64_t id = ids.at(i / width);
    if (id < 0 || id >= vocab) {
      *status = kStatusBadId;
      y[i] = E{};
      return;
    }
    y[i] = table[id * width + i % width];
  }
};

// One sequential step (launch size 1): the positions of each id in ascending order, by a stable counting sort:
// order[first[v] .. first[v+1]) are the positions p with ids[p] == v. `first` has vocab + 1 entries, `next`
// vocab (scratch). Out-of-range ids are counted nowhere (status set; EmbeddingGather-style).
struct EmbeddingGradSort {
  Ids ids;
  int64_t n, vocab;
  int64_t* first;
  int64_t* next;
  int64_t* order;
  int32_t* status;
  LMS_HD void operator()(int64_t) const {
    for (int64_t v = 0; v <= vocab; ++v) first[v] = 0;
    for (int64_t p = 0; p < n; ++p) {
      const int64_t id = ids.at(p);
      if (id < 0 || id >= vocab) {
        *status = kStatusBadId;
        continue;
      }
      ++first[id + 1];
    }
    for (int64_t v = 1; v <= vocab; ++v) first[v] += first[v - 1];
    for (int64_t v = 0; v < vocab; ++v) next[v] = first[v];
    for (int64_t p = 0; p < n; ++p) {
      const int64_t id = ids.at(p);
      if (id >= 0 && id < vocab) order[next[id]++] = p;
    }
  }
};

// dtable[v, c] = sum of dy[p, c] over the positions p of id v, ascending (one index per table element).
template <class T>
struct EmbeddingGradRows {
  const T* dy;
  const int64_t* first;
  const int64_t* order;
  T* dtable;
  int64_t width;
  LMS_HD void operator()(int64_t i) const {
    const int64_t v = i / width, c = i % width;
    double acc = 0;
    for (int64_t j = first[v]; j < first[v + 1]; ++j) acc += static_cast<double>(dy[order[j] * width + c]);
    dtable[i] = static_cast<T>(acc);
  }
};

// ---- reductions ----

// One output element per index: the sum of the input elements that map to it, in row-major input order,
// accumulated in A (double for floats, int64 for integers), then `divide ? acc / factor : acc * factor`.
// `geometry.shape` is the input's shape, `geometry.a` its strides, `geometry.b` the output's stride per input
// dimension (0 along the reduced dimensions). `reduced` is the number of input elements per output.
template <class T, class A>
struct Reduce {
  const T* x;
  T* y;
  Strided geometry;
  int64_t reduced;
  double factor;
  bool divide;
  LMS_HD void operator()(int64_t o) const {
    // The input offset of this output's first element, then of each reduced element in row-major order.
    int64_t base = 0;
    for (int d = 0; d < geometry.rank; ++d)
      if (geometry.b[d] != 0) base += ((o / geometry.b[d]) % geometry.shape[d]) * geometry.a[d];
    A acc = 0;
    for (int64_t r = 0; r < reduced; ++r) {
      int64_t rest = r, off = base;
      for (int d = geometry.rank - 1; d >= 0; --d) {
        if (geometry.b[d] != 0) continue;
        off += (rest % geometry.shape[d]) * geometry.a[d];
        rest /= geometry.shape[d];
      }
      acc += static_cast<A>(x[off]);
    }
    y[o] = finish(acc);
  }
  LMS_HD T finish(A acc) const {
    if constexpr (std::is_integral_v<A>) {  // integer sums: no factor
      return static_cast<T>(acc);
    } else {
      return static_cast<T>(divide ? acc / factor : acc * factor);
    }
  }
};

// ---- index arithmetic (also pool_fns.h, conv_gemm_fns.h) ----

// a / b for a >= 0, b > 0; on uint32 when `narrow` (every offset fits 32 bits; several times cheaper on a GPU
// than dividing int64s, on which the stem's max_pool_grad spent its time).
LMS_HD inline int64_t quot(int64_t a, int64_t b, bool narrow) {
  return narrow ? static_cast<int64_t>(static_cast<uint32_t>(a) / static_cast<uint32_t>(b)) : a / b;
}
// The coordinates c of row-major offset `at` >= 0 in sizes `dims`.
LMS_HD inline void coords3(int64_t at, const int64_t (&dims)[3], bool narrow, int64_t (&c)[3]) {
  const int64_t rest = quot(at, dims[2], narrow);
  c[2] = at - rest * dims[2];
  c[0] = quot(rest, dims[1], narrow);
  c[1] = rest - c[0] * dims[1];
}

// ---- softmax ----

// One (outer, inner) line of x viewed as [outer, dim, inner] per index; causal: line o keeps the first
// o % rows + 1 + offset entries (rows = the size of dimension -2) and the rest are exactly 0.
template <class T>
struct Softmax {
  const T* x;
  T* y;
  int64_t dim, inner;
  bool causal;
  int64_t rows, offset;
  LMS_HD void operator()(int64_t line) const {
    const int64_t o = line / inner, in = line % inner, base = o * dim * inner + in;
    int64_t kept = dim;
    if (causal && o % rows + 1 + offset < dim) kept = o % rows + 1 + offset;
    double max = -INFINITY;
    for (int64_t j = 0; j < kept; ++j) max = fmax(max, static_cast<double>(x[base + j * inner]));
    double sum = 0;
    for (int64_t j = 0; j < kept; ++j) sum += exp(static_cast<double>(x[base + j * inner]) - max);
    for (int64_t j = 0; j < dim; ++j)
      y[base + j * inner] = j < kept ? static_cast<T>(exp(static_cast<double>(x[base + j * inner]) - max) / sum) : T(0);
  }
};

template <class T>
struct SoftmaxGrad {
  const T* dy;
  const T* y;
  T* dx;
  int64_t dim, inner;
  LMS_HD void operator()(int64_t line) const {
    const int64_t base = (line / inner) * dim * inner + line % inner;
    double dot = 0;
    for (int64_t j = 0; j < dim; ++j)
      dot += static_cast<double>(dy[base + j * inner]) * static_cast<double>(y[base + j * inner]);
    for (int64_t j = 0; j < dim; ++j) {
      const int64_t i = base + j * inner;
      dx[i] = static_cast<T>(static_cast<double>(y[i]) * (static_cast<double>(dy[i]) - dot));
    }
  }
};

// ---- normalization ----

// layer_norm of one row (the last dimension, `width` long) per index.
template <class T>
struct LayerNorm {
  const T *x, *gamma, *beta;
  T *y, *mean, *invstd;
  int64_t width;
  double eps;
  LMS_HD void operator()(int64_t r) const {
    const T* xr = x + r * width;
    T* yr = y + r * width;
    double sum = 0;
    for (int64_t j = 0; j < width; ++j) sum += static_cast<double>(xr[j]);
    const double m = sum / static_cast<double>(width);
    double sq = 0;
    for (int64_t j = 0; j < width; ++j) {
      const double d = static_cast<double>(xr[j]) - m;
      sq += d * d;
    }
    const double is = 1 / sqrt(sq / static_cast<double>(width) + eps);
    for (int64_t j = 0; j < width; ++j)
      yr[j] = static_cast<T>(static_cast<double>(gamma[j]) * (static_cast<double>(xr[j]) - m) * is +
                             static_cast<double>(beta[j]));
    mean[r] = static_cast<T>(m);
    invstd[r] = static_cast<T>(is);
  }
};

// layer_norm_grad's dx, one row per index.
template <class T>
struct LayerNormGradRows {
  const T *dy, *x, *gamma, *mean, *invstd;
  T* dx;
  int64_t width;
  LMS_HD void operator()(int64_t r) const {
    const T *xr = x + r * width, *dyr = dy + r * width;
    const double m = static_cast<double>(mean[r]), is = static_cast<double>(invstd[r]), n = static_cast<double>(width);
    double sum_dxhat = 0, sum_dxhat_xhat = 0;
    for (int64_t j = 0; j < width; ++j) {
      const double xhat = (static_cast<double>(xr[j]) - m) * is;
      const double dxhat = static_cast<double>(dyr[j]) * static_cast<double>(gamma[j]);
      sum_dxhat += dxhat;
      sum_dxhat_xhat += dxhat * xhat;
    }
    for (int64_t j = 0; j < width; ++j) {
      const double xhat = (static_cast<double>(xr[j]) - m) * is;
      const double dxhat = static_cast<double>(dyr[j]) * static_cast<double>(gamma[j]);
      dx[r * width + j] = static_cast<T>(is / n * (n * dxhat - sum_dxhat - xhat * sum_dxhat_xhat));
    }
  }
};

// layer_norm_grad's dgamma and dbeta, one column per index, summed over the rows in ascending order.
template <class T>
struct LayerNormGradColumns {
  const T *dy, *x, *mean, *invstd;
  T *dgamma, *dbeta;
  int64_t width, rows;
  LMS_HD void operator()(int64_t j) const {
    double sg = 0, sb = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const double xhat = (static_cast<double>(x[r * width + j]) - static_cast<double>(mean[r])) *
                          static_cast<double>(invstd[r]);
      const double d = static_cast<double>(dy[r * width + j]);
      sg += d * xhat;
      sb += d;
    }
    dgamma[j] = static_cast<T>(sg);
    dbeta[j] = static_cast<T>(sb);
  }
};

// batch_norm_grad over x [N, C, S] (S: the spatial elements), in three launches (cuda_ops_nn.cc) whose every read of
// dy precedes the write of its element of dx, so dx may be dy's buffer (Note [Buffer reuse], plan/liveness.h).
// A channel's elements e = n*S + s are summed in `lanes` lanes: lane p takes e = p, p + lanes, ... in ascending
// order, so neighbouring threads read neighbouring elements; then each channel adds its lanes in lane order
// (past a few hundred lanes, in groups, then the groups in order: BnGradGroups). All in double, in an order fixed
// by the shape: deterministic, and with lanes = N*S (one element a lane) and no groups exactly the reference's
// sequential sums.
// BnGradLanes: one (channel, lane) per index i = c*lanes + p, into lane_sums[2i] (dy) and [2i + 1] (dy * xhat).
template <class T>
struct BnGradLanes {
  const T *dy, *x, *mean, *invstd;
  double* lane_sums;
  int64_t channels, spatial, count, lanes;  // count = N*S
  LMS_HD void operator()(int64_t i) const {
    const int64_t c = i / lanes, p = i % lanes;
    const double m = static_cast<double>(mean[c]), is = static_cast<double>(invstd[c]);
    const int64_t dn = lanes / spatial, ds = lanes % spatial;  // one step of `lanes` elements in (n, s)
    int64_t n = p / spatial, s = p % spatial;
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t e = p; e < count; e += lanes) {
      const int64_t at = (n * channels + c) * spatial + s;
      const double d = static_cast<double>(dy[at]);
      sum_dy += d;
      sum_dy_xhat += d * (static_cast<double>(x[at]) - m) * is;
      n += dn;
      s += ds;
      if (s >= spatial) {
        s -= spatial;
        ++n;
      }
    }
    lane_sums[2 * i] = sum_dy;
    lane_sums[2 * i + 1] = sum_dy_xhat;
  }
};

// BnGradGroups: where a channel has many lanes (a single thread adding thousands of them would take a while),
// one (channel, group of `group` consecutive lanes) per index j = c*groups + g, added in lane order into
// group_sums[2j] and [2j + 1]; BnGradChannels then adds the groups instead of the lanes.
struct BnGradGroups {
  const double* lane_sums;
  double* group_sums;
  int64_t lanes, group, groups;  // groups = ceil(lanes / group)
  LMS_HD void operator()(int64_t j) const {
    const int64_t c = j / groups, first = (j % groups) * group, end = first + group < lanes ? first + group : lanes;
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t p = first; p < end; ++p) {
      sum_dy += lane_sums[2 * (c * lanes + p)];
      sum_dy_xhat += lane_sums[2 * (c * lanes + p) + 1];
    }
    group_sums[2 * j] = sum_dy;
    group_sums[2 * j + 1] = sum_dy_xhat;
  }
};

// BnGradChannels: one channel per index: its `parts` partial sums (lanes, or groups of lanes) added in order into
// sums[2c] and [2c + 1], and dbeta and dgamma rounded from them.
template <class T>
struct BnGradChannels {
  const double* part_sums;
  double* sums;
  T *dgamma, *dbeta;
  int64_t parts;
  LMS_HD void operator()(int64_t c) const {
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t p = 0; p < parts; ++p) {
      sum_dy += part_sums[2 * (c * parts + p)];
      sum_dy_xhat += part_sums[2 * (c * parts + p) + 1];
    }
    sums[2 * c] = sum_dy;
    sums[2 * c + 1] = sum_dy_xhat;
    dgamma[c] = static_cast<T>(sum_dy_xhat);
    dbeta[c] = static_cast<T>(sum_dy);
  }
};

// BnGradData: dx, one element per index (the reference's formula and order of operations).
template <class T>
struct BnGradData {
  const T *dy, *x, *gamma, *mean, *invstd;
  const double* sums;
  T* dx;
  int64_t channels, spatial;
  double count;
  bool narrow = false;  // every offset fits 32 bits (quot)
  LMS_HD void operator()(int64_t i) const {
    const int64_t plane = quot(i, spatial, narrow), c = plane - quot(plane, channels, narrow) * channels;
    const double m = static_cast<double>(mean[c]), is = static_cast<double>(invstd[c]);
    const double g = static_cast<double>(gamma[c]);
    const double xhat = (static_cast<double>(x[i]) - m) * is;
    const double sum_dy = sums[2 * c], sum_dy_xhat = sums[2 * c + 1];
    dx[i] = static_cast<T>(g * is / count * (count * static_cast<double>(dy[i]) - sum_dy - xhat * sum_dy_xhat));
  }
};

// bn_running_update, one channel per index (see the reference's norm.cc for the formulas).
template <class T>
struct BnRunningUpdate {
  const T *rm, *rv, *mean, *invstd;
  T *rm_out, *rv_out;
  double momentum, eps, correction;
  LMS_HD void operator()(int64_t c) const {
    const double is = static_cast<double>(invstd[c]);
    const double var = 1 / (is * is) - eps;
    const double new_rm = (1 - momentum) * static_cast<double>(rm[c]) + momentum * static_cast<double>(mean[c]);
    const double new_rv = (1 - momentum) * static_cast<double>(rv[c]) + momentum * var * correction;
    rm_out[c] = static_cast<T>(new_rm);
    rv_out[c] = static_cast<T>(new_rv);
  }
};

// ---- losses ----

// Per position p of logits [N, C, S] (p = n*S + s): the log-sum-exp over the classes into lse[p], and the
// loss term lse - logits[label] into term[p] (both double, in the node's workspace).
template <class T>
struct CrossEntropyRows {
  const T* logits;
  Ids labels;
  double* lse;
  double* term;  // null: the gradient needs only lse
  int64_t classes, spatial;
  int32_t* status;
  LMS_HD void operator()(int64_t p) const {
    const int64_t base = (p / spatial) * classes * spatial + p % spatial;
    double max = -INFINITY;
    for (int64_t c = 0; c < classes; ++c) max = fmax(max, static_cast<double>(logits[base + c * spatial]));
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c) sum += exp(static_cast<double>(logits[base + c * spatial]) - max);
    lse[p] = max + log(sum);
    if (!term) return;
    const int64_t label = labels.at(p);
    if (label < 0 || label >= classes) {
      *status = kStatusBadLabel;
      term[p] = 0;
      return;
    }
    term[p] = lse[p] - static_cast<double>(logits[base + label * spatial]);
  }
};

// One sequential step (launch size 1): loss = sum of term[0, n) in order / n.
struct MeanOfTerms {
  const double* term;
  int64_t n;
  Scalar loss;
  LMS_HD void operator()(int64_t) const {
    double total = 0;
    for (int64_t p = 0; p < n; ++p) total += term[p];
    loss.store(total / static_cast<double>(n));
  }
};

// dlogits = dloss * (softmax over the classes - onehot(label)) / positions, one logit per index.
template <class T>
struct CrossEntropyGrad {
  Scalar dloss;
  const T* logits;
  Ids labels;
  const double* lse;
  T* dlogits;
  int64_t classes, spatial, positions;
  int32_t* status;
  LMS_HD void operator()(int64_t i) const {
    const int64_t s = i % spatial, c = (i / spatial) % classes, n = i / (spatial * classes);
    const int64_t p = n * spatial + s;
    const int64_t label = labels.at(p);
    if (label < 0 || label >= classes) *status = kStatusBadLabel;
    const double scale = dloss.load() / static_cast<double>(positions);
    const double prob = exp(static_cast<double>(logits[i]) - lse[p]);
    dlogits[i] = static_cast<T>(scale * (prob - (c == label ? 1.0 : 0.0)));
  }
};

// ---- optimizer updates (torch.optim semantics; see the reference's update.cc) ----

// The step's learning rate: lr times the optional lr_scale input (no data: none), in double as the reference.
LMS_HD inline double scaled_lr(double lr, const Scalar& lr_scale) { return lr_scale.data ? lr * lr_scale.load() : lr; }

template <class T>
struct SgdUpdate {
  const T *w, *g;
  T* w_out;
  double lr, wd;
  Scalar lr_scale;
  LMS_HD void operator()(int64_t i) const {
    const double wi = static_cast<double>(w[i]);
    const double d = static_cast<double>(g[i]) + wd * wi;
    w_out[i] = static_cast<T>(wi - scaled_lr(lr, lr_scale) * d);
  }
};

template <class T>
struct MomentumUpdate {
  const T *w, *v, *g;
  T *w_out, *v_out;
  double lr, momentum, wd;
  bool nesterov;
  Scalar lr_scale;
  LMS_HD void operator()(int64_t i) const {
    const double wi = static_cast<double>(w[i]);
    const double d = static_cast<double>(g[i]) + wd * wi;
    const T vi = static_cast<T>(momentum * static_cast<double>(v[i]) + d);
    const double step = nesterov ? d + momentum * static_cast<double>(vi) : static_cast<double>(vi);
    v_out[i] = vi;
    w_out[i] = static_cast<T>(wi - scaled_lr(lr, lr_scale) * step);
  }
};

// Each element reads the step counter t before the update (AdamStep writes t + 1 afterwards, in stream order,
// so an in-place counter is never read half-updated).
template <class T>
struct AdamUpdate {
  const T *w, *m, *v, *g;
  Scalar t;
  T *w_out, *m_out, *v_out;
  double lr, b1, b2, eps, wd;
  Scalar lr_scale;
  bool decoupled;  // AdamW: d = g, and the step starts from w*(1 - lr*wd)
  LMS_HD void operator()(int64_t i) const {
    const double step = static_cast<double>(static_cast<float>(t.load() + 1));  // the counter is f32, rounded
    const double c1 = 1 - pow(b1, step), c2 = 1 - pow(b2, step);
    const double rate = scaled_lr(lr, lr_scale);
    const double wi = static_cast<double>(w[i]);
    const double d = decoupled ? static_cast<double>(g[i]) : static_cast<double>(g[i]) + wd * wi;
    const double decayed = decoupled ? wi * (1 - rate * wd) : wi;
    const T mi = static_cast<T>(b1 * static_cast<double>(m[i]) + (1 - b1) * d);
    const T vi = static_cast<T>(b2 * static_cast<double>(v[i]) + (1 - b2) * d * d);
    const double m_hat = static_cast<double>(mi) / c1, v_hat = static_cast<double>(vi) / c2;
    m_out[i] = mi;
    v_out[i] = vi;
    w_out[i] = static_cast<T>(decayed - rate * m_hat / (sqrt(v_hat) + eps));
  }
};

// One sequential step (launch size 1): t_out = t + 1, rounded to the counter's f32.
struct AdamStep {
  Scalar t, t_out;
  LMS_HD void operator()(int64_t) const { t_out.store(static_cast<float>(t.load() + 1)); }
};

}  // namespace lms::cuda
