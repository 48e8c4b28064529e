// Internal to memdiag::torch: a sweep's configurations resolved against their
// case files, the device and the launcher, with every report path decided
// and checked before anything runs.
#pragma once

#include "memdiag/atomic_file.hpp"
#include "memdiag/case_spec.hpp"
#include "memdiag/distributed.hpp"
#include "memdiag/report.hpp"
#include "memdiag/harness.hpp"
#include "memdiag/probe.hpp"
#include "memdiag/sweep_plan.hpp"

#include <c10/core/Device.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace memdiag {
class ModelCache;  // memdiag/workload.hpp
}

namespace memdiag::detail {

struct PlannedRun {
  std::string case_arg;  // as given: a built-in name or a path (--isolate passes it on)
  CaseSpec spec;
  std::string preset;
  int batch = 0;
  int steps = 0;
  int sequence_length = 0;  // a transformer's tokens per sample; 0 for an MLP
  std::vector<Remedy> remedies;  // resolved: checkpoint=N with N set
  RunLabel label;
  std::string output;  // this rank's report
};

struct ResolvedPlan {
  std::vector<PlannedRun> runs;
  Varying varying;
  c10::Device device = c10::Device(c10::DeviceType::CPU);
  std::optional<LaunchInfo> launch;
};

// Everything that outlives one run of a sweep in this process: the probe
// (the allocator), the process group.
struct Session {
  std::unique_ptr<MemoryProbe> probe;
  std::unique_ptr<Communicator> comm;
  // What the session did to the CPU's thread pool (a data-parallel CPU
  // job), noted in every report.
  std::optional<std::string> threads_note;
  // The limit the device's allocator enforces, in bytes (--memory-limit-mib
  // as the allocator computes it); absent without one.
  std::optional<std::int64_t> limit_bytes;
  // A search's tries share their model's first build (memdiag/workload.hpp).
  ModelCache* model_cache = nullptr;
  // Runs made in this process so far (the report's
  // environment.earlier_runs_in_process).
  int runs_made = 0;
};

// --- harness.cpp ---------------------------------------------------------------
// One configuration in this process, under a recorder; never throws for
// the workload's own failures (they become the report's status). The
// caller resets the probe between runs.
Report run_configuration(const PlannedRun& run, const ResolvedPlan& plan, const HarnessOptions& opts,
                         Session& session, RunObserver& obs);

// --- run_plan.cpp ----------------------------------------------------------------
// The configuration a planned run's report records (its config object).
RunConfig config_of(const PlannedRun& run, const ResolvedPlan& plan, const HarnessOptions& opts);

// Throws UsageError naming the flag at fault: an unknown case or preset, a
// bad value, two runs that would write the same file, a path that cannot be
// written.
ResolvedPlan resolve_plan(const HarnessOptions& opts);

// --- sweep_row.cpp: a sweep's run as its progress line shows it ------------
SweepRow sweep_row(const PlannedRun& run, const Varying& v, const Report& report, double seconds);
// The highest peak a run reached: its samples' and, when it ran out, the
// failing phase's.
double run_peak(const Report& r);

// --- isolate.cpp: --isolate ---------------------------------------------------
// Each configuration in a fresh child process (this executable, one run,
// --quiet), one after another; the same reports, progress and exit code.
int run_isolated(const ResolvedPlan& plan, const HarnessOptions& opts, RunObserver& obs);
// One configuration in a fresh child process, its report (written by the
// child to run.output) read back; a child that wrote none gives a report
// whose status is its exit's.
Report run_in_child(const PlannedRun& run, const ResolvedPlan& plan, const HarnessOptions& opts, RunObserver& obs);
// Whether a run of the plan must run in a child process of its own: an
// allocator setting on CUDA acts on the whole process and on segments made
// after it, so it cannot be set for one run of a sweep and undone.
bool needs_own_process(const PlannedRun& run, const ResolvedPlan& plan);

// The one line for a report kept beside its output (write_own_report):
// "--output: OUT: why; this run's report is at KEPT".
std::string kept_beside_line(const std::string& output, const GuardedWrite& written);
// This executable running one configuration quietly, as --isolate's
// children and the capacity search's confirmations do; output is its report.
std::vector<std::string> child_argv(const PlannedRun& run, const ResolvedPlan& plan, const HarnessOptions& opts,
                                    const std::string& output);
// Runs argv to its end and returns its exit code (128 + signal when killed);
// silent: its stdout and stderr go to /dev/null (its report says it all).
// A stop requested meanwhile is passed on to the child as the same signal.
// Throws memdiag::Error when it cannot start.
int run_child(const std::vector<std::string>& argv, const StopRequest* stop, bool silent = false);

// --- max_batch.cpp: --find-max-batch ------------------------------------------
// The largest batch of plan.runs[0] that completes its steps within the
// budget: doubling to the first out-of-memory, then bisection, in this
// process; then max_batch and max_batch + 1 in fresh processes. Writes the
// report of the largest fitting run with its capacity object.
int run_max_batch_search(const ResolvedPlan& plan, const HarnessOptions& opts, Session& session, RunObserver& obs);

}  // namespace memdiag::detail
