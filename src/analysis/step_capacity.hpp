// Internal to memdiag::analysis: step_capacity.cpp, capacity where the steps' size varied.
#pragma once

#include "memdiag/analysis.hpp"

#include <optional>
#include <vector>

namespace memdiag::detail {

// The fit of the steps' memory against their size, in the unit it follows
// (no budget set: max_size and budget_mib empty); absent where the steps'
// size did not vary.
std::optional<StepSizeCapacity> step_size_fit(const RunFeatures& p);

// The largest step that fits each budget, in the unit (samples or tokens)
// the memory follows (empty where the steps' size did not vary).
std::vector<StepSizeCapacity> predict_step_capacity(const RunFeatures& p, const std::vector<double>& budgets_mib);

}  // namespace memdiag::detail
