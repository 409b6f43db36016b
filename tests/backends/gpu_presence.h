// Whether the cuda tests run. They need a GPU and skip without one, saying why; where a GPU must be present
// (scripts/gpu-check.sh sets LMS_REQUIRE_GPU=1), a cuda backend that cannot be made fails them instead, so that
// a broken driver or library on the GPU machine cannot pass as "skipped".
#pragma once

#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "lms/runtime/backend_registry.h"

namespace lms {

inline bool gpu_required() {
  const char* v = std::getenv("LMS_REQUIRE_GPU");
  return v != nullptr && std::string_view(v) == "1";
}

// The backends of this build, and cuda when this machine has a GPU (the GPU check runs the tests there with
// LMS_REQUIRE_GPU=1: cuda is then listed even if its backend cannot be made, so that the tests fail saying why).
inline std::vector<std::string> training_devices() {
  std::vector<std::string> d = {"reference"};
#ifdef LMS_HAVE_CPU_BACKEND
  d.push_back("cpu");
#endif
  if (make_backend("cuda") || gpu_required()) d.push_back("cuda");
  return d;
}

}  // namespace lms

// Declares `var`, the cuda backend; without one the test is skipped (or, with LMS_REQUIRE_GPU=1, fails).
#define LMS_CUDA_BACKEND_OR_SKIP(var)                                                     \
  auto var = ::lms::make_backend("cuda");                                                 \
  if (!var) {                                                                             \
    if (::lms::gpu_required()) FAIL() << "LMS_REQUIRE_GPU=1: " << var.error().str();      \
    GTEST_SKIP() << var.error().str();                                                    \
  }
