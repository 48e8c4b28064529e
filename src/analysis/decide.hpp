// Internal to memdiag::analysis: decide.cpp, the primary run and the decision rule.
#pragma once

#include "memdiag/analysis.hpp"

#include <vector>

namespace memdiag::detail {

// The run under the most pressure: the one that would run out first.
const RunFeatures& pick_primary(const Group& g);
Decision decide(const RunFeatures& primary, const std::vector<Component>& components);

}  // namespace memdiag::detail
