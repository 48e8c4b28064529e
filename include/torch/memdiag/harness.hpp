// What memory_diagnostics does, as a library call: resolve the case and the
// device, run the workload under a recorder, print progress, write the report.
#pragma once

#include "memdiag/exit_code.hpp"

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace memdiag {

struct HarnessOptions {
  std::string case_arg = "alpha";
  std::string output;  // empty: "<case>.json"
  std::optional<int> batch_size;
  std::string preset;  // empty: the case's default
  std::optional<int> steps;
  std::string device = "auto";
  std::uint64_t seed = 0;
  std::optional<double> memory_limit_mib;
  bool quiet = false;
  bool warm_up_kernels = true;
  std::vector<std::string> case_dirs;
  // Data-parallel runs (started by torchrun or with its variables set).
  int rank_zero_extra_samples = 0;
  bool shard_optimizer_state = false;
  double dist_timeout_s = 60;
};

// The report path of one rank: "{rank}" is replaced by the rank; without it,
// a world of more than one gets "-rankK" before the extension.
std::string output_for_rank(const std::string& output, int rank, int world_size);

// Where built-in cases are looked for: $MEMDIAG_CASES_DIR, the installed
// cases (../share/memdiag/cases beside the executable), then the source
// tree's (a build that was not installed).
std::vector<std::string> default_case_dirs(const std::string& argv0);

// Returns an ExitCode as int. Usage errors print one line to err and write
// nothing.
int run_harness(const HarnessOptions& opts, std::ostream& out, std::ostream& err);

// Prints the built-in cases with their presets and descriptions.
int list_cases(const std::vector<std::string>& case_dirs, std::ostream& out, std::ostream& err);

}  // namespace memdiag
