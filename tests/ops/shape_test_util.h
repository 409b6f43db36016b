// Helpers shared by the shape-rule and cost tests of tests/ops: tensor type shorthands, attribute literals,
// `infer` (normalize attributes, then run the shape rule, as a builder does) and table-driven error checks.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "lms/ops/op.h"

namespace lms::op_test {

inline TensorType f32(Shape s) { return {DType::f32, std::move(s)}; }
inline TensorType f16(Shape s) { return {DType::f16, std::move(s)}; }
inline TensorType i32(Shape s) { return {DType::i32, std::move(s)}; }
inline TensorType i64(Shape s) { return {DType::i64, std::move(s)}; }
using Types = std::vector<TensorType>;

inline Attributes A(std::initializer_list<std::pair<std::string, Attribute>> list) {
  Attributes a;
  for (const auto& [n, v] : list) a.set(n, v);
  return a;
}
inline Attribute I(int64_t v) { return Attribute{v}; }
inline Attribute L(IntList v) { return Attribute{std::move(v)}; }

// What a builder does: normalize the attributes, then run the shape rule.
inline Result<Types> infer(Op op, const Types& in, Attributes a = {}) {
  auto n = normalize_attrs(op_def(op), std::move(a));
  if (!n) return std::unexpected(n.error());
  return infer_types(op, in, *n);
}

inline std::string show(const Types& ts) {
  std::vector<std::string> s;
  for (const TensorType& t : ts) s.push_back(to_string(t));
  return fmt::format("({})", fmt::join(s, ", "));
}

inline ::testing::AssertionResult gives(const Result<Types>& r, const Types& expected) {
  if (!r) return ::testing::AssertionFailure() << "unexpected error: " << r.error().str();
  if (*r != expected) return ::testing::AssertionFailure() << "got " << show(*r) << ", expected " << show(expected);
  return ::testing::AssertionSuccess();
}

struct ErrorCase {
  Op op;
  Types inputs;
  Attributes attrs;
  std::vector<std::string_view> facts;  // each must appear in the message
};

// Runs each case and checks that it fails with a message holding all its facts.
inline void expect_errors(const std::vector<ErrorCase>& cases) {
  for (size_t i = 0; i < cases.size(); ++i) {
    const ErrorCase& c = cases[i];
    SCOPED_TRACE(fmt::format("case {} ({} of {})", i, op_name(c.op), show(c.inputs)));
    auto r = infer(c.op, c.inputs, c.attrs);
    if (r) {
      ADD_FAILURE() << "expected an error, got " << show(*r);
      continue;
    }
    for (std::string_view f : c.facts)
      EXPECT_NE(r.error().what.find(f), std::string::npos) << "message '" << r.error().what << "' lacks '" << f << "'";
  }
}

}  // namespace lms::op_test
