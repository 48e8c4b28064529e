// What memory_diagnostics does, as a library call: resolve the case and the
// device, run the workload under a recorder, write the report. It prints
// nothing and installs no signal handler: what it has to say goes to the
// observer, and a stop is asked for through the StopRequest.
#pragma once

#include "memdiag/exit_code.hpp"
#include "memdiag/harness_options.hpp"
#include "memdiag/run_observer.hpp"

namespace memdiag {

// Runs every configuration and writes one report each. Returns an ExitCode
// as int (memdiag/exit_code.hpp's precedence over the runs' statuses).
// Usage errors are one problem() line, and nothing is written.
int run_harness(const HarnessOptions& opts);

}  // namespace memdiag
