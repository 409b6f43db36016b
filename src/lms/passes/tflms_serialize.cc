// tflms-serialize: pick the levels, then link each level's ops in id order (see tflms_serialize.h).
#include "lms/passes/tflms_serialize.h"

#include <algorithm>

#include "lms/analysis/levels.h"

namespace lms {

Result<int> serialize_levels(Graph& g, const SerializeOptions& opts) {
  if (opts.min_bytes < 0) return fail_at("option 'min_bytes'", "must be >= 0, got {}", opts.min_bytes);
  Levels lv = LMS_TRY(compute_levels(g));
  std::vector<bool> chosen(static_cast<size_t>(lv.count()), false);
  for (int64_t l : opts.levels) {
    if (l < 0 || l >= lv.count())
      return fail_at("option 'levels'", "level {} does not exist (the graph has levels 0 to {})", l, lv.count() - 1);
    chosen[static_cast<size_t>(l)] = true;
  }
  if (opts.min_bytes > 0) {
    for (int l = 0; l < lv.count(); ++l) {
      std::vector<ValueId> touched;
      for (NodeId n : lv.nodes[static_cast<size_t>(l)]) {
        touched.insert(touched.end(), g.node(n).inputs.begin(), g.node(n).inputs.end());
        touched.insert(touched.end(), g.node(n).outputs.begin(), g.node(n).outputs.end());
      }
      std::sort(touched.begin(), touched.end());
      touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
      int64_t bytes = 0;
      for (ValueId v : touched) bytes += g.value(v).type.bytes();
      if (bytes > opts.min_bytes) chosen[static_cast<size_t>(l)] = true;
    }
  }
  int added = 0;
  for (int l = 0; l < lv.count(); ++l) {
    if (!chosen[static_cast<size_t>(l)]) continue;
    const auto& ops = lv.nodes[static_cast<size_t>(l)];  // sorted by id
    for (size_t k = 1; k < ops.size(); ++k) {
      g.add_control_input(ops[k], ops[k - 1]);
      ++added;
    }
  }
  return added;
}

std::vector<AttrSpec> tflms_serialize_options() {
  return {
      {"levels", AttrKind::IntList, Attribute{IntList{}}, "levels whose ops are chained in id order"},
      {"min_bytes", AttrKind::Int, Attribute{int64_t{0}},
       "also chain every level whose ops touch more than this many bytes; 0: off"},
  };
}

Result<void> run_tflms_serialize_pass(Graph& g, const Attributes& options) {
  SerializeOptions o;
  o.levels = options.get_ints("levels", {});
  o.min_bytes = options.get_int("min_bytes", 0);
  LMS_TRY(serialize_levels(g, o));
  return {};
}

}  // namespace lms
