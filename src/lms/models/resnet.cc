// The ResNet builders (18, 34, 50, 101, 152), exactly torchvision's layout so that parameter counts match the
// published ones: a 7x7 stride-2 stem conv + BN + relu + 3x3 stride-2 max-pool (or, with small_stem, a 3x3
// stride-1 conv and no pool), four stages of BasicBlocks (18/34) or Bottlenecks (50+, v1.5: the stride sits
// on the 3x3 conv), a 1x1 conv + BN downsample where the shape changes, global average pooling and a linear
// classifier with bias. Convs have no bias. Value names follow torchvision's module names ("layer1.0.conv1",
// "layer1.0.downsample.0", "fc").
#include <array>

#include <fmt/format.h>

#include "lms/models/layers.h"

namespace lms::models {

namespace {

constexpr int64_t kDefaultImage = 224;
constexpr int64_t kDefaultChannels = 3;
constexpr int64_t kDefaultClasses = 1000;
constexpr int64_t kStemWidth = 64;
constexpr std::array<int64_t, 4> kStageWidths = {64, 128, 256, 512};
constexpr std::array<int64_t, 4> kStageStrides = {1, 2, 2, 2};
constexpr int64_t kBottleneckExpansion = 4;

struct Variant {
  int depth;
  bool bottleneck;
  std::array<int, 4> blocks;  // blocks per stage
};

constexpr std::array<Variant, 5> kVariants = {{
    {18, false, {2, 2, 2, 2}},
    {34, false, {3, 4, 6, 3}},
    {50, true, {3, 4, 6, 3}},
    {101, true, {3, 4, 23, 3}},
    {152, true, {3, 8, 36, 3}},
}};

ValueId conv_bn(Builder& b, ValueId x, int64_t out, int64_t kernel, int64_t stride, int index) {
  ValueId y = conv(b, x, ConvSpec{.out_channels = out, .kernel = kernel, .stride = stride, .pad = kernel / 2},
                   fmt::format("conv{}", index));
  return batch_norm(b, y, fmt::format("bn{}", index));
}

// The shortcut: identity, or a 1x1 conv (with the block's stride) + BN when the shape changes.
ValueId shortcut(Builder& b, ValueId x, int64_t out, int64_t stride) {
  if (stride == 1 && dim(b, x, 1) == out) return x;
  ValueId y = conv(b, x, ConvSpec{.out_channels = out, .kernel = 1, .stride = stride}, "downsample.0");
  return batch_norm(b, y, "downsample.1");
}

// BasicBlock: 3x3 conv (stride) + BN + relu, 3x3 conv + BN, add the shortcut, relu.
ValueId basic_block(Builder& b, ValueId x, int64_t width, int64_t stride) {
  ValueId h = relu(b, conv_bn(b, x, width, 3, stride, 1), "relu1");
  h = conv_bn(b, h, width, 3, 1, 2);
  ValueId sum = b.op(Op::add, {h, shortcut(b, x, width, stride)}, {}, "add");
  return relu(b, sum, "relu");
}

// Bottleneck (v1.5): 1x1 conv + BN + relu, 3x3 conv (stride) + BN + relu, 1x1 conv to 4x width + BN, add the
// shortcut, relu.
ValueId bottleneck(Builder& b, ValueId x, int64_t width, int64_t stride) {
  const int64_t out = width * kBottleneckExpansion;
  ValueId h = relu(b, conv_bn(b, x, width, 1, 1, 1), "relu1");
  h = relu(b, conv_bn(b, h, width, 3, stride, 2), "relu2");
  h = conv_bn(b, h, out, 1, 1, 3);
  ValueId sum = b.op(Op::add, {h, shortcut(b, x, out, stride)}, {}, "add");
  return relu(b, sum, "relu");
}

}  // namespace

Result<void> build_resnet(Graph& g, const ModelOptions& o, int depth) {
  const Variant* v = nullptr;
  for (const Variant& c : kVariants)
    if (c.depth == depth) v = &c;
  if (v == nullptr) return fail("no ResNet of depth {} (known: 18, 34, 50, 101, 152)", depth);
  const auto image = LMS_TRY(image_dims(o, 2, kDefaultImage));
  const int64_t channels = LMS_TRY(positive("channels", o.channels.value_or(kDefaultChannels)));
  const int64_t classes = LMS_TRY(positive("classes", o.classes.value_or(kDefaultClasses)));

  Builder b(g);
  ValueId x = b.input(TensorType{o.dtype, {o.batch, channels, image[0], image[1]}}, "x");
  ValueId labels = b.input(TensorType{DType::i64, {o.batch}}, "labels");
  ValueId h;
  if (o.small_stem) {
    h = relu(b, conv_bn(b, x, kStemWidth, 3, 1, 1), "relu");
  } else {
    h = relu(b, conv_bn(b, x, kStemWidth, 7, 2, 1), "relu");
    h = b.op(Op::max_pool2d, {h},
             attrs({{"kernel", IntList{3, 3}}, {"stride", IntList{2, 2}}, {"pad", IntList{1, 1}}}), "maxpool");
  }
  for (size_t stage = 0; stage < kStageWidths.size(); ++stage) {
    for (int i = 0; i < v->blocks[stage]; ++i) {
      b.set_prefix(fmt::format("layer{}.{}.", stage + 1, i));
      const int64_t stride = i == 0 ? kStageStrides[stage] : 1;
      h = v->bottleneck ? bottleneck(b, h, kStageWidths[stage], stride) : basic_block(b, h, kStageWidths[stage], stride);
    }
  }
  b.set_prefix("");
  h = b.op(Op::global_avg_pool, {h}, {}, "avgpool");
  ValueId logits = linear(b, h, classes, "fc", /*bias=*/true);
  ValueId loss = b.op(Op::cross_entropy, {logits, labels}, {}, "loss");
  return finish(g, b, loss);
}

}  // namespace lms::models
