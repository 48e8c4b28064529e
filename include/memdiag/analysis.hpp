// Analysis: pure functions from reports to verdicts. No LibTorch, no I/O.
//
// A verdict is read off the measured numbers only. The case's name is used to
// group reports and to label output, never to decide; the case's declared
// optimizer and graph flags (Report::case_spec) are never read here.
#pragma once

#include "memdiag/report.hpp"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace memdiag {

enum class Cause { kActivations, kOptimizerState, kRetainedGraph, kParameters, kAllocatorCache, kInconclusive };
const char* to_string(Cause c);
std::optional<Cause> cause_from_string(const std::string& s);
const std::vector<Cause>& all_causes();
// Human words for a cause: "forward activations".
const char* cause_label(Cause c);

// One step's allocator figures. Increments are end-of-phase minus the end of
// the phase before it.
struct StepFigures {
  int step = 0;
  std::optional<double> forward_increment_mib;
  std::optional<double> backward_increment_mib;
  std::optional<double> step_increment_mib;
  std::optional<double> cleanup_allocated_mib;
  double peak_mib = 0;  // highest peak of any phase of the step
};

struct RunFeatures {
  std::string source;
  std::string case_name;
  RunConfig config;
  RunStatus status = RunStatus::kComplete;
  int local_batch = 0;  // samples this rank ran per step (rank 0 may carry extra)
  double parameter_mib = 0;
  std::optional<double> model_ready_mib;  // allocated at model_ready
  std::optional<double> baseline_mib;     // allocated at optimizer_ready
  std::vector<StepFigures> steps;

  // Forward increment in steady state: the median over steps >= 1, or step 0
  // alone when only one step ran.
  std::optional<double> forward_increment_mib;
  std::optional<double> forward_per_sample_mib;
  // cleanup[0] - optimizer_ready: what the first step left behind.
  std::optional<double> first_step_persistent_mib;
  // Least-squares slope of the post-cleanup allocation over steps (>= 2 steps)
  // and the share of step-to-step changes that were increases.
  std::optional<double> growth_per_step_mib;
  std::optional<double> growth_positive_share;
  bool growth_significant = false;
  // The first step's persistent increase beyond one step's worth of growth:
  // state made once and kept (optimizer moments, DDP buckets).
  std::optional<double> first_step_excess_mib;
  std::optional<double> excess_to_parameter_ratio;
  // Total retained by step-on-step growth at the end of the run.
  std::optional<double> retained_growth_mib;

  double peak_allocated_mib = 0;
  std::optional<double> peak_reserved_mib;
  std::optional<double> max_reserved_gap_mib;       // max over samples of reserved - allocated
  std::optional<double> cache_excess_mib;           // peak reserved - peak allocated
  std::optional<double> device_minus_reserved_mib;  // last sample
  std::optional<double> warmup_mib;                 // from the "warmup" event
  std::map<std::string, double> peak_by_phase;
  std::vector<std::string> notes;  // e.g. "stopped by OOM in backward of step 2"
};

RunFeatures compute_features(const Report& report, const std::string& source);

// A candidate cause and how many MiB it accounts for in one run.
struct Component {
  Cause cause = Cause::kInconclusive;
  double mib = 0;
  std::string basis;  // which measurement gave the figure
};
std::vector<Component> components_of(const RunFeatures& f);  // largest first

// Reports of the same case and configuration, differing only in batch size,
// preset, steps or rank.
struct Group {
  std::string key;
  std::string case_name;
  std::string device_kind;  // "cpu", "cuda"
  int world_size = 1;
  std::vector<RunFeatures> runs;  // ordered by preset, batch, steps, rank
};

std::vector<Group> group_runs(std::vector<RunFeatures> runs);

struct SweepPoint {
  double x = 0;  // batch, parameter MiB or steps
  double y = 0;  // forward increment, first-step excess or total growth
  std::string source;
};

struct Sweep {
  std::string kind;  // "batch", "parameters", "steps"
  std::vector<SweepPoint> points;
  double slope = 0;          // y per unit of x (through the origin)
  double max_deviation = 0;  // largest relative departure of y/x from the slope
  bool increasing = false;
};

struct RankRow {
  int rank = 0;
  std::string source;
  double peak_allocated_mib = 0;
  std::optional<double> forward_increment_mib;
  std::optional<double> first_step_excess_mib;
};

struct DistributedView {
  std::string run_label;  // "batch 8, preset small, 4 steps"
  std::vector<RankRow> ranks;
  int max_rank = 0;  // the capacity constraint
  double max_peak_mib = 0;
  double imbalance = 0;  // (max - min) / max of peak
  bool imbalanced = false;
};

struct Verdict {
  std::string case_name;
  std::string group_key;
  Cause dominant = Cause::kInconclusive;
  std::string primary_source;  // the run the verdict is read from
  std::vector<Component> components;
  std::vector<std::string> evidence;
  std::string response;
  std::vector<std::string> not_helpful;
  std::vector<std::string> confirm;  // commands that would confirm a scaling claim
  bool confirmed = false;            // a sweep in the group confirmed the scaling
  std::vector<Sweep> sweeps;
  std::vector<DistributedView> distributed;
  std::vector<std::string> warnings;
};

Verdict diagnose(const Group& group);

struct Analysis {
  std::vector<Group> groups;
  std::vector<Verdict> verdicts;  // one per group, same order
};

// The whole pipeline for a set of reports already read.
Analysis analyse(const std::vector<std::pair<std::string, Report>>& reports);

// Thresholds, named so tests and docs can cite them.
namespace thresholds {
// The dominant cause must exceed the runner-up by this factor.
inline constexpr double kDominanceRatio = 1.25;
// Below this the run is too small to say anything (MiB).
inline constexpr double kMinimumSignalMib = 0.25;
// Growth per step counts as real when above this (MiB) ...
inline constexpr double kGrowthFloorMib = 0.05;
// ... and above this fraction of the baseline ...
inline constexpr double kGrowthBaselineFraction = 0.001;
// ... and at least this share of step-to-step changes are increases.
inline constexpr double kGrowthPositiveShare = 0.75;
// A sweep is linear when every point's y/x is within this of the fitted slope.
inline constexpr double kLinearTolerance = 0.15;
// Ranks whose peaks differ by more than this fraction are imbalanced.
inline constexpr double kRankImbalance = 0.10;
}  // namespace thresholds

}  // namespace memdiag
