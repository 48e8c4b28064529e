// How one run runs on a device, as the run layer asks for it: run this
// configuration and give me its report; the probe's reading and the
// device's size; the reset between runs. Joining the launcher's process
// group is part of the first run (a peer that never comes still leaves
// that run's report). The torch layer implements it (TorchExecutor: the
// workload, the probes, the allocation tracer, the model cache, the
// process group); the run layer's tests answer it with synthetic reports.
#pragma once

#include "memdiag/harness_options.hpp"
#include "memdiag/machine.hpp"
#include "memdiag/probe.hpp"
#include "memdiag/report.hpp"
#include "memdiag/run_observer.hpp"
#include "memdiag/run_plan.hpp"

#include <cstdint>
#include <optional>

namespace memdiag {

class Executor : public Machine {
 public:
  // Before the first run in this process (--isolate runs none here): a
  // CPU rank's share of the host's cores, a lone run's (or a search's)
  // allocator settings, the probe with the memory limit, the snapshots'
  // recording. What fails is one problem() line and the exit code to end
  // with; nullopt when the session is ready.
  virtual std::optional<int> open_session(const ResolvedPlan& plan, const HarnessOptions& opts, RunObserver& obs) = 0;
  // One configuration, under a recorder, from what the probe holds now, to
  // its report. The workload's own failures become the report's status (and
  // a problem() line), never an exception. live: the heading and each
  // sample to obs as they are taken (a plain run's table).
  // opts.trace_allocations: the run traced, then its passes at half the
  // batch and a transformer's shorter sequences.
  virtual Report run(const PlannedRun& run, const ResolvedPlan& plan, const HarnessOptions& opts, RunObserver& obs,
                     bool live) = 0;
  // After a plain run: --memory-snapshot's and --oom-snapshot's files, each
  // named in the report; false when one asked for could not be written.
  virtual bool write_snapshots(const HarnessOptions& opts, Report& report, RunObserver& obs) = 0;
  // Between runs: back to what a fresh process holds after its warm-up
  // (workspaces freed, the cache handed back, the statistics reset).
  virtual void reset_between_runs() = 0;
  virtual ProbeReading read_probe() = 0;
  // The device's whole memory in MiB (CUDA).
  virtual double device_total_mib() = 0;
  // The limit the device's allocator enforces, in bytes (--memory-limit-mib
  // as the allocator computes it); none without one.
  virtual std::optional<std::int64_t> limit_bytes() const = 0;
  // From on until off, runs share their model's first build (a search's
  // tries build the same model again and again).
  virtual void share_model_builds(bool on) = 0;
};

}  // namespace memdiag
