// Child processes: this executable (the runner) running one configuration
// quietly, for --isolate's sweeps, a sweep's run that needs a process of
// its own, and the search's checks in fresh processes. Signals asked for
// are passed on; a child ends with its parent.
#pragma once

#include "memdiag/fresh_processes.hpp"
#include "memdiag/harness_options.hpp"
#include "memdiag/report.hpp"
#include "memdiag/run_observer.hpp"
#include "memdiag/run_plan.hpp"
#include "memdiag/stop_request.hpp"

#include <optional>
#include <string>
#include <vector>

namespace memdiag {

// Each configuration in a fresh child process (this executable, one run,
// --quiet), one after another; the same reports, progress and exit code.
int run_isolated(const ResolvedPlan& plan, const HarnessOptions& opts, RunObserver& obs);
// One configuration in a fresh child process, its report (written by the
// child to run.output) read back; a child that wrote none gives a report
// whose status is its exit's.
Report run_in_child(const PlannedRun& run, const ResolvedPlan& plan, const HarnessOptions& opts, RunObserver& obs);

// This executable running one configuration quietly; output is its report.
std::vector<std::string> child_argv(const PlannedRun& run, const ResolvedPlan& plan, const HarnessOptions& opts,
                                    const std::string& output);
// Runs argv to its end and returns its exit code (128 + signal when killed);
// silent: its stdout and stderr go to /dev/null (its report says it all).
// A stop requested meanwhile is passed on to the child as the same signal.
// Throws memdiag::Error when it cannot start.
int run_child(const std::vector<std::string>& argv, const StopRequest* stop, bool silent = false);

// FreshProcesses as children of this process, their reports written into
// a temporary folder (removed, even by a second signal) and read back.
class ChildProcesses final : public FreshProcesses {
 public:
  std::vector<std::optional<Report>> run(const std::vector<PlannedRun>& runs, const ResolvedPlan& plan,
                                         const HarnessOptions& opts) override;
};

}  // namespace memdiag
