// `lms maxres --model NAME ... --budget SIZE --strategy S [--json]`: the largest input side (square images for
// resnets, cubes for unet3d) whose training step fits the budget, searched over multiples of the side the model
// needs to be whole at every down-sampling (resnet 32; unet3d 2^(depth-1)), from twice that multiple up; see
// planning.h for the search. The batch is --batch (default 1).
#include <memory>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "planning.h"

namespace lms::cli {

namespace {

constexpr int64_t kResnetSideMultiple = 32;   // five stride-2 stages (the small stem has fewer; 32 divides both)
constexpr int64_t kDefaultUnetDepth = 4;      // models/unet3d.cc's default depth
constexpr int64_t kDefaultSideLimit = 16384;  // searched up to this side unless --limit says otherwise

struct MaxResCmd {
  PlanArgs plan;
  int64_t limit = kDefaultSideLimit;
};

// The side granule of a model, or an error for models without an image side.
Result<int64_t> side_multiple(const ModelArgs& m) {
  if (m.name.starts_with("resnet")) return kResnetSideMultiple;
  if (m.name == "unet3d") return int64_t{1} << ((m.depth > 0 ? m.depth : kDefaultUnetDepth) - 1);
  return fail("maxres applies to models with an image input (resnet*, unet3d), not '{}'", m.name);
}

int run(const MaxResCmd& c) {
  auto multiple = side_multiple(c.plan.model);
  if (!multiple) return report(multiple.error());
  const int64_t m = *multiple;
  // Probe k is side (k + 1) * m: the smallest side, 2m, leaves 2 values per channel at the coarsest resolution
  // (m alone leaves 1, where batch norm at batch 1 has no variance).
  if (c.limit < 2 * m) return report(Error{fmt::format("--limit must be at least {} for this model", 2 * m), {}});
  auto r = largest_model(c.plan, c.limit / m - 1, "side", [m](ModelArgs& args, int64_t k) {
    args.image = std::to_string((k + 1) * m);
    return (k + 1) * m;
  });
  if (!r) return report(r.error());
  if (c.plan.json) {
    nlohmann::ordered_json j = capacity_json("max_side", *r);
    j["side_multiple"] = m;
    fmt::print("{}\n", j.dump(2));
    return kExitOk;
  }
  print_capacity(fmt::format("max side {} (multiples of {})", r->size, m), c.plan.model.name, "", *r);
  return kExitOk;
}

}  // namespace

void add_maxres_command(CLI::App& root, int& exit_code) {
  auto c = std::make_shared<MaxResCmd>();
  CLI::App* sub = root.add_subcommand("maxres", "The largest input side whose training step fits the budget.");
  add_plan_options(sub, c->plan, /*with_file=*/false);
  sub->add_option("--limit", c->limit, "Largest side searched")->capture_default_str();
  sub->callback([c, &exit_code] { exit_code = run(*c); });
}

}  // namespace lms::cli
