// A sweep's run as its progress line and summary show it: data for the
// observer, which words it.
#pragma once

#include "memdiag/output_names.hpp"
#include "memdiag/report.hpp"
#include "memdiag/run_observer.hpp"
#include "memdiag/run_plan.hpp"

namespace memdiag {

SweepRow sweep_row(const PlannedRun& run, const Varying& v, const Report& report, double seconds);
// The highest peak a run reached: its samples' and, when it ran out, the
// failing phase's.
double run_peak(const Report& r);

}  // namespace memdiag
