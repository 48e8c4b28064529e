// What memory_diagnostics does, as a library call: resolve the plan, then
// one run, a sweep (in this process, or --isolate's children) or a
// --find-max-batch search, each run through an Executor, each report
// written. It prints nothing and installs no signal handler: what it has
// to say goes to the observer, and a stop is asked for through the
// StopRequest (memdiag/harness_options.hpp).
#pragma once

#include "memdiag/executor.hpp"
#include "memdiag/exit_code.hpp"
#include "memdiag/harness_options.hpp"

namespace memdiag {

// Runs every configuration and writes one report each. Returns an ExitCode
// as int (memdiag/exit_code.hpp's precedence over the runs' statuses).
// Usage errors are one problem() line, and nothing is written.
int run_harness(const HarnessOptions& opts, Executor& executor);

}  // namespace memdiag
