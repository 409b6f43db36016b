// The model registry and the option handling every builder shares: the one explicit table from model name to
// builder (with the options each model reads), the checks that reject options a model does not use, image
// size parsing and resolution, and the final checks on a built graph (first builder error, tensor sizes).
#include "lms/models/models.h"

#include <array>
#include <charconv>
#include <string>

#include <fmt/format.h>

#include "lms/models/layers.h"

namespace lms {

namespace models {

namespace {

// The options a model reads, beyond batch and dtype which every model reads.
enum Uses : unsigned {
  kImage = 1u << 0,
  kClasses = 1u << 1,
  kChannels = 1u << 2,
  kSmallStem = 1u << 3,
  kHidden = 1u << 4,
  kDepth = 1u << 5,
  kBaseFilters = 1u << 6,
  kLayers = 1u << 7,
  kHiddenSize = 1u << 8,
  kHeads = 1u << 9,
  kSeq = 1u << 10,
  kVocab = 1u << 11,
  kUntied = 1u << 12,
  kGelu = 1u << 13,
  kDropout = 1u << 14,
};

struct OptionField {
  Uses bit;
  std::string_view name;
  bool (*is_set)(const ModelOptions&);
};

constexpr std::array<OptionField, 15> kOptionFields = {{
    {kImage, "image", [](const ModelOptions& o) { return !o.image.empty(); }},
    {kClasses, "classes", [](const ModelOptions& o) { return o.classes.has_value(); }},
    {kChannels, "channels", [](const ModelOptions& o) { return o.channels.has_value(); }},
    {kSmallStem, "small-stem", [](const ModelOptions& o) { return o.small_stem; }},
    {kHidden, "hidden", [](const ModelOptions& o) { return !o.hidden.empty(); }},
    {kDepth, "depth", [](const ModelOptions& o) { return o.depth.has_value(); }},
    {kBaseFilters, "base-filters", [](const ModelOptions& o) { return o.base_filters.has_value(); }},
    {kLayers, "layers", [](const ModelOptions& o) { return o.layers.has_value(); }},
    {kHiddenSize, "hidden-size", [](const ModelOptions& o) { return o.hidden_size.has_value(); }},
    {kHeads, "heads", [](const ModelOptions& o) { return o.heads.has_value(); }},
    {kSeq, "seq", [](const ModelOptions& o) { return o.seq.has_value(); }},
    {kVocab, "vocab", [](const ModelOptions& o) { return o.vocab.has_value(); }},
    {kUntied, "untied", [](const ModelOptions& o) { return o.untied; }},
    {kGelu, "gelu", [](const ModelOptions& o) { return !o.gelu.empty(); }},
    {kDropout, "dropout", [](const ModelOptions& o) { return o.dropout.has_value(); }},
}};

using BuildFn = Result<void> (*)(Graph&, const ModelOptions&);

struct Entry {
  ModelInfo info;
  unsigned uses;
  BuildFn build;
};

constexpr unsigned kResnetUses = kImage | kClasses | kChannels | kSmallStem;

const std::array<Entry, 8> kModels = {{
    {{"mlp", "multi-layer perceptron on flattened images (default 1x28x28, hidden 512,256, 10 classes)"},
     kImage | kClasses | kChannels | kHidden | kDropout, build_mlp},
    {{"resnet18", "ResNet-18 (torchvision layout; BasicBlock; 11.7M params at 1000 classes)"}, kResnetUses,
     [](Graph& g, const ModelOptions& o) { return build_resnet(g, o, 18); }},
    {{"resnet34", "ResNet-34 (torchvision layout; BasicBlock; 21.8M params)"}, kResnetUses,
     [](Graph& g, const ModelOptions& o) { return build_resnet(g, o, 34); }},
    {{"resnet50", "ResNet-50 v1.5 (torchvision layout; Bottleneck; 25.6M params, 4.1 GMACs at 224)"},
     kResnetUses, [](Graph& g, const ModelOptions& o) { return build_resnet(g, o, 50); }},
    {{"resnet101", "ResNet-101 v1.5 (torchvision layout; Bottleneck; 44.5M params)"}, kResnetUses,
     [](Graph& g, const ModelOptions& o) { return build_resnet(g, o, 101); }},
    {{"resnet152", "ResNet-152 v1.5 (torchvision layout; Bottleneck; 60.2M params)"}, kResnetUses,
     [](Graph& g, const ModelOptions& o) { return build_resnet(g, o, 152); }},
    {{"unet3d", "3D U-Net for volumetric segmentation (default 4x64^3 in, depth 4, 32 base filters, 3 classes)"},
     kImage | kClasses | kChannels | kDepth | kBaseFilters, build_unet3d},
    {{"gpt", "GPT-2 style decoder, pre-LN (default GPT-2 small: 12 layers, 768 wide, 124.4M params)"},
     kLayers | kHiddenSize | kHeads | kSeq | kVocab | kUntied | kGelu | kDropout, build_gpt},
}};

const std::vector<ModelInfo>& infos() {
  static const std::vector<ModelInfo> r = [] {
    std::vector<ModelInfo> v;
    for (const Entry& e : kModels) v.push_back(e.info);
    return v;
  }();
  return r;
}

Result<void> check_options_used(const Entry& e, const ModelOptions& o) {
  for (const OptionField& f : kOptionFields) {
    if ((e.uses & f.bit) != 0 || !f.is_set(o)) continue;
    std::vector<std::string_view> used = {"batch"};
    for (const OptionField& u : kOptionFields)
      if ((e.uses & u.bit) != 0) used.push_back(u.name);
    used.push_back("dtype");
    return fail_at(std::string(f.name), "option does not apply to model '{}' (its options: {})", e.info.name,
                   fmt::join(used, ", "));
  }
  return {};
}

}  // namespace

Result<int64_t> positive(std::string_view option, int64_t value) {
  if (value < 1) return fail_at(std::string(option), "must be at least 1, got {}", value);
  return value;
}

Result<double> dropout_probability(const ModelOptions& o) {
  const double p = o.dropout.value_or(0);
  if (!(p >= 0 && p < 1)) return fail_at("dropout", "must be in [0, 1), got {}", p);
  return p;
}

Result<std::vector<int64_t>> image_dims(const ModelOptions& o, int rank, int64_t fallback) {
  if (o.image.empty()) return std::vector<int64_t>(static_cast<size_t>(rank), fallback);
  if (o.image.size() != 1 && o.image.size() != static_cast<size_t>(rank)) {
    std::string spelled = rank == 2 ? "S or HxW" : rank == 3 ? "S or DxHxW" : "S";
    return fail_at("image", "this model takes {} spatial dims ({}), got {} ({})", rank, spelled, o.image.size(),
                   fmt::join(o.image, "x"));
  }
  for (int64_t d : o.image)
    if (d < 1) return fail_at("image", "every side must be at least 1, got {}", fmt::join(o.image, "x"));
  if (o.image.size() == 1) return std::vector<int64_t>(static_cast<size_t>(rank), o.image[0]);
  return o.image;
}

Result<void> finish(Graph& g, Builder& b, ValueId loss) {
  if (!b.ok()) return std::unexpected(*b.error());
  // Every tensor must stay below the element limit (Note [Element limit]); a checked product so that an
  // absurd option is an error here rather than a wrapped count later.
  for (size_t i = 0; i < g.num_values(); ++i) {
    const Value& v = g.value(ValueId{static_cast<uint32_t>(i)});
    int64_t n = 1;
    bool overflow = false;
    for (int64_t d : v.type.shape) overflow = overflow || __builtin_mul_overflow(n, d, &n);
    if (overflow || n > kMaxElements)
      return fail_at("%" + v.name, "tensor {} has more than 2^48 elements (batch or sizes too large)",
                     to_string(v.type));
  }
  g.set_outputs({loss});
  return {};
}

}  // namespace models

std::span<const ModelInfo> model_list() { return models::infos(); }

Result<Graph> build_model(std::string_view name, const ModelOptions& opts) {
  const models::Entry* entry = nullptr;
  for (const models::Entry& e : models::kModels)
    if (e.info.name == name) entry = &e;
  if (entry == nullptr) {
    std::vector<std::string_view> known;
    for (const ModelInfo& m : model_list()) known.push_back(m.name);
    return fail("unknown model '{}' (known: {})", name, fmt::join(known, ", "));
  }
  const std::string where(entry->info.name);
  if (opts.batch < 1) return fail_at(where + ": batch", "must be at least 1, got {}", opts.batch);
  if (!is_float(opts.dtype))
    return fail_at(where + ": dtype", "must be a floating-point type, got {}", dtype_name(opts.dtype));
  if (auto r = models::check_options_used(*entry, opts); !r) return wrap(where, r.error());
  Graph g(where);
  if (auto r = entry->build(g, opts); !r) return wrap(where, r.error());
  return g;
}

Result<std::vector<int64_t>> parse_image_size(std::string_view text) {
  constexpr size_t kMaxDims = 3;
  std::vector<int64_t> dims;
  size_t start = 0;
  for (;;) {
    size_t end = text.find('x', start);
    std::string_view part = text.substr(start, end == std::string_view::npos ? end : end - start);
    if (part.empty())
      return fail_at("image", "'{}' is not a size (expected S, HxW or DxHxW, e.g. 224 or 256x320)", text);
    if (part.front() == '-') return fail_at("image", "'{}': sides must be positive, got {}", text, part);
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (ec == std::errc::result_out_of_range) return fail_at("image", "'{}': {} is too large", text, part);
    if (ec != std::errc() || ptr != part.data() + part.size())
      return fail_at("image", "'{}' is not a size (expected S, HxW or DxHxW, e.g. 224 or 256x320)", text);
    if (v == 0) return fail_at("image", "'{}': sides must be positive, got 0", text);
    dims.push_back(v);
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  if (dims.size() > kMaxDims) return fail_at("image", "'{}' has {} dims; at most {} are allowed", text, dims.size(), kMaxDims);
  return dims;
}

}  // namespace lms
