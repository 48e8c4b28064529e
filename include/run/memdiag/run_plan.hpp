// A sweep's configurations resolved against their case files, the device
// and the launcher, with every report path decided and checked before
// anything runs. No LibTorch: the front executable checks a plan this way
// before it starts a runner, and the runner resolves the same plan again.
#pragma once

#include "memdiag/case_spec.hpp"
#include "memdiag/device.hpp"
#include "memdiag/harness_options.hpp"
#include "memdiag/launch.hpp"
#include "memdiag/machine.hpp"
#include "memdiag/output_names.hpp"
#include "memdiag/report.hpp"

#include <optional>
#include <string>
#include <vector>

namespace memdiag {

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
  Device device;
  std::optional<LaunchInfo> launch;
  // On CUDA, the caching allocator's settings the process runs under
  // before any run's own (Machine::allocator_settings); empty on the CPU.
  std::string process_allocator_settings;
};

// Throws UsageError naming the flag at fault: a value out of its range, an
// unknown case or preset, a combination refused, two runs that would write
// the same file, a path that cannot be written. Makes --output-dir. The
// machine must be able to tell the device (throws memdiag::Error if not).
ResolvedPlan resolve_plan(const HarnessOptions& opts, const Machine& machine);

// resolve_plan's checks, for the front. Where the machine cannot tell the
// device without LibTorch, those that need it (what a CPU or a CUDA device
// refuses, a report of another configuration where a run writes: the
// device is part of a configuration) are left to the runner, and so is
// making --output-dir (a usage error of the device's may still come);
// false says so. True when every check was made, as resolve_plan makes
// them.
bool check_plan(const HarnessOptions& opts, const Machine& machine);

// The configuration a planned run's report records (its config object).
RunConfig config_of(const PlannedRun& run, const ResolvedPlan& plan, const HarnessOptions& opts);

// Whether a run of the plan must run in a child process of its own: an
// allocator setting on CUDA acts on the whole process and on segments made
// after it, so it cannot be set for one run of a sweep and undone.
bool needs_own_process(const PlannedRun& run, const ResolvedPlan& plan);

}  // namespace memdiag
