// Initial values of parameters and state, from each value's `init` attribute (docs/models.md, "Initializers"):
// "he" (Kaiming normal, fan-in mode), "zeros", "ones", "normal(S)" (mean 0, std S) and "uniform(B)" (on
// [-B, B]), and "bits" (random 64-bit words, for i64 values: dropout keys); an empty init means "he" for a
// parameter of rank >= 2 and "zeros" otherwise.
//
// Deterministic and independent of graph order: a value's numbers come from a counter-based stream keyed by
// (seed, FNV-1a of the value's name) (support/random.h), so adding, removing or reordering layers leaves every
// other value's initial contents unchanged, and the same (seed, name, type, init) gives the same bits on every
// machine.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "lms/ir/graph.h"
#include "lms/runtime/tensor.h"
#include "lms/support/error.h"

namespace lms {

struct InitSpec {
  enum class Kind { he, zeros, ones, normal, uniform, bits };
  Kind kind = Kind::zeros;
  double scale = 0;  // normal: the standard deviation; uniform: the bound; unused otherwise
};

// Parses an init string ("he", "zeros", "ones", "bits", "normal(0.02)", "uniform(0.1)"); the empty string is resolved
// by the caller (it depends on the value). Errors: unknown names, malformed, negative or non-finite scales.
Result<InitSpec> parse_init(std::string_view text);

// Fills a tensor of `type` per `spec`, drawing from the stream keyed by (seed, name). Errors: "he" on a value of rank <
// 2 (no fan-in), random float inits on integer dtypes, and "bits" on anything but i64. `name` also labels errors.
Result<HostTensor> make_initial_value(const TensorType& type, const InitSpec& spec, std::string_view name,
                                      uint64_t seed);

// The initial value of `v`, a `param` or `state` output, from its init attribute. Errors name the value and
// the init string.
Result<HostTensor> initial_value(const Graph& g, ValueId v, uint64_t seed);

// Every param and state value of `g`, keyed by value name: a fresh checkpoint (io/npz.h writes it).
Result<std::map<std::string, HostTensor>> initial_values(const Graph& g, uint64_t seed);

}  // namespace lms
