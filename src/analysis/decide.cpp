// The decision: which component a run's memory is dominated by, and the rule
// and threshold that said so.
#include "decide.hpp"
#include "evidence.hpp"

#include "memdiag/phase_shape.hpp"

#include <algorithm>
#include <limits>
#include <tuple>

namespace memdiag {

// Each cause's figure comes from one measurement: activations from the
// steady forward increment (with what the loop held of a step past its
// cleanup), optimizer state from the persistent increase made once at the
// first step (less what was held over, within the census's state), a retained graph from the post-cleanup growth over
// all steps, parameters from the weights the rank holds, the cache from peak reserved
// minus peak allocated, fragmentation from the most free memory stranded in
// split segments of a run whose allocator had to retry.
std::vector<Component> components_of(const RunFeatures& f) {
  std::vector<Component> c;
  if (f.forward_increment_mib) {
    // Where the steady forwards varied (their sizes or shapes did), the
    // largest: it is under the run's peak, and the median step's set
    // against the optimizer's state read "inconclusive" where the largest
    // steps' forwards were twice that state and set the peak (an
    // independent check's dynamically padded LM, 29.22 MiB at the median
    // against 57-60 at its longest steps).
    const double forward = f.forward_range ? std::max(*f.forward_increment_mib, f.forward_range->most_mib)
                                           : *f.forward_increment_mib;
    const double activations = forward + f.held_over_mib;
    c.push_back({Cause::kActivations, std::max(0.0, activations), activations > 0 ? f.held_over_mib : 0.0});
  }
  if (f.optimizer_state_made_mib) c.push_back({Cause::kOptimizerState, *f.optimizer_state_made_mib});
  // A graph held across steps: growing (a leak), or held whole from one
  // step into the next (an evaluation's forward without no_grad), the
  // larger of the two.
  std::optional<double> retained = f.retained_growth_mib;
  if (f.held_graph_mib && *f.held_graph_mib > retained.value_or(0)) retained = f.held_graph_mib;
  // A cache of the last few steps' tensors (a deque of features kept
  // graph-connected: 96 MiB of a 144 MiB peak read "activations"), at its
  // bound.
  if (f.kept_bounded_mib >= thresholds::kMinimumSignalMib && f.kept_bounded_mib > retained.value_or(0)) {
    retained = f.kept_bounded_mib;
  }
  if (retained) c.push_back({Cause::kRetainedGraph, *retained});
  c.push_back({Cause::kParameters, f.held_parameter_mib});
  if (f.cache_excess_mib) c.push_back({Cause::kAllocatorCache, *f.cache_excess_mib});
  if (f.fragmentation_mib) c.push_back({Cause::kFragmentation, *f.fragmentation_mib});
  std::stable_sort(c.begin(), c.end(), [](const Component& a, const Component& b) { return a.mib > b.mib; });
  return c;
}

namespace detail {

// Post-cleanup memory that rises with the steps' own size (a loop that
// holds the last batch's tensors through cleanup, on a ramp) is not kept
// step on step: it falls when a step is smaller. Told apart where the
// sizes do not rise with the steps: the growth is a leak only if it goes
// on where the size goes down.
bool grows_with_size(const RunFeatures& p) {
  if (!(p.step_samples && p.step_samples->varied()) && !(p.step_tokens && p.step_tokens->varied())) return false;
  const bool tokens = !(p.step_samples && p.step_samples->varied());
  std::optional<double> last_size, last_cleanup;
  int down_steps = 0, grew_anyway = 0;
  for (const StepFigures& st : p.steps) {
    const std::optional<std::int64_t> n = tokens ? st.tokens : st.samples;
    if (!n || !st.cleanup_allocated_mib) continue;
    if (last_size && static_cast<double>(*n) < *last_size) {
      ++down_steps;
      if (*st.cleanup_allocated_mib > *last_cleanup + thresholds::kGrowthFloorMib) ++grew_anyway;
    }
    last_size = static_cast<double>(*n);
    last_cleanup = *st.cleanup_allocated_mib;
  }
  // A ramp never goes down: its growth cannot be told from the size's.
  return down_steps == 0 || grew_anyway == 0;
}

// No leak where the steps' forwards varied (their inputs did), the
// recorder's walk of the live tensors at the cleanups found nothing
// kept, and the rise per step is within what the loop held at its
// cleanups: the batch it holds until the next replaces it, larger as the
// images grew (an independent check's ConvNeXt on ascending sizes read
// "unbounded" at +0.3 MiB a step beside 1.5 MiB held); so, where the
// walk read every step's cleanup and found nothing kept (an independent
// check's Faster R-CNN on images of their own sizes: +0.61 MiB a step
// over 3 steps beside 12.2 MiB held read "unbounded" against 1687 MiB
// of activations). A loop of one shape leaking after the walked steps
// is still a leak (a review's).
bool walk_saw_no_leak(const RunFeatures& p) {
  return p.kept.empty() && p.walk_held_mib && p.growth_per_step_mib && *p.growth_per_step_mib <= *p.walk_held_mib &&
         (p.forward_range.has_value() || p.walk_covered_every_step);
}

namespace {

// The run's highest phase peak split into what grows with the batch (the
// peak less the model's state counted at that phase and what persists
// beside it: workspaces, buckets) and the model's state. Nothing without a
// census there.
std::optional<Decision::PeakSplit> peak_split(const RunFeatures& p) {
  const PhaseShape* top = nullptr;
  for (const PhaseShape& s : p.capacity_point.phases) {
    if (top == nullptr || s.peak_mib > top->peak_mib) top = &s;
  }
  if (top == nullptr || (!top->start_census && !top->end_census)) return std::nullopt;
  const double state = std::max(top->start_census ? fixed_mib(*top->start_census) : 0.0,
                                top->end_census ? fixed_mib(*top->end_census) : 0.0);
  if (!(state > 0)) return std::nullopt;
  Decision::PeakSplit s;
  s.phase = top->phase;
  s.peak_mib = top->peak_mib;
  s.model_state_mib = state;
  s.with_batch_mib = std::max(0.0, top->peak_mib - state - p.capacity_point.persistent_other_mib);
  return s;
}

}  // namespace

const RunFeatures& pick_primary(const Group& g) {
  // A run that ran out of memory first: it is the question. Then the run
  // under the most pressure, the one that would run out first.
  const RunFeatures* best = &g.runs.front();
  for (const RunFeatures& r : g.runs) {
    if (std::make_tuple(r.oom.has_value(), r.peak_allocated_mib, r.config.steps) >
        std::make_tuple(best->oom.has_value(), best->peak_allocated_mib, best->config.steps)) {
      best = &r;
    }
  }
  return *best;
}

Decision decide(const RunFeatures& p, const std::vector<Component>& all) {
  Decision d;
  d.status = p.status;
  // Steps of varying size leave a reserve that follows the largest of them
  // and blocks cut for other shapes: the cache and the stranded pieces
  // grow with the variation, whatever the job's consumer. In a run that
  // completed they are the consequence (a limit would expose them), so the
  // consumer is named (a variable-length LM read allocator_cache without a
  // limit, inconclusive at 10000 MiB and activations at 9000, issue 36).
  const bool sizes_varied = p.sizes_varied();
  std::vector<Component> components;
  for (const Component& c : all) {
    const bool overhead = c.cause == Cause::kAllocatorCache || c.cause == Cause::kFragmentation;
    if (overhead && sizes_varied && !p.oom && c.mib > 0) {
      d.set_aside.push_back(c);
    } else {
      components.push_back(c);
    }
  }
  d.retained_bounded = bounded_hold(p);
  if (!components.empty()) d.top = components.front();
  if (components.size() > 1) d.runner_up = components[1];
  const double top = d.top ? d.top->mib : 0.0;
  const double second = d.runner_up ? d.runner_up->mib : 0.0;
  if (second > 0) d.margin = top / second;

  if (p.oom) {
    d.rule = DecisionRule::kOutOfMemory;
  } else if (std::none_of(p.steps.begin(), p.steps.end(),
                          [](const StepFigures& st) { return st.cleanup_allocated_mib.has_value(); })) {
    // A run that stopped before any step reached its cleanup (interrupted
    // or failed in forward, backward or step()) never measured what a step
    // leaves behind: optimizer state and a retained graph would read as
    // 0 MiB, and the parameters win by default. Nothing is claimed.
    d.rule = DecisionRule::kNoCompletedStep;
  } else if (top < thresholds::kMinimumSignalMib) {
    d.rule = DecisionRule::kBelowSignal;
    d.threshold = thresholds::kMinimumSignalMib;
  } else if (p.steps.size() < 2 && p.first_step_persistent_mib &&
             *p.first_step_persistent_mib * thresholds::kDominanceRatio > top &&
             *p.first_step_persistent_mib > thresholds::kMinimumSignalMib) {
    // With one step, optimizer state made once and a graph retained every
    // step leave the same trace: an increase after the first cleanup.
    d.rule = DecisionRule::kOneStepAmbiguous;
    d.threshold = thresholds::kDominanceRatio;
    d.first_step_persistent_mib = p.first_step_persistent_mib;
  } else if (top < thresholds::kDominanceRatio * second) {
    d.rule = DecisionRule::kTooClose;
    d.threshold = thresholds::kDominanceRatio;
    // Activations against the weights: the forward's increment is what the
    // forward made, not what backward holds at the peak (the gradients of
    // the activations beside them, a layer's output the loop kept and the
    // forward replaced). A hostile check's job held 68 of its 100.3 MiB
    // peak in what grew with the batch, against 32.3 of weights and their
    // gradients, and read inconclusive (activations 20.09 against the
    // weights' 16.17). Told apart at the peak where it is clear there.
    const std::optional<Decision::PeakSplit> split = peak_split(p);
    const bool pair = d.top && d.runner_up &&
                      ((d.top->cause == Cause::kActivations && d.runner_up->cause == Cause::kParameters) ||
                       (d.top->cause == Cause::kParameters && d.runner_up->cause == Cause::kActivations));
    if (pair && split && split->with_batch_mib >= thresholds::kDominanceRatio * split->model_state_mib) {
      d.rule = DecisionRule::kDominantAtPeak;
      if (d.top->cause != Cause::kActivations) std::swap(d.top, d.runner_up);
      d.margin = split->with_batch_mib / split->model_state_mib;
      d.peak_split = split;
    }
  } else {
    d.rule = DecisionRule::kDominant;
    d.threshold = thresholds::kDominanceRatio;
  }
  const bool retained_decides = d.rule == DecisionRule::kDominant && d.top && d.top->cause == Cause::kRetainedGraph;
  if ((d.rule == DecisionRule::kDominant || d.rule == DecisionRule::kTooClose) && !retained_decides &&
      p.growth_significant && p.steps.size() >= static_cast<std::size_t>(thresholds::kMinGrowthSteps) &&
      p.retained_growth_mib &&
      *p.retained_growth_mib >= thresholds::kMinimumSignalMib && !grows_with_size(p) && !walk_saw_no_leak(p)) {
    // Memory kept on every step is unbounded: it runs out at some step,
    // however much larger a steady consumer is now (BERT's logits kept in a
    // list read inconclusive over 6 steps beside its activations).
    d.rule = DecisionRule::kGrowsEveryStep;
    d.runner_up = d.top->cause == Cause::kRetainedGraph ? d.runner_up : d.top;  // the steady cost beside it
    for (const Component& c : components) {
      if (c.cause == Cause::kRetainedGraph) d.top = c;
    }
    d.margin = d.runner_up && d.runner_up->mib > 0 ? std::optional<double>(d.top->mib / d.runner_up->mib) : std::nullopt;
    d.threshold = thresholds::kGrowthPositiveShare;
    d.growth_steps = static_cast<int>(p.steps.size());
  }
  return d;
}

}  // namespace detail
}  // namespace memdiag
