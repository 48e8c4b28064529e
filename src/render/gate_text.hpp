// Internal to memdiag::render: the gates' outcome at the head of the
// markdown and text outputs (and HTML's gate section reads the same
// lines): PASS or FAIL, the failed checks and regressions first, then
// what held.
#pragma once

#include "memdiag/render.hpp"

#include <string>
#include <vector>

namespace memdiag::detail {

// Wanted where a gate or a baseline was given.
bool gate_summary_wanted(const std::vector<GateCheck>& gates, const RegressionReport* r);
std::string gate_summary_markdown(const std::vector<GateCheck>& gates, const RegressionReport* r);
std::string gate_summary_text(const std::vector<GateCheck>& gates, const RegressionReport* r);

}  // namespace memdiag::detail
