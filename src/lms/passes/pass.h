// The pass interface and the explicit pass registry. A pass is a plain function `Result<void>(Graph&, const
// Attributes& options)`; the registry (passes/registry.cc) lists every pass by name with its declared options,
// so pipelines are text: `dce,verify` or `tflms-swap{threshold=3},verify`. Nothing registers itself.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "lms/ir/attributes.h"
#include "lms/ir/graph.h"
#include "lms/support/error.h"

namespace lms {

using PassFn = Result<void> (*)(Graph& g, const Attributes& options);

struct PassInfo {
  std::string_view name;
  std::string_view doc;          // one line
  std::vector<AttrSpec> options;  // declared options, with defaults
  PassFn run = nullptr;
};

std::span<const PassInfo> pass_registry();
const PassInfo* find_pass(std::string_view name);

// One step of a pipeline: the pass and its options, normalized against its declared options.
struct PassCall {
  const PassInfo* pass = nullptr;
  Attributes options;
};

// Parses `name{key=value, ...},name,...`. Values use the IR attribute syntax (3, 0.5, true, [1, 2], "text");
// a bare word is a string. Errors name the pass, the option and the column.
Result<std::vector<PassCall>> parse_pipeline(std::string_view text);

struct PipelineOptions {
  bool verify_each = false;  // run the verifier after every pass (tests turn this on)
};

// Runs the passes in order; an error names the pass that failed.
Result<void> run_pipeline(Graph& g, std::span<const PassCall> pipeline, const PipelineOptions& opts = {});

}  // namespace lms
