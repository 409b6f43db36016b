// The MLP builder: images x[N, C, H, W] flattened to [N, C*H*W], then one linear layer (matmul + bias) and a relu per
// hidden width (each followed by dropout with --dropout p > 0), a final linear layer to the classes, and the mean
// cross-entropy against labels i64[N]. Defaults fit Fashion-MNIST: 1x28x28 inputs, hidden [512, 256], 10 classes.
#include <fmt/format.h>

#include "lms/models/layers.h"

namespace lms::models {

namespace {
constexpr int64_t kDefaultImage = 28;
constexpr int64_t kDefaultChannels = 1;
constexpr int64_t kDefaultClasses = 10;
const std::vector<int64_t> kDefaultHidden = {512, 256};
}  // namespace

Result<void> build_mlp(Graph& g, const ModelOptions& o) {
  const auto image = LMS_TRY(image_dims(o, 2, kDefaultImage));
  const int64_t channels = LMS_TRY(positive("channels", o.channels.value_or(kDefaultChannels)));
  const int64_t classes = LMS_TRY(positive("classes", o.classes.value_or(kDefaultClasses)));
  const std::vector<int64_t>& hidden = o.hidden.empty() ? kDefaultHidden : o.hidden;
  for (int64_t h : hidden) LMS_TRY(positive("hidden", h));
  const double p = LMS_TRY(dropout_probability(o));
  int64_t features = 0;
  if (__builtin_mul_overflow(channels, image[0], &features) || __builtin_mul_overflow(features, image[1], &features))
    return fail_at("image", "{}x{}x{} features overflow", channels, image[0], image[1]);

  Builder b(g);
  ValueId x = b.input(TensorType{o.dtype, {o.batch, channels, image[0], image[1]}}, "x");
  ValueId labels = b.input(TensorType{DType::i64, {o.batch}}, "labels");
  ValueId h = b.op(Op::reshape, {x}, attrs({{"shape", IntList{o.batch, features}}}), "flatten");
  for (size_t i = 0; i < hidden.size(); ++i) {
    std::string name = fmt::format("fc{}", i + 1);
    h = relu(b, linear(b, h, hidden[i], name, /*bias=*/true), name + ".relu");
    h = b.dropout(h, p, name + ".drop");
  }
  ValueId logits = linear(b, h, classes, fmt::format("fc{}", hidden.size() + 1), /*bias=*/true);
  ValueId loss = b.op(Op::cross_entropy, {logits, labels}, {}, "loss");
  return finish(g, b, loss);
}

}  // namespace lms::models
