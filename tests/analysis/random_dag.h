// Random DAGs of small elementwise ops for the property tests of reachability and the TFLMS analyses and
// passes: `inputs` graph inputs, then `nodes` ops each reading one or two earlier values (relu or add), biased
// towards recent values so that graphs are deep like training graphs but still have long skip edges. Built in
// creation order, so node-id order is a valid schedule. Reproducible: splitmix64 from lms/support/random.h.
#pragma once

#include <string>

#include "lms/ir/builder.h"
#include "lms/support/random.h"

namespace lms::testing {

struct RandomDagOptions {
  int inputs = 2;        // graph inputs (sources)
  int nodes = 60;        // ops after the inputs
  int recent = 6;        // "recent" window for the biased choice of an operand
  int percent_far = 30;  // chance (in percent) that an operand is drawn uniformly from all earlier values
  TensorType type{DType::f32, {4, 4}};
};

inline Graph random_dag(uint64_t seed, const RandomDagOptions& o = {}) {
  Graph g("rand");
  Builder b(g);
  std::vector<ValueId> values;
  for (int i = 0; i < o.inputs; ++i) values.push_back(b.input(o.type, "x" + std::to_string(i)));
  uint64_t counter = 0;
  auto draw = [&](uint64_t bound) { return mix64(seed * kSplitMixGamma + ++counter) % bound; };
  auto pick = [&]() {
    uint64_t n = values.size();
    if (static_cast<int>(draw(100)) < o.percent_far || n <= static_cast<uint64_t>(o.recent))
      return values[draw(n)];
    return values[n - 1 - draw(static_cast<uint64_t>(o.recent))];
  };
  for (int i = 0; i < o.nodes; ++i) {
    std::string name = "n" + std::to_string(i);
    if (draw(2) == 0) values.push_back(b.op(Op::relu, {pick()}, {}, name));
    else values.push_back(b.op(Op::add, {pick(), pick()}, {}, name));
  }
  g.set_outputs({values.back()});
  return g;
}

}  // namespace lms::testing
