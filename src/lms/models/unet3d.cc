// The 3D U-Net builder (Cicek et al. 2016, in the common batch-norm variant): `depth` resolution levels with
// `base_filters` doubling per level. Each level runs two (3x3x3 conv pad 1 + BN + relu); the encoder goes
// down with 2x max-pooling, the decoder up with a 2x transposed conv (kernel 2, stride 2, with bias), then
// concatenates the encoder's features of that level (skip first, on channels) before its two convs. A final
// 1x1x1 conv with bias gives per-voxel class scores, scored by cross-entropy against labels i64[N, D, H, W].
// Sides must be divisible by 2^(depth-1) so that every up-sampling meets its skip connection exactly.
#include <fmt/format.h>

#include "lms/models/layers.h"

namespace lms::models {

namespace {

constexpr int64_t kDefaultImage = 64;
constexpr int64_t kDefaultChannels = 4;
constexpr int64_t kDefaultClasses = 3;
constexpr int64_t kDefaultDepth = 4;
constexpr int64_t kDefaultBaseFilters = 32;
// Depth 48 already needs sides of 2^47; refusing deeper nets keeps the shifts below defined.
constexpr int64_t kMaxDepth = 48;

// Two (3x3x3 conv + BN + relu), under the current prefix.
ValueId double_conv(Builder& b, ValueId x, int64_t filters) {
  for (int i = 1; i <= 2; ++i) {
    x = conv(b, x, ConvSpec{.out_channels = filters, .kernel = 3, .pad = 1}, fmt::format("conv{}", i));
    x = relu(b, batch_norm(b, x, fmt::format("bn{}", i)), fmt::format("relu{}", i));
  }
  return x;
}

}  // namespace

Result<void> build_unet3d(Graph& g, const ModelOptions& o) {
  const auto image = LMS_TRY(image_dims(o, 3, kDefaultImage));
  const int64_t channels = LMS_TRY(positive("channels", o.channels.value_or(kDefaultChannels)));
  const int64_t classes = LMS_TRY(positive("classes", o.classes.value_or(kDefaultClasses)));
  const int64_t depth = LMS_TRY(positive("depth", o.depth.value_or(kDefaultDepth)));
  const int64_t base = LMS_TRY(positive("base-filters", o.base_filters.value_or(kDefaultBaseFilters)));
  if (depth > kMaxDepth) return fail_at("depth", "must be at most {}, got {}", kMaxDepth, depth);
  int64_t top_filters = 0;
  if (__builtin_mul_overflow(base, int64_t{1} << (depth - 1), &top_filters))
    return fail_at("base-filters", "{} doubled {} times overflows", base, depth - 1);
  const int64_t multiple = int64_t{1} << (depth - 1);
  for (int64_t side : image)
    if (side % multiple != 0)
      return fail_at("image", "sides must be divisible by 2^(depth-1) = {} for depth {}, got {}", multiple, depth,
                     fmt::join(image, "x"));

  Builder b(g);
  ValueId x = b.input(TensorType{o.dtype, {o.batch, channels, image[0], image[1], image[2]}}, "x");
  ValueId labels = b.input(TensorType{DType::i64, {o.batch, image[0], image[1], image[2]}}, "labels");
  std::vector<ValueId> skips;
  ValueId h = x;
  for (int64_t level = 0; level < depth; ++level) {
    if (level > 0) {
      b.set_prefix("");
      h = b.op(Op::max_pool3d, {h}, attrs({{"kernel", IntList{2, 2, 2}}}), fmt::format("pool{}", level - 1));
    }
    b.set_prefix(fmt::format("enc{}.", level));
    h = double_conv(b, h, base << level);
    skips.push_back(h);
  }
  for (int64_t level = depth - 2; level >= 0; --level) {
    b.set_prefix(fmt::format("dec{}.", level));
    const int64_t filters = base << level;
    ValueId up = conv(b, h, ConvSpec{.out_channels = filters, .kernel = 2, .stride = 2, .bias = true, .transposed = true},
                      "up");
    h = b.op(Op::concat, {skips[static_cast<size_t>(level)], up}, attrs({{"axis", int64_t{1}}}), "concat");
    h = double_conv(b, h, filters);
  }
  b.set_prefix("");
  ValueId logits = conv(b, h, ConvSpec{.out_channels = classes, .kernel = 1, .bias = true}, "out");
  ValueId loss = b.op(Op::cross_entropy, {logits, labels}, {}, "loss");
  return finish(g, b, loss);
}

}  // namespace lms::models
