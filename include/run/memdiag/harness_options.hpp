// What a memory_diagnostics run is asked to do, as data: the flags once
// parsed. In the run layer (no LibTorch), so that the front executable
// parses and checks them without loading LibTorch.
#pragma once

#include "memdiag/parallelism.hpp"
#include "memdiag/run_observer.hpp"
#include "memdiag/stop_request.hpp"
#include "memdiag/sweep_plan.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace memdiag {

struct HarnessOptions {
  // The configurations to run, in order: the product of the sweep flags'
  // lists, or a plan file's entries. One entry is a plain run.
  std::vector<RunRequest> runs = {RunRequest{"", "alpha", std::nullopt, std::nullopt, std::nullopt, {}, std::nullopt}};
  bool from_plan = false;   // runs came from --plan (names them and {name} works)
  std::string plan_file;    // --plan's file: an input no report may replace
  // Replace a report of another configuration found where a made name
  // (--output-dir, a template, the default) puts this run's report.
  bool overwrite = false;
  std::string output;      // path or template with {case} {preset} {batch} {steps} {name} {rank}
  std::string output_dir;  // instead of output: DIR/<case and what varies>.json
  std::string device = "auto";
  std::uint64_t seed = 0;
  std::optional<double> memory_limit_mib;
  bool warm_up_kernels = true;
  // Each configuration of a sweep in a fresh child process rather than in
  // this one (same reports; isolation by construction).
  bool isolate = false;
  std::vector<std::string> case_dirs;
  // Data-parallel runs (started by torchrun or with its variables set).
  int rank_zero_extra_samples = 0;
  // The mode a launched job runs in (ddp, or a sharded mode asked for by
  // its flag); a single process is mode none whatever this says.
  ParallelMode parallel_mode = ParallelMode::kDdp;
  // ZeRO-2/3 (--shard gradients|parameters): modules per unit, and whether
  // the next unit is gathered while one runs.
  std::string shard_flag;  // the flag as the user spelt it, for messages (empty: the mode's own)
  int shard_unit_modules = 1;
  bool shard_prefetch_next = false;
  double dist_timeout_s = 60;
  // --find-max-batch: search for the largest batch that completes the
  // steps within the budget (--memory-limit-mib, or what the device leaves
  // to the allocator) instead of running the batch given.
  bool find_max_batch = false;
  // CUDA: the allocator's history as memory_viz's pickle, for the whole run
  // (memory_snapshot) or at the moment an allocation is refused (oom_snapshot).
  std::string memory_snapshot;
  std::string oom_snapshot;
  std::size_t snapshot_max_entries = 100000;
  bool snapshot_cpp_stacks = false;
  // Every request the run makes of the allocator, and the same
  // configuration's at half the batch, in the report (allocation_trace):
  // compare_memory_reports replays the allocator from them to predict what
  // fits at other batches and limits.
  bool trace_allocations = false;
  // A fresh process started before its batch was known (FreshProcesses::
  // prepare, the runner's --batch-from-stdin): a run makes its model and
  // optimizer, then asks this for its batch and runs that instead of the
  // one planned (nullopt: none came, the run ends interrupted). Empty: the
  // planned batch.
  std::function<std::optional<int>()> await_batch;
  // This executable, for --isolate's children.
  std::string self_exe;
  // Where progress, outcomes and problems go (none: nowhere), and the stop
  // request runs check between phases (none: runs are not stopped).
  RunObserver* observer = nullptr;
  const StopRequest* stop = nullptr;
};

}  // namespace memdiag
