// A memory regression gate: new reports against baseline reports of the
// same case, configuration and rank, phase by phase, with the component
// that moved. The peak decides; the rest says why.
#pragma once

#include "memdiag/features.hpp"
#include "memdiag/report.hpp"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace memdiag {

struct RegressionThresholds {
  // A peak regresses when it grows by more than this fraction of the
  // baseline's peak and, when given, by more than max_increase_mib too
  // (a floor, so that small runs do not fail on rounding).
  double max_increase_fraction = 0.05;
  std::optional<double> max_increase_mib;
};

struct PhaseDelta {
  Phase phase = Phase::kForward;
  double base_peak_mib = 0, new_peak_mib = 0;  // the highest peak of the phase over the steps
  double base_end_mib = 0, new_end_mib = 0;    // allocated at the end of its last occurrence
  bool regressed = false;
};

// What a run is made of, before and after: parameters, gradients (the
// census's largest), the optimizer's state (the census's at the last
// step(), else what the first step left), the forward's activations, the
// growth per step after cleanup, and what the loop holds between steps
// beside the model state (the median of the cleanups after the first,
// beyond the census: an evaluation's graph kept from step to step,
// outputs held over).
enum class MovedComponent { kParameters, kGradients, kOptimizerState, kActivations, kGrowthPerStep, kHeldBetweenSteps };
const char* to_string(MovedComponent c);

struct ComponentDelta {
  MovedComponent component = MovedComponent::kActivations;
  double base_mib = 0, new_mib = 0;
};

struct RegressionPair {
  std::string key;  // the configuration in words: "alpha, cuda, preset small, batch 4, 4 steps"
  std::string new_source, base_source;
  RunStatus new_status = RunStatus::kComplete, base_status = RunStatus::kComplete;
  double base_peak_mib = 0, new_peak_mib = 0;
  std::vector<PhaseDelta> phases;
  std::vector<ComponentDelta> components;
  // The component whose MiB grew most, when any grew by more than 0.5 MiB:
  // the parameters first where they grew (their gradients and state
  // follow them: a wider layer read as optimizer state by 0.06 MiB), a
  // growth per step weighed over the run's steps (a rate beside totals
  // named a leak optimizer state).
  std::optional<MovedComponent> moved;
  // ... and where the peak fell, the one that fell most.
  std::optional<MovedComponent> fell;
  bool regressed = false;  // the run's peak, or any phase's
};

// A new report and a baseline of the same case (producer, device kind,
// rank and variant) that match each other in nothing else: the job's
// configuration changed (its batch, steps, sequence length), so the gate
// cannot compare them. Said with what changed and both peaks, and the
// baseline's side fails the gate: a pull request that doubles the batch
// must not pass unseen.
struct ConfigurationChange {
  std::string new_source, base_source;
  std::string changed;  // "batch 16 -> batch 32"
  double base_peak_mib = 0, new_peak_mib = 0;
};

struct RegressionReport {
  RegressionThresholds thresholds;
  std::vector<RegressionPair> pairs;
  std::vector<std::string> new_without_baseline;  // sources
  std::vector<std::string> baseline_without_new;
  std::vector<ConfigurationChange> changed;  // among the two lists above, paired by case
  bool regressed() const;
  // No report matched any baseline: the gate compared nothing.
  bool nothing_matched() const { return pairs.empty(); }
  // The gate's one outcome, for the exit code and every format: a peak
  // regressed, nothing was compared (a baseline that matches nothing must
  // not pass), or a baseline has no new report (the job changed its
  // configuration, or did not run: what the gate guards went unchecked).
  // Reports without a baseline are listed, not failed.
  bool failed() const { return regressed() || nothing_matched() || !baseline_without_new.empty(); }
};

using SourcedReport = std::pair<std::string, Report>;
RegressionReport compare_to_baseline(const std::vector<SourcedReport>& now, const std::vector<SourcedReport>& baseline,
                                     const RegressionThresholds& t);

}  // namespace memdiag
