// Note [Buffer reuse] (plan/liveness.h) on every backend of this build, and cuda where a GPU is present: each case
// of the cross-backend table (op_cases.h) whose op may write its output over an input runs as a Program in which
// the planner gives the output that input's buffer (run_case's `over_input`, which checks that it did), and must
// give the bits of the same case with a buffer of its own. A kernel that wrote element i before reading another
// element of the input it overwrites fails here.
#include "backends/gpu_presence.h"
#include "backends/op_cases.h"

namespace lms {
namespace {

using namespace op_cases;

std::vector<OpCase> reusing_cases() {
  std::vector<OpCase> cases;
  for (OpCase& c : all_cases())
    if (reuses_input(c)) cases.push_back(std::move(c));
  return cases;
}

class BufferReuse : public ::testing::TestWithParam<OpCase> {};

TEST_P(BufferReuse, GivesTheBitsOfAFreshBuffer) {
  const OpCase& c = GetParam();
  constexpr uint64_t kSeed = 23;
  for (const std::string& device : training_devices()) {
    auto fresh = make_backend(device);
    auto reused = make_backend(device);
    ASSERT_TRUE(fresh.has_value() && reused.has_value()) << device << ": " << fresh.error().str();
    const std::vector<HostTensor> want = run_case(c, **fresh, kSeed);
    const std::vector<HostTensor> got = run_case(c, **reused, kSeed, nullptr, /*over_input=*/true);
    ASSERT_EQ(got.size(), want.size()) << c.name << " on " << device;
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].data, want[i].data) << c.name << " on " << device;
  }
}

INSTANTIATE_TEST_SUITE_P(Table, BufferReuse, ::testing::ValuesIn(reusing_cases()), test_name);

// Every op that declares a reusable input is exercised by some case (a new one without a row would go untested).
TEST(BufferReuse, EveryReusingOpHasACase) {
  std::vector<bool> seen(kNumOps, false);
  for (const OpCase& c : reusing_cases()) seen[static_cast<size_t>(c.op)] = true;
  for (const OpDef& d : all_op_defs())
    if (d.reusable_input >= 0) {
      EXPECT_TRUE(seen[static_cast<size_t>(d.op)]) << d.name;
    }
}

}  // namespace
}  // namespace lms
