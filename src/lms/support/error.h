// Errors as values. Every fallible function at a library boundary returns `Result<T>` (std::expected) whose
// error names what went wrong, where (a node, a file:line:col, an option), and carries the numbers in its
// message. Errors print as one line: "where: what". No exception crosses a library boundary.
#pragma once

#include <expected>
#include <string>
#include <utility>

#include <fmt/core.h>

namespace lms {

struct Error {
  std::string what;   // what went wrong, with the numbers involved
  std::string where;  // the node, file position or option it concerns; empty when global

  // One line: "where: what" (or just "what").
  std::string str() const { return where.empty() ? what : where + ": " + what; }
};

template <class T>
using Result = std::expected<T, Error>;

// Shorthand for `return fail("...", args...)` in functions returning Result<T>.
template <class... Args>
std::unexpected<Error> fail(fmt::format_string<Args...> f, Args&&... args) {
  return std::unexpected(Error{fmt::format(f, std::forward<Args>(args)...), {}});
}

// Same, with a location.
template <class... Args>
std::unexpected<Error> fail_at(std::string where, fmt::format_string<Args...> f, Args&&... args) {
  return std::unexpected(Error{fmt::format(f, std::forward<Args>(args)...), std::move(where)});
}

// Prefixes the location of an error coming up from a callee ("outer: inner: what").
inline std::unexpected<Error> wrap(std::string where, Error e) {
  e.where = e.where.empty() ? std::move(where) : where + ": " + e.where;
  return std::unexpected(std::move(e));
}

}  // namespace lms

// Propagates an error from an expression returning Result<T>; evaluates to the value otherwise.
// (A GNU statement expression: g++ and clang both accept it; it keeps call sites to one line.)
#define LMS_TRY(expr)                                          \
  ({                                                           \
    auto lms_try_result_ = (expr);                             \
    if (!lms_try_result_) return std::unexpected(std::move(lms_try_result_.error())); \
    std::move(*lms_try_result_);                               \
  })

// Same for Result<void>.
#define LMS_TRY_VOID(expr)                                     \
  do {                                                         \
    auto lms_try_result_ = (expr);                             \
    if (!lms_try_result_) return std::unexpected(std::move(lms_try_result_.error())); \
  } while (0)
