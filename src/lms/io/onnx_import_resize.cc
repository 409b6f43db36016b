// The importer's Resize handler (see onnx_importer.h): upsampling by whole factors, as U-Nets and segmentation
// heads write it (nn.Upsample, F.interpolate with scale_factor 2), built from ops LMS has, one axis at a time,
// so every backend runs it and autodiff differentiates it:
//   - nearest: each element repeated s times: a `reshape` to [..., d, 1, ...], `broadcast_to` [..., d, s, ...],
//     a `reshape` to [..., d*s, ...];
//   - linear (half_pixel, PyTorch's align_corners=False): output s*i + p is (1 - c) x[i] + c x[i+1] for the phase
//     offset c = (p + 0.5) / s - 0.5 >= 0, and -c x[i-1] + (1 + c) x[i] for c < 0, neighbours clamped at the
//     ends (`slice` and `concat` give x shifted by one), each phase two `scale`s and an `add`; the s phases are
//     interleaved by a `concat` on a new axis and a `reshape`. Axes are done last first, the order PyTorch's
//     bilinear and trilinear kernels nest their weighted sums in.
#include <fmt/format.h>

#include <cmath>

#include "lms/io/onnx_importer.h"

namespace lms::onnx_import_detail {

namespace {

// Shape `s` with a 1 inserted after `axis`.
IntList with_unit_after(const Shape& s, size_t axis) {
  IntList out(s.begin(), s.end());
  out.insert(out.begin() + static_cast<std::ptrdiff_t>(axis) + 1, 1);
  return out;
}

}  // namespace

Result<void> Importer::resize(const OnnxNode& n) {
  ValueId x = LMS_TRY(data(n, 0));
  const Shape in = shape_of(x);
  // Opset 10: (X, scales); 11 and later: (X, roi, scales, sizes), scales or sizes given.
  const size_t scales_at = model_.opset < 11 ? 1 : 2;
  std::vector<int64_t> factor(in.size(), 1);
  const HostTensor* scales = constant(n, scales_at);
  const HostTensor* sizes = model_.opset < 11 ? nullptr : constant(n, 3);
  if (has_input(n, scales_at) && scales == nullptr) return fail("the scales input is not a constant");
  if (has_input(n, 3) && sizes == nullptr) return fail("the sizes input is not a constant");
  if (scales != nullptr && scales->type.num_elements() > 0) {
    if (scales->type.num_elements() != static_cast<int64_t>(in.size()))
      return fail("{} scales for a tensor of rank {}", scales->type.num_elements(), in.size());
    for (size_t k = 0; k < in.size(); ++k) {
      const double s = scales->get(static_cast<int64_t>(k));
      if (!(s >= 1) || s != std::round(s) || s > 1024)
        return fail("scale {} along axis {} is not supported (whole upsampling factors are)", s, k);
      factor[k] = static_cast<int64_t>(s);
    }
  } else if (sizes != nullptr) {
    const std::vector<int64_t> to = ints_of(*sizes);
    if (to.size() != in.size()) return fail("{} sizes for a tensor of rank {}", to.size(), in.size());
    for (size_t k = 0; k < in.size(); ++k) {
      if (to[k] < in[k] || to[k] % in[k] != 0)
        return fail("size {} along axis {} of {} is not a whole multiple of it (upsampling by whole factors is "
                    "supported)", to[k], k, to_string(in));
      factor[k] = to[k] / in[k];
    }
  } else {
    return fail("neither scales nor sizes are given");
  }
  const std::string mode = string_attr(n, "mode", "nearest");
  const std::string coords = string_attr(n, "coordinate_transformation_mode", "half_pixel");
  const std::string rounding = string_attr(n, "nearest_mode", "round_prefer_floor");
  const bool half_pixel = coords == "half_pixel" || coords == "pytorch_half_pixel";
  if (mode == "nearest") {
    // Output j takes input floor(j / s) under these (for whole factors half-pixel offsets stay within +-0.5).
    if (!(coords == "asymmetric" && rounding == "floor") &&
        !(half_pixel && (rounding == "round_prefer_floor" || rounding == "round_prefer_ceil")))
      return fail("nearest with coordinate_transformation_mode '{}' and nearest_mode '{}' is not supported "
                  "(asymmetric with floor, as PyTorch exports nn.Upsample, and half_pixel with rounding are)",
                  coords, rounding);
  } else if (mode == "linear") {
    if (!half_pixel)
      return fail("linear with coordinate_transformation_mode '{}' is not supported (half_pixel, PyTorch's "
                  "align_corners=False, is)", coords);
  } else {
    return fail("mode '{}' is not supported (nearest and linear are)", mode);
  }
  for (size_t k = in.size(); k-- > 0;) {
    const int64_t s = factor[k], d = shape_of(x)[k];
    if (s == 1) continue;
    const auto axis = static_cast<int64_t>(k);
    const std::string name = out_name(n) + fmt::format(".axis{}", k);
    Shape grown = shape_of(x);
    grown[k] = d * s;
    IntList grouped(grown.begin(), grown.end());
    grouped[k] = d;
    grouped.insert(grouped.begin() + axis + 1, s);
    ValueId up;
    if (mode == "nearest") {
      ValueId unit = b_.op(Op::reshape, {x}, attrs({{"shape", with_unit_after(shape_of(x), k)}}), name + ".unit");
      up = b_.op(Op::broadcast_to, {unit}, attrs({{"shape", grouped}}), name + ".repeated");
    } else {
      // x[i-1] and x[i+1] along the axis, clamped at the ends.
      auto part = [&](int64_t start, int64_t end, const char* what) {
        return b_.op(Op::slice, {x}, attrs({{"axis", axis}, {"start", start}, {"end", end}}), name + what);
      };
      ValueId prev = x, next = x;
      if (d > 1) {
        prev = b_.op(Op::concat, {part(0, 1, ".first"), part(0, d - 1, ".head")}, attrs({{"axis", axis}}),
                     name + ".prev");
        next = b_.op(Op::concat, {part(1, d, ".tail"), part(d - 1, d, ".last")}, attrs({{"axis", axis}}),
                     name + ".next");
      }
      std::vector<ValueId> phases;
      for (int64_t p = 0; p < s; ++p) {
        const double c = (static_cast<double>(p) + 0.5) / static_cast<double>(s) - 0.5;
        const std::string ph = name + fmt::format(".phase{}", p);
        const ValueId self = b_.op(Op::scale, {x}, attrs({{"factor", c < 0 ? 1 + c : 1 - c}}), ph + ".self");
        const ValueId other = b_.op(Op::scale, {c < 0 ? prev : next}, attrs({{"factor", c < 0 ? -c : c}}),
                                    ph + ".neighbour");
        // PyTorch's order: the lower index's term first.
        const ValueId sum = b_.op(Op::add, {c < 0 ? other : self, c < 0 ? self : other}, {}, ph);
        if (!b_.ok()) return std::unexpected(*b_.error());
        phases.push_back(b_.op(Op::reshape, {sum}, attrs({{"shape", with_unit_after(shape_of(sum), k)}}),
                               ph + ".unit"));
      }
      up = b_.op(Op::concat, std::move(phases), attrs({{"axis", axis + 1}}), name + ".interleaved");
    }
    x = b_.op(Op::reshape, {up}, attrs({{"shape", IntList(grown.begin(), grown.end())}}), name);
    if (!b_.ok()) return std::unexpected(*b_.error());
  }
  return define(n, x);
}

}  // namespace lms::onnx_import_detail
