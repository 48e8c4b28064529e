// Internal to memdiag::torch: one configuration run in this process, to
// its report (Executor::run).
#pragma once

#include "memdiag/harness_options.hpp"
#include "memdiag/report.hpp"
#include "memdiag/run_observer.hpp"
#include "memdiag/run_plan.hpp"
#include "session.hpp"

#include <string>

namespace memdiag::detail {

// Under a recorder, from what the probe holds now; joins the launcher's
// process group at the first run; with --trace-allocations, traced and
// its passes run. Never throws for the workload's own failures (they
// become the report's status). live: the heading and each sample to obs.
Report run_configuration(const PlannedRun& run, const ResolvedPlan& plan, const HarnessOptions& opts,
                         Session& session, RunObserver& obs, bool live);

// On CUDA, where the plan is one run (or a search's tries): its model built
// on the host in a thread of its own while this process starts CUDA
// (build_model_ahead), into session.model_cache, which the run takes it
// from. A search's cache then keeps that build for its later tries.
void build_first_model_ahead(const ResolvedPlan& plan, const HarnessOptions& opts, Session& session);

// c10 errors carry a backtrace after the first line; users need the first.
std::string first_line(const std::string& what);

}  // namespace memdiag::detail
