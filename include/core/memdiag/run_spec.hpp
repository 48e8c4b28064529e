// A memory_diagnostics invocation as data: what the analysis suggests running
// to confirm a claim, spelt as an argument vector only at the edge, so that
// what is printed is exactly what runs.
#pragma once

#include "memdiag/parallelism.hpp"
#include "memdiag/remedy.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memdiag {

struct RunSpec {
  std::string case_ref;               // a built-in case name, or a case file path
  std::optional<std::string> device;  // absent: memory_diagnostics's own default (auto)
  std::optional<std::string> preset;
  std::optional<int> batch_size_per_device;
  std::optional<int> steps;
  std::optional<int> sequence_length;  // a transformer's
  std::optional<std::uint64_t> seed;
  std::optional<double> memory_limit_mib;
  // Data parallel: more than 1 runs under torchrun with that many processes.
  int world_size = 1;
  int rank_zero_extra_samples = 0;
  // The data-parallel mode (world_size > 1): ddp, or a sharded one spelt by
  // its definition's flag.
  ParallelMode mode = ParallelMode::kDdp;
  std::vector<Remedy> remedies;         // none: the baseline
  bool warm_up_kernels = true;          // false: --no-warmup
  bool quiet = false;
  bool overwrite = false;               // --overwrite: a child of a sweep given it replaces what its parent may
  std::vector<std::string> case_dirs;   // --cases-dir, searched first for case names
  std::string output;  // with {rank} when world_size > 1
  // ZeRO-2/3's units and prefetch (the mode's defaults: 1, none).
  int unit_modules = 1;
  bool prefetch_next = false;
  // --find-max-batch: the largest batch that fits, searched (batch left out).
  bool find_max_batch = false;
};

// The argument vector, program first: "memory_diagnostics --case ... --output
// ...", or "torchrun --nproc-per-node=N --no-python memory_diagnostics ...".
std::vector<std::string> to_argv(const RunSpec& run, const std::string& program = "memory_diagnostics");

// POSIX shell quoting: words that need no quotes stay bare, the rest go in
// single quotes. shell_command joins quoted words with spaces.
std::string shell_quote(const std::string& word);
std::string shell_command(const std::vector<std::string>& argv);

}  // namespace memdiag
