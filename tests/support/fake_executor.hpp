// The run layer's executor and fresh processes answered without running
// anything (memdiag/executor.hpp, memdiag/fresh_processes.hpp): a job whose
// memory at every batch is known, as synthetic reports. The search, the
// sweeps and the plan are tested against it with no process started and
// no LibTorch.
#pragma once

#include "memdiag/executor.hpp"
#include "memdiag/fresh_processes.hpp"
#include "memdiag/run_observer.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace memdiag::testkit {

// A training job on one device: weights W, then per sample a MiB of
// activations held from forward into backward, and `extra` more that the
// allocation trace does not show (what a replay would miss). It fits a
// batch b when W + extra + a b is within the limit.
struct Job {
  double weights_mib = 100;
  double per_sample_mib = 0.5;
  double extra_mib = 0;
  // false: reports without samples (nothing for the capacity model to read).
  bool phases = true;
  bool fits(std::int64_t batch, double limit_mib) const {
    return weights_mib + extra_mib + per_sample_mib * static_cast<double>(batch) <= limit_mib;
  }
  // One step's report at a batch: setup, forward, backward, step, cleanup,
  // with the census; oom at forward where it does not fit. traced: with its
  // allocation trace (the CPU tracking allocator's) and a pass at half the
  // batch, which shows W and a but not the extra.
  Report report(std::int64_t batch, double limit_mib, bool traced = false) const;
};

class FakeExecutor final : public Executor {
 public:
  Job job;
  double limit_mib = 1000;
  bool cuda = false;
  double device_mib = 143771;   // an H200's, on CUDA
  double process_mib = 520;     // this process's own, on CUDA (NVML)
  // What was asked, in order.
  std::vector<std::pair<std::int64_t, bool>> runs;  // batch, traced
  int resets = 0;
  std::vector<bool> sharing;  // share_model_builds calls
  // Set to a FakeFresh's `ending`: the runs made while its fresh processes
  // were still ending (holding the device's memory) are counted.
  const bool* fresh_ending = nullptr;
  int runs_beside_ending = 0;

  bool cuda_compiled() const override { return cuda; }
  std::optional<int> cuda_device_count() const override { return cuda ? 1 : 0; }
  std::string allocator_settings() const override { return {}; }
  std::optional<int> open_session(const ResolvedPlan&, const HarnessOptions&, RunObserver&) override {
    return std::nullopt;
  }
  Report run(const PlannedRun& run, const ResolvedPlan&, const HarnessOptions& opts, RunObserver&, bool) override {
    runs.emplace_back(run.batch, opts.trace_allocations);
    if (fresh_ending != nullptr && *fresh_ending) ++runs_beside_ending;
    return job.report(run.batch, limit_mib, opts.trace_allocations);
  }
  bool write_snapshots(const HarnessOptions&, Report&, RunObserver&) override { return true; }
  void reset_between_runs() override { ++resets; }
  ProbeReading read_probe() override {
    ProbeReading r;
    if (cuda) r.process_device_mib = process_mib;
    return r;
  }
  double device_total_mib() override { return device_mib; }
  std::optional<std::int64_t> limit_bytes() const override {
    return static_cast<std::int64_t>(limit_mib * 1024 * 1024);
  }
  void share_model_builds(bool on) override { sharing.push_back(on); }
};

// Fresh processes whose job may differ from the one in this process (a
// batch finder's answer that fails when started afresh).
class FakeFresh final : public FreshProcesses {
 public:
  Job job;
  double limit_mib = 1000;
  std::vector<std::vector<std::int64_t>> asked;  // each call's batches, side by side
  std::vector<std::pair<std::int64_t, int>> prepared;  // each prepare's batch and count
  // As ChildProcesses: run() returns while its processes end; settle()
  // waits for them.
  bool ending = false;
  int settles = 0;
  void settle() override {
    ending = false;
    ++settles;
  }
  void prepare(const PlannedRun& base, const ResolvedPlan&, const HarnessOptions&, int count) override {
    prepared.emplace_back(base.batch, count);
  }
  std::vector<std::optional<Report>> run(const std::vector<PlannedRun>& runs, const ResolvedPlan&,
                                         const HarnessOptions&) override {
    asked.emplace_back();
    std::vector<std::optional<Report>> out;
    for (const PlannedRun& r : runs) {
      asked.back().push_back(r.batch);
      out.push_back(job.report(r.batch, limit_mib));
    }
    ending = true;
    return out;
  }
};

// What the run layer said, by kind.
class SearchLog final : public RunObserver {
 public:
  std::vector<std::int64_t> tried;
  std::vector<std::pair<std::int64_t, std::optional<RunStatus>>> confirming;
  std::optional<CapacitySearch> found;
  std::string output;
  std::vector<std::string> problems;
  std::vector<SweepRow> rows;
  void problem(const std::string& line) override { problems.push_back(line); }
  void search_tried(const CapacityTry& t, std::size_t) override { tried.push_back(t.batch); }
  void search_confirming(std::int64_t batch, std::optional<RunStatus> status) override {
    confirming.emplace_back(batch, status);
  }
  void search_finished(const CapacitySearch& c, const std::string& out) override {
    found = c;
    output = out;
  }
  void sweep_run_finished(const SweepRow& row, std::size_t, std::size_t) override { rows.push_back(row); }
};

}  // namespace memdiag::testkit
