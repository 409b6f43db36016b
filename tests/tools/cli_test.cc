// The `lms` command end to end: bad input of every kind gives exactly one error line on stderr and a non-zero
// exit (never a crash or a signal), and the documented good paths work (round trip, stats JSON, help).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "tools/cli_util.h"

namespace {

namespace fs = std::filesystem;

using lms::testing::CmdResult;
using lms::testing::expect_one_error_line;

CmdResult lms(const std::string& args) { return lms::testing::run_lms(args); }

fs::path write_temp(const std::string& name, const std::string& content) {
  fs::path p = fs::temp_directory_path() / ("lms_cli_test_" + std::to_string(getpid()) + "_" + name);
  std::ofstream(p, std::ios::binary) << content;
  return p;
}

struct BadGraph {
  const char* name;
  const char* text;
  const char* needle;
};

TEST(Cli, BadGraphsGiveOneErrorLine) {
  const BadGraph cases[] = {
      {"empty", "", "empty input"},
      {"malformed", "graph g {\n  %x = input( : f32[2]\n}\n", ":2:"},
      {"unknown_op", "graph g {\n  %x = input() : f32[2]\n  %y = frobnicate(%x) : f32[2]\n}\n", "unknown op 'frobnicate'"},
      {"arity", "graph g {\n  %x = input() : f32[2]\n  %y = add(%x) : f32[2]\n}\n", "takes 2 inputs"},
      {"unknown_attr", "graph g {\n  %x = input() : f32[2]\n  %y = relu(%x) {alpha = 0.1} : f32[2]\n}\n",
       "no attribute 'alpha'"},
      {"shape", "graph g {\n  %x = input() : f32[2,3]\n  %w = param() : f32[4,5]\n  %y = matmul(%x, %w) : f32[2,5]\n}\n",
       "%y"},
      {"cycle", "graph g {\n  %x = input() : f32[2]\n  %a = relu(%x) after(%b) : f32[2]\n  %b = relu(%a) : f32[2]\n}\n",
       "cycle"},
      {"undefined", "graph g {\n  %y = relu(%nope) : f32[2]\n}\n", "%nope"},
      {"binary", std::string("\x7f" "ELF\x02\x01\x01\0\0\0\xff\xfe", 12).c_str(), "error"},
  };
  for (const BadGraph& c : cases) {
    fs::path p = write_temp(c.name, c.text);
    expect_one_error_line(lms("opt " + p.string() + " --passes verify"), c.needle, c.name);
  }
  // A binary file with NUL bytes inside (the table above stops at the first NUL).
  std::string bin(256, '\0');
  for (int i = 0; i < 256; ++i) bin[i] = static_cast<char>(i);
  expect_one_error_line(lms("opt " + write_temp("bytes", bin).string() + " --passes verify"), "error", "binary");
}

TEST(Cli, BadCommandLines) {
  expect_one_error_line(lms("opt /no/such/file --passes verify"), "cannot read '/no/such/file'", "missing file");
  expect_one_error_line(lms("model nosuch"), "unknown model 'nosuch'", "unknown model");
  expect_one_error_line(lms("model resnet50 --batch 0"), "batch", "batch 0");
  expect_one_error_line(lms("model resnet50 --image 0"), "image", "image 0");
  expect_one_error_line(lms("model resnet50 --heads 4"), "heads", "option not used by the model");
  expect_one_error_line(lms("stats"), "--model", "no input");
  expect_one_error_line(lms("frobnicate"), "frobnicate", "unknown command");
  expect_one_error_line(lms("model resnet50 --no-such-flag"), "no-such-flag", "unknown flag");
  CmdResult r = lms("opt - --passes nosuch </dev/null");
  expect_one_error_line(r, "unknown pass 'nosuch'", "unknown pass");
}

TEST(Cli, RoundTripThroughOpt) {
  CmdResult model = lms("model resnet18 --batch 2 --image 32 --small-stem");
  ASSERT_EQ(model.status, 0) << model.err;
  fs::path p = write_temp("r18.lms", model.out);
  CmdResult opt = lms("opt " + p.string() + " --passes verify");
  ASSERT_EQ(opt.status, 0) << opt.err;
  EXPECT_EQ(opt.out, model.out);
}

// The training graph keeps the stem's argmax by default; --no-argmax-pool keeps its relu output instead, and
// needs --train like the other training flags.
TEST(Cli, NoArgmaxPool) {
  CmdResult on = lms("model resnet18 --batch 2 --image 32 --train sgd");
  ASSERT_EQ(on.status, 0) << on.err;
  EXPECT_NE(on.out.find("max_pool_argmax("), std::string::npos);
  EXPECT_EQ(on.out.find("max_pool_grad("), std::string::npos);
  CmdResult off = lms("model resnet18 --batch 2 --image 32 --train sgd --no-argmax-pool");
  ASSERT_EQ(off.status, 0) << off.err;
  EXPECT_EQ(off.out.find("max_pool_argmax("), std::string::npos);
  EXPECT_NE(off.out.find("max_pool_grad(%maxpool.grad, %relu)"), std::string::npos);
  expect_one_error_line(lms("model resnet18 --no-argmax-pool"), "need --train", "--no-argmax-pool without --train");
}

TEST(Cli, StatsJsonAndHelp) {
  CmdResult r = lms("stats --model resnet50 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("\"params\": 25557032"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"levels\": "), std::string::npos);
  CmdResult h = lms("--help");
  EXPECT_EQ(h.status, 0);
  for (const char* cmd : {"model", "stats", "opt"}) EXPECT_NE(h.out.find(cmd), std::string::npos) << cmd;
  CmdResult hm = lms("model --help");
  EXPECT_EQ(hm.status, 0);
  EXPECT_NE(hm.out.find("--batch"), std::string::npos);
  EXPECT_NE(hm.out.find("resnet152"), std::string::npos);
}

}  // namespace
