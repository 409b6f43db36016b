// `lms model --train` and `lms stats --train` end to end: the printed training graph parses back and holds
// the optimizer's updates, stats count the training graph, and bad flags give one error line.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tools/cli_util.h"

#include "lms/ir/parser.h"
#include "lms/ir/printer.h"
#include "lms/ir/verifier.h"

namespace {

namespace fs = std::filesystem;

using lms::testing::CmdResult;

CmdResult lms(const std::string& args) { return lms::testing::run_lms(args); }

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

TEST(TrainFlags, ModelPrintsTheTrainingGraph) {
  CmdResult r = lms("model mlp --batch 2 --hidden 8 --image 4 --train momentum --lr 0.1 --momentum 0.5");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  auto g = lms::parse_graph(r.out);
  ASSERT_TRUE(g.has_value()) << g.error().str();
  EXPECT_TRUE(lms::verify(*g).has_value());
  EXPECT_EQ(lms::print_graph(*g), r.out);
  EXPECT_EQ(count(r.out, "= momentum_update("), 4u);  // fc1.w, fc1.b, fc2.w, fc2.b
  EXPECT_NE(r.out.find("{lr = 0.1, momentum = 0.5, weight_decay = 0.0, nesterov = false}"), std::string::npos)
      << r.out;
}

TEST(TrainFlags, StatsCountTheTrainingGraph) {
  const std::string model = "--model resnet18 --batch 2 --image 32 --small-stem --json";
  CmdResult fwd = lms("stats " + model);
  CmdResult trn = lms("stats " + model + " --train adam");
  ASSERT_EQ(fwd.status, 0) << fwd.err;
  ASSERT_EQ(trn.status, 0) << trn.err;
  auto f = nlohmann::json::parse(fwd.out), t = nlohmann::json::parse(trn.out);
  for (const char* key : {"params", "flops", "nodes", "levels"}) {
    EXPECT_TRUE(f.contains(key) && t.contains(key)) << key;
  }
  EXPECT_EQ(t["params"], f["params"]);
  EXPECT_GT(t["nodes"].get<int64_t>(), 3 * f["nodes"].get<int64_t>());
  // Backward convolutions do twice the forward's multiply-adds (data and filter gradients).
  EXPECT_GT(t["flops"].get<double>(), 2.5 * f["flops"].get<double>());
  // Adam's two moments per parameter, plus running statistics and step counts.
  EXPECT_GE(t["state_bytes"].get<int64_t>(), 2 * f["param_bytes"].get<int64_t>());
}

TEST(TrainFlags, BadFlagsGiveOneErrorLine) {
  struct Bad {
    const char* args;
    const char* needle;
  };
  for (const Bad& b : {Bad{"model mlp --lr 0.1", "need --train"},
                       Bad{"model mlp --train rmsprop", "--train must be sgd, momentum, adam or adamw, got 'rmsprop'"},
                       Bad{"model mlp --train adam --momentum 0.5", "--momentum applies to --train momentum"},
                       Bad{"model mlp --train sgd --lr -1", "'lr' = -1 must be >= 0"},
                       Bad{"stats --model mlp --train sgd --weight-decay -2", "'weight-decay' = -2 must be >= 0"},
                       Bad{"model resnet18 --image 32 --train sgd", "count"}}) {
    CmdResult r = lms(b.args);
    EXPECT_EQ(r.status, 1) << b.args;
    EXPECT_TRUE(r.out.empty()) << b.args;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << b.args << ": " << r.err;
    EXPECT_EQ(r.err.rfind("lms: error: ", 0), 0u) << b.args << ": " << r.err;
    EXPECT_NE(r.err.find(b.needle), std::string::npos) << b.args << ": " << r.err;
  }
}

}  // namespace
