// The order of a memory_diagnostics invocation's runs: the plan resolved,
// then one run, a sweep, --isolate's children or a search, each run
// through the executor and each report written here.
#include "memdiag/harness.hpp"

#include "memdiag/errors.hpp"
#include "memdiag/exit_code.hpp"
#include "memdiag/isolate.hpp"
#include "memdiag/max_batch.hpp"
#include "memdiag/own_report.hpp"
#include "memdiag/sweep_row.hpp"

#include <chrono>

namespace memdiag {
namespace {

// A plain run: the live table, then where the report went.
int run_single(const ResolvedPlan& plan, const HarnessOptions& opts, Executor& executor, RunObserver& obs) {
  const PlannedRun& run = plan.runs.front();
  Report report = executor.run(run, plan, opts, obs, /*live=*/true);
  const bool snapshots_ok = executor.write_snapshots(opts, report, obs);
  const OwnReportWritten written = write_run_report(run.output, report, obs);
  obs.run_finished(report, written.ok ? written.at : std::string());
  if (!written.ok) return to_int(ExitCode::kFailed);
  // Another run wrote there meanwhile: its report stays, and so does this one.
  if (written.kept_beside) return to_int(ExitCode::kUsage);
  if (!snapshots_ok && report.status == RunStatus::kComplete) return to_int(ExitCode::kFailed);
  return to_int(exit_code_for(report.status));
}

// Every configuration in this process, one after another, each starting
// from what a fresh process holds after its warm-up; one whose allocator
// settings act on the whole process in a child of its own.
int run_sweep(const ResolvedPlan& plan, const HarnessOptions& opts, Executor& executor, RunObserver& obs) {
  std::vector<SweepRow> rows;
  std::vector<RunStatus> statuses;
  bool kept_beside = false;
  for (std::size_t i = 0; i < plan.runs.size(); ++i) {
    const PlannedRun& run = plan.runs[i];
    if (i > 0) executor.reset_between_runs();
    const auto t0 = std::chrono::steady_clock::now();
    Report report;
    if (needs_own_process(run, plan)) {
      report = run_in_child(run, plan, opts, obs);  // the child wrote it
    } else {
      report = executor.run(run, plan, opts, obs, /*live=*/false);
      const OwnReportWritten written = write_run_report(run.output, report, obs);
      if (!written.ok) report.status = RunStatus::kFailed;
      kept_beside = kept_beside || written.kept_beside;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rows.push_back(sweep_row(run, plan.varying, report, seconds));
    statuses.push_back(report.status);
    obs.sweep_run_finished(rows.back(), i + 1, plan.runs.size());
    // A stop request ends the sweep after the run in progress, whatever
    // that run's status (an out-of-memory run does not check it).
    if (report.status == RunStatus::kInterrupted || (opts.stop != nullptr && opts.stop->requested())) {
      statuses.push_back(RunStatus::kInterrupted);
      break;
    }
    // A rank that did not complete leaves its peers' collectives hanging:
    // every rank stops, as a single run would.
    if (plan.launch && report.status != RunStatus::kComplete) break;
  }
  obs.sweep_finished(rows, plan.runs.size());
  const ExitCode code = exit_code_for(statuses);
  return to_int(kept_beside && code != ExitCode::kInterrupted ? ExitCode::kUsage : code);
}

}  // namespace

int run_harness(const HarnessOptions& opts, Executor& executor) {
  RunObserver silent;
  RunObserver& obs = opts.observer != nullptr ? *opts.observer : silent;
  ResolvedPlan plan;
  try {
    plan = resolve_plan(opts, executor);
  } catch (const UsageError& u) {
    obs.problem(u.what());
    return to_int(ExitCode::kUsage);
  }
  obs.session_started(SessionInfo{plan.launch ? plan.launch->rank : 0, plan.launch ? plan.launch->world_size : 1,
                                  plan.device.str()});
  if (opts.isolate) return run_isolated(plan, opts, obs);
  if (opts.find_max_batch) {
    ChildProcesses children;
    return run_max_batch_search(plan, opts, executor, children, obs);  // opens the session itself
  }
  if (const std::optional<int> failed = executor.open_session(plan, opts, obs)) return *failed;
  return plan.runs.size() == 1 ? run_single(plan, opts, executor, obs) : run_sweep(plan, opts, executor, obs);
}

}  // namespace memdiag
