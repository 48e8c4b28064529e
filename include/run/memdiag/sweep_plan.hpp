// Sweeps: the configurations one memory_diagnostics invocation runs, from the
// comma-separated lists of its flags (their product, in the order given) or
// from a plan file. resolve_plan (memdiag/run_plan.hpp) resolves them
// against their case files and names their reports.
#pragma once

#include "memdiag/output_names.hpp"
#include "memdiag/remedy.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memdiag {

// One configuration as asked for; unset fields take the case's defaults.
struct RunRequest {
  std::string name;  // a plan's entry name; empty in a product
  std::string case_arg;
  std::optional<std::string> preset;
  std::optional<int> batch_size_per_device;
  std::optional<int> steps;
  std::vector<Remedy> remedies;  // none: the baseline
  std::optional<int> sequence_length;  // a transformer's; unset: the preset's
};

// The five sweep flags, each a list of one or more values.
struct SweepAxes {
  std::vector<std::string> cases;
  std::vector<std::string> presets;  // empty: each case's default
  std::vector<int> batch_sizes;      // empty: the preset's
  std::vector<int> steps;            // empty: the preset's
  std::vector<int> sequence_lengths;  // empty: the preset's (transformers)
  std::vector<std::vector<Remedy>> remedies;  // empty: the baseline only
};

// "none,checkpoint,accumulate=4+bf16" -> three remedy sets.
std::vector<std::vector<Remedy>> parse_remedy_list(const std::string& flag, const std::string& text);

// The product of the lists: cases outermost, then presets, batch sizes,
// steps, sequence lengths, remedies, each in the order given.
std::vector<RunRequest> expand_product(const SweepAxes& axes);

// A plan file (cases/plans/reference.json):
//   {"description": "...", "runs": [{"name": "alpha-batch1", "case": "alpha",
//                                    "batch_size_per_device": 1}, ...]}
// Names are unique, letters, digits, '_' and '-'. Throws InputError naming
// the file and the JSON path.
std::vector<RunRequest> read_plan_file(const std::string& path);
std::vector<RunRequest> parse_plan_text(const std::string& text, const std::string& source);

}  // namespace memdiag
