// `lms maxbatch --model NAME ... --budget SIZE --strategy S [--json]`: the largest batch whose training step fits
// the budget with the strategy, by doubling then bisection over the batch size (planning.h; fitting is assumed
// monotone in the batch, which holds when every activation grows with it). Prints the plan at that batch.
#include <memory>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "planning.h"

namespace lms::cli {

namespace {

constexpr int64_t kDefaultBatchLimit = 1 << 16;  // searched up to this batch unless --limit says otherwise

struct MaxBatchCmd {
  PlanArgs plan;
  int64_t limit = kDefaultBatchLimit;
};

int run(const MaxBatchCmd& c) {
  auto r = largest_model(c.plan, c.limit, "batch", [](ModelArgs& m, int64_t k) {
    m.batch = k;
    m.batch_given = true;
    return k;
  });
  if (!r) return report(r.error());
  const bool at_limit = r->size == c.limit;
  if (c.plan.json) {
    nlohmann::ordered_json j = capacity_json("max_batch", *r);
    j["limit_reached"] = at_limit;
    fmt::print("{}\n", j.dump(2));
    return kExitOk;
  }
  print_capacity(fmt::format("max batch {}", r->size), c.plan.model.name.empty() ? c.plan.file : c.plan.model.name,
                 at_limit ? " (the search limit; raise --limit)" : "", *r);
  return kExitOk;
}

}  // namespace

void add_maxbatch_command(CLI::App& root, int& exit_code) {
  auto c = std::make_shared<MaxBatchCmd>();
  CLI::App* sub = root.add_subcommand("maxbatch", "The largest batch whose training step fits the budget.");
  add_plan_options(sub, c->plan, /*with_file=*/true);
  sub->add_option("--limit", c->limit, "Largest batch searched")->capture_default_str();
  sub->callback([c, &exit_code] { exit_code = run(*c); });
}

}  // namespace lms::cli
