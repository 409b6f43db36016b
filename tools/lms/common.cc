// Shared command-line helpers (see common.h).
#include "common.h"

#include <cctype>
#include <charconv>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include <fmt/format.h>

#include "lms/io/onnx_import.h"
#include "lms/ir/parser.h"
#include "lms/ir/verifier.h"

namespace lms::cli {

void add_model_options(CLI::App* app, ModelArgs& a, bool with_model_flag) {
  if (with_model_flag) app->add_option("--model", a.name, "Build this model instead of reading a file");
  app->add_option("--batch", a.batch, "Mini-batch size")->capture_default_str()->each([&a](const std::string&) {
    a.batch_given = true;
  });
  app->add_option("--image", a.image, "Input size: S (square/cube), HxW or DxHxW (default: the model's)");
  app->add_option("--classes", a.classes, "Number of classes (default: the model's)");
  app->add_option("--channels", a.channels, "Input channels (default: the model's)");
  app->add_flag("--small-stem", a.small_stem, "resnet: 3x3 stride-1 stem without max-pool, for 28x28/32x32 inputs");
  app->add_option("--hidden", a.hidden, "mlp: hidden layer widths, comma-separated (default 512,256)");
  app->add_option("--depth", a.depth, "unet3d: resolution levels (default 4)");
  app->add_option("--base-filters", a.base_filters, "unet3d: filters at the first level (default 32)");
  app->add_option("--layers", a.layers, "gpt: transformer layers (default 12)");
  app->add_option("--hidden-size", a.hidden_size, "gpt: model width (default 768)");
  app->add_option("--heads", a.heads, "gpt: attention heads (default 12)");
  app->add_option("--seq", a.seq, "gpt: sequence length (default 1024)");
  app->add_option("--vocab", a.vocab, "gpt: vocabulary size (default 50257)");
  app->add_flag("--untied", a.untied, "gpt: separate output embedding instead of tying it to the input one");
  app->add_option("--gelu", a.gelu, "gpt: MLP activation, erf (exact, default) or tanh (GPT-2's approximation)");
  app->add_option("--dropout", a.dropout, "gpt, mlp: dropout probability in [0, 1) (default 0: no dropout)");
  app->add_option("--dtype", a.dtype, "Element type of activations and parameters")->capture_default_str();
  add_onnx_options(app, a);
}

void add_onnx_options(CLI::App* app, ModelArgs& a) {
  app->add_option("--frozen", a.frozen,
                  "ONNX models: float initializers that are buffers, not trained (positional tables, normalization "
                  "constants), comma-separated; '*' matches any characters")
      ->delimiter(',');
  app->add_option("--dim", a.dims,
                  "ONNX models exported with symbolic sizes past the batch: the size of each, NAME=N by the name in "
                  "the file, comma-separated (a dynamic sequence length: seq=512)")
      ->delimiter(',');
  app->add_option("--input-value", a.input_values,
                  "ONNX models with several inputs: hold these at one value, NAME=V, comma-separated (an attention "
                  "mask at 1: no padding; token type ids at 0), so that one data input remains")
      ->delimiter(',');
}

Result<ModelOptions> resolve(const ModelArgs& a) {
  ModelOptions o;
  o.batch = a.batch;
  if (!a.image.empty()) o.image = LMS_TRY(parse_image_size(a.image));
  auto positive = [](int64_t v, std::string_view flag) -> Result<std::optional<int64_t>> {
    if (v < 0) return fail("--{} must be positive, got {}", flag, v);
    if (v == 0) return std::optional<int64_t>{};
    return std::optional<int64_t>{v};
  };
  o.classes = LMS_TRY(positive(a.classes, "classes"));
  o.channels = LMS_TRY(positive(a.channels, "channels"));
  o.depth = LMS_TRY(positive(a.depth, "depth"));
  o.base_filters = LMS_TRY(positive(a.base_filters, "base-filters"));
  o.layers = LMS_TRY(positive(a.layers, "layers"));
  o.hidden_size = LMS_TRY(positive(a.hidden_size, "hidden-size"));
  o.heads = LMS_TRY(positive(a.heads, "heads"));
  o.seq = LMS_TRY(positive(a.seq, "seq"));
  o.vocab = LMS_TRY(positive(a.vocab, "vocab"));
  o.small_stem = a.small_stem;
  o.untied = a.untied;
  o.gelu = a.gelu;
  o.dropout = a.dropout;
  if (!a.hidden.empty()) {
    std::stringstream ss(a.hidden);
    std::string part;
    while (std::getline(ss, part, ',')) {
      char* end = nullptr;
      long long v = std::strtoll(part.c_str(), &end, 10);
      if (part.empty() || *end != '\0' || v <= 0) return fail("--hidden expects positive integers like 512,256, got '{}'", a.hidden);
      o.hidden.push_back(v);
    }
  }
  auto dt = parse_dtype(a.dtype);
  if (!dt) return fail("--dtype must be one of f32, f16, bf16, f64 (f64: reference backend), got '{}'", a.dtype);
  o.dtype = *dt;
  return o;
}

Result<std::string> read_text(const std::string& path) {
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return fail("cannot read '{}': it is a directory, not a file", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail("cannot read '{}': {}", path, std::strerror(errno));
  std::string text((std::istreambuf_iterator<char>(in)), {});
  if (in.bad()) return fail("cannot read '{}': read error", path);
  return text;
}

Result<void> write_text(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return {};
  }
  std::ofstream out(path, std::ios::binary);
  if (!out) return fail("cannot write '{}': {}", path, std::strerror(errno));
  out << text;
  if (!out) return fail("cannot write '{}': write error", path);
  return {};
}

namespace {

// `flag`'s NAME=VALUE items as a map; `example` shows one in messages.
template <class T>
Result<std::map<std::string, T>> assignments(std::string_view flag, const std::vector<std::string>& items,
                                             std::string_view example) {
  std::map<std::string, T> out;
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    T value{};
    const char* end = item.data() + item.size();
    const auto [next, ec] = eq == std::string::npos ? std::from_chars_result{nullptr, std::errc::invalid_argument}
                                                    : std::from_chars(item.data() + eq + 1, end, value);
    if (eq == 0 || ec != std::errc{} || next != end)
      return fail("{} '{}': expected NAME=VALUE (e.g. {})", flag, item, example);
    if (!out.emplace(item.substr(0, eq), value).second)
      return fail("{}: '{}' is given twice", flag, item.substr(0, eq));
  }
  return out;
}

// An ONNX model file as a forward graph named after the file. Model options other than --batch describe a
// built-in model and are refused rather than ignored.
Result<Graph> import_onnx_file(const std::string& file, const ModelArgs& args,
                               std::map<std::string, HostTensor>* weights, const OnnxModel* onnx) {
  const std::pair<bool, std::string_view> unused[] = {
      {!args.image.empty(), "image"}, {args.classes != 0, "classes"}, {args.channels != 0, "channels"},
      {args.small_stem, "small-stem"}, {!args.hidden.empty(), "hidden"}, {args.depth != 0, "depth"},
      {args.base_filters != 0, "base-filters"}, {args.layers != 0, "layers"}, {args.hidden_size != 0, "hidden-size"},
      {args.heads != 0, "heads"}, {args.seq != 0, "seq"}, {args.vocab != 0, "vocab"}, {args.untied, "untied"},
      {!args.gelu.empty(), "gelu"}, {args.dropout.has_value(), "dropout"}, {args.dtype != "f32", "dtype"}};
  for (const auto& [given, flag] : unused)
    if (given)
      return fail("--{} does not apply to an ONNX model (--batch, --dim, --frozen and --input-value do)", flag);
  std::optional<OnnxModel> read;
  if (!onnx) onnx = &read.emplace(LMS_TRY(read_onnx(file)));
  OnnxImportOptions opts;
  opts.values = weights != nullptr;
  opts.frozen = args.frozen;
  opts.input_values = LMS_TRY(assignments<double>("--input-value", args.input_values, "attention_mask=1"));
  opts.dims = LMS_TRY(assignments<int64_t>("--dim", args.dims, "seq=512"));
  if (args.batch_given) opts.batch = args.batch;
  opts.symbolic_batch = args.batch;
  std::string name = legal_name(std::filesystem::path(file).stem().string());
  if (std::isdigit(static_cast<unsigned char>(name[0])) || name[0] == '.' || name[0] == '-')
    name = "onnx_" + name;
  auto imported = import_onnx(*onnx, name, opts);
  if (!imported) return wrap(file, imported.error());
  if (auto v = verify(imported->forward); !v) return wrap(file, v.error());
  if (weights) *weights = std::move(imported->weights);
  return std::move(imported->forward);
}

}  // namespace

bool is_onnx_file(const std::string& file) { return file.size() > 5 && file.ends_with(".onnx"); }

Result<Graph> load_graph(const std::string& file, const ModelArgs& args, std::map<std::string, HostTensor>* weights,
                         const OnnxModel* onnx) {
  if (!file.empty() && !args.name.empty()) return fail("give a graph FILE or --model NAME, not both");
  if (file.empty()) {
    if (args.name.empty()) return fail("give a graph FILE (- for stdin) or --model NAME");
    if (!args.frozen.empty()) return fail("--frozen applies to ONNX models only (a built-in model has no buffers)");
    if (!args.input_values.empty() || !args.dims.empty())
      return fail("--{} applies to ONNX models only", args.dims.empty() ? "input-value" : "dim");
    ModelOptions o = LMS_TRY(resolve(args));
    return build_model(args.name, o);
  }
  if (is_onnx_file(file)) return import_onnx_file(file, args, weights, onnx);
  if (!args.frozen.empty()) return fail("--frozen applies to ONNX models only (a graph file has no initializers)");
  if (!args.input_values.empty() || !args.dims.empty())
    return fail("--{} applies to ONNX models only", args.dims.empty() ? "input-value" : "dim");
  std::string text = LMS_TRY(read_text(file));
  std::string shown = file == "-" ? "<stdin>" : file;
  Graph g = LMS_TRY(parse_graph(text, shown));
  if (auto v = verify(g); !v) return wrap(shown, v.error());
  return g;
}

std::string format_count(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

int report(const Error& e) {
  std::string line = e.str();
  for (char& c : line)  // one line, whatever names a file brought in (control characters would break or redraw it)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  fmt::print(stderr, "lms: error: {}\n", line);
  return kExitError;
}

}  // namespace lms::cli
