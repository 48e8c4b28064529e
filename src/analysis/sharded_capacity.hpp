// Internal to memdiag::analysis: sharded_capacity.cpp, capacity per rank under each parallel mode.
#pragma once

#include "memdiag/analysis.hpp"

#include <vector>

namespace memdiag::detail {

// From a single-rank primary: each mode's largest batch per rank at each
// world size (empty without world sizes, or for a data-parallel primary).
std::vector<ShardedCapacity> predict_sharded_capacity(const Group& g, const RunFeatures& primary,
                                                      const std::vector<double>& budgets_mib,
                                                      const std::vector<int>& world_sizes);

}  // namespace memdiag::detail
