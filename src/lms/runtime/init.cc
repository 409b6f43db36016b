// Parameter and state initialization (init.h). The numbers are computed in double precision from the
// portable generator in support/random.h and rounded once to the value's dtype.
#include "lms/runtime/init.h"

#include <charconv>
#include <cmath>

#include "lms/support/random.h"

namespace lms {

namespace {

// Kaiming normal's gain for relu (He et al. 2015): std = sqrt(kHeGain / fan_in).
constexpr double kHeGain = 2.0;

// The scale in "name(scale)", or nullopt when `text` does not have that form.
std::optional<std::string_view> call_argument(std::string_view text, std::string_view name) {
  if (!text.starts_with(name) || text.size() < name.size() + 2) return std::nullopt;
  std::string_view rest = text.substr(name.size());
  if (rest.front() != '(' || rest.back() != ')') return std::nullopt;
  return rest.substr(1, rest.size() - 2);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

}  // namespace

Result<InitSpec> parse_init(std::string_view text) {
  using K = InitSpec::Kind;
  if (text == "he") return InitSpec{K::he, 0};
  if (text == "zeros") return InitSpec{K::zeros, 0};
  if (text == "ones") return InitSpec{K::ones, 0};
  if (text == "bits") return InitSpec{K::bits, 0};
  for (auto [name, kind] : {std::pair{std::string_view("normal"), K::normal}, {std::string_view("uniform"), K::uniform}}) {
    auto arg = call_argument(text, name);
    if (!arg) continue;
    std::string_view a = trim(*arg);
    double v = 0;
    auto [p, ec] = std::from_chars(a.data(), a.data() + a.size(), v);
    if (ec != std::errc() || p != a.data() + a.size())
      return fail("init '{}': '{}' is not a number", text, *arg);
    if (!std::isfinite(v) || v < 0) return fail("init '{}': the scale must be finite and >= 0", text);
    return InitSpec{kind, v};
  }
  return fail("unknown init '{}' (known: he, zeros, ones, bits, normal(S), uniform(B))", text);
}

Result<HostTensor> make_initial_value(const TensorType& type, const InitSpec& spec, std::string_view name,
                                      uint64_t seed) {
  using K = InitSpec::Kind;
  HostTensor t(type);
  const int64_t n = type.num_elements();
  if (spec.kind == K::zeros) return t;  // HostTensor's storage starts zeroed; 0 is all-zero bits in every dtype
  if (spec.kind == K::ones) {
    for (int64_t i = 0; i < n; ++i) t.set(i, 1.0);
    return t;
  }
  const RandomStream stream(derive_key(seed, fnv1a64(name)));
  if (spec.kind == K::bits) {
    if (type.dtype != DType::i64)
      return fail_at(std::string(name), "init 'bits' needs an i64 value, got {}", to_string(type));
    for (int64_t i = 0; i < n; ++i) t.as<int64_t>()[static_cast<size_t>(i)] = static_cast<int64_t>(stream.bits(i));
    return t;
  }
  if (!is_float(type.dtype))
    return fail_at(std::string(name), "a random init needs a floating-point value, got {}", to_string(type));
  if (spec.kind == K::uniform) {
    for (int64_t i = 0; i < n; ++i) t.set(i, spec.scale * (2 * stream.uniform(static_cast<uint64_t>(i)) - 1));
    return t;
  }
  double stddev = spec.scale;
  if (spec.kind == K::he) {
    if (type.rank() < 2)
      return fail_at(std::string(name), "init 'he' needs rank >= 2 (fan_in = product of all dims but the first), got {}",
                     to_string(type));
    if (n == 0) return t;
    const double fan_in = static_cast<double>(n / type.shape[0]);
    stddev = std::sqrt(kHeGain / fan_in);
  }
  for (int64_t i = 0; i < n; i += 2) {
    auto [a, b] = stream.normal_pair(static_cast<uint64_t>(i / 2));
    t.set(i, stddev * a);
    if (i + 1 < n) t.set(i + 1, stddev * b);
  }
  return t;
}

Result<HostTensor> initial_value(const Graph& g, ValueId v, uint64_t seed) {
  const Value& val = g.value(v);
  const std::string where = "%" + val.name;
  if (!val.producer.valid()) return fail_at(where, "has no producer");
  const Node& node = g.node(val.producer);
  if (node.op != Op::param && node.op != Op::state)
    return fail_at(where, "is not a param or state value (produced by {})", op_def(node.op).name);
  std::string text = node.attrs.get_string("init", "");
  if (text.empty()) text = node.op == Op::param && val.type.rank() >= 2 ? "he" : "zeros";
  auto spec = parse_init(text);
  if (!spec) return fail_at(where, "{}", spec.error().what);
  auto t = make_initial_value(val.type, *spec, val.name, seed);
  if (!t) return fail_at(where, "init '{}': {}", text, t.error().what);
  return t;
}

Result<std::map<std::string, HostTensor>> initial_values(const Graph& g, uint64_t seed) {
  std::map<std::string, HostTensor> out;
  for (NodeId n : g.node_ids()) {
    const Node& node = g.node(n);
    if (node.op != Op::param && node.op != Op::state) continue;
    for (ValueId v : node.outputs) out.emplace(g.value(v).name, LMS_TRY(initial_value(g, v, seed)));
  }
  return out;
}

}  // namespace lms
