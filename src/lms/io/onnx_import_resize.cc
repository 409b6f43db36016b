// The importer's Resize handler (see onnx_importer.h): upsampling as U-Nets and segmentation heads write it
// (nn.Upsample, F.interpolate), built from ops LMS has, one axis at a time, so every backend runs it and autodiff
// differentiates it:
//   - nearest by a whole factor s: each element repeated s times: a `reshape` to [..., d, 1, ...], `broadcast_to`
//     [..., d, s, ...], a `reshape` to [..., d*s, ...];
//   - linear (half_pixel, PyTorch's align_corners=False) by a whole factor: output s*i + p is (1 - c) x[i] +
//     c x[i+1] for the phase offset c = (p + 0.5) / s - 0.5 >= 0, and -c x[i-1] + (1 + c) x[i] for c < 0,
//     neighbours clamped at the ends (`slice` and `concat` give x shifted by one), each phase two `scale`s and an
//     `add`; the s phases are interleaved by a `concat` on a new axis and a `reshape`;
//   - any other linear resize (align_corners, asymmetric, sizes that are not whole multiples, downsampling): a
//     `matmul` by the [d, D] interpolation matrix (two nonzero weights per output, PyTorch's), held as state, with
//     the axis moved last by `transpose`s.
// Axes are done last first, the order PyTorch's bilinear and trilinear kernels nest their weighted sums in.
// Tile, a repetition too, is here as well: per axis a `reshape`, `broadcast_to` and `reshape` (folded on
// constants).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "lms/io/onnx_fold.h"
#include "lms/io/onnx_importer.h"

namespace lms::onnx_import_detail {

namespace {

// Shape `s` with a 1 inserted after `axis`.
IntList with_unit_after(const Shape& s, size_t axis) {
  IntList out(s.begin(), s.end());
  out.insert(out.begin() + static_cast<std::ptrdiff_t>(axis) + 1, 1);
  return out;
}

// The [d, D] matrix whose column j holds the weights of output j of a linear resize of d elements to D:
// source position src(j) clamped below at 0 (PyTorch's area_pixel_compute_source_index), weights 1 - l and l on
// floor(src) and the next element, clamped at the end.
HostTensor interpolation_matrix(int64_t d, int64_t D, double scale, const std::string& coords, DType dtype) {
  HostTensor m(TensorType{dtype, {d, D}});
  for (int64_t j = 0; j < D; ++j) {
    double src = coords == "align_corners" ? (D > 1 ? static_cast<double>(j) * static_cast<double>(d - 1) /
                                                          static_cast<double>(D - 1)
                                                    : 0.0)
                 : coords == "asymmetric"  ? static_cast<double>(j) / scale
                 : coords == "pytorch_half_pixel" && D == 1 ? 0.0
                                                             : (static_cast<double>(j) + 0.5) / scale - 0.5;
    src = std::clamp(src, 0.0, static_cast<double>(d - 1));
    const auto i0 = static_cast<int64_t>(std::floor(src));
    const int64_t i1 = std::min(i0 + 1, d - 1);
    const double l = src - static_cast<double>(i0);
    m.set(i0 * D + j, m.get(i0 * D + j) + (1 - l));
    m.set(i1 * D + j, m.get(i1 * D + j) + l);
  }
  return m;
}

}  // namespace

Result<void> Importer::resize(const OnnxNode& n) {
  ValueId x = LMS_TRY(data(n, 0));
  const Shape in = shape_of(x);
  // Opset 10: (X, scales); 11 and later: (X, roi, scales, sizes), scales or sizes given.
  const size_t scales_at = model_.opset < 11 ? 1 : 2;
  std::vector<int64_t> to(in.size());  // the output size of each axis
  std::vector<double> scale(in.size(), 1.0);
  const HostTensor* scales = constant(n, scales_at);
  const HostTensor* sizes = model_.opset < 11 ? nullptr : constant(n, 3);
  if (has_input(n, scales_at) && scales == nullptr) return fail("the scales input is not a constant");
  if (has_input(n, 3) && sizes == nullptr) return fail("the sizes input is not a constant");
  if (scales != nullptr && scales->type.num_elements() > 0) {
    if (scales->type.num_elements() != static_cast<int64_t>(in.size()))
      return fail("{} scales for a tensor of rank {}", scales->type.num_elements(), in.size());
    for (size_t k = 0; k < in.size(); ++k) {
      scale[k] = scales->get(static_cast<int64_t>(k));
      to[k] = static_cast<int64_t>(std::floor(static_cast<double>(in[k]) * scale[k]));  // ONNX's output size
      if (!(scale[k] > 0) || to[k] < 1 || to[k] > (int64_t{1} << 24))
        return fail("scale {} along axis {} of {} is out of range", scale[k], k, to_string(in));
    }
  } else if (sizes != nullptr) {
    to = ints_of(*sizes);
    if (to.size() != in.size()) return fail("{} sizes for a tensor of rank {}", to.size(), in.size());
    for (size_t k = 0; k < in.size(); ++k) {
      if (to[k] < 1 || to[k] > (int64_t{1} << 24))
        return fail("size {} along axis {} is out of range", to[k], k);
      scale[k] = static_cast<double>(to[k]) / static_cast<double>(in[k]);
    }
  } else {
    return fail("neither scales nor sizes are given");
  }
  const std::string mode = string_attr(n, "mode", "nearest");
  const std::string coords = string_attr(n, "coordinate_transformation_mode", "half_pixel");
  const std::string rounding = string_attr(n, "nearest_mode", "round_prefer_floor");
  const bool half_pixel = coords == "half_pixel" || coords == "pytorch_half_pixel";
  auto whole = [&](size_t k) { return to[k] % in[k] == 0 && scale[k] == static_cast<double>(to[k] / in[k]); };
  if (mode == "nearest") {
    // Output j takes input floor(j / s) under these (for whole factors half-pixel offsets stay within +-0.5).
    if (!(coords == "asymmetric" && rounding == "floor") &&
        !(half_pixel && (rounding == "round_prefer_floor" || rounding == "round_prefer_ceil")))
      return fail("nearest with coordinate_transformation_mode '{}' and nearest_mode '{}' is not supported "
                  "(asymmetric with floor, as PyTorch exports nn.Upsample, and half_pixel with rounding are)",
                  coords, rounding);
    for (size_t k = 0; k < in.size(); ++k)
      if (!whole(k))
        return fail("nearest resizing of axis {} from {} to {} is not supported (by whole factors it is)", k, in[k],
                    to[k]);
  } else if (mode == "linear") {
    if (!half_pixel && coords != "align_corners" && coords != "asymmetric")
      return fail("linear with coordinate_transformation_mode '{}' is not supported (half_pixel, "
                  "pytorch_half_pixel, align_corners and asymmetric are)", coords);
  } else {
    return fail("mode '{}' is not supported (nearest and linear are)", mode);
  }
  for (size_t k = in.size(); k-- > 0;) {
    const int64_t d = shape_of(x)[k];
    if (to[k] == d && (scale[k] == 1 || coords == "align_corners")) continue;  // the identity
    const auto axis = static_cast<int64_t>(k);
    const std::string name = out_name(n) + fmt::format(".axis{}", k);
    if (mode == "linear" && !(half_pixel && whole(k))) {  // the interpolation matrix
      const auto r = static_cast<int64_t>(shape_of(x).size());
      IntList perm(static_cast<size_t>(r));
      std::iota(perm.begin(), perm.end(), 0);
      std::swap(perm[k], perm.back());  // its own inverse
      const bool last = axis == r - 1;
      ValueId moved = last ? x : b_.op(Op::transpose, {x}, attrs({{"perm", perm}}), name + ".moved");
      const ValueId weights =
          constant_state(name + ".weights", interpolation_matrix(d, to[k], scale[k], coords, b_.type(x).dtype));
      ValueId y = b_.op(Op::matmul, {moved, weights}, {}, last ? name : name + ".resized");
      x = last ? y : b_.op(Op::transpose, {y}, attrs({{"perm", perm}}), name);
      if (!b_.ok()) return std::unexpected(*b_.error());
      continue;
    }
    const int64_t s = to[k] / d;  // a whole factor from here on
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

Result<void> Importer::tile(const OnnxNode& n) {
  const HostTensor* repeats_input = constant(n, 1);
  if (repeats_input == nullptr) return fail("the repeats input is not a constant");
  const std::vector<int64_t> repeats = ints_of(*repeats_input);
  if (const HostTensor* c = folded(n, 0)) return define_const(n, LMS_TRY(fold_tile(*c, repeats)));
  ValueId x = LMS_TRY(data(n, 0));
  if (repeats.size() != shape_of(x).size())
    return fail("{} repeats for a tensor of rank {}", repeats.size(), shape_of(x).size());
  // Per axis: [..., d, ...] viewed as [..., 1, d, ...], broadcast to [..., r, d, ...], viewed as [..., r*d, ...].
  for (size_t k = 0; k < repeats.size(); ++k) {
    if (repeats[k] < 1) return fail("repeat {} along axis {} is not supported (1 or more are)", repeats[k], k);
    if (repeats[k] == 1) continue;
    const std::string name = out_name(n) + fmt::format(".axis{}", k);
    const Shape s = shape_of(x);
    IntList unit(s.begin(), s.end()), repeated(s.begin(), s.end()), merged(s.begin(), s.end());
    unit.insert(unit.begin() + static_cast<std::ptrdiff_t>(k), 1);
    repeated.insert(repeated.begin() + static_cast<std::ptrdiff_t>(k), repeats[k]);
    merged[k] *= repeats[k];
    x = b_.op(Op::reshape, {x}, attrs({{"shape", unit}}), name + ".unit");
    x = b_.op(Op::broadcast_to, {x}, attrs({{"shape", repeated}}), name + ".repeated");
    x = b_.op(Op::reshape, {x}, attrs({{"shape", merged}}), name);
    if (!b_.ok()) return std::unexpected(*b_.error());
  }
  return define(n, x);
}

}  // namespace lms::onnx_import_detail
