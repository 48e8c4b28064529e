// Internal to memdiag::analysis: parallel_modes.cpp, the parallel modes measured side by side, per rank.
#pragma once

#include "memdiag/analysis.hpp"

#include <vector>

namespace memdiag::detail {

// A replicated run and the mode runs of its configuration, rank 0's census
// against each mode's formulas.
std::vector<ModeRow> mode_rows(const Group& g);

}  // namespace memdiag::detail
