// The golden-test harness (FileCheck style). Each tests/golden/**/*.lms file holds a graph in IR text, one or
// more `# RUN:` lines (shell commands; `%s` is the file itself, a leading `lms` is the built binary, a `not `
// prefix expects a non-zero exit) and CHECK lines the command's stdout must match:
//   CHECK: pattern       the next match at or after the previous match
//   CHECK-NEXT: pattern  a match on the line right after the previous match
//   CHECK-NOT: pattern   no match between the previous match and the next positive match (or the end)
// Patterns are literal text except `{{regex}}`, `[[NAME:regex]]` (capture into NAME) and `[[NAME]]` (the text
// captured earlier), so tests survive renaming. Runs of blanks in a pattern match runs of blanks.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>

namespace {

namespace fs = std::filesystem;

struct Directive {
  enum Kind { Check, Next, Not } kind;
  std::string pattern;
  int line;  // in the test file, for messages
};

struct GoldenFile {
  std::vector<std::string> runs;
  std::vector<Directive> checks;
};

std::vector<std::string> golden_files() {
  std::vector<std::string> files;
  fs::path root = fs::path(LMS_SOURCE_DIR) / "tests" / "golden";
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file() && e.path().extension() == ".lms") files.push_back(fs::relative(e.path(), root).string());
  std::sort(files.begin(), files.end());
  return files;
}

GoldenFile read_directives(const std::string& path) {
  GoldenFile f;
  std::ifstream in(path);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    auto take = [&](std::string_view tag) -> std::optional<std::string> {
      size_t p = line.find(tag);
      if (p == std::string::npos) return std::nullopt;
      std::string rest = line.substr(p + tag.size());
      size_t b = rest.find_first_not_of(" \t");
      size_t e = rest.find_last_not_of(" \t\r");
      return b == std::string::npos ? std::string() : rest.substr(b, e - b + 1);
    };
    if (auto r = take("RUN:")) f.runs.push_back(*r);
    else if (auto c = take("CHECK-NEXT:")) f.checks.push_back({Directive::Next, *c, n});
    else if (auto c2 = take("CHECK-NOT:")) f.checks.push_back({Directive::Not, *c2, n});
    else if (auto c3 = take("CHECK:")) f.checks.push_back({Directive::Check, *c3, n});
  }
  return f;
}

std::string escape_regex(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == ' ' || c == '\t') {
      if (out.size() < 6 || out.substr(out.size() - 6) != "[ \\t]+") out += "[ \\t]+";
      continue;
    }
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

// Compiles a pattern into a regex; `captures` receives the names of the capture groups in order.
std::string to_regex(const std::string& pat, const std::map<std::string, std::string>& vars,
                     std::vector<std::string>& captures, std::string& error) {
  std::string re;
  size_t i = 0;
  while (i < pat.size()) {
    if (pat.compare(i, 2, "{{") == 0) {
      size_t e = pat.find("}}", i + 2);
      if (e == std::string::npos) { error = "unterminated {{"; return {}; }
      re += "(?:" + pat.substr(i + 2, e - i - 2) + ")";
      i = e + 2;
    } else if (pat.compare(i, 2, "[[") == 0) {
      size_t e = pat.find("]]", i + 2);
      if (e == std::string::npos) { error = "unterminated [["; return {}; }
      std::string body = pat.substr(i + 2, e - i - 2);
      size_t colon = body.find(':');
      if (colon == std::string::npos) {
        auto it = vars.find(body);
        if (it == vars.end()) { error = "use of undefined variable [[" + body + "]]"; return {}; }
        re += escape_regex(it->second);
      } else {
        captures.push_back(body.substr(0, colon));
        re += "(" + body.substr(colon + 1) + ")";
      }
      i = e + 2;
    } else {
      size_t next = std::min(pat.find("{{", i), pat.find("[[", i));
      if (next == std::string::npos) next = pat.size();
      re += escape_regex(std::string_view(pat).substr(i, next - i));
      i = next;
    }
  }
  return re;
}

struct RunResult {
  std::string out;
  int status = 0;
};

RunResult run_shell(const std::string& cmd) {
  RunResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return {"popen failed", -1};
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string expand_run(std::string run, const std::string& file) {
  bool expect_fail = run.rfind("not ", 0) == 0;
  if (expect_fail) run = run.substr(4);
  std::string out;
  // `lms` at the start of the command or after a pipe is the built binary.
  std::regex lms_word(R"((^|\|\s*)lms\b)");
  run = std::regex_replace(run, lms_word, std::string("$1") + LMS_BINARY);
  for (size_t p; (p = run.find("%s")) != std::string::npos;) run.replace(p, 2, "'" + file + "'");
  return expect_fail ? "! ( " + run + " )" : run;
}

class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, Matches) {
  std::string path = (fs::path(LMS_SOURCE_DIR) / "tests" / "golden" / GetParam()).string();
  GoldenFile f = read_directives(path);
  ASSERT_FALSE(f.runs.empty()) << path << ": no RUN line";
  ASSERT_FALSE(f.checks.empty()) << path << ": no CHECK line";
  std::string output;
  for (const std::string& run : f.runs) {
    std::string cmd = expand_run(run, path);
    RunResult r = run_shell(cmd);
    ASSERT_EQ(r.status, 0) << path << ": command failed (status " << r.status << "): " << cmd << "\n" << r.out;
    output += r.out;
  }
  std::vector<std::string> lines;
  {
    std::istringstream ss(output);
    for (std::string l; std::getline(ss, l);) lines.push_back(l);
  }
  std::map<std::string, std::string> vars;
  size_t line = 0, col = 0;       // where the next search starts
  int last_line = -1;             // line of the previous positive match
  std::vector<const Directive*> pending_not;
  auto fail_here = [&](const Directive& d, const std::string& why) {
    std::string ctx;
    size_t first = last_line < 0 ? 0 : static_cast<size_t>(last_line);
    for (size_t i = first; i < lines.size() && i < first + 8; ++i)
      ctx += "    " + lines[i] + "\n";
    ADD_FAILURE() << path << ":" << d.line << ": " << why << "\n  pattern: " << d.pattern << "\n  output from line "
                  << (last_line < 0 ? 1 : last_line + 1) << ":\n" << ctx << "  full output:\n" << output;
  };
  auto check_nots = [&](size_t end_line, size_t end_col) {
    for (const Directive* d : pending_not) {
      std::vector<std::string> caps;
      std::string err;
      std::string re = to_regex(d->pattern, vars, caps, err);
      if (!err.empty()) { fail_here(*d, err); continue; }
      std::regex rx(re);
      for (size_t l = line; l < lines.size() && l <= end_line; ++l) {
        size_t b = l == line ? col : 0;
        size_t e = l == end_line ? end_col : lines[l].size();
        if (b > e || b > lines[l].size()) continue;
        std::string segment = lines[l].substr(b, e - b);
        if (std::regex_search(segment, rx)) fail_here(*d, "CHECK-NOT pattern found on output line " + std::to_string(l + 1) + ": " + lines[l]);
      }
    }
    pending_not.clear();
  };
  for (const Directive& d : f.checks) {
    if (d.kind == Directive::Not) {
      pending_not.push_back(&d);
      continue;
    }
    std::vector<std::string> caps;
    std::string err;
    std::string re = to_regex(d.pattern, vars, caps, err);
    if (!err.empty()) { fail_here(d, err); return; }
    std::regex rx(re);
    std::smatch m;
    bool found = false;
    size_t from = d.kind == Directive::Next ? static_cast<size_t>(last_line + 1) : line;
    size_t to = d.kind == Directive::Next ? from + 1 : lines.size();
    for (size_t l = from; l < to && l < lines.size() && !found; ++l) {
      size_t b = (l == line) ? col : 0;
      if (b > lines[l].size()) continue;
      std::string rest = lines[l].substr(b);
      if (std::regex_search(rest, m, rx)) {
        found = true;
        check_nots(l, b + m.position(0));
        for (size_t k = 0; k < caps.size(); ++k) vars[caps[k]] = m[k + 1].str();
        line = l;
        col = b + m.position(0) + m.length(0);
        last_line = static_cast<int>(l);
      }
    }
    if (!found) {
      fail_here(d, d.kind == Directive::Next ? "CHECK-NEXT: no match on the next line" : "CHECK: no match");
      return;
    }
  }
  check_nots(lines.empty() ? 0 : lines.size() - 1, lines.empty() ? 0 : lines.back().size());
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Files, Golden, ::testing::ValuesIn(golden_files()), test_name);

}  // namespace
