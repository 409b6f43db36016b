// Model builders: the forward graphs of the networks LMS trains (an MLP, ResNet-18..152, a 3D U-Net and a
// GPT-style decoder). `build_model` looks a name up in one explicit registry and returns a forward Graph
// named after the model, whose single output is the scalar f32 mean loss. Inputs are `%x` (images or token
// ids) and `%labels`; parameters carry an init string (docs/models.md lists the vocabulary). Every bad option
// is an error value naming the option or the layer, never a crash. docs/models.md is the user reference.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "lms/ir/graph.h"
#include "lms/ir/types.h"
#include "lms/support/error.h"

namespace lms {

// Options shared by all builders. A field a model does not use must be left unset (nullopt, empty, false):
// setting it is an error naming the option, so a misspelt command line never silently builds the default.
// Errors name options as the command line spells them without the dashes ("small-stem", "hidden-size").
struct ModelOptions {
  int64_t batch = 1;                     // samples per step (N, or B for gpt); >= 1
  std::vector<int64_t> image;            // spatial input size; one value = square (2-D) or cube (3-D); empty = default
  std::optional<int64_t> classes;        // output classes (mlp 10, resnet 1000, unet3d 3)
  std::optional<int64_t> channels;       // input channels (mlp 1, resnet 3, unet3d 4)
  bool small_stem = false;               // resnet: 3x3 stride-1 first conv and no max-pool (28x28, 32x32 inputs)
  std::vector<int64_t> hidden;           // mlp: hidden layer widths; empty = default [512, 256]
  std::optional<int64_t> depth;          // unet3d: resolution levels (depth-1 down-samplings); default 4
  std::optional<int64_t> base_filters;   // unet3d: filters at the first level, doubling per level; default 32
  std::optional<int64_t> layers;         // gpt: transformer blocks; default 12
  std::optional<int64_t> hidden_size;    // gpt: model width; default 768
  std::optional<int64_t> heads;          // gpt: attention heads, must divide hidden_size; default 12
  std::optional<int64_t> seq;            // gpt: sequence length (context); default 1024
  std::optional<int64_t> vocab;          // gpt: vocabulary size; default 50257
  bool untied = false;                   // gpt: separate lm_head weight instead of reusing wte
  std::string gelu;                      // gpt: "erf" (exact, nn.GELU(); the default) or "tanh" (GPT-2's gelu_new)
  std::optional<double> dropout;         // gpt, mlp: drop probability in [0, 1) (gpt: nanoGPT's places); default 0
  DType dtype = DType::f32;              // element type of activations and parameters (floating point)
};

struct ModelInfo {
  std::string_view name;     // the registry key, also the graph's name
  std::string_view summary;  // one line for `lms model --help`
};

// Every known model, in a stable order.
std::span<const ModelInfo> model_list();

// Builds the forward graph of model `name`. Errors: unknown name (listing the known ones), options out of
// range or not used by this model, wrong number of image dimensions, and any shape-rule failure (naming the
// layer, e.g. "unet3d: %enc2.conv1: ...").
Result<Graph> build_model(std::string_view name, const ModelOptions& opts);

// Parses an image size: "224", "256x320", "64x64x64" (1 to 3 positive integers separated by 'x'). Errors
// for zero, negative, overflowing or malformed values.
Result<std::vector<int64_t>> parse_image_size(std::string_view text);

}  // namespace lms
