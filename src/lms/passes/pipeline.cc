// Pipeline text -> pass calls, and running them. Grammar: pipeline = call (',' call)*;
// call = name ('{' key '=' value (',' key '=' value)* '}')?; value = int | float | bool | [ints] | "str" | word.
#include <cctype>
#include <charconv>
#include <cstdlib>

#include <fmt/format.h>

#include "lms/ir/verifier.h"
#include "lms/passes/pass.h"

namespace lms {

namespace {

class PipelineLexer {
 public:
  explicit PipelineLexer(std::string_view s) : s_(s) {}

  void skip_space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool at_end() {
    skip_space();
    return i_ >= s_.size();
  }
  bool eat(char c) {
    skip_space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  char peek() {
    skip_space();
    return i_ < s_.size() ? s_[i_] : '\0';
  }
  std::string_view word() {
    skip_space();
    size_t b = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '-' || s_[i_] == '_' ||
                              s_[i_] == '.' || s_[i_] == '+'))
      ++i_;
    return s_.substr(b, i_ - b);
  }
  std::unexpected<Error> error(std::string what) const {
    return std::unexpected(Error{std::move(what), fmt::format("pipeline column {}", i_ + 1)});
  }
  Result<Attribute> value() {
    if (eat('"')) {
      std::string out;
      while (i_ < s_.size() && s_[i_] != '"') out += s_[i_++];
      if (!eat('"')) return error("unterminated string");
      return Attribute{out};
    }
    if (eat('[')) {
      IntList list;
      if (eat(']')) return Attribute{list};
      do {
        std::string_view w = word();
        int64_t v = 0;
        auto [p, ec] = std::from_chars(w.data(), w.data() + w.size(), v);
        if (w.empty() || ec != std::errc() || p != w.data() + w.size())
          return error(fmt::format("expected an integer in the list, got '{}'", w));
        list.push_back(v);
      } while (eat(','));
      if (!eat(']')) return error("expected ']' to close the list");
      return Attribute{list};
    }
    std::string_view w = word();
    if (w.empty()) return error(fmt::format("expected a value, got '{}'", peek()));
    if (w == "true" || w == "false") return Attribute{w == "true"};
    int64_t iv = 0;
    auto [p, ec] = std::from_chars(w.data(), w.data() + w.size(), iv);
    if (ec == std::errc() && p == w.data() + w.size()) return Attribute{iv};
    double dv = 0;
    auto [pd, ecd] = std::from_chars(w.data(), w.data() + w.size(), dv);
    if (ecd == std::errc() && pd == w.data() + w.size()) return Attribute{dv};
    return Attribute{std::string(w)};
  }

 private:
  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace

Result<std::vector<PassCall>> parse_pipeline(std::string_view text) {
  PipelineLexer lex(text);
  std::vector<PassCall> calls;
  if (lex.at_end()) return lex.error("empty pipeline (passes: name them separated by commas, e.g. 'dce,verify')");
  do {
    std::string_view name = lex.word();
    if (name.empty()) return lex.error(fmt::format("expected a pass name, got '{}'", lex.peek()));
    const PassInfo* pass = find_pass(name);
    if (pass == nullptr) {
      std::vector<std::string_view> known;
      for (const PassInfo& p : pass_registry()) known.push_back(p.name);
      return lex.error(fmt::format("unknown pass '{}' (passes: {})", name, fmt::join(known, ", ")));
    }
    Attributes opts;
    if (lex.eat('{')) {
      if (!lex.eat('}')) {
        do {
          std::string_view key = lex.word();
          if (key.empty()) return lex.error(fmt::format("expected an option name of pass '{}'", name));
          if (opts.has(key)) return lex.error(fmt::format("option '{}' of pass '{}' given twice", key, name));
          if (!lex.eat('=')) return lex.error(fmt::format("expected '=' after option '{}'", key));
          auto v = lex.value();
          if (!v) return std::unexpected(v.error());
          opts.set(key, *v);
        } while (lex.eat(','));
        if (!lex.eat('}')) return lex.error(fmt::format("expected '}}' to close the options of pass '{}'", name));
      }
    }
    auto normalized = normalize_attributes(pass->options, std::move(opts), fmt::format("pass '{}'", name), "option");
    if (!normalized) return lex.error(normalized.error().what);
    calls.push_back(PassCall{pass, std::move(*normalized)});
  } while (lex.eat(','));
  if (!lex.at_end()) return lex.error(fmt::format("expected ',' between passes, got '{}'", lex.peek()));
  return calls;
}

Result<void> run_pipeline(Graph& g, std::span<const PassCall> pipeline, const PipelineOptions& opts) {
  for (const PassCall& call : pipeline) {
    auto r = call.pass->run(g, call.options);
    if (!r) return wrap(fmt::format("pass '{}'", call.pass->name), r.error());
    if (opts.verify_each) {
      auto v = verify(g);
      if (!v) return wrap(fmt::format("after pass '{}'", call.pass->name), v.error());
    }
  }
  return {};
}

}  // namespace lms
