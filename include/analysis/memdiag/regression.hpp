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
// census's largest), the first step's persistent state (optimizer moments),
// the forward's activations and the growth per step after cleanup.
enum class MovedComponent { kParameters, kGradients, kOptimizerState, kActivations, kGrowthPerStep };
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
  // The component whose MiB grew most, when any grew by more than 0.5 MiB.
  std::optional<MovedComponent> moved;
  bool regressed = false;  // the run's peak, or any phase's
};

struct RegressionReport {
  RegressionThresholds thresholds;
  std::vector<RegressionPair> pairs;
  std::vector<std::string> new_without_baseline;  // sources
  std::vector<std::string> baseline_without_new;
  bool regressed() const;
  // No report matched any baseline: the gate compared nothing.
  bool nothing_matched() const { return pairs.empty(); }
  // The gate's one outcome, for the exit code and every format: a peak
  // regressed, or nothing was compared (a baseline that matches nothing
  // must not pass). Reports without a baseline are listed, not failed.
  bool failed() const { return regressed() || nothing_matched(); }
};

using SourcedReport = std::pair<std::string, Report>;
RegressionReport compare_to_baseline(const std::vector<SourcedReport>& now, const std::vector<SourcedReport>& baseline,
                                     const RegressionThresholds& t);

}  // namespace memdiag
