// Learning-rate schedules (see lr_schedule.h).
#include "lms/runtime/lr_schedule.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>

namespace lms {

namespace {
constexpr std::array<std::string_view, 4> kDecayNames = {"constant", "linear", "cosine", "step"};
}  // namespace

std::string_view lr_decay_name(LrDecay d) { return kDecayNames[static_cast<size_t>(d)]; }

std::optional<LrDecay> parse_lr_decay(std::string_view name) {
  for (size_t i = 0; i < kDecayNames.size(); ++i)
    if (kDecayNames[i] == name) return static_cast<LrDecay>(i);
  return std::nullopt;
}

bool is_scheduled(const LrSchedule& s) { return s.decay != LrDecay::constant || s.warmup_steps > 0; }

Result<void> check_lr_schedule(const LrSchedule& s, double lr) {
  if (s.warmup_steps < 0) return fail("--warmup-steps must be >= 0, got {}", s.warmup_steps);
  const bool decays_to_floor = s.decay == LrDecay::linear || s.decay == LrDecay::cosine;
  if (s.decay_steps) {
    if (!decays_to_floor) return fail("--decay-steps applies to --lr-schedule linear or cosine");
    if (*s.decay_steps <= s.warmup_steps)
      return fail("--decay-steps ({}) must be greater than --warmup-steps ({})", *s.decay_steps, s.warmup_steps);
  }
  if (!(s.min_lr >= 0 && s.min_lr <= lr))
    return fail("--min-lr must be in [0, the learning rate {}], got {}", lr, s.min_lr);
  if (s.min_lr > 0 && !decays_to_floor) return fail("--min-lr applies to --lr-schedule linear or cosine");
  if (s.decay == LrDecay::step) {
    if (!s.milestones.empty() && s.step_every != 0) return fail("give --lr-step-every or --lr-milestones, not both");
    if (s.milestones.empty() && s.step_every < 1)
      return fail("--lr-schedule step needs --lr-step-every N (N >= 1) or --lr-milestones, got {}", s.step_every);
    for (size_t i = 0; i < s.milestones.size(); ++i) {
      if (s.milestones[i] < 1) return fail("--lr-milestones must be steps >= 1, got {}", s.milestones[i]);
      if (i > 0 && s.milestones[i] <= s.milestones[i - 1])
        return fail("--lr-milestones must increase, got {} after {}", s.milestones[i], s.milestones[i - 1]);
    }
    if (!(s.gamma > 0 && s.gamma <= 1)) return fail("--lr-gamma must be in (0, 1], got {}", s.gamma);
  } else if (s.step_every != 0 || !s.milestones.empty()) {
    return fail("--lr-step-every and --lr-milestones apply to --lr-schedule step");
  }
  return {};
}

double lr_at(const LrSchedule& s, double lr, int64_t step, int64_t end_step) {
  if (step < s.warmup_steps) return lr * static_cast<double>(step + 1) / static_cast<double>(s.warmup_steps);
  const int64_t after = step - s.warmup_steps;
  switch (s.decay) {
    case LrDecay::constant: return lr;
    case LrDecay::step: {
      const auto passed = s.milestones.empty() ? after / s.step_every
                                               : std::ranges::upper_bound(s.milestones, step) - s.milestones.begin();
      return lr * std::pow(s.gamma, static_cast<double>(passed));
    }
    case LrDecay::linear:
    case LrDecay::cosine: {
      const int64_t span = s.decay_steps.value_or(end_step) - s.warmup_steps;
      // A run that ends within its warm-up never decays; past the decay's end the rate stays at the floor.
      const double progress =
          span <= 0 ? 1.0 : std::min(1.0, static_cast<double>(after) / static_cast<double>(span));
      const double fraction =
          s.decay == LrDecay::linear ? 1 - progress : 0.5 * (1 + std::cos(std::numbers::pi * progress));
      return s.min_lr + (lr - s.min_lr) * fraction;
    }
  }
  return lr;
}

}  // namespace lms
