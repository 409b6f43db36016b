// Size parsing and formatting (see size.h).
#include "lms/support/size.h"

#include <array>
#include <cctype>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace lms {

namespace {

struct Unit {
  std::string_view name;  // lower case
  double factor;
};

// Matched against the whole suffix after the number.
constexpr std::array<Unit, 12> kUnits = {{
    {"b", 1.0},
    {"kib", 1024.0},
    {"mib", 1024.0 * 1024},
    {"gib", 1024.0 * 1024 * 1024},
    {"tib", 1024.0 * 1024 * 1024 * 1024},
    {"kb", 1e3},
    {"mb", 1e6},
    {"gb", 1e9},
    {"tb", 1e12},
    {"k", 1024.0},  // the short forms some tools print ("16G"): binary, as `free -h` and `ls -h` mean them
    {"m", 1024.0 * 1024},
    {"g", 1024.0 * 1024 * 1024},
}};

constexpr std::string_view kExpected = "expected a byte count or a number with a unit like 512MiB, 16GiB, 2GB";

}  // namespace

Result<int64_t> parse_size(std::string_view text) {
  std::string_view s = text;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  if (s.empty()) return fail("size '{}': empty; {}", text, kExpected);
  if (s.front() == '-') return fail("size '{}' is negative", text);

  // Number part: digits with at most one '.'.
  size_t i = 0;
  bool dot = false, digits = false;
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      digits = true;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (!digits) return fail("size '{}': no number; {}", text, kExpected);
  std::string_view number = s.substr(0, i);
  std::string_view unit_text = s.substr(i);
  while (!unit_text.empty() && unit_text.front() == ' ') unit_text.remove_prefix(1);
  std::string unit;
  for (char c : unit_text) unit += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));

  double factor = 0;
  if (unit.empty()) {
    factor = 1;
  } else {
    for (const Unit& u : kUnits)
      if (u.name == unit) factor = u.factor;
    if (factor == 0) return fail("size '{}': unknown unit '{}'; {}", text, unit_text, kExpected);
  }

  if (unit.empty() || unit == "b") {
    if (dot) return fail("size '{}': a byte count must be a whole number", text);
    int64_t v = 0;
    for (char c : number) {
      if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, c - '0', &v))
        return fail("size '{}' is too large", text);
    }
    return v;
  }
  double value = std::strtod(std::string(number).c_str(), nullptr);
  double bytes = std::round(value * factor);
  // 2^63 is exactly representable; anything at or above it does not fit in int64_t.
  if (!(bytes < 9223372036854775808.0)) return fail("size '{}' is too large", text);
  return static_cast<int64_t>(bytes);
}

std::string format_size(int64_t bytes) {
  constexpr std::array<const char*, 5> kNames = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  size_t u = 0;
  while ((v >= 1024 || v <= -1024) && u + 1 < kNames.size()) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, kNames[u]);
}

}  // namespace lms
