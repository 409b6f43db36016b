// The `autodiff` and `train` passes: thin wrappers reading pass options (see passes.h).
#include "lms/autodiff/passes.h"

#include <sstream>
#include <string>

#include "lms/autodiff/autodiff.h"
#include "lms/autodiff/optimizer.h"

namespace lms {

std::vector<AttrSpec> autodiff_pass_options() {
  return {{"wrt", AttrKind::String, Attribute{std::string()},
           "value names to differentiate with respect to, comma-separated; empty: every parameter"}};
}

Result<void> run_autodiff_pass(Graph& g, const Attributes& options) {
  std::vector<std::string> wrt;
  std::stringstream list(options.get_string("wrt", ""));
  for (std::string name; std::getline(list, name, ',');) {
    if (name.empty()) return fail("option 'wrt' has an empty name in '{}'", options.get_string("wrt", ""));
    wrt.push_back(name);
  }
  g = LMS_TRY(build_gradient_graph(g, wrt));
  return {};
}

Result<void> run_train_pass(Graph& g, const Attributes& options) {
  TrainingOptions t = LMS_TRY(training_options_from(options));
  g = LMS_TRY(build_training_graph(g, t));
  return {};
}

}  // namespace lms
