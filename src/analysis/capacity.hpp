// Internal to memdiag::analysis: capacity.cpp, the verdict's predictions of the largest batch.
#pragma once

#include "memdiag/analysis.hpp"

#include <utility>
#include <vector>

namespace memdiag::detail {

// The budgets a prediction answers: those given, else the run's memory
// limit, else the device less what sits outside the allocator.
std::vector<std::pair<double, CapacityPrediction::Budget>> capacity_budgets(const RunFeatures& primary,
                                                                           const std::vector<double>& budgets_mib);
std::vector<CapacityPrediction> predict_capacity(const Group& g, const RunFeatures& primary,
                                                 const std::vector<double>& budgets_mib);
// Beside each prediction with a search under the allocator's defaults: a
// search of the same configuration and budget under expandable segments
// among all the group's runs (variants included), the referee of the
// stranded memory the lines do not model.
void add_expandable_searches(std::vector<CapacityPrediction>& predictions, const Group& whole, const RunFeatures& primary);

// Every run of the primary's configuration along batch, and the tries of any
// search of it: the points the capacity model fits.
std::vector<CapacityPoint> batch_points(const Group& g, const RunFeatures& primary);

}  // namespace memdiag::detail
