// Internal to memdiag::analysis: oom.cpp, what made the failing phase of a run that ran out of memory
// exceed its budget, read from the run's oom event, census and completed
// steps.
#pragma once

#include "memdiag/analysis.hpp"

#include <optional>
#include <string>

namespace memdiag::detail {

// The free memory under the budget at an out-of-memory failure, by where it
// lay: cached but free (reserved - allocated) and never reserved (the budget
// minus reserved, at most what the device had free); whether one place (the
// largest cached piece, or the unreserved rest as a new segment) could hold
// the request.
struct FreeUnderBudget {
  double cached_mib = 0;
  double unreserved_mib = 0;
  double total_mib = 0;
  bool one_place_holds_it = false;
};
std::optional<FreeUnderBudget> free_under_budget(const OomAt& oom, const std::string& allocator_settings);
// What the failing step needs at its peak, from the completed steps.
struct StepNeed {
  double mib = 0;
  bool measured = false;  // a completed step at least as large reached it
  int from_steps = 0;
};
std::optional<StepNeed> failing_step_need(const RunFeatures& oom_run);
Cause oom_cause(const RunFeatures& oom_run);
evidence::OutOfMemory oom_evidence(const RunFeatures& oom_run, Cause cause);

}  // namespace memdiag::detail
