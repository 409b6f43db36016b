// Attribute values and their text spelling.
#include "lms/ir/attributes.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace lms {

std::string_view attr_kind_name(AttrKind k) {
  switch (k) {
    case AttrKind::Int: return "int";
    case AttrKind::Float: return "float";
    case AttrKind::Bool: return "bool";
    case AttrKind::String: return "string";
    case AttrKind::IntList: return "int list";
  }
  return "?";
}

AttrKind kind_of(const Attribute& a) { return static_cast<AttrKind>(a.index()); }

namespace {
std::string float_text(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{}", v);  // shortest round-trip representation
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
        else out += c;
    }
  }
  return out + "\"";
}
}  // namespace

std::string to_string(const Attribute& a) {
  switch (kind_of(a)) {
    case AttrKind::Int: return fmt::format("{}", std::get<int64_t>(a));
    case AttrKind::Float: return float_text(std::get<double>(a));
    case AttrKind::Bool: return std::get<bool>(a) ? "true" : "false";
    case AttrKind::String: return quoted(std::get<std::string>(a));
    case AttrKind::IntList: return fmt::format("[{}]", fmt::join(std::get<IntList>(a), ", "));
  }
  return "?";
}

const Attribute* Attributes::find(std::string_view name) const {
  for (const auto& [n, v] : entries_)
    if (n == name) return &v;
  return nullptr;
}

void Attributes::set(std::string_view name, Attribute value) {
  for (auto& [n, v] : entries_)
    if (n == name) {
      v = std::move(value);
      return;
    }
  entries_.emplace_back(std::string(name), std::move(value));
}

void Attributes::erase(std::string_view name) {
  std::erase_if(entries_, [&](const Entry& e) { return e.first == name; });
}

namespace {
template <class T>
T get_or(const Attributes& attrs, std::string_view name, T fallback) {
  const Attribute* a = attrs.find(name);
  if (a == nullptr) return fallback;
  if (const T* v = std::get_if<T>(a)) return *v;
  return fallback;
}
}  // namespace

int64_t Attributes::get_int(std::string_view n, int64_t f) const { return get_or(*this, n, f); }
double Attributes::get_float(std::string_view n, double f) const { return get_or(*this, n, f); }
bool Attributes::get_bool(std::string_view n, bool f) const { return get_or(*this, n, f); }
std::string Attributes::get_string(std::string_view n, std::string f) const { return get_or(*this, n, std::move(f)); }
IntList Attributes::get_ints(std::string_view n, IntList f) const { return get_or(*this, n, std::move(f)); }

Result<Attributes> normalize_attributes(std::span<const AttrSpec> specs, Attributes attrs, std::string_view owner,
                                        std::string_view noun) {
  auto find_spec = [&](std::string_view name) -> const AttrSpec* {
    for (const AttrSpec& s : specs)
      if (s.name == name) return &s;
    return nullptr;
  };
  for (auto& [name, value] : attrs.mutable_entries()) {
    const AttrSpec* s = find_spec(name);
    if (s == nullptr) {
      std::vector<std::string_view> known;
      for (const AttrSpec& a : specs) known.push_back(a.name);
      return fail("{} has no {} '{}' ({}s: {})", owner, noun, name, noun,
                  known.empty() ? std::string("none") : fmt::format("{}", fmt::join(known, ", ")));
    }
    if (s->kind == AttrKind::Float && kind_of(value) == AttrKind::Int)
      value = static_cast<double>(std::get<int64_t>(value));
    if (kind_of(value) != s->kind)
      return fail("{} '{}' of {} must be {}, got {} {}", noun, name, owner, attr_kind_name(s->kind),
                  attr_kind_name(kind_of(value)), to_string(value));
  }
  Attributes out;
  for (const AttrSpec& s : specs) {
    if (const Attribute* a = attrs.find(s.name)) out.set(s.name, *a);
    else if (!s.default_value) return fail("{} needs {} '{}' ({})", owner, noun, s.name, s.doc);
  }
  return out;
}

}  // namespace lms
