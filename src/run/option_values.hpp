// Internal to memdiag::run: the values of memory_diagnostics's single
// options that a report could not hold, or that would silently mean
// something else, each refused in this one place. resolve_plan calls it,
// so the front, the runner and a program calling run_harness refuse
// alike; the flag parser only reads how a value is spelt.
#pragma once

#include "memdiag/harness_options.hpp"

namespace memdiag::detail {

// Throws UsageError naming the flag of the first value out of its range.
void check_option_values(const HarnessOptions& opts);

}  // namespace memdiag::detail
