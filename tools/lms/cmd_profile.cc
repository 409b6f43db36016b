// `lms profile --device D (FILE | --model NAME ...) -o PROFILE.json`: measures how long every node of the
// training step takes on a backend, for the cost model (DESIGN.md "Cost model"; sim/cost_model.h). Compiles the
// training graph for the device (strategy none, no budget), runs --warmup steps and then --steps measured
// steps on synthetic inputs (floats in [0.5, 1), integer inputs 0: valid labels and token ids), and writes each
// node's median time by name. It also measures the backend's copy rates each way: one --copy-bytes tensor
// swapped out and back in through the backend's own swap path (its copy streams and host arena), timed like any
// node. `lms plan --profile PROFILE.json --device-model M` then predicts with the measured node times instead of
// the roofline wherever a node is named in the profile, and with the measured copy rates instead of M's.
#include <algorithm>
#include <memory>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "lms/analysis/stats.h"
#include "lms/ir/builder.h"
#include "lms/runtime/backend_registry.h"
#include "lms/runtime/executor.h"
#include "lms/runtime/program.h"
#include "planning.h"

namespace lms::cli {

namespace {

struct ProfileCmd {
  PlanArgs plan;       // FILE, model and --train options (no budget: the step runs unconstrained)
  std::string device = "cpu";
  int steps = 5;       // measured steps; each node's median over them is written
  int warmup = 1;      // steps run first and not measured
  std::string output;  // -o PROFILE.json
  std::string copy_bytes = "256MiB";  // --copy-bytes: the tensor the copy rates are measured with; 0: none
  bool tf32 = false;                  // --tf32: cuda's f32 convolutions and matmuls on TF32 tensor cores
  BackendFlags backend;                  // --cuda-workspace, --cuda-conv-gemm, --cpu-layouts
  int slowest = 10;                   // --slowest: nodes listed on stdout, slowest first (0: none)
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Synthetic inputs: floats in [0.5, 1) from a fixed sequence, integers 0.
HostTensor synthetic(const TensorType& t, uint64_t& state) {
  HostTensor h(t);
  if (t.dtype == DType::f32)
    for (float& x : h.as<float>()) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      x = 0.5f + static_cast<float>(state >> 40) / static_cast<float>(1ULL << 25);
    }
  return h;
}

// The backend's copy rates: x (`bytes` of f32) swapped out to the host arena and back in, on a backend of its
// own (arenas are made once per backend); each direction's median node time over the measured steps.
Result<nlohmann::ordered_json> copy_rates(const ProfileCmd& c, int64_t bytes) {
  const int64_t elements = bytes / static_cast<int64_t>(sizeof(float));
  if (elements < 1) return fail("--copy-bytes must be 0 (no copy measurement) or at least 4 bytes, got {}", bytes);
  Graph g;
  g.set_name("copy_rates");
  Builder b(g);
  ValueId x = b.input(TensorType{DType::f32, {elements}}, "x");
  ValueId back = b.op(Op::swap_in, {b.op(Op::swap_out, {x}, {}, "to_host")}, {}, "to_device");
  if (!b.ok()) return std::unexpected(*b.error());
  g.set_outputs({back});
  const BackendOptions options = LMS_TRY(backend_options(c.tf32, c.backend, c.device));
  std::unique_ptr<Backend> backend = LMS_TRY(make_backend(c.device, options));
  Program program = LMS_TRY(compile(g, {}, backend.get()));
  Executor ex = LMS_TRY(Executor::create(program, *backend, ExecutorOptions{.time_nodes = true}));
  LMS_TRY_VOID(ex.initialize(0));
  const Graph& pg = program.graph();
  HostTensor input(pg.value(program.inputs().front()).type);
  Feed feed{program.inputs().front(), &input};
  const NodeId out = pg.value(*pg.find_value("to_host")).producer, in = pg.value(*pg.find_value("to_device")).producer;
  std::vector<double> d2h, h2d;
  for (int i = 0; i < c.warmup + c.steps; ++i) {
    StepResult r = LMS_TRY(ex.step({&feed, 1}));
    if (i < c.warmup) continue;
    d2h.push_back(r.node_seconds[out.v]);
    h2d.push_back(r.node_seconds[in.v]);
  }
  const double d2h_s = median(d2h), h2d_s = median(h2d);
  if (d2h_s <= 0 || h2d_s <= 0) return fail("device '{}': the copies took no measurable time", c.device);
  const auto size = static_cast<double>(elements * static_cast<int64_t>(sizeof(float)));
  nlohmann::ordered_json j;
  j["bytes"] = elements * static_cast<int64_t>(sizeof(float));
  j["d2h_bytes_per_s"] = size / d2h_s;
  j["h2d_bytes_per_s"] = size / h2d_s;
  return j;
}

Result<nlohmann::ordered_json> profile(const ProfileCmd& c) {
  if (c.steps < 1) return fail("--steps must be >= 1, got {}", c.steps);
  if (c.warmup < 0) return fail("--warmup must be >= 0, got {}", c.warmup);
  if (c.slowest < 0) return fail("--slowest must be >= 0, got {}", c.slowest);
  auto copy_bytes = parse_size(c.copy_bytes);
  if (!copy_bytes) return wrap("--copy-bytes", copy_bytes.error());
  Graph g = LMS_TRY(training_graph(c.plan, c.plan.model));
  LMS_TRY_VOID(check_backend_dtypes(g));
  const BackendOptions options = LMS_TRY(backend_options(c.tf32, c.backend, c.device));
  std::unique_ptr<Backend> backend = LMS_TRY(make_backend(c.device, options));
  Program program = LMS_TRY(compile(g, {}, backend.get()));
  Executor ex = LMS_TRY(Executor::create(program, *backend, ExecutorOptions{.time_nodes = true}));
  LMS_TRY_VOID(ex.initialize(0));
  const Graph& pg = program.graph();
  uint64_t state = 1;
  std::vector<HostTensor> inputs;
  std::vector<Feed> feeds;
  inputs.reserve(program.inputs().size());
  for (ValueId v : program.inputs()) {
    inputs.push_back(synthetic(pg.value(v).type, state));
    feeds.push_back(Feed{v, &inputs.back()});
  }
  std::vector<std::vector<double>> times(pg.num_nodes());
  std::vector<double> steps;
  for (int i = 0; i < c.warmup + c.steps; ++i) {
    StepResult r = LMS_TRY(ex.step(feeds));
    if (i < c.warmup) continue;
    steps.push_back(r.seconds);
    for (NodeId n : pg.node_ids()) times[n.v].push_back(r.node_seconds[n.v]);
  }
  nlohmann::ordered_json j;
  j["device"] = c.device;
  j["graph"] = pg.name();
  j["steps"] = c.steps;
  j["step_seconds"] = median(steps);
  nlohmann::ordered_json nodes = nlohmann::ordered_json::array();
  for (NodeId n : pg.node_ids()) {
    const Node& node = pg.node(n);
    if (node.outputs.empty() || pg.def(n).traits.source) continue;
    const Cost cost = node_cost(pg, node);  // the work measured, so that plans at other sizes can scale it
    nodes.push_back({{"name", pg.value(node.outputs.front()).name},
                     {"op", std::string(pg.def(n).name)},
                     {"seconds", median(times[n.v])},
                     {"flops", cost.flops},
                     {"bytes_read", cost.bytes_read},
                     {"bytes_written", cost.bytes_written}});
    if (std::string k = backend->kernel_description(n); !k.empty()) nodes.back()["kernel"] = std::move(k);
  }
  j["nodes"] = std::move(nodes);
  if (*copy_bytes > 0) j["copies"] = LMS_TRY(copy_rates(c, *copy_bytes));
  return j;
}

// The `count` slowest nodes, slowest first: median time, share of the nodes' total, name, op and kernel.
void print_slowest(const nlohmann::ordered_json& j, int count) {
  std::vector<const nlohmann::ordered_json*> nodes;  // into j["nodes"]
  double total = 0;
  for (const auto& n : j["nodes"]) {
    nodes.push_back(&n);
    total += n["seconds"].get<double>();
  }
  const auto shown = static_cast<size_t>(std::clamp<int64_t>(count, 0, static_cast<int64_t>(nodes.size())));
  if (shown == 0) return;
  // stable: equal times keep the graph's order
  using Node = const nlohmann::ordered_json*;
  std::stable_sort(nodes.begin(), nodes.end(), [](Node a, Node b) {
    return (*a)["seconds"].get<double>() > (*b)["seconds"].get<double>();
  });
  fmt::print("slowest {} of {} nodes (median ms, share of all nodes' time):\n", shown, nodes.size());
  for (size_t i = 0; i < shown; ++i) {
    const auto& n = *nodes[i];
    const double s = n["seconds"].get<double>();
    fmt::print("  {:9.3f} {:5.1f}%  {} ({}){}\n", s * 1e3, total > 0 ? 100 * s / total : 0.0,
               n["name"].get<std::string>(), n["op"].get<std::string>(),
               n.contains("kernel") ? ": " + n["kernel"].get<std::string>() : std::string());
  }
}

int run(const ProfileCmd& c) {
  if (c.output.empty()) return report(Error{"give -o PROFILE.json", {}});
  auto j = profile(c);
  if (!j) return report(j.error());
  auto w = write_text(c.output, j->dump(1) + "\n");
  if (!w) return report(w.error());
  fmt::print("profiled {} nodes of '{}' on {} over {} steps: median step {:.4g} s; wrote {}\n",
             (*j)["nodes"].size(), (*j)["graph"].get<std::string>(), c.device, c.steps,
             (*j)["step_seconds"].get<double>(), c.output);
  if (j->contains("copies"))
    fmt::print("copies of {}: device to host {:.3g} GB/s, host to device {:.3g} GB/s\n",
               format_size((*j)["copies"]["bytes"].get<int64_t>()),
               (*j)["copies"]["d2h_bytes_per_s"].get<double>() / 1e9,
               (*j)["copies"]["h2d_bytes_per_s"].get<double>() / 1e9);
  print_slowest(*j, c.slowest);
  return kExitOk;
}

}  // namespace

Result<MeasuredProfile> read_profile(const std::string& path) {
  std::string text = LMS_TRY(read_text(path));
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("nodes") || !j["nodes"].is_array())
    return fail("{}: not a profile written by `lms profile` (expected a JSON object with \"nodes\")", path);
  MeasuredProfile p;
  for (const auto& n : j["nodes"]) {
    if (!n.is_object() || !n.contains("name") || !n["name"].is_string() || !n.contains("seconds") ||
        !n["seconds"].is_number() || n["seconds"].get<double>() < 0)
      return fail("{}: a node entry needs \"name\" and a non-negative \"seconds\": {}", path, n.dump());
    MeasuredNode& node = p.nodes[n["name"].get<std::string>()];
    node.seconds = n["seconds"].get<double>();
    if (n.contains("flops") || n.contains("bytes_read") || n.contains("bytes_written")) {
      auto count = [&](const char* key) {
        return n.contains(key) && n[key].is_number() ? n[key].get<double>() : -1.0;
      };
      const double flops = count("flops"), read = count("bytes_read"), written = count("bytes_written");
      if (flops < 0 || read < 0 || written < 0)
        return fail("{}: a node entry with work needs non-negative \"flops\", \"bytes_read\" and "
                    "\"bytes_written\": {}", path, n.dump());
      node.cost = Cost{flops, static_cast<int64_t>(read), static_cast<int64_t>(written)};
    }
  }
  if (j.contains("copies")) {
    const auto& r = j["copies"];
    auto rate = [&](const char* key) {
      return r.is_object() && r.contains(key) && r[key].is_number() ? r[key].get<double>() : 0.0;
    };
    p.d2h_bytes_per_s = rate("d2h_bytes_per_s");
    p.h2d_bytes_per_s = rate("h2d_bytes_per_s");
    if (p.d2h_bytes_per_s <= 0 || p.h2d_bytes_per_s <= 0)
      return fail("{}: \"copies\" needs positive \"d2h_bytes_per_s\" and \"h2d_bytes_per_s\": {}", path, r.dump());
  }
  return p;
}

void add_profile_command(CLI::App& root, int& exit_code) {
  auto c = std::make_shared<ProfileCmd>();
  CLI::App* sub = root.add_subcommand("profile", "Measure every node of a training step on a device, for the cost model.");
  sub->add_option("FILE", c->plan.file, "Graph in the IR text format (- for stdin); or use --model");
  add_model_options(sub, c->plan.model, /*with_model_flag=*/true);
  add_train_options(sub, c->plan.train);
  c->plan.model.batch = kDefaultTrainBatch;
  sub->add_option("--device", c->device, "Backend: reference, cpu, cuda")->capture_default_str();
  sub->add_option("--copy-bytes", c->copy_bytes,
                  "Size of the tensor the copy rates are measured with (0: measure no copies)")->capture_default_str();
  sub->add_flag("--tf32", c->tf32, "cuda: f32 convolutions and matmuls on TF32 tensor cores");
  add_backend_options(sub, c->backend);
  sub->add_option("--steps", c->steps, "Measured steps (each node's median is written)")->capture_default_str();
  sub->add_option("--warmup", c->warmup, "Steps run first and not measured")->capture_default_str();
  sub->add_option("--slowest", c->slowest,
                  "List this many of the slowest nodes, with the kernel each runs (0: none)")
      ->capture_default_str();
  sub->add_option("-o,--output", c->output, "The profile (JSON) to write")->required();
  sub->callback([c, &exit_code] { exit_code = run(*c); });
}

}  // namespace lms::cli
