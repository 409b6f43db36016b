// Reference matmul (batched, optional transposes, b shared across the batch when rank 2), softmax (optionally
// causal) and softmax_grad. Every dot product runs over k in ascending order into a double, whichever loop
// nest computes it, so the transposed and plain layouts give bit-identical products.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "lms/backends/reference/families.h"

namespace lms::reference {

namespace {

template <class T>
void matmul_loops(const MatmulGeometry& g, const T* a, const T* b, T* out) {
  const int64_t a_size = g.m * g.k, b_size = g.shared_b ? 0 : g.k * g.n;
  // a's element (m, k) and b's element (k, n) within one batch matrix.
  auto at = [&](int64_t m, int64_t k) { return g.ta ? k * g.m + m : m * g.k + k; };
  auto bt = [&](int64_t k, int64_t n) { return g.tb ? n * g.k + k : k * g.n + n; };
  std::vector<Acc> row(static_cast<size_t>(g.n));
  for (int64_t bi = 0; bi < g.batch; ++bi) {
    const T* pa = a + bi * a_size;
    const T* pb = b + bi * b_size;
    T* po = out + bi * g.m * g.n;
    for (int64_t m = 0; m < g.m; ++m) {
      if (g.tb) {  // b's rows are contiguous along k: one dot product per output
        for (int64_t n = 0; n < g.n; ++n) {
          Acc acc = 0;
          for (int64_t k = 0; k < g.k; ++k) acc += static_cast<Acc>(pa[at(m, k)]) * static_cast<Acc>(pb[bt(k, n)]);
          po[m * g.n + n] = static_cast<T>(acc);
        }
        continue;
      }
      // b's rows are contiguous along n: accumulate a whole output row, still in ascending k per element.
      std::fill(row.begin(), row.end(), 0.0);
      for (int64_t k = 0; k < g.k; ++k) {
        const Acc av = pa[at(m, k)];
        const T* brow = pb + k * g.n;
        for (int64_t n = 0; n < g.n; ++n) row[static_cast<size_t>(n)] += av * static_cast<Acc>(brow[n]);
      }
      for (int64_t n = 0; n < g.n; ++n) po[m * g.n + n] = static_cast<T>(row[static_cast<size_t>(n)]);
    }
  }
}

template <class T>
Result<void> softmax_loops(const Args& a) {
  const TensorType& x = a.in(0);
  if (a.out(0) != x) return fail("{} output {} must be {}", a.name(), to_string(a.out(0)), to_string(x));
  const int axis = LMS_TRY(axis_attr(a, "axis", x.rank()));
  const bool causal = a.c.b("causal");
  if (causal && (axis != x.rank() - 1 || x.rank() < 2))
    return fail("causal {} needs rank >= 2 and the last axis, got axis {} of {}", a.name(), axis, to_string(x));
  const AxisSplit s = split_at(x.shape, axis);
  const int64_t rows = causal ? x.shape[x.rank() - 2] : 1, offset = a.c.i("causal_offset");
  const T* px = a.in_data<T>(0);
  T* py = a.out_data<T>(0);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t in = 0; in < s.inner; ++in) {
      const int64_t base = o * s.dim * s.inner + in;
      // Causal: row i (the index along dim -2) keeps columns j <= i + offset; masked entries are exactly 0.
      const int64_t kept = causal ? std::min(s.dim, o % rows + 1 + offset) : s.dim;
      Acc max = -std::numeric_limits<Acc>::infinity();
      for (int64_t j = 0; j < kept; ++j) max = std::max(max, static_cast<Acc>(px[base + j * s.inner]));
      Acc sum = 0;
      for (int64_t j = 0; j < kept; ++j) sum += std::exp(static_cast<Acc>(px[base + j * s.inner]) - max);
      for (int64_t j = 0; j < s.dim; ++j)
        py[base + j * s.inner] =
            j < kept ? static_cast<T>(std::exp(static_cast<Acc>(px[base + j * s.inner]) - max) / sum) : T(0);
    }
  return {};
}

template <class T>
Result<void> softmax_grad_loops(const Args& a) {
  const TensorType& y = a.in(1);
  if (a.in(0) != y || a.out(0) != y)
    return fail("{} needs dy, y and dx of one type, got {}, {} and {}", a.name(), to_string(a.in(0)), to_string(y),
                to_string(a.out(0)));
  const int axis = LMS_TRY(axis_attr(a, "axis", y.rank()));
  const AxisSplit s = split_at(y.shape, axis);
  const T *pdy = a.in_data<T>(0), *py = a.in_data<T>(1);
  T* pdx = a.out_data<T>(0);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t in = 0; in < s.inner; ++in) {
      const int64_t base = o * s.dim * s.inner + in;
      Acc dot = 0;
      for (int64_t j = 0; j < s.dim; ++j) {
        const int64_t i = base + j * s.inner;
        dot += static_cast<Acc>(pdy[i]) * static_cast<Acc>(py[i]);
      }
      for (int64_t j = 0; j < s.dim; ++j) {
        const int64_t i = base + j * s.inner;
        pdx[i] = static_cast<T>(static_cast<Acc>(py[i]) * (static_cast<Acc>(pdy[i]) - dot));
      }
    }
  return {};
}

}  // namespace

Result<void> matmul(const Args& a) {
  MatmulGeometry g = LMS_TRY(matmul_geometry(a));
  return with_float(a, a.in(0).dtype, [&]<class T>() -> Result<void> {
    matmul_loops<T>(g, a.in_data<T>(0), a.in_data<T>(1), a.out_data<T>(0));
    return {};
  });
}

Result<void> softmax(const Args& a) {
  return with_float(a, a.in(0).dtype, [&]<class T>() { return softmax_loops<T>(a); });
}

Result<void> softmax_grad(const Args& a) {
  return with_float(a, a.in(1).dtype, [&]<class T>() { return softmax_grad_loops<T>(a); });
}

}  // namespace lms::reference
