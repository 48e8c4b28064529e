// --find-max-batch: the largest batch of a plan's one configuration that
// completes its steps within the budget (--memory-limit-mib, or on CUDA
// what the device leaves to the allocator). Tries run through the
// executor, each from what a fresh process holds; the answer is checked in
// fresh processes; the report of the largest fitting run is written with
// its capacity object (memdiag/report.hpp's CapacitySearch).
#pragma once

#include "memdiag/executor.hpp"
#include "memdiag/fresh_processes.hpp"
#include "memdiag/harness_options.hpp"
#include "memdiag/run_observer.hpp"
#include "memdiag/run_plan.hpp"

namespace memdiag {

// Opens the executor's session itself, after starting the processes that
// will check the answer (FreshProcesses::prepare), so that they start
// LibTorch and CUDA and build their model while this process does the
// same. Returns the exit code: 0 found (confirmed or not, as the report says),
// 3 when not even the first try fits, 130 interrupted, 1 failed, 2 when
// the report went beside another run's.
int run_max_batch_search(const ResolvedPlan& plan, const HarnessOptions& opts, Executor& executor,
                         FreshProcesses& fresh, RunObserver& obs);

}  // namespace memdiag
