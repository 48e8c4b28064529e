// Internal to memdiag::analysis: confirm.cpp, the runs that would confirm what a group cannot.
#pragma once

#include "memdiag/analysis.hpp"

#include <set>
#include <string>
#include <vector>

namespace memdiag::detail {

// Post-cleanup growth seen over fewer than thresholds::kMinGrowthSteps
// cleanups: the decision does not weigh it yet, and a longer run is asked.
bool growth_unjudged(const RunFeatures& p);

// The runs that would confirm what the group cannot, with outputs beside the
// primary report that clash with no report in `taken`.
std::vector<ConfirmingRun> confirming_runs(const Decision& d, Cause cause, bool confirmed, const Group& g,
                                           const RunFeatures& primary, const std::set<std::string>& taken);

}  // namespace memdiag::detail
