// Running the built `lms` binary from tests: exit status, stdout and stderr of one command, and the check that a
// failure is exactly one "lms: error: ..." line on stderr with nothing on stdout.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include <sys/wait.h>
#include <unistd.h>

namespace lms::testing {

struct CmdResult {
  int status = -1;  // exit code; -1 if killed by a signal
  std::string out;  // stdout
  std::string err;  // stderr
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// A per-process scratch directory for command outputs and test files.
inline std::filesystem::path temp_dir() {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("lms_cli_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

// Runs `lms ARGS` (ARGS may hold shell redirections) and captures its outputs.
inline CmdResult run_lms(const std::string& args) {
  static int counter = 0;
  std::filesystem::path out = temp_dir() / ("out" + std::to_string(counter));
  std::filesystem::path err = temp_dir() / ("err" + std::to_string(counter));
  ++counter;
  std::string cmd = std::string(LMS_BINARY) + " " + args + " >" + out.string() + " 2>" + err.string();
  int st = std::system(cmd.c_str());
  return CmdResult{WIFEXITED(st) ? WEXITSTATUS(st) : -1, slurp(out), slurp(err)};
}

inline void expect_one_error_line(const CmdResult& r, std::string_view needle, const std::string& what) {
  EXPECT_GT(r.status, 0) << what << " (status -1 means a signal)";
  EXPECT_TRUE(r.out.empty()) << what << ": stdout: " << r.out;
  ASSERT_FALSE(r.err.empty()) << what;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << what << ": more than one line: " << r.err;
  EXPECT_EQ(r.err.rfind("lms: error: ", 0), 0u) << what << ": " << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << what << ": " << r.err;
}

}  // namespace lms::testing
