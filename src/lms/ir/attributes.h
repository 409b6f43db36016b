// Typed node attributes: int, float, bool, string, int list. A node's attributes are an ordered list of
// (name, value) pairs kept in the op definition's declared order, so printing is deterministic. Floats print
// in the shortest form that parses back to the same double, always with a '.' or an exponent so that their
// kind survives the round trip.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "lms/support/error.h"

namespace lms {

enum class AttrKind : uint8_t { Int, Float, Bool, String, IntList };
std::string_view attr_kind_name(AttrKind k);  // "int", "float", ...

using IntList = std::vector<int64_t>;
using Attribute = std::variant<int64_t, double, bool, std::string, IntList>;

AttrKind kind_of(const Attribute& a);
std::string to_string(const Attribute& a);  // text-format spelling: 3, 0.1, true, "s", [1, 2]

class Attributes {
 public:
  using Entry = std::pair<std::string, Attribute>;

  const std::vector<Entry>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }
  bool has(std::string_view name) const { return find(name) != nullptr; }
  const Attribute* find(std::string_view name) const;

  // Sets (or replaces) an attribute; new names are appended. Ops' attribute lists define the canonical order
  // and `normalize` in ops/ reorders to it.
  void set(std::string_view name, Attribute value);
  void erase(std::string_view name);
  std::vector<Entry>& mutable_entries() { return entries_; }

  // Typed getters: the attribute's value if present with that kind, else `fallback`.
  int64_t get_int(std::string_view name, int64_t fallback) const;
  double get_float(std::string_view name, double fallback) const;
  bool get_bool(std::string_view name, bool fallback) const;
  std::string get_string(std::string_view name, std::string fallback) const;
  IntList get_ints(std::string_view name, IntList fallback) const;

  friend bool operator==(const Attributes&, const Attributes&) = default;

 private:
  std::vector<Entry> entries_;
};

// A declared attribute (of an op) or option (of a pass).
struct AttrSpec {
  std::string_view name;
  AttrKind kind;
  std::optional<Attribute> default_value;  // nullopt: required
  std::string_view doc;                    // one line, for docs and --help
};

// Checks `attrs` against `specs` (unknown names list the known ones; an int is accepted where a float is
// declared; required ones must be present) and returns them in declared order, without filling defaults.
// `owner` and `noun` phrase the errors: "op 'conv2d'" + "attribute", "pass 'dce'" + "option".
Result<Attributes> normalize_attributes(std::span<const AttrSpec> specs, Attributes attrs, std::string_view owner,
                                        std::string_view noun);

}  // namespace lms
