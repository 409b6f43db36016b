// The cuda backend's convolution mapping (backends/cuda/conv_plan.h) checked without a GPU: every convolution
// row of the cross-backend table (forward, both gradients, transposed, 1-D to 3-D, groups, dilation, f64) is
// planned, the plan's pass is executed by a plain host convolution written here to cuDNN's documented semantics
// (cross-correlation over the plan's NCHW/NCDHW shapes, symmetric padding, groups over channels; forward
// (x, w) -> y, backward-data (w, dy) -> dx, backward-filter (x, dy) -> dw, with the call's operands in the
// plan's roles), and the result is compared with the reference backend's op.
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "backends/op_cases.h"
#include "lms/backends/cuda/conv_plan.h"

namespace lms {
namespace {

using namespace op_cases;

bool is_conv_family(Op op) {
  switch (op) {
    case Op::conv1d:
    case Op::conv2d:
    case Op::conv3d:
    case Op::conv_backward_data:
    case Op::conv_backward_filter:
    case Op::conv_transpose1d:
    case Op::conv_transpose2d:
    case Op::conv_transpose3d: return true;
    default: return false;
  }
}

// A plan's convolution with the spatial dimensions padded at the front to three.
struct Geometry {
  int64_t n, ci, co, groups;
  std::array<int64_t, 3> in, k, out, stride, pad, dil;
};

Geometry geometry(const cuda::ConvPlan& p) {
  Geometry g{p.x[0], p.x[1], p.y[1], p.groups, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}};
  const size_t spatial = p.x.size() - 2, first = 3 - spatial;
  for (size_t i = 0; i < spatial; ++i) {
    g.in[first + i] = p.x[2 + i];
    g.k[first + i] = p.w[2 + i];
    g.out[first + i] = p.y[2 + i];
    g.stride[first + i] = p.stride[i];
    g.pad[first + i] = p.pad[i];
    g.dil[first + i] = p.dil[i];
  }
  return g;
}

// Calls f(x index, w index, y index) for every multiply of the convolution, with indices into the packed
// x[N,Ci,*in], w[Co,Ci/g,*k] and y[N,Co,*out] of the geometry.
template <class F>
void for_each_product(const Geometry& g, F f) {
  const int64_t ci_g = g.ci / g.groups, co_g = g.co / g.groups;
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t co = 0; co < g.co; ++co)
      for (int64_t c = 0; c < ci_g; ++c) {
        const int64_t ci = co / co_g * ci_g + c;
        for (int64_t o0 = 0; o0 < g.out[0]; ++o0)
          for (int64_t o1 = 0; o1 < g.out[1]; ++o1)
            for (int64_t o2 = 0; o2 < g.out[2]; ++o2)
              for (int64_t k0 = 0; k0 < g.k[0]; ++k0)
                for (int64_t k1 = 0; k1 < g.k[1]; ++k1)
                  for (int64_t k2 = 0; k2 < g.k[2]; ++k2) {
                    const int64_t i0 = o0 * g.stride[0] - g.pad[0] + k0 * g.dil[0];
                    const int64_t i1 = o1 * g.stride[1] - g.pad[1] + k1 * g.dil[1];
                    const int64_t i2 = o2 * g.stride[2] - g.pad[2] + k2 * g.dil[2];
                    if (i0 < 0 || i0 >= g.in[0] || i1 < 0 || i1 >= g.in[1] || i2 < 0 || i2 >= g.in[2]) continue;
                    const int64_t x = (((n * g.ci + ci) * g.in[0] + i0) * g.in[1] + i1) * g.in[2] + i2;
                    const int64_t w = (((co * ci_g + c) * g.k[0] + k0) * g.k[1] + k1) * g.k[2] + k2;
                    const int64_t y = (((n * g.co + co) * g.out[0] + o0) * g.out[1] + o1) * g.out[2] + o2;
                    f(x, w, y);
                  }
      }
}

// The plan's pass on the call's operands, as cuDNN defines it, accumulated in double.
HostTensor emulate(const cuda::ConvPlan& p, const std::vector<HostTensor>& in, const TensorType& out_type) {
  const Geometry g = geometry(p);
  std::vector<double> acc(static_cast<size_t>(out_type.num_elements()), 0.0);
  const HostTensor &a = in[0], &b = in[1];
  switch (p.pass) {
    case cuda::ConvPass::forward:  // (x, w) -> y
      for_each_product(g, [&](int64_t x, int64_t w, int64_t y) { acc[y] += a.get(x) * b.get(w); });
      break;
    case cuda::ConvPass::backward_data:  // (dy, w) -> dx
      for_each_product(g, [&](int64_t x, int64_t w, int64_t y) { acc[x] += a.get(y) * b.get(w); });
      break;
    case cuda::ConvPass::backward_filter:  // (x, dy) -> dw
      for_each_product(g, [&](int64_t x, int64_t w, int64_t y) { acc[w] += a.get(x) * b.get(y); });
      break;
  }
  HostTensor out(out_type);
  for (size_t i = 0; i < acc.size(); ++i) out.set(static_cast<int64_t>(i), acc[i]);
  return out;
}

TEST(ConvPlan, EveryConvolutionRowComputesTheReference) {
  int checked = 0;
  for (const OpCase& c : all_cases()) {
    if (!is_conv_family(c.op)) continue;
    SCOPED_TRACE(c.name);
    const std::vector<HostTensor> inputs = inputs_of(c, 5);
    auto want = ref_test::run(c.op, inputs, c.attrs);
    ASSERT_TRUE(want.has_value()) << want.error().str();
    auto attrs = normalize_attrs(op_def(c.op), c.attrs);
    ASSERT_TRUE(attrs.has_value());
    std::vector<TensorRef> in_refs, out_refs;
    for (const HostTensor& t : inputs) in_refs.push_back({&t.type, const_cast<std::byte*>(t.data.data())});
    HostTensor got_type((*want)[0].type);
    out_refs.push_back({&got_type.type, got_type.data.data()});
    const KernelCall call{c.op, &*attrs, in_refs, out_refs, nullptr, 0};
    auto plan = cuda::conv_plan(call);
    ASSERT_TRUE(plan.has_value()) << plan.error().str();
    EXPECT_GE(plan->x.size(), 4u) << "cuDNN's legacy descriptors are 4-D at least";
    const HostTensor got = emulate(*plan, inputs, (*want)[0].type);
    const double tol = (*want)[0].type.dtype == DType::f64 ? 1e-12 : 1e-6;
    EXPECT_LE(relative_error(got, (*want)[0]), tol);
    ++checked;
  }
  EXPECT_GE(checked, 30) << "the table's convolution rows and their gradients";
}

// What cuDNN's descriptors cannot express is refused with one line naming it.
TEST(ConvPlan, AsymmetricTransposedPaddingIsRefused) {
  HostTensor x = ref_test::f32({1, 2, 4, 4}), w = ref_test::f32({2, 2, 3, 3});
  // output_pad 2 >= stride 2 is allowed by the shape rule when output_pad < dilation (3).
  const Attributes a = ref_test::A({{"stride", ref_test::L({2, 2})}, {"dilation", ref_test::L({3, 3})},
                                    {"output_pad", ref_test::L({2, 2})}});
  auto want = ref_test::run(Op::conv_transpose2d, {x, w}, a);
  ASSERT_TRUE(want.has_value()) << want.error().str();
  auto attrs = normalize_attrs(op_def(Op::conv_transpose2d), a);
  ASSERT_TRUE(attrs.has_value());
  HostTensor out((*want)[0].type);
  const std::vector<TensorRef> in = {{&x.type, x.data.data()}, {&w.type, w.data.data()}};
  const std::vector<TensorRef> o = {{&out.type, out.data.data()}};
  auto plan = cuda::conv_plan(KernelCall{Op::conv_transpose2d, &*attrs, in, o, nullptr, 0});
  ASSERT_FALSE(plan.has_value());
  EXPECT_NE(plan.error().str().find("asymmetric padding"), std::string::npos) << plan.error().str();
}

}  // namespace
}  // namespace lms
