// Internal to memdiag::analysis: sequence_capacity.cpp, capacity along a transformer's sequence.
#pragma once

#include "memdiag/analysis.hpp"

#include <vector>

namespace memdiag::detail {

// The longest sequence that fits each budget at the primary's batch, from
// its configuration's sequence sweep (empty without one).
std::vector<SequenceCapacity> predict_sequence_capacity(const Group& g, const RunFeatures& primary,
                                                        const std::vector<double>& budgets_mib);

}  // namespace memdiag::detail
