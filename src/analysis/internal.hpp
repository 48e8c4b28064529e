// Internal to src/analysis: pieces shared by the verdict and its helpers.
#pragma once

#include "memdiag/analysis.hpp"

#include <string>
#include <vector>

namespace memdiag::detail {

// What to do about a cause, and what would not help.
const char* cause_response(Cause c);
const std::vector<const char*>& cause_not_helpful(Cause c);

// A least-squares line through the origin over (x, y) points, sorted by x.
Sweep fit_sweep(std::string kind, std::vector<SweepPoint> points);
// Increasing and within thresholds::kLinearTolerance of proportional.
bool is_linear(const Sweep& s);

// One view per run configuration that has more than one rank.
std::vector<DistributedView> distributed_views(const Group& g);

}  // namespace memdiag::detail
