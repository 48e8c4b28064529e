// The evidence a verdict cites: typed records with the figures that support
// the decided cause, and the warnings a reader must not miss.
#include "evidence.hpp"
#include "confirm.hpp"
#include "decide.hpp"
#include "step_capacity.hpp"
#include "sweeps.hpp"
#include "modules.hpp"

#include <algorithm>
#include <cmath>

namespace memdiag::detail {

evidence::PostCleanupTrend trend(const RunFeatures& p, bool made_once) {
  const bool unseen = p.growth_unseen_frees_mib.has_value();
  evidence::PostCleanupTrend t;
  t.growth_per_step_mib = p.growth_per_step_mib;
  t.growing = p.growth_significant;
  t.steps = static_cast<int>(p.steps.size());
  t.state_grew_mib = p.cleanup_state_taken_mib;
  t.held_graph_mib = p.cleanup_held_graph_taken_mib;
  t.gradients_held_mib = p.cleanup_gradients_taken_mib;
  t.gradients_held_cleanups = p.cleanup_gradients_taken_count;
  t.gradients_unknown_cleanups = p.cleanup_gradients_unknown_count;
  // State that kept growing was not made once (LBFGS's history).
  t.made_once = made_once && !p.growth_significant && !unseen && t.state_grew_mib < thresholds::kGrowthFloorMib;
  t.unseen_frees = unseen;
  t.too_few_steps = growth_unjudged(p);
  t.rise = rise_said(p);
  if (p.growth_significant) {
    t.follows_size = grows_with_size(p);
    if (walk_saw_no_leak(p)) t.walk_held_mib = p.walk_held_mib;
  }
  return t;
}

namespace {

void add_sweep(std::vector<Evidence>& out, const std::vector<Sweep>& sweeps, SweepKind kind, const Sweep** found) {
  if (const Sweep* s = find_sweep(sweeps, kind)) {
    out.push_back(evidence::SweepFit{*s});
    *found = s;
  }
}

}  // namespace

std::optional<RunFeatures::OneRise> rise_said(const RunFeatures& p) {
  return p.growth_significant ? std::nullopt : p.one_rise;
}

RunPoint point_of(const RunFeatures& f) {
  return RunPoint{f.local_batch, f.config.preset, static_cast<int>(f.steps.size())};
}

bool bounded_hold(const RunFeatures& p) {
  return !p.growth_significant && (p.held_graph_mib || p.kept_bounded_mib >= thresholds::kMinimumSignalMib);
}

std::optional<WalkedGrowth> walked_growth(const RunFeatures& p) {
  if (p.walk_covered_every_step) return std::nullopt;
  const StepFigures* first = nullptr;
  const StepFigures* last = nullptr;
  for (const StepFigures& st : p.steps) {
    if (!st.cleanup_allocated_mib ||
        std::find(p.walked_steps.begin(), p.walked_steps.end(), st.step) == p.walked_steps.end()) {
      continue;
    }
    if (!first) first = &st;
    last = &st;
  }
  if (!first || !last || last->step <= first->step) return std::nullopt;
  return WalkedGrowth{first->step, last->step,
                      (*last->cleanup_allocated_mib - *first->cleanup_allocated_mib) /
                          static_cast<double>(last->step - first->step)};
}

std::optional<double> kept_tensors_explaining_growth(const RunFeatures& p) {
  // The walk's MiB a step is its steps' mean: told against their growth.
  const std::optional<WalkedGrowth> walked = walked_growth(p);
  const double slope = walked ? walked->mib_per_step : p.growth_per_step_mib.value_or(0);
  double tensors = 0;
  for (const KeptRecord& k : p.kept) {
    if (k.what == KeptRecord::What::kRetainGraph) return std::nullopt;
    if (k.what == KeptRecord::What::kTensor && !k.held_steps) tensors += k.mib_per_step;
  }
  if (slope <= 0 || tensors < 0.5 * slope) return std::nullopt;
  return tensors;
}

std::vector<Evidence> cause_evidence(Cause cause, const RunFeatures& p, const std::vector<Sweep>& sweeps,
                                     bool& confirmed, const std::vector<double>& budgets_mib) {
  std::vector<Evidence> out;
  const double fwd = p.forward_increment_mib.value_or(0);
  const Sweep* sweep = nullptr;
  confirmed = false;
  switch (cause) {
    case Cause::kActivations:
      {
        evidence::ForwardIncrement f{fwd, p.forward_per_sample_mib, p.parameter_mib, p.peak_allocated_mib, point_of(p), std::nullopt,
                                    p.held_over_mib, p.forward_freed_gradients_mib, std::nullopt, false, 1, std::nullopt, std::nullopt,
                                    std::nullopt, std::nullopt, 0, std::nullopt, false, false, 1, false};
        f.input_mib = p.forward_input_mib;
        f.gathered_parameters_mib = p.forward_gathered_mib;
        f.calls = p.forward_calls;
        f.calls_chunked = p.forward_calls_chunked;
        if (f.calls > 1) {
          for (const ModuleRecord& m : p.modules) {
            if (m.name && m.name->empty() && !m.parent && m.calls == f.calls && m.mib > 0) {
              // Nearer one call's worth than all of them: released.
              const double one = m.mib / static_cast<double>(m.calls);
              f.calls_released = fwd + p.held_over_mib < 0.5 * (m.mib + one);
            }
          }
        }
        if (p.forward_range) {
          f.range = p.forward_range;
          f.tokens_varied = p.step_tokens && p.step_tokens->varied();
          f.samples_seen = p.step_samples.has_value();
          f.tokens_seen = p.step_tokens.has_value();
        }
        if (p.step_samples && p.step_samples->varied()) f.samples = p.step_samples;
        if ((p.step_samples && p.step_samples->varied()) || (p.step_tokens && p.step_tokens->varied())) {
          // Where the steps' fit says memory follows the tokens, the figure
          // is per token, at a batch that varied or held (an independent
          // check's Qwen2 on lengths that varied at batch 8 read "13.15 MiB
          // per sample" beside a capacity in tokens).
          const std::optional<StepSizeCapacity> fit = step_size_fit(p);
          if (fit && fit->unit == StepSizeCapacity::Unit::kTokens && p.step_tokens) {
            // The forward's own per token, the median of each step's (the
            // fit's rate is the step's whole need: backward's too).
            std::vector<double> per_token;
            for (const StepFigures& st : p.steps) {
              if (st.forward_increment_mib && st.tokens && *st.tokens > 0) {
                per_token.push_back((*st.forward_increment_mib + f.held_beyond_inputs_mib()) /
                                    static_cast<double>(*st.tokens));
              }
            }
            if (!per_token.empty()) {
              std::sort(per_token.begin(), per_token.end());
              f.per_token_mib = per_token[per_token.size() / 2];
              f.tokens = p.step_tokens;
            }
          }
        }
        if (p.micro_batches > 1) {
          f.micro_batches = p.micro_batches;
          if (!p.steps.empty()) f.micro_batch_samples = p.steps.back().forward_samples;
        }
        if (p.config.batch_assumed) {
          f.batch_assumed = true;
          f.per_sample_mib.reset();
        }
        if (p.logits_mib && fwd > 0 && *p.logits_mib >= thresholds::kLargeLogitsShare * fwd) f.logits_mib = p.logits_mib;
        out.push_back(f);
      }
      if (auto m = forward_by_module(p)) out.push_back(std::move(*m));
      out.push_back(trend(p, false));
      add_sweep(out, sweeps, SweepKind::kBatch, &sweep);
      confirmed = sweep != nullptr && sweep->linear;
      {
        // The shape of the growth along the sequence: linear (the tokens'
        // activations) or quadratic (spelt-out attention's scores).
        const Sweep* seq = nullptr;
        add_sweep(out, sweeps, SweepKind::kSequence, &seq);
        confirmed = confirmed || (seq != nullptr && seq->increasing);
      }
      break;
    case Cause::kOptimizerState: {
      std::optional<double> setup;
      if (p.model_ready_mib && p.baseline_mib) setup = *p.baseline_mib - *p.model_ready_mib;
      evidence::OptimizerStateMade made{setup, p.optimizer_state_made_mib.value_or(0),
                                        p.first_step_excess_mib.value_or(0), p.excess_to_parameter_ratio.value_or(0),
                                        p.held_parameter_mib, std::nullopt, std::nullopt, std::nullopt, false, false,
                                        std::nullopt, p.id.device_kind == "cpu"};
      made.state_counted = !p.steps.empty() && p.steps.front().cleanup_optimizer_state_mib.has_value();
      if (p.optimizer_state_first_step_mib) {
        made.grown_to_mib = made.persistent_mib;
        made.persistent_mib = *p.optimizer_state_first_step_mib;
        // Once, then flat: the census's rises between recorded steps.
        std::vector<std::pair<int, double>> census;
        for (const StepFigures& st : p.steps) {
          if (st.step_optimizer_state_mib) census.emplace_back(st.step, *st.step_optimizer_state_mib);
        }
        int rises = 0;
        std::size_t at = 0;
        for (std::size_t i = 1; i < census.size(); ++i) {
          const double d = census[i].second - census[i - 1].second;
          if (d > thresholds::kMinimumSignalMib) {
            ++rises;
            at = i;
          } else if (d < -thresholds::kMinimumSignalMib) {
            rises = 2;  // it moved both ways: not one buffer made late
          }
        }
        if (rises == 1 && census.size() - at >= 3) made.grew_once_at_step = census[at].first;
      }
      {
        // step()'s own peak above its ends (an independent check's dense
        // Adam on a 2M x 64 embedding peaked 976 MiB above what it left,
        // inside step(), and was told nothing of it).
        const PhaseShape* step = nullptr;
        double run_peak = 0;
        for (const PhaseShape& s : p.capacity_point.phases) {
          run_peak = std::max(run_peak, s.peak_mib);
          if (s.phase == Phase::kStep) step = &s;
        }
        if (step != nullptr) {
          const double transient = step->peak_mib - std::max(step->start_mib, step->end_mib);
          if (transient >= thresholds::kMinimumSignalMib && transient >= 0.25 * made.persistent_mib) {
            made.step_transient_mib = transient;
            made.step_peak_is_runs = step->peak_mib >= run_peak - 1e-9;
            // A parameter at a time makes about two temporaries the size of
            // the parameter: more than three times the largest module's own
            // weights is every parameter's at once (foreach=True asked for
            // on the CPU: an independent check's 16 layers of 4 MiB made
            // 64.10 MiB and were told "the largest parameter's").
            if (made.one_parameter_at_a_time && p.largest_module_mib && *p.largest_module_mib > 0 &&
                transient > 3 * *p.largest_module_mib) {
              made.one_parameter_at_a_time = false;
            }
          }
        }
      }
      if (!p.steps.empty() && p.steps.front().cleanup_gradients_mib) {
        // The rest, where the census says it is the gradients kept
        // through the cleanup (an independent check's set_to_none=False
        // read "the rest is not its state" for 64 MiB of them).
        const double rest = made.left_mib - made.persistent_mib;
        const double grads = *p.steps.front().cleanup_gradients_mib;
        if (grads >= thresholds::kGrowthFloorMib && rest >= 0.5 * grads) made.gradients_kept_mib = std::min(grads, rest);
      }
      out.push_back(made);
      if (!p.steps.empty() && p.steps.front().step_increment_mib) {
        out.push_back(evidence::StepIncrements{*p.steps.front().step_increment_mib,
                                               p.steps.size() > 1 ? p.steps[1].step_increment_mib : std::nullopt});
      }
      out.push_back(trend(p, true));
      // DDP's gradient buckets (and ZeroRedundancyOptimizer's, under DDP):
      // sharded gradients (ZeRO-2, FSDP) are reduce-scattered per unit, no
      // bucket the size of the parameters is kept.
      // Said where the census cannot tell, or tells that the first step
      // left about a parameter's worth beyond the optimizer's state (a
      // CPU DDP job over Gloo left none: its 32.83 MiB were all state,
      // and the line contradicted the one above it).
      const std::optional<double> census_state =
          p.steps.empty() ? std::nullopt : p.steps.front().cleanup_optimizer_state_mib;
      const bool buckets_seen = !census_state || p.first_step_excess_mib.value_or(0) - *census_state >=
                                                     0.5 * p.held_parameter_mib;
      if (p.id.world_size > 1 && (p.id.mode == ParallelMode::kDdp || p.id.mode == ParallelMode::kZero1) &&
          buckets_seen) {
        out.push_back(evidence::DataParallelBuckets{p.id.world_size});
      }
      add_sweep(out, sweeps, SweepKind::kParameters, &sweep);
      confirmed = sweep != nullptr && sweep->linear;
      break;
    }
    case Cause::kRetainedGraph: {
      // A graph held whole from step to step, not grown: the kept
      // record says it (KeptAcrossSteps, with every verdict), and no
      // growth is claimed.
      if (bounded_hold(p)) break;
      const double slope = p.growth_per_step_mib.value_or(0);
      evidence::RetainedGrowth g{slope, p.growth_positive_share.value_or(0), p.retained_growth_mib.value_or(0),
                                 point_of(p), std::nullopt, std::nullopt, std::nullopt, 0, 0};
      // At this rate: each later step peaks higher by what a step keeps,
      // against the run's limit, else a budget asked for, else the device.
      g.budget_mib = p.config.memory_limit_mib ? p.config.memory_limit_mib
                     : !budgets_mib.empty()    ? std::optional<double>(budgets_mib.front())
                                               : p.device_total_mib;
      g.acceleration_mib = p.growth_acceleration_mib;
      g.first_rise_mib = p.growth_first_rise_mib;
      g.last_rise_mib = p.growth_last_rise_mib;
      if (g.budget_mib && slope > 0 && !p.steps.empty() && p.peak_allocated_mib < *g.budget_mib) {
        const double room = *g.budget_mib - p.peak_allocated_mib;
        double steps_left = std::ceil(room / slope);
        if (g.acceleration_mib) {
          // Rises that keep speeding up: n more steps add n d + a n (n + 1) / 2
          // (d the last rise, a its growth a step).
          const double a = *g.acceleration_mib, b = g.last_rise_mib + 0.5 * a;
          steps_left = std::ceil((-b + std::sqrt(b * b + 2 * a * room)) / a);
        }
        g.fills_at_step = static_cast<std::int64_t>(std::min(steps_left + p.steps.back().step, 1e15));
      }
      out.push_back(g);
      if (fwd > 0) {
        evidence::RetainedShareOfForward share{slope,        fwd,          kept_tensors_explaining_growth(p),
                                               std::nullopt, 0,            0,
                                               std::nullopt, std::nullopt, std::nullopt};
        const bool attached = std::any_of(p.kept.begin(), p.kept.end(), [](const KeptRecord& k) {
          return k.what == KeptRecord::What::kTensor && !k.held_steps && k.grad_fn;
        });
        // The kept tensors' MiB a step is the walked steps' mean: told
        // against the cleanups' rise over those steps where the walk read
        // some of them only (sizes that varied make the two differ), and
        // said where the walked steps grew otherwise than the run.
        double against = slope;
        if (const std::optional<WalkedGrowth> walked = walked_growth(p); walked && share.kept_tensors_mib) {
          against = walked->mib_per_step;
          if (std::abs(against - slope) > thresholds::kLinearTolerance * slope) {
            share.walked_first_step = walked->first_step;
            share.walked_last_step = walked->last_step;
            share.walked_growth_mib = against;
          }
        }
        // What the graph saved is the rest where it is more than the two
        // figures' own disagreement (the tolerance the fits allow): a
        // kept output's graph, backward run through it, saved nothing.
        if (share.kept_tensors_mib && attached &&
            against - *share.kept_tensors_mib >=
                std::max(thresholds::kGrowthFloorMib, thresholds::kLinearTolerance * *share.kept_tensors_mib)) {
          share.kept_graph_mib = against - *share.kept_tensors_mib;
        }
        if (p.cleanup_parameters_grew_steps > 0) {
          const double steps = p.cleanup_parameters_grew_steps;
          share.parameters_per_step_mib = p.cleanup_parameters_grew_mib / steps;
          share.state_per_step_mib = p.cleanup_state_grew_with_parameters_mib / steps;
        }
        out.push_back(share);
      }
      add_sweep(out, sweeps, SweepKind::kSteps, &sweep);
      confirmed = sweep != nullptr && sweep->increasing;
      break;
    }
    case Cause::kParameters: {
      evidence::WeightsDominate w{p.held_parameter_mib, p.peak_allocated_mib, fwd,
                                  p.first_step_excess_mib.value_or(0), point_of(p), p.max_gradient_mib,
                                  p.max_gradient_mib && *p.max_gradient_mib < thresholds::kFrozenShare * p.held_parameter_mib,
                                  p.forward_gathered_mib};
      w.trainable_mib = p.trainable_parameter_mib;
      // Half the weights or more require gradients that never came.
      w.gradients_not_reached = w.mostly_frozen && p.trainable_parameter_mib &&
                                *p.trainable_parameter_mib >= 0.5 * p.held_parameter_mib;
      if (w.gradients_not_reached) w.mostly_frozen = false;
      out.push_back(w);
      out.push_back(trend(p, false));
      add_sweep(out, sweeps, SweepKind::kBatch, &sweep);
      break;
    }
    case Cause::kAllocatorCache:
      out.push_back(evidence::CacheExcess{p.peak_reserved_mib.value_or(0), p.peak_allocated_mib,
                                          p.cache_excess_mib.value_or(0)});
      break;
    case Cause::kFragmentation:
      if (p.max_inactive_split_mib) {
        evidence::StrandedSplits s;
        s.max_inactive_split_mib = *p.max_inactive_split_mib;
        if (!p.steps.empty()) {
          s.first_step_split_mib = p.steps.front().max_inactive_split_mib.value_or(0);
          s.last_step_split_mib = p.steps.back().max_inactive_split_mib.value_or(0);
        }
        s.alloc_retries = p.alloc_retries.value_or(0);
        s.peak_reserved_mib = p.peak_reserved_mib.value_or(0);
        s.peak_allocated_mib = p.peak_allocated_mib;
        s.steps = static_cast<int>(p.steps.size());
        out.push_back(s);
      }
      break;
    case Cause::kInconclusive: break;
  }
  return out;
}

std::vector<Evidence> general_evidence(Cause cause, const RunFeatures& p) {
  std::vector<Evidence> out;
  if (p.max_reserved_gap_mib && *p.max_reserved_gap_mib > 0 && cause != Cause::kAllocatorCache &&
      cause != Cause::kFragmentation) {
    out.push_back(evidence::ReservedGap{*p.max_reserved_gap_mib});
  }
  // Stranded memory that made the allocator retry is said whatever the
  // cause: the run completed, but closer to its limit than its tensors are.
  if (cause != Cause::kFragmentation && p.fragmentation_mib && *p.fragmentation_mib >= thresholds::kMinimumSignalMib) {
    bool unused = false;
    for (Evidence& e : cause_evidence(Cause::kFragmentation, p, {}, unused)) out.push_back(std::move(e));
  }
  if (p.held_before_training_mib && *p.held_before_training_mib >= thresholds::kMinimumSignalMib &&
      *p.held_before_training_mib >= 0.1 * p.held_parameter_mib) {
    out.push_back(evidence::HeldBeforeTraining{*p.held_before_training_mib, p.held_parameter_mib,
                                               p.id.device_kind != "cpu",
                                               std::min(p.buffer_mib, *p.held_before_training_mib), p.largest_buffers});
  }
  if (p.evaluations && p.evaluations->peak_mib > p.training_peak_mib + thresholds::kMinimumSignalMib) {
    out.push_back(evidence::EvaluationPeak{p.evaluations->peak_mib, p.training_peak_mib, p.evaluations->forwards,
                                           p.evaluations->samples, p.evaluations->step});
  }
  if (p.device_minus_reserved_mib) out.push_back(evidence::OutsideAllocator{*p.device_minus_reserved_mib});
  // What was kept is said whatever the cause: a graph kept through a
  // running sum grows memory too little to decide anything, yet it is the
  // bug (PyTorch warns of it).
  if (!p.kept.empty()) out.push_back(evidence::KeptAcrossSteps{p.kept});
  if ((!p.resident.empty() && !p.walked_steps.empty()) || p.buffer_mib >= thresholds::kMinimumSignalMib) {
    evidence::ResidentTensors r;
    r.tensors = p.resident;
    r.peak_mib = p.peak_allocated_mib;
    if (!p.walked_steps.empty()) {
      r.first_step = p.walked_steps.front();
      r.last_step = p.walked_steps.back();
    }
    r.cuda = p.id.device_kind != "cpu";
    r.buffer_mib = p.buffer_mib;
    r.buffers = p.largest_buffers;
    r.mib = r.buffer_mib;
    for (const KeptRecord& k : p.resident) r.mib += k.mib_per_step;
    if (r.mib >= thresholds::kMinimumSignalMib && r.mib >= thresholds::kResidentShareOfPeak * p.peak_allocated_mib) {
      out.push_back(std::move(r));
    }
  }
  return out;
}

std::vector<Warning> collect_warnings(const RunFeatures& primary, const std::vector<RunFeatures>& runs,
                                      const std::vector<DistributedView>& views,
                                      std::vector<warning::RankSetIncomplete> rank_sets) {
  std::vector<Warning> out;
  for (const RunStop& s : primary.stops) out.push_back(warning::RunStopped{primary.source, s});
  // The other ranks' stops in the primary's rank set, after its own: the
  // rank that failed first may be another (an independent check's rank 1
  // raised at step 3, and only rank 0's "Connection closed by peer", the
  // consequence, was said).
  for (const DistributedView& view : views) {
    const auto is_primary = [&](const RankRow& row) { return row.source == primary.source; };
    if (std::none_of(view.ranks.begin(), view.ranks.end(), is_primary)) continue;
    for (const RankRow& row : view.ranks) {
      if (is_primary(row)) continue;
      for (const RunFeatures& r : runs) {
        if (r.source != row.source) continue;
        for (const RunStop& s : r.stops) out.push_back(warning::RunStopped{r.source, s});
      }
    }
  }
  {
    warning::InputsVaried w{primary.source, std::nullopt, std::nullopt, primary.local_batch};
    if (primary.step_samples && primary.step_samples->varied()) w.samples = primary.step_samples;
    if (primary.step_tokens && primary.step_tokens->varied()) w.tokens = primary.step_tokens;
    if (w.samples || w.tokens) out.push_back(w);
  }
  if (primary.config.batch_assumed) out.push_back(warning::BatchAssumed{primary.source});
  if (primary.config.batch_seen) {
    out.push_back(warning::BatchGiven{primary.source, primary.config.batch_size_per_device, *primary.config.batch_seen});
  }
  if (!primary.recording_problems.empty()) {
    out.push_back(warning::RecordingProblems{primary.source, primary.recording_problems});
  }
  if (!primary.step_notes.empty()) {
    constexpr std::size_t kShown = 3;
    warning::StepNotes w{primary.source, {}, primary.step_notes.size()};
    for (std::size_t i = 0; i < primary.step_notes.size() && i < kShown; ++i) w.notes.push_back(primary.step_notes[i]);
    out.push_back(std::move(w));
  }
  if (primary.growth_unseen_frees_mib || primary.buckets_before_recording_mib) {
    out.push_back(warning::GrowthUnseenFrees{primary.source, primary.growth_unseen_frees_mib.value_or(0),
                                             primary.growth_unseen_frees_mib ? rise_said(primary) : std::nullopt,
                                             primary.buckets_before_recording_mib});
  }
  for (const DistributedView& d : views) {
    if (d.imbalanced) {
      warning::RankImbalance w;
      w.run = d.run;
      w.imbalance = d.imbalance;
      w.max_rank = d.max_rank;
      w.max_peak_mib = d.max_peak_mib;
      w.variant = d.variant;
      // What the reports themselves say differs between the ranks: their
      // samples (a launch giving rank 0 more), their optimizer state
      // (ZeRO-1 gives each rank whole parameters' state). Either one
      // explains the gap; the CPU's caveat is for a gap nothing explains
      // (two independent checks' jobs of 3x the samples and of 97.66 MiB
      // of state to 0.27 were told "a difference this size may be" it).
      const RankRow* most = nullptr;
      const RankRow* fewest = nullptr;
      const RankRow* most_state = nullptr;
      const RankRow* least_state = nullptr;
      for (const RankRow& r : d.ranks) {
        if (most == nullptr || r.batch > most->batch) most = &r;
        if (fewest == nullptr || r.batch < fewest->batch) fewest = &r;
        if (r.optimizer_state_mib) {
          if (most_state == nullptr || *r.optimizer_state_mib > *most_state->optimizer_state_mib) most_state = &r;
          if (least_state == nullptr || *r.optimizer_state_mib < *least_state->optimizer_state_mib) least_state = &r;
        }
      }
      // Only what the rank that binds has more of explains it.
      bool explained = false;
      if (most != nullptr && fewest != nullptr && most->batch > fewest->batch && most->rank == d.max_rank) {
        w.most_samples = most->batch;
        w.fewest_samples = fewest->batch;
        w.most_samples_rank = most->rank;
        explained = true;
      }
      if (most_state != nullptr && least_state != nullptr && most_state->rank == d.max_rank &&
          *most_state->optimizer_state_mib - *least_state->optimizer_state_mib >
              thresholds::kRankImbalance * d.max_peak_mib) {
        w.most_state_mib = most_state->optimizer_state_mib;
        w.least_state_mib = least_state->optimizer_state_mib;
        w.most_state_rank = most_state->rank;
        explained = true;
      }
      // A leak of the rank that binds, where it is half the gap or more
      // (an independent check's rank 1 kept its logits, 32 MiB a step, the
      // whole of a 224 MiB gap, and was told the gap may be the readings).
      double least_peak = d.max_peak_mib;
      for (const RankRow& r : d.ranks) least_peak = std::min(least_peak, r.peak_allocated_mib);
      for (const RankRow& r : d.ranks) {
        if (!r.capacity_constraint || !r.kept_growth_per_step_mib) continue;
        if (r.kept_growth_mib >= 0.5 * (d.max_peak_mib - least_peak)) {
          w.kept_per_step_mib = r.kept_growth_per_step_mib;
          w.kept_mib = r.kept_growth_mib;
          explained = true;
        }
      }
      w.cpu_readings_overstate =
          !explained && primary.id.device_kind == "cpu" && primary.id.producer == kProducerPython;
      out.push_back(w);
    }
  }
  for (warning::RankSetIncomplete& w : rank_sets) out.push_back(std::move(w));
  return out;
}

}  // namespace memdiag::detail
