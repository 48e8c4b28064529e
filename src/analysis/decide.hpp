// Internal to memdiag::analysis: decide.cpp, the primary run and the decision rule.
#pragma once

#include "memdiag/analysis.hpp"

#include <vector>

namespace memdiag::detail {

// The run under the most pressure: the one that would run out first.
const RunFeatures& pick_primary(const Group& g);
// A post-cleanup growth that follows the steps' own size (a ramp's, or
// one that falls where a step is smaller), and one within what the loop
// held at its cleanups where the walk found nothing kept: no leak.
bool grows_with_size(const RunFeatures& p);
bool walk_saw_no_leak(const RunFeatures& p);
Decision decide(const RunFeatures& primary, const std::vector<Component>& components);

}  // namespace memdiag::detail
