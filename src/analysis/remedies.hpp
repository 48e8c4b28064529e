// Internal to memdiag::analysis: remedies.cpp, the remedies measured against their baseline runs.
#pragma once

#include "memdiag/analysis.hpp"

#include <cstddef>
#include <optional>
#include <vector>

namespace memdiag::detail {

// The group's runs without remedies (all of them when every run has one):
// the verdict is read from these.
Group baseline_runs(const Group& g);
// tied: where the verdict is inconclusive, the two consumers within the
// margin; a row reduces the cause where it reduces either.
std::vector<RemedyRow> remedy_rows(const Group& g, Cause dominant, const std::vector<Cause>& tied = {});
// The largest difference of a step's loss from the baseline's, as a share
// of the baseline's largest loss over the steps compared,
// and (at) the index of that step among the losses compared.
std::optional<double> max_loss_diff(const RunFeatures& r, const RunFeatures& base, std::size_t* at = nullptr);
std::optional<std::size_t> best_remedy(const std::vector<RemedyRow>& rows);
// The lowest peak among the rows that reduce the cause and complete.
std::optional<std::size_t> lowest_peak_remedy(const std::vector<RemedyRow>& rows);

}  // namespace memdiag::detail
