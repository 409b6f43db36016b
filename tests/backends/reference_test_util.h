// Helpers shared by the reference backend's tests (tests/backends/reference_*_test.cc): tensor literals,
// deterministic random tensors, running one op on HostTensors the way the runtime would (normalized attributes,
// output types from the shape rule), and central-difference gradient checks.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "lms/backends/reference/kernels.h"
#include "lms/runtime/tensor.h"

namespace lms::ref_test {

inline HostTensor tensor(DType t, Shape s, std::vector<double> values = {}) {
  HostTensor h(TensorType{t, std::move(s)});
  if (!values.empty() && static_cast<int64_t>(values.size()) != h.type.num_elements())
    ADD_FAILURE() << "tensor literal has " << values.size() << " values for " << to_string(h.type);
  for (size_t i = 0; i < values.size() && static_cast<int64_t>(i) < h.type.num_elements(); ++i)
    h.set(static_cast<int64_t>(i), values[i]);
  return h;
}
inline HostTensor f32(Shape s, std::vector<double> v = {}) { return tensor(DType::f32, std::move(s), std::move(v)); }
inline HostTensor f64(Shape s, std::vector<double> v = {}) { return tensor(DType::f64, std::move(s), std::move(v)); }
inline HostTensor i64(Shape s, std::vector<double> v = {}) { return tensor(DType::i64, std::move(s), std::move(v)); }
inline HostTensor i32(Shape s, std::vector<double> v = {}) { return tensor(DType::i32, std::move(s), std::move(v)); }

inline Attributes A(std::initializer_list<std::pair<std::string, Attribute>> list) {
  Attributes a;
  for (const auto& [n, v] : list) a.set(n, v);
  return a;
}
inline Attribute I(int64_t v) { return Attribute{v}; }
inline Attribute F(double v) { return Attribute{v}; }
inline Attribute B(bool v) { return Attribute{v}; }
inline Attribute L(IntList v) { return Attribute{std::move(v)}; }
inline Attribute S(std::string v) { return Attribute{std::move(v)}; }

// Uniform values in [lo, hi) from a fixed seed (splitmix64), identical on every machine.
inline HostTensor random(DType t, Shape s, uint64_t seed, double lo = -1, double hi = 1) {
  HostTensor h(TensorType{t, std::move(s)});
  uint64_t state = seed;
  for (int64_t i = 0; i < h.type.num_elements(); ++i) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    double u = static_cast<double>(z >> 11) / 9007199254740992.0;  // 2^53
    h.set(i, lo + (hi - lo) * u);
  }
  return h;
}

inline std::vector<double> values(const HostTensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.type.num_elements(); ++i) v.push_back(t.get(i));
  return v;
}

// Runs `op` on `inputs` as the runtime would: normalized attributes, output types from the shape rule, fresh
// output buffers. Errors from normalization, the shape rule or the kernel come back as they are.
inline Result<std::vector<HostTensor>> run(Op op, std::vector<HostTensor> inputs, Attributes attrs = {}) {
  auto normalized = normalize_attrs(op_def(op), std::move(attrs));
  if (!normalized) return std::unexpected(normalized.error());
  std::vector<TensorType> in_types;
  for (const HostTensor& t : inputs) in_types.push_back(t.type);
  auto out_types = infer_types(op, in_types, *normalized);
  if (!out_types) return std::unexpected(out_types.error());
  std::vector<HostTensor> outs;
  for (const TensorType& t : *out_types) outs.emplace_back(t);
  std::vector<TensorRef> in_refs, out_refs;
  for (HostTensor& t : inputs) in_refs.push_back({&t.type, t.data.data()});
  for (HostTensor& t : outs) out_refs.push_back({&t.type, t.data.data()});
  KernelCall call{op, &*normalized, in_refs, out_refs, nullptr, 0};
  auto r = run_reference_kernel(call);
  if (!r) return std::unexpected(r.error());
  return outs;
}

// run() that must succeed; returns output `index`.
inline HostTensor run1(Op op, std::vector<HostTensor> inputs, Attributes attrs = {}, size_t index = 0) {
  auto r = run(op, std::move(inputs), std::move(attrs));
  if (!r) {
    ADD_FAILURE() << op_name(op) << " failed: " << r.error().str();
    return {};
  }
  return std::move((*r)[index]);
}

inline ::testing::AssertionResult near(const HostTensor& got, const std::vector<double>& expected, double tol) {
  if (got.type.num_elements() != static_cast<int64_t>(expected.size()))
    return ::testing::AssertionFailure() << "got " << to_string(got.type) << ", expected " << expected.size()
                                         << " values";
  for (size_t i = 0; i < expected.size(); ++i) {
    double g = got.get(static_cast<int64_t>(i));
    if (!(std::abs(g - expected[i]) <= tol))
      return ::testing::AssertionFailure() << "element " << i << ": got " << fmt::format("{:.10g}", g)
                                           << ", expected " << fmt::format("{:.10g}", expected[i]) << " (all: "
                                           << fmt::format("{}", fmt::join(values(got), ", ")) << ")";
  }
  return ::testing::AssertionSuccess();
}

// sum(a * b) over all elements, in double.
inline double dot(const HostTensor& a, const HostTensor& b) {
  double s = 0;
  for (int64_t i = 0; i < a.type.num_elements(); ++i) s += a.get(i) * b.get(i);
  return s;
}

// Checks `analytic`, the claimed gradient of scalar `f` at `x`, against central differences with step h:
// each element must satisfy |analytic - numeric| <= tol * max(1, |numeric|).
inline ::testing::AssertionResult matches_numeric_gradient(const std::function<double(const HostTensor&)>& f,
                                                            const HostTensor& x, const HostTensor& analytic,
                                                            double h = 1e-6, double tol = 1e-6) {
  if (analytic.type.shape != x.type.shape)
    return ::testing::AssertionFailure() << "gradient " << to_string(analytic.type) << " vs x " << to_string(x.type);
  HostTensor probe = x;
  for (int64_t i = 0; i < x.type.num_elements(); ++i) {
    const double v = x.get(i);
    probe.set(i, v + h);
    const double up = f(probe);
    probe.set(i, v - h);
    const double down = f(probe);
    probe.set(i, v);
    const double numeric = (up - down) / (2 * h), got = analytic.get(i);
    if (!(std::abs(got - numeric) <= tol * std::max(1.0, std::abs(numeric))))
      return ::testing::AssertionFailure() << "element " << i << " of " << to_string(x.type) << ": analytic "
                                           << fmt::format("{:.12g}", got) << ", numeric "
                                           << fmt::format("{:.12g}", numeric);
  }
  return ::testing::AssertionSuccess();
}

// The error message of a failed run (or a marker when it unexpectedly succeeded).
inline std::string error_of(const Result<std::vector<HostTensor>>& r) {
  return r ? std::string("<no error>") : r.error().str();
}

}  // namespace lms::ref_test
