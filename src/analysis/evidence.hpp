// Internal to memdiag::analysis: evidence.cpp, the evidence a verdict cites and its warnings.
#pragma once

#include "memdiag/analysis.hpp"

#include <vector>

namespace memdiag::detail {

RunPoint point_of(const RunFeatures& f);
// The evidence for the decided cause, and whether a sweep confirmed it.
std::vector<Evidence> cause_evidence(Cause cause, const RunFeatures& p, const std::vector<Sweep>& sweeps,
                                     bool& confirmed);
// Figures every verdict carries: the cache gap and memory outside the allocator.
std::vector<Evidence> general_evidence(Cause cause, const RunFeatures& p);
// How the primary run stopped, if it did, and ranks out of balance.
std::vector<Warning> collect_warnings(const RunFeatures& primary, const std::vector<DistributedView>& views,
                                      std::vector<warning::RankSetIncomplete> rank_sets);

}  // namespace memdiag::detail
