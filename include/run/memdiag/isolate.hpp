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

#include <memory>
#include <optional>
#include <string>
#include <thread>
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
// Starts argv (silent: its stdout and stderr to /dev/null; stdin_fd >= 0:
// its stdin; stdout_fd >= 0: its stdout, silent or not) in a process group
// of its own that ends with this process. Throws memdiag::Error when it
// cannot start.
int spawn_child(const std::vector<std::string>& argv, bool silent, int stdin_fd = -1, int stdout_fd = -1);
// Waits for a started child and returns its exit code (128 + signal when
// killed). A stop requested meanwhile is passed on as the same signal.
int wait_child(int pid, const StopRequest* stop);
// Waits for a started child to be done with its report: the end of its
// stdout (done_fd, the read end of the pipe spawn_child gave it), which
// the runner closes once its report is written, before its exit. What it
// writes there is read and dropped. A stop requested meanwhile is passed
// on as wait_child passes it. The child is not waited for: reap_later.
void wait_done(int pid, int done_fd, const StopRequest* stop);
// Waits for a child's exit on a thread of its own, returned (join it to
// know the child is gone), so that the caller goes on while the child's
// process ends (on the H200 a CUDA process's end took 0.10 s after its
// report was written).
std::thread reap_later(int pid);
// Runs argv to its end and returns its exit code: spawn_child, wait_child.
int run_child(const std::vector<std::string>& argv, const StopRequest* stop, bool silent = false);

// The runner's flag that makes a child wait for its batch (a line on its
// stdin) once its model and optimizer are made: FreshProcesses::prepare.
inline constexpr const char* kBatchFromStdinFlag = "--batch-from-stdin";

// FreshProcesses as children of this process, their reports written into
// a temporary folder (removed, even by a second signal) and read back.
// Prepared children (memdiag/child_processes.cpp) wait in the same folder.
class ChildProcesses final : public FreshProcesses {
 public:
  ChildProcesses();
  ~ChildProcesses() override;
  ChildProcesses(const ChildProcesses&) = delete;
  ChildProcesses& operator=(const ChildProcesses&) = delete;
  std::vector<std::optional<Report>> run(const std::vector<PlannedRun>& runs, const ResolvedPlan& plan,
                                         const HarnessOptions& opts) override;
  void prepare(const PlannedRun& base, const ResolvedPlan& plan, const HarnessOptions& opts, int count) override;
  void settle() override;

 private:
  struct Waiting;
  struct Folder;
  const std::string& folder();
  std::unique_ptr<Folder> folder_;
  std::vector<Waiting> waiting_;
  std::vector<std::thread> ending_;  // the exits of children whose reports were read
  int made_ = 0;  // reports named in the folder so far
};

}  // namespace memdiag
