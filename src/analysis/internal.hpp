// Internal to memdiag::analysis: the steps diagnose() is made of, each a small
// function of its own file, so a new kind of verdict is an addition.
#pragma once

#include "memdiag/analysis.hpp"

#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace memdiag::detail {

// --- sweeps.cpp ---------------------------------------------------------------
// A least-squares line through the origin over (x, y) points, sorted by x.
Sweep fit_sweep(SweepKind kind, std::vector<SweepPoint> points);
// y = a x + b x^2 by least squares over (x, y); none when the x do not
// determine both (fewer than two distinct).
std::optional<std::pair<double, double>> fit_linear_quadratic(const std::vector<std::pair<double, double>>& xy);
// The batch, parameter and steps sweeps present in the group around the
// primary run, each varying one setting with the others equal to its.
std::vector<Sweep> collect_sweeps(const Group& g, const RunFeatures& primary);
const Sweep* find_sweep(const std::vector<Sweep>& sweeps, SweepKind kind);
// One view per run configuration that has more than one rank.
std::vector<DistributedView> distributed_views(const Group& g);
// Each rank set of a data-parallel run (world above 1, one rank or more
// given) whose reports miss a rank of its world or repeat one.
std::vector<warning::RankSetIncomplete> rank_set_warnings(const Group& g);

// --- decide.cpp ---------------------------------------------------------------
// The run under the most pressure: the one that would run out first.
const RunFeatures& pick_primary(const Group& g);
Decision decide(const RunFeatures& primary, const std::vector<Component>& components);

// --- evidence.cpp -------------------------------------------------------------
RunPoint point_of(const RunFeatures& f);
// The evidence for the decided cause, and whether a sweep confirmed it.
std::vector<Evidence> cause_evidence(Cause cause, const RunFeatures& p, const std::vector<Sweep>& sweeps,
                                     bool& confirmed);
// Figures every verdict carries: the cache gap and memory outside the allocator.
std::vector<Evidence> general_evidence(Cause cause, const RunFeatures& p);
// The forward by module, where the report carries one step's (modules.cpp).
std::optional<evidence::ForwardByModule> forward_by_module(const RunFeatures& p);
// How the primary run stopped, if it did, and ranks out of balance.
std::vector<Warning> collect_warnings(const RunFeatures& primary, const std::vector<DistributedView>& views,
                                      std::vector<warning::RankSetIncomplete> rank_sets);

// --- oom.cpp ------------------------------------------------------------------
// What made the failing phase of a run that ran out of memory exceed its
// budget, read from the run's oom event, census and completed steps.
// The free memory under the budget at an out-of-memory failure, by where it
// lay: cached but free (reserved - allocated) and never reserved (the budget
// minus reserved, at most what the device had free); whether one place (the
// largest cached piece, or the unreserved rest as a new segment) could hold
// the request.
struct FreeUnderBudget {
  double cached_mib = 0;
  double unreserved_mib = 0;
  double total_mib = 0;
  bool one_place_holds_it = false;
};
std::optional<FreeUnderBudget> free_under_budget(const OomAt& oom, const std::string& allocator_settings);
// What the failing step needs at its peak, from the completed steps.
struct StepNeed {
  double mib = 0;
  bool measured = false;  // a completed step at least as large reached it
  int from_steps = 0;
};
std::optional<StepNeed> failing_step_need(const RunFeatures& oom_run);
Cause oom_cause(const RunFeatures& oom_run);
evidence::OutOfMemory oom_evidence(const RunFeatures& oom_run, Cause cause);

// --- capacity.cpp -------------------------------------------------------------
// The budgets a prediction answers: those given, else the run's memory
// limit, else the device less what sits outside the allocator.
std::vector<std::pair<double, CapacityPrediction::Budget>> capacity_budgets(const RunFeatures& primary,
                                                                           const std::vector<double>& budgets_mib);
std::vector<CapacityPrediction> predict_capacity(const Group& g, const RunFeatures& primary,
                                                 const std::vector<double>& budgets_mib);

// Every run of the primary's configuration along batch, and the tries of any
// search of it: the points the capacity model fits.
std::vector<CapacityPoint> batch_points(const Group& g, const RunFeatures& primary);

// --- sharded_capacity.cpp -----------------------------------------------------
// From a single-rank primary: each mode's largest batch per rank at each
// world size (empty without world sizes, or for a data-parallel primary).
std::vector<ShardedCapacity> predict_sharded_capacity(const Group& g, const RunFeatures& primary,
                                                      const std::vector<double>& budgets_mib,
                                                      const std::vector<int>& world_sizes);

// --- sequence_capacity.cpp ----------------------------------------------------
// The longest sequence that fits each budget at the primary's batch, from
// its configuration's sequence sweep (empty without one).
std::vector<StepSizeCapacity> predict_step_capacity(const RunFeatures& p, const std::vector<double>& budgets_mib);
std::vector<SequenceCapacity> predict_sequence_capacity(const Group& g, const RunFeatures& primary,
                                                        const std::vector<double>& budgets_mib);

// --- remedies.cpp -------------------------------------------------------------
// The group's runs without remedies (all of them when every run has one):
// the verdict is read from these.
Group baseline_runs(const Group& g);
std::vector<RemedyRow> remedy_rows(const Group& g, Cause dominant);
// The largest relative difference of a step's loss from the baseline's.
std::optional<double> max_loss_diff(const RunFeatures& r, const RunFeatures& base);
// The parallel modes measured side by side, per rank (parallel_modes.cpp).
std::vector<ModeRow> mode_rows(const Group& g);
std::optional<std::size_t> best_remedy(const std::vector<RemedyRow>& rows);
// The lowest peak among the rows that reduce the cause and complete.
std::optional<std::size_t> lowest_peak_remedy(const std::vector<RemedyRow>& rows);

// --- confirm.cpp --------------------------------------------------------------
// The runs that would confirm what the group cannot, with outputs beside the
// primary report that clash with no report in `taken`.
std::vector<ConfirmingRun> confirming_runs(const Decision& d, Cause cause, bool confirmed, const Group& g,
                                           const RunFeatures& primary, const std::set<std::string>& taken);

}  // namespace memdiag::detail
