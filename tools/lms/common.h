// Shared pieces of the `lms` subcommands: model options on the command line, reading a graph from a file,
// stdin or a model builder, writing output, sizes and error reporting. Subcommands print errors as one line
// on stderr ("lms: error: ...") and return a non-zero exit code; they never throw past main.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "lms/io/onnx.h"
#include "lms/ir/graph.h"
#include "lms/models/models.h"
#include "lms/runtime/tensor.h"
#include "lms/support/error.h"
#include "lms/support/size.h"  // format_size, parse_size

namespace lms::cli {

// Exit codes.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;   // the command ran and failed (bad input, does not fit, ...)
inline constexpr int kExitUsage = 2;   // the command line itself is wrong

// The --batch of `lms train` and `lms plan` when none is given, so that a plan is of what train would run.
inline constexpr int64_t kDefaultTrainBatch = 32;

// Model options as typed on the command line; `resolve` turns them into ModelOptions.
struct ModelArgs {
  std::string name;       // --model NAME (or the positional NAME of `lms model`)
  int64_t batch = 1;      // --batch
  bool batch_given = false;  // --batch was on the command line (an ONNX model otherwise keeps its own batch)
  std::string image;      // --image S | HxW | DxHxW
  int64_t classes = 0;    // --classes (0: model default)
  int64_t channels = 0;   // --channels (0: model default)
  bool small_stem = false;
  std::string hidden;     // --hidden 512,256 (mlp)
  int64_t depth = 0, base_filters = 0;                              // unet3d (0: default)
  int64_t layers = 0, hidden_size = 0, heads = 0, seq = 0, vocab = 0;  // gpt (0: default)
  bool untied = false;
  std::string gelu;
  std::optional<double> dropout;  // --dropout P (gpt, mlp)
  std::string dtype = "f32";
  std::vector<std::string> frozen;  // --frozen NAME,... (ONNX models: initializers that are not trained)
  std::vector<std::string> input_values;  // --input-value NAME=V,... (ONNX models: inputs held at a value)
  std::vector<std::string> dims;          // --dim NAME=N,... (ONNX models: sizes of symbolic dimensions)
};

// Adds --batch, --image, ... to `app`. With `with_model_flag`, also `--model NAME`.
void add_model_options(CLI::App* app, ModelArgs& args, bool with_model_flag);
// Adds the options only ONNX models take: --frozen, --input-value, --dim (add_model_options includes them).
void add_onnx_options(CLI::App* app, ModelArgs& args);
Result<ModelOptions> resolve(const ModelArgs& args);

// A graph from FILE ("-" = stdin, parsed and verified; a FILE ending in .onnx is imported, io/onnx_import.h) or,
// when FILE is empty, from --model. An imported model's weights go to `weights` when given (else they are not
// copied). `onnx`: FILE's contents already read (read_onnx), for a caller importing it at several sizes.
Result<Graph> load_graph(const std::string& file, const ModelArgs& args,
                         std::map<std::string, HostTensor>* weights = nullptr, const OnnxModel* onnx = nullptr);

// Whether FILE names an ONNX model (ends in ".onnx"): imported as a forward graph whose batch --batch can set.
bool is_onnx_file(const std::string& file);

Result<std::string> read_text(const std::string& path);                  // "-" = stdin
Result<void> write_text(const std::string& path, const std::string& text);  // "" or "-" = stdout

// "25,557,032".
std::string format_count(int64_t n);

// Prints "lms: error: <error>" on stderr; returns kExitError.
int report(const Error& e);

}  // namespace lms::cli
