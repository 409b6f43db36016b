// `lms plan`, `lms maxbatch` and `lms maxres` end to end: the JSON contract (docs/cli.md), a plan that says
// what `lms train` then does (the same planned peak), the exit status of a plan that does not fit, and the
// capacity searches' answers checked against `lms plan` one step past them. Bad options are one error line.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <regex>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/cli_util.h"

namespace lms {
namespace {

using testing::expect_one_error_line;
using testing::run_lms;

nlohmann::json json_of(const testing::CmdResult& r, const std::string& what) {
  auto j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << what << ": not JSON: " << r.out << r.err;
  return j;
}

const char* kGpt = "--model gpt --layers 2 --hidden-size 64 --heads 4 --seq 64 --vocab 100 --batch 8";

// A third of the way from kGpt's hard minimum to its peak without LMS: a budget that needs swapping.
int64_t gpt_tight_budget() {
  auto none = json_of(run_lms(std::string("plan ") + kGpt + " --budget 1GiB --json"), "none");
  const auto peak = none["peak_bytes"].get<int64_t>(), hard = none["min_budget_bytes"].get<int64_t>();
  return hard + (peak - hard) / 3;
}

TEST(PlanCommand, JsonHasEveryKeyAndMatchesTrain) {
  auto r = run_lms("plan --model mlp --budget 1GiB --json");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = json_of(r, "plan");
  for (const char* k : {"fits", "strategy", "budget_bytes", "peak_bytes", "peak_bytes_none", "param_bytes",
                        "min_budget_bytes", "min_budget_op", "lower_bound_bytes", "reused_buffers", "host_bytes",
                        "swap_out_bytes",
                        "swap_in_bytes",
                        "swapped_tensors", "recompute_flops", "predicted_step_seconds", "lms_needed"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_TRUE(j["fits"].get<bool>());
  EXPECT_EQ(j["strategy"], "none");
  const std::string largest = j["min_budget_op"].get<std::string>();  // "%name, op" of a node of the plan
  EXPECT_TRUE(largest.starts_with("%") && largest.find(", ") != std::string::npos) << largest;
  EXPECT_EQ(j["budget_bytes"].get<int64_t>(), int64_t{1} << 30);
  // The plan is of what train runs (same default batch, same optimizer): the same planned peak.
  auto t = run_lms("train --model mlp --steps 1 --json");
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_EQ(j["peak_bytes"].get<int64_t>(), json_of(t, "train")["planned_peak_bytes"].get<int64_t>());
  // And with the flag as train spells it (--optimizer; plan's own name is --train): Adam's state, the same peak.
  auto adam = run_lms("plan --model mlp --budget 1GiB --json --optimizer adam");
  ASSERT_EQ(adam.status, 0) << adam.err;
  auto ta = run_lms("train --model mlp --steps 1 --json --optimizer adam");
  ASSERT_EQ(ta.status, 0) << ta.err;
  EXPECT_EQ(json_of(adam, "plan")["peak_bytes"].get<int64_t>(),
            json_of(ta, "train")["planned_peak_bytes"].get<int64_t>());
  EXPECT_GT(json_of(adam, "plan")["param_bytes"].get<int64_t>(), j["param_bytes"].get<int64_t>()) << "two moments";
}

// --no-buffer-reuse gives every value a buffer of its own (docs/planner.md "Buffer reuse"): none reused, a peak
// no lower, and `train` plans the same way.
TEST(PlanCommand, NoBufferReuseGivesEveryValueItsOwnBuffer) {
  auto reused = json_of(run_lms(std::string("plan ") + kGpt + " --budget 1GiB --json"), "plan");
  auto own = json_of(run_lms(std::string("plan ") + kGpt + " --budget 1GiB --json --no-buffer-reuse"), "plan");
  EXPECT_GT(reused["reused_buffers"].get<int>(), 0);
  EXPECT_EQ(own["reused_buffers"].get<int>(), 0);
  EXPECT_LT(reused["peak_bytes"].get<int64_t>(), own["peak_bytes"].get<int64_t>());
  auto t = run_lms(std::string("train ") + kGpt + " --steps 1 --json --no-buffer-reuse");
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_EQ(json_of(t, "train")["planned_peak_bytes"].get<int64_t>(), own["peak_bytes"].get<int64_t>());
  auto text = run_lms(std::string("plan ") + kGpt + " --budget 1GiB");
  EXPECT_NE(text.out.find("buffer reuse    " + std::to_string(reused["reused_buffers"].get<int>()) + " outputs"),
            std::string::npos)
      << text.out;
}

TEST(PlanCommand, StatsReportsTheSamePeakWithoutLms) {
  auto stats = run_lms("stats --model mlp --batch 32 --train momentum --json");
  ASSERT_EQ(stats.status, 0) << stats.err;
  auto plan = run_lms("plan --model mlp --budget 1GiB --json");
  ASSERT_EQ(plan.status, 0) << plan.err;
  auto s = json_of(stats, "stats"), p = json_of(plan, "plan");
  EXPECT_EQ(s["peak_bytes_none"].get<int64_t>(), p["peak_bytes_none"].get<int64_t>());
  EXPECT_EQ(s["min_budget_bytes"].get<int64_t>(), p["min_budget_bytes"].get<int64_t>());
}

TEST(PlanCommand, NotFittingExitsOneWithTheReason) {
  auto r = run_lms(std::string("plan ") + kGpt + " --budget 3MB --json");
  EXPECT_EQ(r.status, 1);
  auto j = json_of(r, "plan");
  EXPECT_FALSE(j["fits"].get<bool>());
  EXPECT_NE(j["error"].get<std::string>().find("does not fit"), std::string::npos) << j.dump();
  EXPECT_EQ(r.err.rfind("lms: error: ", 0), 0u) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one error line: " << r.err;
}

// Where the largest op holds the loss's logits (a GPT head over a 2000-word vocabulary), the reason a budget below
// the hard minimum fails names --loss-chunks, and with the loss in 8 blocks auto fits that budget; a loss the
// pass cannot split is one error line.
TEST(PlanCommand, LossChunksLowerTheHardMinimumOfAHeadBoundModel) {
  std::string gpt = std::string(kGpt) + " --strategy auto --device-model h100-pcie5";
  gpt.replace(gpt.find("--vocab 100"), 11, "--vocab 2000");
  auto whole = json_of(run_lms("plan " + gpt + " --budget 1GiB --json"), "whole");
  auto chunked = json_of(run_lms("plan " + gpt + " --budget 1GiB --loss-chunks 8 --json"), "chunked");
  const auto hard = whole["min_budget_bytes"].get<int64_t>();
  ASSERT_LT(chunked["min_budget_bytes"].get<int64_t>(), hard);
  const std::string budget = std::to_string(hard - 1);
  auto r = run_lms("plan " + gpt + " --budget " + budget);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("below the minimum any plan needs"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--loss-chunks"), std::string::npos) << r.err;
  EXPECT_EQ(run_lms("plan " + gpt + " --budget " + budget + " --loss-chunks 8").status, 0);
  // maxbatch says the same of the batch past its answer.
  auto capacity = run_lms("maxbatch " + gpt + " --budget " + budget);
  EXPECT_NE(capacity.out.find("the next size does not fit: batch "), std::string::npos) << capacity.out;
  EXPECT_NE(capacity.out.find("--loss-chunks"), std::string::npos) << capacity.out;
  expect_one_error_line(run_lms("plan --model unet3d --batch 1 --image 16 --depth 2 --budget 1GiB --loss-chunks 2"),
                        "not [N, classes]", "a segmentation loss over voxels");
  expect_one_error_line(run_lms("plan " + gpt + " --budget 1GiB --loss-chunks 0"), "--loss-chunks", "zero");
}

TEST(PlanCommand, TflmsSwapsUnderABudgetTheNoSwapPlanExceeds) {
  const auto peak = json_of(run_lms(std::string("plan ") + kGpt + " --budget 1GiB --json"), "none")["peak_bytes"];
  const int64_t budget = gpt_tight_budget();
  auto r = run_lms(std::string("plan ") + kGpt + " --strategy tflms --json --budget " + std::to_string(budget));
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = json_of(r, "tflms");
  EXPECT_TRUE(j["fits"].get<bool>());
  EXPECT_TRUE(j["lms_needed"].get<bool>());
  EXPECT_LE(j["peak_bytes"].get<int64_t>(), budget);
  EXPECT_EQ(j["peak_bytes_none"], peak);
  EXPECT_GT(j["swapped_tensors"].get<int64_t>(), 0);
  EXPECT_GT(j["host_bytes"].get<int64_t>(), 0);
  ASSERT_TRUE(j.contains("tflms"));
  for (const char* k : {"swapout_threshold", "swapin_ahead", "swapin_groupby", "sync_mode", "simulated_peak_bytes",
                        "levels", "trials", "rounds"})
    EXPECT_TRUE(j["tflms"].contains(k)) << k << " in " << j["tflms"].dump();
}

TEST(PlanCommand, DeviceModelPredictsTheStepTime) {
  auto r = run_lms(std::string("plan ") + kGpt + " --budget 1GiB --device-model h100-pcie5 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = json_of(r, "plan");
  EXPECT_EQ(j["device_model"], "h100-pcie5");
  const double step = j["predicted_step_seconds"].get<double>();
  const double compute = j["predicted_compute_seconds"].get<double>();
  EXPECT_GT(compute, 0);
  EXPECT_GE(step, compute) << "the step is at least the compute stream's busy time";
  EXPECT_EQ(j["predicted_stall_seconds"].get<double>(), 0.0) << "nothing is swapped, nothing to wait for";
  // Without --device-model there is no prediction.
  EXPECT_TRUE(json_of(run_lms(std::string("plan ") + kGpt + " --budget 1GiB --json"), "plan")["predicted_step_seconds"]
                  .is_null());
}

// --tf32 predicts f32 arithmetic at the device's TF32 tensor-core rate: a convolution net, compute-bound on the
// roofline at FP32 rate, gets a shorter compute time; a device without TF32, or a backend other than cuda, is a
// one-line error.
TEST(PlanCommand, Tf32PredictsWithTheTensorCoreRate) {
  const std::string common = "plan --model resnet18 --small-stem --image 32 --batch 64 --budget 1GiB --json";
  auto fp32 = json_of(run_lms(common + " --device-model h100-pcie5"), "fp32");
  auto tf32 = json_of(run_lms(common + " --device-model h100-pcie5 --tf32"), "tf32");
  EXPECT_LT(tf32["predicted_compute_seconds"].get<double>(), fp32["predicted_compute_seconds"].get<double>());
  expect_one_error_line(run_lms(common + " --device-model v100-pcie3 --tf32"), "no TF32", "v100");
  expect_one_error_line(run_lms(common + " --device cpu --tf32"), "--tf32 applies to --device cuda", "cpu plan");
  expect_one_error_line(run_lms("train --model mlp --device reference --steps 1 --tf32"),
                        "--tf32 applies to --device cuda", "reference train");
  expect_one_error_line(run_lms("profile --model mlp --device reference --tf32 -o x.json"),
                        "--tf32 applies to --device cuda", "reference profile");
}

// --cuda-workspace and --cuda-conv-gemm are cuda's (their effects are checked on a GPU by the cuda op
// tests): with another backend, or a bad size, one error line from each command that takes them.
TEST(PlanCommand, CudaWorkspaceIsCudasAndASize) {
  const std::string plan = "plan --model mlp --budget 1GiB";
  expect_one_error_line(run_lms(plan + " --device cpu --cuda-workspace 1GiB"), "--cuda-workspace applies to --device cuda",
                        "cpu plan");
  expect_one_error_line(run_lms(plan + " --cuda-workspace 1GiB"), "--cuda-workspace applies to --device cuda",
                        "plan without a backend");
  expect_one_error_line(run_lms("train --model mlp --device reference --steps 1 --cuda-workspace 1GiB"),
                        "--cuda-workspace applies to --device cuda", "reference train");
  expect_one_error_line(run_lms("profile --model mlp --device reference --cuda-workspace 1GiB -o x.json"),
                        "--cuda-workspace applies to --device cuda", "reference profile");
  expect_one_error_line(run_lms("maxbatch --model mlp --budget 1GiB --device cuda --cuda-workspace lots"),
                        "--cuda-workspace", "bad size");
  expect_one_error_line(run_lms(plan + " --device cpu --cuda-conv-gemm off"),
                        "--cuda-conv-gemm applies to --device cuda", "cpu plan, gemm flag");
  expect_one_error_line(run_lms("profile --model mlp --device reference --cuda-conv-gemm 1x1 -o x.json"),
                        "--cuda-conv-gemm applies to --device cuda", "reference profile, gemm flag");
  expect_one_error_line(run_lms("train --model mlp --device cuda --steps 1 --cuda-conv-gemm some"),
                        "--cuda-conv-gemm", "unknown gemm choice");
}

// --cpu-layouts is the cpu backend's (its effect: tests/backends/cpu_training_test.cc): elsewhere, or with a
// value other than blocked and plain, one error line.
TEST(PlanCommand, CpuLayoutsIsCpus) {
  expect_one_error_line(run_lms("plan --model mlp --budget 1GiB --cpu-layouts plain"),
                        "--cpu-layouts applies to --device cpu", "plan without a backend");
  expect_one_error_line(run_lms("train --model mlp --device reference --steps 1 --cpu-layouts plain"),
                        "--cpu-layouts applies to --device cpu", "reference train");
  expect_one_error_line(run_lms("profile --model mlp --device reference --cpu-layouts blocked -o x.json"),
                        "--cpu-layouts applies to --device cpu", "reference profile");
  expect_one_error_line(run_lms("train --model mlp --device cpu --steps 1 --cpu-layouts nhwc"), "--cpu-layouts",
                        "unknown layout choice");
}

TEST(ProfileCommand, MeasuredTimesDrivePlanPredictions) {
  const std::string profile = (testing::temp_dir() / "mlp_profile.json").string();
  auto r = run_lms("profile --model mlp --device reference --steps 2 --warmup 0 --copy-bytes 1MiB -o " + profile);
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(testing::slurp(profile), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  ASSERT_GT(j["nodes"].size(), 10u);
  EXPECT_EQ(j["copies"]["bytes"].get<int64_t>(), int64_t{1} << 20);
  EXPECT_GT(j["copies"]["d2h_bytes_per_s"].get<double>(), 0);
  EXPECT_GT(j["copies"]["h2d_bytes_per_s"].get<double>(), 0);
  double sum = 0;
  for (const auto& n : j["nodes"]) {
    EXPECT_GE(n["seconds"].get<double>(), 0) << n.dump();
    sum += n["seconds"].get<double>();
  }
  EXPECT_GT(sum, 0);
  // Everything runs on the compute stream without swaps, so the predicted step is the sum of the node times:
  // measured ones for every node the profile names (all of them here), nothing from the roofline.
  auto p = run_lms("plan --model mlp --budget 1GiB --device-model h100-pcie5 --json --profile " + profile);
  ASSERT_EQ(p.status, 0) << p.err;
  EXPECT_NEAR(json_of(p, "plan")["predicted_step_seconds"].get<double>(), sum, 1e-9 * sum);
  // The profile recorded each node's work, so it predicts the mlp at 4x the batch too: each node's time above
  // the launch overhead scales with its roofline time (4x for the batch-sized ops, 1x for the optimizer's).
  for (const auto& n : j["nodes"]) EXPECT_TRUE(n.contains("flops") && n.contains("bytes_read")) << n.dump();
  auto big = run_lms("plan --model mlp --batch 128 --budget 1GiB --device-model h100-pcie5 --json --profile " + profile);
  ASSERT_EQ(big.status, 0) << big.err;
  const double scaled = json_of(big, "plan at batch 128")["predicted_step_seconds"].get<double>();
  EXPECT_GT(scaled, 1.5 * sum);
  EXPECT_LT(scaled, 4 * sum);

  expect_one_error_line(run_lms("plan --model mlp --budget 1GiB --profile " + profile), "needs --device-model",
                        "profile alone");
  const std::string bad = (testing::temp_dir() / "bad_profile.json").string();
  std::ofstream(bad) << "{\"nodes\": [{\"name\": \"x\"}]}";
  expect_one_error_line(run_lms("plan --model mlp --budget 1GiB --device-model h100-pcie5 --profile " + bad),
                        "non-negative \"seconds\"", "bad profile");
  std::ofstream(bad) << "{\"nodes\": [{\"name\": \"x\", \"seconds\": 1, \"flops\": -1}]}";
  expect_one_error_line(run_lms("plan --model mlp --budget 1GiB --device-model h100-pcie5 --profile " + bad),
                        "non-negative \"flops\"", "bad work");
  expect_one_error_line(run_lms("profile --model mlp --device reference"), "output", "no -o");
  expect_one_error_line(run_lms("profile --model mlp --device reference --copy-bytes 2 -o " + bad), "--copy-bytes",
                        "copy tensor too small");
  expect_one_error_line(run_lms("profile --model mlp --device reference --slowest -1 -o " + bad), "--slowest",
                        "negative --slowest");
}

// `lms profile` lists the slowest nodes on stdout, slowest first, each with its share of the nodes' time; a
// backend that chooses how a node runs says so in the node's "kernel" (the cpu backend: oneDNN's primitives and
// their implementations, its own loops, the reference kernel where it falls back), the reference backend not.
TEST(ProfileCommand, ListsTheSlowestNodesAndTheirKernels) {
  const std::string path = (testing::temp_dir() / "kernels_profile.json").string();
  auto r = run_lms("profile --model mlp --device reference --steps 1 --warmup 0 --copy-bytes 0 --slowest 3 -o " +
                   path);
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(testing::slurp(path), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  std::vector<double> times;
  for (const auto& n : j["nodes"]) {
    EXPECT_FALSE(n.contains("kernel")) << n.dump();
    times.push_back(n["seconds"].get<double>());
  }
  std::ranges::sort(times, std::greater<>());
  const size_t at = r.out.find("slowest 3 of " + std::to_string(times.size()) + " nodes");
  ASSERT_NE(at, std::string::npos) << r.out;
  std::istringstream listed(r.out.substr(at));
  std::string line;
  std::getline(listed, line);  // the heading
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(std::getline(listed, line)) << r.out;
    double ms = 0;
    std::istringstream(line) >> ms;
    EXPECT_NEAR(ms, times[i] * 1e3, 5e-4) << line;  // printed to the microsecond
  }
  EXPECT_FALSE(std::getline(listed, line)) << "more than 3 nodes listed: " << r.out;
#ifdef LMS_HAVE_CPU_BACKEND
  r = run_lms("profile --model resnet18 --small-stem --image 8 --batch 2 --classes 2 --device cpu --steps 1 "
              "--warmup 0 --copy-bytes 0 -o " + path);
  ASSERT_EQ(r.status, 0) << r.err;
  j = nlohmann::json::parse(testing::slurp(path), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  int convolutions = 0;
  const nlohmann::json* slowest = nullptr;
  for (const auto& n : j["nodes"]) {
    if (!slowest || n["seconds"].get<double>() > (*slowest)["seconds"].get<double>()) slowest = &n;
    ASSERT_TRUE(n.contains("kernel")) << n.dump();
    const std::string kernel = n["kernel"].get<std::string>(), op = n["op"].get<std::string>();
    if (op.starts_with("conv")) {
      ++convolutions;
      EXPECT_NE(kernel.find("convolution "), std::string::npos) << n.dump();
    }
    if (op == "relu") {
      EXPECT_NE(kernel.find("eltwise "), std::string::npos) << n.dump();
    }
  }
  // 20 convolutions, each with its weight gradient, and all but the stem with its data gradient
  EXPECT_EQ(convolutions, 20 + 20 + 19);
  ASSERT_NE(slowest, nullptr);
  EXPECT_NE(r.out.find((*slowest)["name"].get<std::string>() + " (" + (*slowest)["op"].get<std::string>() +
                       "): " + (*slowest)["kernel"].get<std::string>()),
            std::string::npos)
      << r.out;
#endif
}

// A profile's copy rates replace the device model's link rates: the same tflms plan (it swaps) predicted with a
// profile measuring a slow link and one measuring a fast link. The swap-ins run one after another on the h2d
// stream, so the step takes at least swap_in_bytes / rate.
TEST(ProfileCommand, MeasuredCopyRatesReplaceTheLinkRates) {
  const std::string budget = std::to_string(gpt_tight_budget());
  auto predict = [&](const std::string& copies) {
    const std::string path = (testing::temp_dir() / "copies_profile.json").string();
    std::ofstream(path) << "{\"nodes\": [], \"copies\": " << copies << "}";
    return run_lms(std::string("plan ") + kGpt + " --strategy tflms --device-model h100-pcie5 --json --budget " +
                   budget + " --profile " + path);
  };
  auto slow = json_of(predict(R"({"bytes": 1, "d2h_bytes_per_s": 1e3, "h2d_bytes_per_s": 1e3})"), "slow");
  auto fast = json_of(predict(R"({"bytes": 1, "d2h_bytes_per_s": 1e15, "h2d_bytes_per_s": 1e15})"), "fast");
  const double swap_in = slow["swap_in_bytes"].get<double>();
  ASSERT_GT(swap_in, 0) << "the plan swaps";
  EXPECT_GE(slow["predicted_step_seconds"].get<double>(), swap_in / 1e3);
  EXPECT_LT(fast["predicted_step_seconds"].get<double>(), swap_in / 1e3 / 100);
  expect_one_error_line(predict(R"({"d2h_bytes_per_s": 0})"), "positive", "bad copy rates");
}

// Every element is closed in order (a small XML well-formedness check: tags nest, attributes are quoted).
bool well_formed(const std::string& svg) {
  std::vector<std::string> open;
  for (size_t i = svg.find('<'); i != std::string::npos; i = svg.find('<', i + 1)) {
    const size_t end = svg.find('>', i);
    if (end == std::string::npos) return false;
    const std::string tag = svg.substr(i + 1, end - i - 1);
    if (std::count(tag.begin(), tag.end(), '"') % 2 != 0) return false;
    if (tag.ends_with("/")) continue;
    const std::string name = tag.substr(tag[0] == '/' ? 1 : 0, tag.find_first_of(" /", 1) - (tag[0] == '/' ? 1 : 0));
    if (tag[0] != '/') {
      open.push_back(name);
    } else {
      if (open.empty() || open.back() != name) return false;
      open.pop_back();
    }
  }
  return open.empty();
}

TEST(PlanCommand, PlotIsAWellFormedSvgOfBothPlans) {
  const std::string svg_path = (testing::temp_dir() / "plan.svg").string();
  auto r = run_lms(std::string("plan ") + kGpt + " --strategy tflms --budget " + std::to_string(gpt_tight_budget()) +
                   " --device-model h100-pcie5 --plot " + svg_path);
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string svg = testing::slurp(svg_path);
  EXPECT_TRUE(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_TRUE(svg.ends_with("</svg>\n"));
  EXPECT_TRUE(well_formed(svg));
  size_t curves = 0;
  for (size_t i = svg.find("<polyline"); i != std::string::npos; i = svg.find("<polyline", i + 1)) ++curves;
  EXPECT_EQ(curves, 2u) << "tflms and none";
  EXPECT_NE(svg.find(">budget "), std::string::npos);
  EXPECT_NE(svg.find("swap-outs"), std::string::npos) << "the plan swaps: its ticks are explained";
  EXPECT_FALSE(well_formed("<svg><text>x</svg>"));  // the checker itself can fail
}

TEST(PlanCommand, AutoReportsItsChoicesAndPlotsThreePlans) {
  const std::string budget = std::to_string(gpt_tight_budget());
  const std::string svg_path = (testing::temp_dir() / "plan_auto.svg").string();
  auto r = run_lms(std::string("plan ") + kGpt + " --strategy auto --budget " + budget +
                   " --device-model v100-pcie3 --json --plot " + svg_path);
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = json_of(r, "auto");
  EXPECT_TRUE(j["fits"].get<bool>());
  EXPECT_EQ(j["strategy"], "auto");
  EXPECT_LE(j["peak_bytes"].get<int64_t>(), std::stoll(budget));
  EXPECT_EQ(j["device_model"], "v100-pcie3");
  ASSERT_TRUE(j.contains("auto")) << r.out;
  const auto& a = j["auto"];
  EXPECT_EQ(a["choices"].size(), a["swapped"].get<size_t>() + a["recomputed"].get<size_t>());
  if (a["recomputed"].get<int>() > 0) {
    EXPECT_GT(j["recompute_flops"].get<double>(), 0);
  }
  for (const auto& c : a["choices"]) {
    EXPECT_TRUE(c["kind"] == "swap" || c["kind"] == "recompute") << c.dump();
    EXPECT_GT(c["bytes"].get<int64_t>(), 0) << c.dump();
  }
  const std::string svg = testing::slurp(svg_path);
  EXPECT_TRUE(well_formed(svg));
  size_t curves = 0;
  for (size_t i = svg.find("<polyline"); i != std::string::npos; i = svg.find("<polyline", i + 1)) ++curves;
  EXPECT_EQ(curves, 3u) << "none, tflms and auto";
  // The text report names what it took and the costliest choices; --verbose lists every round of auto's search
  // on stderr: the schedule and greedy it started from, the estimate's target, the estimate's and the exact plan's
  // peaks and where they are (the exact one where it does not fit).
  auto text = run_lms(std::string("plan ") + kGpt + " --strategy auto --budget " + budget +
                      " --device-model v100-pcie3 --verbose");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("auto            took "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("costliest"), std::string::npos) << text.out;
  const std::regex round(R"(  auto (graph|level) order (both|cascade|segment|swap-only|recompute-only|strict))"
                         R"(( reuse)?( \+\d+ pinned)? +round \d+: target [0-9.]+ [KMG]?i?B, )"
                         R"(estimate [0-9.]+ [KMG]?i?B( \(stuck\))? at (%\S+|node #\d+), )"
                         R"(planned [0-9.]+ [KMG]?i?B(: fits, [0-9.e-]+ s| at (%\S+|node #\d+): too big) )"
                         R"(\(\d+ swapped, \d+ recomputed\))");
  int rounds = 0, fitting = 0;
  std::istringstream err(text.err);
  for (std::string line; std::getline(err, line);) {
    if (!line.starts_with("  auto ")) continue;
    EXPECT_TRUE(std::regex_match(line, round)) << line;
    ++rounds;
    fitting += line.find(": fits, ") != std::string::npos;
  }
  EXPECT_GT(rounds, 0) << text.err;
  EXPECT_GT(fitting, 0) << "the plan it took came from a round that fits\n" << text.err;
}

TEST(PlanCommand, TraceOfThePredictedStep) {
  const std::string path = (testing::temp_dir() / "plan_trace.json").string();
  auto r = run_lms(std::string("plan ") + kGpt + " --strategy tflms --budget " + std::to_string(gpt_tight_budget()) +
                   " --device-model h100-pcie5 --json --trace " + path);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto plan = json_of(r, "tflms");
  const auto step = plan["predicted_step_seconds"].get<double>();
  ASSERT_GT(plan["swapped_tensors"].get<int>(), 0) << "the case exercises the copy streams";
  const auto trace = nlohmann::json::parse(testing::slurp(path));
  double end = 0;
  size_t slices = 0;
  int64_t device_max = 0, host_max = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") {
      EXPECT_EQ(e["args"]["name"], "lms plan: tflms predicted on h100-pcie5");
    }
    if (e["ph"] == "C") {
      (e["name"] == "device memory" ? device_max : host_max) =
          std::max(e["name"] == "device memory" ? device_max : host_max, e["args"]["bytes"].get<int64_t>());
    }
    if (e["ph"] != "X") continue;
    ++slices;
    end = std::max(end, e["ts"].get<double>() + e["dur"].get<double>());
  }
  EXPECT_GT(slices, 10u);
  EXPECT_NEAR(end, step * 1e6, 1.0) << "the last slice ends with the predicted step";
  EXPECT_LE(device_max, plan["peak_bytes"].get<int64_t>()) << "never more in use than the planned arena";
  EXPECT_GT(device_max, plan["param_bytes"].get<int64_t>());
  EXPECT_LE(host_max, plan["host_bytes"].get<int64_t>());
  EXPECT_GT(host_max, 0);
  // A prediction needs a device model: one error line, nothing written.
  const std::string none_path = (testing::temp_dir() / "plan_trace_none.json").string();
  expect_one_error_line(run_lms(std::string("plan ") + kGpt + " --budget 1GiB --trace " + none_path), "device model",
                        "--trace without --device-model");
  EXPECT_FALSE(std::filesystem::exists(none_path));
}

bool plan_fits(const std::string& args) {
  auto r = run_lms("plan " + args + " --json");
  EXPECT_TRUE(r.status == 0 || r.status == 1) << args << ": " << r.err;
  return json_of(r, args)["fits"].get<bool>();
}

TEST(MaxBatchCommand, TheAnswerFitsAndOneMoreDoesNot) {
  for (const std::string strategy : {"none", "tflms"}) {
    const std::string common = "--model mlp --budget 16MiB --strategy " + strategy;
    auto r = run_lms("maxbatch " + common + " --json");
    ASSERT_EQ(r.status, 0) << r.err;
    const auto b = json_of(r, "maxbatch")["max_batch"].get<int64_t>();
    ASSERT_GT(b, 1);
    EXPECT_TRUE(plan_fits(common + " --batch " + std::to_string(b))) << strategy << " batch " << b;
    EXPECT_FALSE(plan_fits(common + " --batch " + std::to_string(b + 1))) << strategy << " batch " << b + 1;
    // And it says why the next batch does not fit.
    const auto next = json_of(r, "maxbatch")["next_does_not_fit"];
    ASSERT_TRUE(next.is_string()) << strategy;
    EXPECT_EQ(next.get<std::string>().rfind("batch " + std::to_string(b + 1) + ": ", 0), 0u) << next;
    EXPECT_NE(next.get<std::string>().find("fit"), std::string::npos) << next;  // "does not fit", "cannot fit"
  }
}

// Under a budget nothing reaches, the batch is bounded by the model builder's refusal of tensors past 2^48
// elements (mlp's largest is the input, [batch, 784]): the search goes on below the refusal and says so.
TEST(MaxBatchCommand, ARefusedSizeBoundsTheSearchAndIsReported) {
  const std::string huge = "4000000000000000000";
  auto r = run_lms("maxbatch --model mlp --budget " + huge + " --limit " + huge + " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = json_of(r, "maxbatch");
  const auto b = j["max_batch"].get<int64_t>();
  constexpr int64_t kMaxElements = int64_t{1} << 48, kFeatures = 28 * 28;
  EXPECT_LE(b * kFeatures, kMaxElements);
  EXPECT_GT((b + 1) * kFeatures, kMaxElements);
  ASSERT_TRUE(j["limited_by"].is_string());
  EXPECT_NE(j["limited_by"].get<std::string>().find("more than 2^48 elements"), std::string::npos) << j.dump();
  EXPECT_TRUE(json_of(run_lms("maxbatch --model mlp --budget 16MiB --json"), "memory")["limited_by"].is_null());
}

TEST(MaxResCommand, TheAnswerFitsAndTheNextSideDoesNot) {
  const std::string common = "--model unet3d --depth 3 --base-filters 8 --budget 64MiB";
  auto r = run_lms("maxres " + common + " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = json_of(r, "maxres");
  const auto side = j["max_side"].get<int64_t>();
  EXPECT_EQ(j["side_multiple"].get<int64_t>(), 4);
  ASSERT_GE(side, 4);
  EXPECT_EQ(side % 4, 0);
  EXPECT_TRUE(plan_fits(common + " --batch 1 --image " + std::to_string(side)));
  EXPECT_FALSE(plan_fits(common + " --batch 1 --image " + std::to_string(side + 4)));
}

TEST(PlanCommands, BadOptionsAreOneLineErrors) {
  expect_one_error_line(run_lms("plan --model mlp"), "--budget", "no budget");
  expect_one_error_line(run_lms("plan --model mlp --budget 1GiB --strategy magic"), "unknown strategy", "strategy");
  expect_one_error_line(run_lms("plan --model mlp --budget 1GiB --device tpu"), "tpu", "device");
  expect_one_error_line(run_lms("plan --model mlp --budget 1GiB --device-model tpu9"), "unknown device model",
                        "device model");
  expect_one_error_line(run_lms("maxbatch --budget 1GiB"), "--model", "no model");
  expect_one_error_line(run_lms("maxbatch --model mlp --budget 1GiB --limit 0"), "--limit", "limit");
  expect_one_error_line(run_lms("maxres --model mlp --budget 1GiB"), "image input", "mlp has no side");
  expect_one_error_line(run_lms("maxbatch --model mlp --budget 1KiB"), "does not fit even at batch 1", "tiny");
}

}  // namespace
}  // namespace lms
