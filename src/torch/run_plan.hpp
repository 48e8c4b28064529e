// Internal to memdiag::torch: a sweep's configurations resolved against their
// case files, the device and the launcher, with every report path decided
// and checked before anything runs.
#pragma once

#include "memdiag/case_spec.hpp"
#include "memdiag/distributed.hpp"
#include "memdiag/report.hpp"
#include "memdiag/harness.hpp"
#include "memdiag/sweep_plan.hpp"

#include <c10/core/Device.h>

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace memdiag::detail {

struct PlannedRun {
  std::string case_arg;  // as given: a built-in name or a path (--isolate passes it on)
  CaseSpec spec;
  std::string preset;
  int batch = 0;
  int steps = 0;
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

// Throws UsageError naming the flag at fault: an unknown case or preset, a
// bad value, two runs that would write the same file, a path that cannot be
// written.
ResolvedPlan resolve_plan(const HarnessOptions& opts);

// --- sweep_progress.cpp: what a sweep prints ---------------------------------
struct SweepRow {
  std::string label;  // "alpha batch 4", or a plan entry's name
  RunStatus status = RunStatus::kComplete;
  double peak_mib = 0;
  std::optional<double> peak_reserved_mib;
  double seconds = 0;
  std::string output;
};
SweepRow sweep_row(const PlannedRun& run, const Varying& v, const Report& report, double seconds);
// "[3/7] alpha batch 4: complete, peak 140.4 MiB, 0.21 s", as each run ends.
void print_progress_line(const SweepRow& row, std::size_t index, std::size_t total, std::ostream& err);
// All runs in a table, then a count by status.
void print_summary(const std::vector<SweepRow>& rows, std::size_t planned, std::ostream& out);

// --- isolate.cpp: --isolate ---------------------------------------------------
// Each configuration in a fresh child process (this executable, one run,
// --quiet), one after another; the same reports, progress and exit code.
int run_isolated(const ResolvedPlan& plan, const HarnessOptions& opts, bool talk, std::ostream& out,
                 std::ostream& err);

}  // namespace memdiag::detail
