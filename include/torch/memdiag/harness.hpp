// What memory_diagnostics does, as a library call: resolve the case and the
// device, run the workload under a recorder, print progress, write the report.
#pragma once

#include "memdiag/exit_code.hpp"
#include "memdiag/sweep_plan.hpp"

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace memdiag {

struct HarnessOptions {
  // The configurations to run, in order: the product of the sweep flags'
  // lists, or a plan file's entries. One entry is a plain run.
  std::vector<RunRequest> runs = {RunRequest{"", "alpha", std::nullopt, std::nullopt, std::nullopt, {}}};
  bool from_plan = false;   // runs came from --plan (names them and {name} works)
  std::string output;      // path or template with {case} {preset} {batch} {steps} {name} {rank}
  std::string output_dir;  // instead of output: DIR/<case and what varies>.json
  std::string device = "auto";
  std::uint64_t seed = 0;
  std::optional<double> memory_limit_mib;
  bool quiet = false;
  bool warm_up_kernels = true;
  // Each configuration of a sweep in a fresh child process rather than in
  // this one (same reports; isolation by construction).
  bool isolate = false;
  std::vector<std::string> case_dirs;
  // Data-parallel runs (started by torchrun or with its variables set).
  int rank_zero_extra_samples = 0;
  bool shard_optimizer_state = false;
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
  // This executable, for --isolate's children.
  std::string self_exe;
};

// Where built-in cases are looked for: $MEMDIAG_CASES_DIR, the installed
// cases (../share/memdiag/cases beside the executable), then the source
// tree's (a build that was not installed).
std::vector<std::string> default_case_dirs(const std::string& argv0);

// This executable's path (/proc/self/exe, else argv0), for --isolate.
std::string self_executable(const std::string& argv0);

// Runs every configuration and writes one report each. Returns an ExitCode
// as int: for a sweep, 130 if interrupted, else 1 if any run failed, else 3
// if any ran out of memory, else 0. Usage errors print one line to err and
// write nothing.
int run_harness(const HarnessOptions& opts, std::ostream& out, std::ostream& err);

// Prints the built-in cases with their presets and descriptions.
int list_cases(const std::vector<std::string>& case_dirs, std::ostream& out, std::ostream& err);

}  // namespace memdiag
