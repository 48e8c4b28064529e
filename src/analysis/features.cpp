// One report's figures: per-step increments, the steady forward increment,
// the post-cleanup trend and what the first step left behind.
#include "memdiag/analysis.hpp"
#include "memdiag/features.hpp"
#include "memdiag/phase_shape.hpp"

#include <algorithm>
#include <map>
#include <cmath>
#include <limits>

namespace memdiag {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Ordinary least squares slope of y over x.
double ols_slope(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  double sx = 0, sy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sx += x[i];
    sy += y[i];
  }
  const double mx = sx / n, my = sy / n;
  double num = 0, den = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    num += (x[i] - mx) * (y[i] - my);
    den += (x[i] - mx) * (x[i] - mx);
  }
  return den > 0 ? num / den : 0.0;
}

// Peaks, reserve and the per-step increments, in one walk over the samples.
void read_samples(const Report& r, RunFeatures& f) {
  const Sample* prev = nullptr;
  for (const Sample& s : r.samples) {
    f.peak_allocated_mib = std::max(f.peak_allocated_mib, s.peak_allocated_mib);
    f.training_peak_mib = std::max(f.training_peak_mib, s.peak_allocated_mib);
    if (s.evaluation) {
      // The run's peak, not any training phase's.
      f.peak_allocated_mib = std::max(f.peak_allocated_mib, s.evaluation->peak_mib);
      if (!f.evaluations) f.evaluations = RunFeatures::Evaluations{};
      RunFeatures::Evaluations& e = *f.evaluations;
      e.forwards += s.evaluation->forwards;
      if (s.evaluation->peak_mib >= e.peak_mib) {
        e.peak_mib = s.evaluation->peak_mib;
        e.samples = s.evaluation->samples;
        e.step = s.step;
      }
    }
    double& pp = f.peak_by_phase[s.phase];
    pp = std::max(pp, s.peak_allocated_mib);
    if (s.reserved_mib) {
      f.peak_reserved_mib = std::max(f.peak_reserved_mib.value_or(0), *s.reserved_mib);
      f.max_reserved_gap_mib = std::max(f.max_reserved_gap_mib.value_or(0), *s.reserved_mib - s.allocated_mib);
    }
    if (s.inactive_split_mib) f.max_inactive_split_mib = std::max(f.max_inactive_split_mib.value_or(0), *s.inactive_split_mib);
    if (s.alloc_retries) f.alloc_retries = std::max(f.alloc_retries.value_or(0), *s.alloc_retries);
    if (s.host_resident_mib) f.peak_host_resident_mib = std::max(f.peak_host_resident_mib.value_or(0), *s.host_resident_mib);
    if (s.host_pinned_mib) f.peak_host_pinned_mib = std::max(f.peak_host_pinned_mib.value_or(0), *s.host_pinned_mib);
    if (!s.step && s.phase == Phase::kOptimizerReady) f.baseline_mib = s.allocated_mib;
    if (!s.step && s.phase == Phase::kModelReady) f.model_ready_mib = s.allocated_mib;
    if (s.step) {
      if (f.steps.empty() || f.steps.back().step != *s.step) {
        f.steps.push_back(StepFigures{});
        f.steps.back().step = *s.step;
      }
      StepFigures& st = f.steps.back();
      if (s.phase == Phase::kStep && s.loss) {
        // Several optimizers stepped in one step (a GAN) write a step
        // sample each, each with the step's losses so far: the last holds
        // the step's.
        if (st.had_loss) f.losses.back() = *s.loss;
        else f.losses.push_back(*s.loss);
        st.had_loss = true;
      }
      st.peak_mib = std::max(st.peak_mib, s.peak_allocated_mib);
      if (s.inactive_split_mib) st.max_inactive_split_mib = std::max(st.max_inactive_split_mib.value_or(0), *s.inactive_split_mib);
      std::optional<double> inc =
          prev ? std::optional<double>(s.allocated_mib - prev->allocated_mib) : std::nullopt;
      switch (s.phase) {
        case Phase::kForward:
          if (inc && s.tensors && prev->tensors && prev->tensors->gradients_mib > s.tensors->gradients_mib) {
            // zero_grad() between the model's call and backward() (as
            // PyTorch's tutorials place it) freed the last step's
            // gradients inside this forward: what the forward made is
            // the increment with them added back (16.02 MiB of gradients
            // read as a forward of 15.98 MiB where it made 32).
            st.forward_freed_gradients_mib = prev->tensors->gradients_mib - s.tensors->gradients_mib;
            inc = *inc + st.forward_freed_gradients_mib;
          }
          if (inc && s.tensors && prev->tensors && s.tensors->parameters_mib > prev->tensors->parameters_mib + 0.005) {
            // A fully sharded model's parameters in use (FSDP2 gathers each
            // module's weights for its forward; the root's stay to
            // backward): the census counts them, and they are weights, not
            // what the forward made of the batch (16.4 MiB of an increment
            // of 16.8 at one sample over two ranks).
            st.forward_gathered_mib = s.tensors->parameters_mib - prev->tensors->parameters_mib;
            inc = *inc - st.forward_gathered_mib;
          }
          // With several optimizers (a GAN) the step's micro-batches are
          // different passes, not equal slices of one batch: the largest
          // forward is the step's (kept aside as it is read, put in place
          // once the step's step() samples are counted).
          if (inc && (!st.largest_forward.forward_increment_mib ||
                      *inc > *st.largest_forward.forward_increment_mib)) {
            st.largest_forward.forward_increment_mib = inc;
            st.largest_forward.forward_peak_increment_mib = s.peak_allocated_mib - prev->allocated_mib;
            st.largest_forward.forward_allocated_mib = s.allocated_mib;
          }
          st.forward_increment_mib = inc;
          ++st.forwards;
          if (prev) st.forward_peak_increment_mib = s.peak_allocated_mib - prev->allocated_mib;
          st.forward_allocated_mib = s.allocated_mib;
          st.forward_samples = s.samples;
          st.forward_tokens = s.tokens;
          if (s.input_mib) f.forward_input_mib = s.input_mib;  // the latest step's that says
          if (s.forwards) f.forward_calls = std::max(f.forward_calls, *s.forwards);
          if (s.forwards_chunked) f.forward_calls_chunked = true;
          if (s.samples) st.samples = st.samples.value_or(0) + *s.samples;
          if (s.tokens) st.tokens = st.tokens.value_or(0) + *s.tokens;
          break;
        case Phase::kBackward:
          st.backward_increment_mib = inc;
          st.backward_peak_mib = std::max(st.backward_peak_mib.value_or(0), s.peak_allocated_mib);
          break;
        case Phase::kStep:
          // Each optimizer's step() of the step, added up.
          if (inc) st.step_increment_mib = st.step_increment_mib.value_or(0) + *inc;
          if (s.tensors) st.step_optimizer_state_mib = s.tensors->optimizer_state_mib;
          ++st.step_samples;
          break;
        case Phase::kCleanup:
          st.cleanup_allocated_mib = s.allocated_mib;
          if (s.tensors) {
            st.cleanup_gradients_mib = s.tensors->gradients_mib;
            st.cleanup_optimizer_state_mib = s.tensors->optimizer_state_mib;
            st.cleanup_parameters_mib = s.tensors->parameters_mib;
          }
          break;
        case Phase::kSetup:
        case Phase::kModelReady:
        case Phase::kOptimizerReady: break;
      }
    }
    prev = &s;
  }
  // Accumulation: micro-batches before one step() (not a GAN's passes,
  // each before its own optimizer's step()).
  if (!f.steps.empty() && f.steps.front().step == 0 && f.steps.front().step_samples == 1 &&
      f.steps.front().forwards > 1) {
    f.micro_batches = f.steps.front().forwards;
  }
  for (StepFigures& st : f.steps) {
    if (st.step_samples < 2 || !st.largest_forward.forward_increment_mib) continue;
    st.forward_increment_mib = st.largest_forward.forward_increment_mib;
    st.forward_peak_increment_mib = st.largest_forward.forward_peak_increment_mib;
    st.forward_allocated_mib = st.largest_forward.forward_allocated_mib;
    // The passes are not slices of a batch: the step's size is what its
    // passes said (the recorder sees the model's, not the others').
    st.forward_samples = st.samples;
    st.forward_tokens = st.tokens;
  }
  if (!r.samples.empty()) {
    const Sample& last = r.samples.back();
    if (last.device_used_mib && last.reserved_mib) f.device_minus_reserved_mib = *last.device_used_mib - *last.reserved_mib;
    f.final_reserved_mib = last.reserved_mib;
  }
  if (f.peak_reserved_mib) f.cache_excess_mib = std::max(0.0, *f.peak_reserved_mib - f.peak_allocated_mib);
  if (f.max_inactive_split_mib && f.alloc_retries.value_or(0) > 0) f.fragmentation_mib = f.max_inactive_split_mib;
}

void read_events(const Report& r, RunFeatures& f) {
  for (const Event& e : r.events) {
    switch (e.kind) {
      case EventKind::kWarmup:
        if (e.mib) f.warmup_mib = *e.mib;
        break;
      case EventKind::kOom: {
        f.stops.push_back(RunStop{e.kind, e.phase, e.step, e.message});
        OomAt at;
        at.phase = e.phase;
        at.step = e.step;
        at.details = e.oom.value_or(OomDetails{});
        at.budget_mib = at.details.limit_mib;
        // memdiag before 0.3 read the largest free block with the
        // allocator's "guess from the device" (its free memory, not a
        // cached block): a figure above what was reserved is not a block.
        if (at.details.largest_free_block_mib && at.details.reserved_mib &&
            *at.details.largest_free_block_mib > *at.details.reserved_mib) {
          at.details.largest_free_block_mib.reset();
        }
        if (!at.budget_mib) at.budget_mib = r.config.memory_limit_mib;
        if (!at.budget_mib) at.budget_mib = r.environment.device_total_mib;
        if (at.details.allocated_mib && at.details.tensors) {
          const TensorCensus& t = *at.details.tensors;
          at.other_mib = std::max(0.0, *at.details.allocated_mib - t.parameters_mib - t.gradients_mib -
                                           t.optimizer_state_mib);
        }
        for (const Sample& s : r.samples) {
          if (s.tensors) at.state_before_mib = s.tensors->optimizer_state_mib;
        }
        // The run's peak is the failing phase's, not the last completed
        // one's: what was live when the allocation was refused.
        f.peak_allocated_mib = std::max({f.peak_allocated_mib, e.mib.value_or(0), at.details.allocated_mib.value_or(0)});
        f.oom = at;
        break;
      }
      case EventKind::kInterrupted:
      case EventKind::kError: f.stops.push_back(RunStop{e.kind, e.phase, e.step, e.message}); break;
      case EventKind::kNote:
        if (e.step) f.step_notes.push_back(e.message);
        break;
      case EventKind::kKept:
        f.walked_steps = e.walked_steps;
        for (const KeptRecord& k : e.kept) {
          if (k.what == KeptRecord::What::kHeld) {
            f.walk_held_mib = k.mib_per_step;
          } else if (k.what == KeptRecord::What::kResident) {
            // On the run's device only, as the bounded caches below.
            if (k.device.empty() || k.device == f.id.device_kind) f.resident.push_back(k);
          } else {
            // On the run's device only: a CUDA job's loader holding its
            // next batches in pinned host memory is no device memory.
            if (k.what == KeptRecord::What::kTensor && k.held_steps &&
                (k.device.empty() || k.device == f.id.device_kind)) {
              f.kept_bounded_mib += k.mib_per_step * static_cast<double>(*k.held_steps);
            }
            if (k.what == KeptRecord::What::kHeldGraph) {
              f.held_graph_mib = k.mib_per_step;
              f.held_graph_from_first_step = k.from_step.value_or(0) == 0;
              f.held_graph_from_step = static_cast<int>(k.from_step.value_or(0));
              f.held_graph_grows = k.grows;
            }
            f.kept.push_back(k);
          }
        }
        break;
      case EventKind::kRecording: f.recording_problems.push_back(e.message); break;
      case EventKind::kModules:
        f.modules = e.modules;
        f.modules_step = e.step;
        break;
    }
  }
}

// Steady state where there is one: step 0 also carries one-off library
// set-up when the run was not warmed up.
void forward_increment(RunFeatures& f) {
  std::vector<double> steady, all, freed, gathered;
  for (const StepFigures& st : f.steps) {
    if (!st.forward_increment_mib) continue;
    all.push_back(*st.forward_increment_mib);
    if (st.step >= 1) {
      steady.push_back(*st.forward_increment_mib);
      freed.push_back(st.forward_freed_gradients_mib);
      gathered.push_back(st.forward_gathered_mib);
    }
  }
  if (!freed.empty()) f.forward_freed_gradients_mib = median(freed);
  if (!gathered.empty()) {
    f.forward_gathered_mib = median(gathered);
  } else if (!f.steps.empty()) {
    f.forward_gathered_mib = f.steps.front().forward_gathered_mib;  // one step: its own, as the forward's figure is
  }
  if (steady.size() >= 2) {
    // Where the steady forwards differ (the inputs' shapes changed), the
    // median figure is said as such, with the range it stands for.
    ForwardRange r{0, 0, -1, -1};
    for (const StepFigures& st : f.steps) {
      if (st.step < 1 || !st.forward_increment_mib) continue;
      const double x = *st.forward_increment_mib;
      if (r.least_step < 0 || x < r.least_mib) r.least_mib = x, r.least_step = st.step;
      if (r.most_step < 0 || x > r.most_mib) r.most_mib = x, r.most_step = st.step;
    }
    if (r.least_mib > 0 && r.most_mib >= thresholds::kDominanceRatio * r.least_mib &&
        r.most_mib - r.least_mib >= thresholds::kMinimumSignalMib) {
      f.forward_range = r;
    }
  }
  if (!steady.empty()) {
    f.forward_increment_mib = median(steady);
  } else if (!all.empty()) {
    f.forward_increment_mib = all.front();
  }
  // Each increment over what its own forward was given: a schedule or
  // variable buckets make the configured batch wrong for most steps (a ramp
  // read against its full batch is 25-37% low per sample).
  std::vector<double> per_sample_steady, per_sample_all;
  for (const StepFigures& st : f.steps) {
    if (!st.forward_increment_mib || !st.forward_samples) continue;
    const double v = *st.forward_increment_mib / static_cast<double>(*st.forward_samples);
    per_sample_all.push_back(v);
    if (st.step >= 1) per_sample_steady.push_back(v);
  }
  if (!per_sample_steady.empty() && per_sample_steady.size() == steady.size()) {
    f.forward_per_sample_mib = median(per_sample_steady);
  } else if (steady.empty() && !per_sample_all.empty()) {
    f.forward_per_sample_mib = per_sample_all.front();
  } else if (f.forward_increment_mib && f.local_batch > 0) {
    f.forward_per_sample_mib = *f.forward_increment_mib / static_cast<double>(f.local_batch);
  }
}

std::optional<SizeRange> range_of(const std::vector<StepFigures>& steps, std::optional<std::int64_t> StepFigures::*field) {
  std::optional<SizeRange> r;
  for (const StepFigures& st : steps) {
    const std::optional<std::int64_t>& v = st.*field;
    if (!v) continue;
    if (!r) r = SizeRange{*v, *v, 0};
    r->least = std::min(r->least, *v);
    r->most = std::max(r->most, *v);
    ++r->steps;
  }
  return r;
}

void split_first_step_excess(RunFeatures& f);

// The post-cleanup trajectory: what the first step left, the growth per step,
// and how much of the first step's increase was made once.
void post_cleanup_trend(RunFeatures& f) {
  std::vector<double> xs, ys, grads;
  std::optional<double> first_state, first_parameters;
  int first_parameters_step = 0;
  double first_cleanup = 0;
  for (const StepFigures& st : f.steps) {
    if (st.cleanup_allocated_mib) {
      xs.push_back(st.step);
      double y = *st.cleanup_allocated_mib;
      // Parameters made since the first cleanup are the loop's (a new
      // nn.Parameter and its param group every step: 3 MiB a step of
      // which the state's 2 were taken out below as the optimizer's, and
      // the 1 left read as a graph): the state that grew with them stays.
      bool parameters_grew = false;
      if (st.cleanup_parameters_mib) {
        if (!first_parameters) {
          first_parameters = st.cleanup_parameters_mib;
          first_parameters_step = st.step;
        }
        const double grew = *st.cleanup_parameters_mib - *first_parameters;
        parameters_grew = grew >= thresholds::kGrowthFloorMib;
        if (parameters_grew) {
          f.cleanup_parameters_grew_mib = grew;
          f.cleanup_parameters_grew_steps = st.step - first_parameters_step;
          if (st.cleanup_optimizer_state_mib && first_state) {
            f.cleanup_state_grew_with_parameters_mib = std::max(0.0, *st.cleanup_optimizer_state_mib - *first_state);
          }
        }
      }
      // What the optimizer's state grew by since the first cleanup is
      // the optimizer's (LBFGS's history filling to history_size), not
      // something the loop keeps: 5.80 MiB a step of it read as growth.
      // No more than the allocation grew, where a census and the
      // allocator disagree.
      if (st.cleanup_optimizer_state_mib && !first_state) first_state = st.cleanup_optimizer_state_mib;
      if (st.cleanup_optimizer_state_mib && !parameters_grew) {
        const double state_grew = std::max(0.0, *st.cleanup_optimizer_state_mib - *first_state);
        const double allocation_grew = ys.empty() ? 0.0 : std::max(0.0, y - first_cleanup);
        y -= std::min(state_grew, allocation_grew);
        f.cleanup_state_taken_mib = std::min(state_grew, allocation_grew);
      }
      // A graph no backward ran through, held from a later step on (an
      // evaluation without no_grad() from step 2): the rise it makes at
      // that cleanup is the held graph, bounded, not a leak of every step
      // (18.1 MiB held from step 2 read "grows 4.40 MiB every step" and
      // "the growth per step continues"). No more than the allocation rose.
      if (f.held_graph_mib && !f.held_graph_grows && f.held_graph_from_step > 0 && st.step >= f.held_graph_from_step &&
          !ys.empty()) {
        f.cleanup_held_graph_taken_mib = std::min(*f.held_graph_mib, std::max(0.0, y - first_cleanup));
        y -= f.cleanup_held_graph_taken_mib;
      }
      if (ys.empty()) first_cleanup = y;
      ys.push_back(y);
      grads.push_back(st.cleanup_gradients_mib.value_or(-1));
    }
  }
  // Gradients held at some cleanups and not at others are no growth:
  // they are the parameters' and bounded by them. A loop that frees its
  // gradients at a step's start (zero_grad() before the forward) has them
  // freed at every cleanup but the last, which the block's end closes with
  // them still held (16 MiB there read as 2.29 MiB of growth a step over
  // six); one that calls zero_grad() every other step holds them at every
  // other cleanup (48.1 MiB read as 2.29 MiB a step over eight). The
  // census says so: each cleanup's gradients beyond the least any cleanup
  // held are taken out before the trend is read. A cleanup without a
  // census (-1: a sampled step, a report of an older recorder) does not
  // stop the others' from being taken out; where some were, it is left
  // out of the trend, since it may have held them too (a writer with a
  // census at some cleanups only: the held ones without it read as
  // growth), as long as two cleanups remain.
  const auto counted = std::count_if(grads.begin(), grads.end(), [](double g) { return g >= 0; });
  if (ys.size() >= 3 && counted >= 2) {
    double least = std::numeric_limits<double>::infinity();
    for (const double g : grads) {
      if (g >= 0) least = std::min(least, g);
    }
    for (std::size_t i = 0; i < ys.size(); ++i) {
      if (grads[i] >= 0 && grads[i] - least >= thresholds::kGrowthFloorMib) {
        ys[i] -= grads[i] - least;
        f.cleanup_gradients_taken_mib = std::max(f.cleanup_gradients_taken_mib, grads[i] - least);
        ++f.cleanup_gradients_taken_count;
      }
    }
    const auto unknown = static_cast<std::ptrdiff_t>(ys.size()) - counted;
    if (f.cleanup_gradients_taken_count > 0 && unknown > 0 && counted >= 2) {
      std::vector<double> kept_x, kept_y;
      for (std::size_t i = 0; i < ys.size(); ++i) {
        if (grads[i] < 0) continue;
        kept_x.push_back(xs[i]);
        kept_y.push_back(ys[i]);
      }
      xs.swap(kept_x);
      ys.swap(kept_y);
      f.cleanup_gradients_unknown_count = static_cast<int>(unknown);
    }
  }
  if (f.baseline_mib && !ys.empty() && xs.front() == 0) f.first_step_persistent_mib = ys.front() - *f.baseline_mib;
  if (ys.size() >= 2) {
    const double slope = ols_slope(xs, ys);
    int up = 0;
    for (std::size_t i = 1; i < ys.size(); ++i) up += ys[i] > ys[i - 1] ? 1 : 0;
    const double share = static_cast<double>(up) / static_cast<double>(ys.size() - 1);
    f.growth_per_step_mib = slope;
    f.growth_positive_share = share;
    const double floor =
        std::max(thresholds::kGrowthFloorMib, thresholds::kGrowthBaselineFraction * f.baseline_mib.value_or(0));
    // A staircase is growth too: what is kept every few steps (an
    // evaluation every other step whose outputs are kept: 75, 75, 139,
    // 139, 203 ... MiB read "stable (+30.48 MiB per step)" and the weights
    // named), where the allocation never falls and still rose in the
    // second half of the steps (a cache that fills in the first steps and
    // stops is not).
    int ups = 0, downs = 0, late_ups = 0;
    for (std::size_t i = 1; i < ys.size(); ++i) {
      const double d = ys[i] - ys[i - 1];
      if (d > floor) {
        ++ups;
        if (2 * i > ys.size()) ++late_ups;
      }
      if (d < -floor) ++downs;
    }
    const bool staircase = downs == 0 && ups >= 2 && late_ups >= 1;
    // A rise that stopped: flat for at least two steps since its last rise,
    // and for longer than any pause between its rises (a staircase's every
    // other step pauses one). A MoCo queue of detached keys filled over
    // five steps and flat for the last two of eight read "grows 7.86 MiB
    // every step" and "stop retaining graphs".
    std::size_t last_up = 0, gap = 0, max_gap = 0;
    for (std::size_t i = 1; i < ys.size(); ++i) {
      if (ys[i] - ys[i - 1] > floor) {
        if (last_up > 0) max_gap = std::max(max_gap, gap);
        last_up = i;
        gap = 0;
      } else {
        ++gap;
      }
    }
    const std::size_t tail = last_up > 0 ? ys.size() - 1 - last_up : 0;
    const bool stopped = downs == 0 && ups >= 2 && tail >= 2 && tail > max_gap;
    if (ups == 1 && downs == 0) {
      for (std::size_t i = 1; i < ys.size(); ++i) {
        if (ys[i] - ys[i - 1] > floor) {
          f.one_rise = RunFeatures::OneRise{static_cast<int>(xs[i - 1]), static_cast<int>(xs[i]), ys[i] - ys[i - 1], 1};
        }
      }
    } else if (ups >= 2 && downs == 0 && (late_ups == 0 || stopped)) {
      std::size_t first = 0, last = 0;
      for (std::size_t i = 1; i < ys.size(); ++i) {
        if (ys[i] - ys[i - 1] > floor) {
          if (first == 0) first = i;
          last = i;
        }
      }
      f.one_rise = RunFeatures::OneRise{static_cast<int>(xs[first - 1]), static_cast<int>(xs[last]),
                                        ys[last] - ys[first - 1], ups};
    }
    f.growth_significant = slope > floor && (share >= thresholds::kGrowthPositiveShare || staircase) && !stopped;
    if (f.growth_significant && ys.size() >= 5) {
      std::vector<double> mid, rise;
      bool steady_up = true;
      for (std::size_t i = 1; i < ys.size(); ++i) {
        const double r = (ys[i] - ys[i - 1]) / std::max(1.0, xs[i] - xs[i - 1]);
        if (r <= floor || (!rise.empty() && r < rise.back() - floor)) steady_up = false;
        mid.push_back(0.5 * (xs[i] + xs[i - 1]));
        rise.push_back(r);
      }
      if (steady_up && rise.back() >= 2 * rise.front() && rise.back() - rise.front() >= 2 * floor) {
        const double a = ols_slope(mid, rise);
        if (a > 0) {
          f.growth_acceleration_mib = a;
          f.growth_last_rise_mib = rise.back();
          f.growth_first_rise_mib = rise.front();
        }
      }
    }
    if (f.first_step_persistent_mib) {
      // Growth that recurs every step also happened in step 0; what is left
      // is made once.
      const double per_step = f.growth_significant ? slope : 0.0;
      f.first_step_excess_mib = std::max(0.0, *f.first_step_persistent_mib - per_step);
    }
    // Over the steps the run made, recorded or not: a sampled long job
    // records some of them, and a complete one ran to its last step.
    double span = xs.back() - xs.front() + 1;
    if (f.config.step_sampling && f.status == RunStatus::kComplete && f.config.steps > xs.back() + 1) {
      span = f.config.steps - xs.front();
    }
    if (f.growth_significant) f.retained_growth_mib = slope * span;
  }
  split_first_step_excess(f);
  if (f.held_over_mib > 0) {
    // What the loop holds of a step is the step's, and grows with its
    // batch: not part of the fixed memory a capacity fit keeps at every
    // batch (a layer's cached input and the batch, 24 MiB at batch 4096,
    // read as fixed put the largest batch 36% too high), and the
    // forward's figure per sample has it.
    // Less what persistent_other_mib set aside already (the walk's "held"
    // is this same figure): subtracted twice, a frozen teacher's 16.4 MiB
    // of weights left the fixed part, and a distillation's batch 1 was
    // expected at 28.90 MiB where it peaked at 44.24.
    f.capacity_point.persistent_other_mib =
        std::max(0.0, f.capacity_point.persistent_other_mib - std::max(0.0, f.held_over_mib - f.held_at_cleanups_mib));
    if (f.forward_per_sample_mib && f.local_batch > 0) {
      *f.forward_per_sample_mib += f.held_over_mib / static_cast<double>(f.local_batch);
    }
  }
  if (f.optimizer_state_made_mib && f.held_parameter_mib > 0) {
    f.excess_to_parameter_ratio = *f.optimizer_state_made_mib / f.held_parameter_mib;
  }
}

// Whether the steady forwards needed at once what step 0's did: where the
// loop held a step's tensors until the next forward replaced them, each
// later forward still made all of its own before the old ones went (its
// peak above its start is step 0's); memory a library made once in step
// 0's forward (a workspace, a lazily built buffer) raised step 0's peak
// alone.
bool steady_peaks_match_first(const RunFeatures& f, double held) {
  const StepFigures& first = f.steps.front();
  if (!first.forward_peak_increment_mib) return false;
  std::vector<double> steady;
  for (const StepFigures& st : f.steps) {
    if (st.step >= 1 && st.forward_peak_increment_mib) steady.push_back(*st.forward_peak_increment_mib);
  }
  if (steady.empty()) return false;
  return std::abs(*first.forward_peak_increment_mib - median(steady)) < 0.5 * held;
}

void split_first_step_excess(RunFeatures& f) {
  if (!f.first_step_excess_mib) return;
  const double excess = *f.first_step_excess_mib;
  const bool sizes_varied = f.sizes_varied();
  if (f.steps.size() >= 2 && f.steps.front().step == 0 && f.steps.front().forward_increment_mib && !sizes_varied &&
      f.forward_increment_mib) {
    const double held =
        std::clamp(*f.steps.front().forward_increment_mib - *f.forward_increment_mib, 0.0, excess);
    // Seen held where the forwards' peaks say so, or where the recorder's
    // walk found the loop holding that much of each step's tensors at its
    // cleanup (a forward that frees them before its peak: a layer's cached
    // input and the batch, replaced early, 24 MiB a hostile check saw).
    const bool walked = f.walk_held_mib && *f.walk_held_mib >= 0.5 * held;
    if (held >= thresholds::kMinimumSignalMib && (walked || steady_peaks_match_first(f, held))) f.held_over_mib = held;
  }

  // A graph no backward ran through, held from step 0's end on (an
  // evaluation without no_grad after step()), is in step 0's excess too:
  // not the optimizer's (an SGD job without momentum read 16.14 MiB of
  // "optimizer state" that was the evaluation's graph).
  // Only where it was held from step 0's cleanup and did not grow (an
  // evaluation from step 2, or one whose outputs a list keeps, is not in
  // step 0's excess as a whole: a review read Adam's 10 MiB as 0).
  const double held_graph = f.held_graph_from_first_step && !f.growth_significant ? f.held_graph_mib.value_or(0) : 0.0;
  double state = excess - f.held_over_mib - held_graph;
  const bool buckets = f.id.world_size > 1 && (f.id.mode == ParallelMode::kDdp || f.id.mode == ParallelMode::kZero1);
  // The census at step 0's step(): the state the first step made.
  std::optional<double> first_census;
  for (const StepFigures& st : f.steps) {
    if (st.step == 0 && st.step_optimizer_state_mib) first_census = st.step_optimizer_state_mib;
  }
  if (first_census && !buckets) state = std::min(state, *first_census);
  else if (f.step_optimizer_state_mib && !buckets) state = std::min(state, *f.step_optimizer_state_mib);
  f.optimizer_state_made_mib = std::max(0.0, state);
  // Grown where the census grew: the census against the census (the
  // excess below it, a CPU profiler's missed frees, is no growth: an
  // independent check's FSDP2 Adam read "grew to 60.03 MiB ... as LBFGS's
  // history does" from 58.79 against a census of 60.03 at every step).
  if (first_census && f.step_optimizer_state_mib &&
      *f.step_optimizer_state_mib > *first_census + thresholds::kMinimumSignalMib) {
    f.optimizer_state_first_step_mib = f.optimizer_state_made_mib;
    f.optimizer_state_made_mib = *f.step_optimizer_state_mib;
  }
}

}  // namespace

std::int64_t local_batch_of(const RunConfig& c) {
  const Parallelism& p = c.parallel;
  return static_cast<std::int64_t>(c.batch_size_per_device) +
         (p.rank == 0 && p.world_size > 1 ? static_cast<std::int64_t>(p.rank_zero_extra_samples) : 0);
}

namespace {

RunFeatures features_of(const Report& r, const std::string& source);

// DDP's first gradient buckets, made before recording began, rebuilt at
// the second step's forward on a CPU rank (memdiag's Python recorder reads
// the CPU off PyTorch's profiler, which drops the free of a block it never
// saw made): the one rise between the first two cleanups, where the walk
// named nothing kept and it is no more than the weights the buckets hold.
std::optional<double> buckets_made_before_recording(const RunFeatures& f) {
  if (f.id.device_kind != "cpu" || f.id.world_size <= 1 || f.id.producer != kProducerPython) return std::nullopt;
  if (f.id.mode != ParallelMode::kDdp && f.id.mode != ParallelMode::kZero1) return std::nullopt;
  if (!f.kept.empty() || f.growth_significant || !f.one_rise || f.one_rise->rises != 1) return std::nullopt;
  if (f.steps.empty() || f.one_rise->after_step != f.steps.front().step) return std::nullopt;
  if (f.one_rise->mib > (1 + thresholds::kLinearTolerance) * f.parameter_mib) return std::nullopt;
  return f.one_rise->mib;
}

}  // namespace

// A CPU rank's readings less the frees its profiler did not see: each
// step's samples lowered by what stayed allocated beyond the census at its
// cleanup above the least any cleanup held (nothing is kept: the walks
// said so). Without this the capacity model read them as the batch's: an
// independent check's FSDP2 rank, its readings 84 MiB above its census by
// its last cleanup (0.2 at its first elsewhere, in steps of a unit's
// 12 MiB), took it as 2.6 MiB a sample where 0.05 was.
Report without_unseen_frees(const Report& r) {
  std::map<int, double> rest;  // step -> beyond the census at its cleanup
  for (const auto& [step, mib] : beyond_census_at_cleanups(r)) rest[step] = mib;
  Report seen = r;
  if (rest.empty()) return seen;
  double least = rest.begin()->second;
  for (const auto& [step, mib] : rest) least = std::min(least, mib);
  for (Sample& s : seen.samples) {
    if (!s.step) continue;
    // A step with no cleanup (a stopped run's last) as the last one read.
    auto it = rest.lower_bound(*s.step);
    if (it == rest.end()) it = std::prev(rest.end());
    const double unseen = std::max(0.0, it->second - least);
    s.allocated_mib = std::max(0.0, s.allocated_mib - unseen);
    s.peak_allocated_mib = std::max(s.allocated_mib, s.peak_allocated_mib - unseen);
  }
  return seen;
}

RunFeatures compute_features(const Report& r, const std::string& source) {
  RunFeatures f = features_of(r, source);
  Report seen = r;
  if (const std::optional<double> buckets = buckets_made_before_recording(f)) {
    // Read again with the samples before the rebuild as the process held
    // them: the rise is then no forward's, and the buckets fixed memory.
    const int rebuilt_after = f.one_rise->after_step;
    for (Sample& s : seen.samples) {
      if (s.step && *s.step > rebuilt_after) continue;
      s.allocated_mib += *buckets;
      s.peak_allocated_mib += *buckets;
    }
    f = features_of(seen, source);
    f.buckets_before_recording_mib = buckets;
  }
  if (f.growth_unseen_frees_mib) {
    // The capacity from the readings less the growth not read: the rest
    // of the features keep the readings as they were (the warning says
    // why their growth is not a leak).
    f.capacity_point = features_of(without_unseen_frees(seen), source).capacity_point;
  }
  return f;
}

namespace {

RunFeatures features_of(const Report& r, const std::string& source) {
  RunFeatures f;
  f.source = source;
  f.id = identity_of(r);
  f.case_name = r.case_info.name;
  f.case_source = r.case_info.source;
  f.case_builtin = r.case_info.builtin;
  f.case_presets = r.case_info.presets;
  f.case_preset_parameters = r.case_info.preset_parameters;
  f.config = r.config;
  f.status = r.status;
  f.parameter_mib = to_mib(r.model.parameter_bytes);
  if (r.model.largest_module_bytes) f.largest_module_mib = to_mib(*r.model.largest_module_bytes);
  if (r.model.split_parameter_bytes) f.split_parameter_mib = to_mib(*r.model.split_parameter_bytes);
  for (const Sample& s : r.samples) {
    if (s.tensors) f.max_gradient_mib = std::max(f.max_gradient_mib.value_or(0), s.tensors->gradients_mib);
    if (s.phase == Phase::kStep && s.tensors) {
      f.step_model_state_mib = fixed_mib(*s.tensors);
      f.step_optimizer_state_mib = s.tensors->optimizer_state_mib;
      f.step_parameters_mib = s.tensors->parameters_mib;
    }
  }
  f.held_parameter_mib = f.parameter_mib;
  const ParallelModeDefinition& mode = definition(r.config.parallel.mode);
  if ((mode.shards_parameters || mode.splits_layers) && f.step_parameters_mib) {
    f.held_parameter_mib = *f.step_parameters_mib;
  }
  f.model_attention = r.model.attention;
  f.model_autocast = r.model.autocast;
  f.model_checkpointing = r.model.checkpointing;
  f.model_checkpoint_outside_mib = r.model.checkpoint_outside_mib;
  f.model_outside_parameters_mib = r.model.outside_parameters_mib;
  if (r.model.parameters > 0) {
    f.bytes_per_parameter = static_cast<double>(r.model.parameter_bytes) / static_cast<double>(r.model.parameters);
  }
  f.model_layers = r.model.layers;
  f.local_batch = local_batch_of(r.config);
  if (r.model.vocab && r.config.sequence_length && f.local_batch > 0) {
    f.logits_mib = to_mib(f.local_batch * static_cast<std::int64_t>(*r.config.sequence_length) * *r.model.vocab * 4);
  }
  f.device_total_mib = r.environment.device_total_mib;
  f.capacity_search = r.capacity;
  f.capacity_point = capacity_point(r, f.local_batch, source);
  if (r.allocation_trace && !r.config.allocator_settings.empty()) {
    // The replay is PyTorch's default allocator; other settings change its rules.
    f.trace_unusable = "the replay models the allocator's default settings, and this run ran under " +
                       r.config.allocator_settings;
  } else if (r.allocation_trace) {
    // The replay checks itself on the run it has before predicting others.
    f.trace_unusable = replay_disagreement(*r.allocation_trace);
    if (f.trace_unusable.empty()) {
      if (std::optional<ScaledTrace> t = scale_trace(*r.allocation_trace, &f.trace_unusable)) {
        f.scaled_trace = std::make_shared<const ScaledTrace>(std::move(*t));
      }
      if (std::optional<ScaledTrace> t = scale_trace_along_length(*r.allocation_trace)) {
        f.length_trace = std::make_shared<const ScaledTrace>(std::move(*t));
      }
    } else {
      f.trace_unusable = "the replay of the run disagrees with the allocator: " + f.trace_unusable;
    }
  }
  read_samples(r, f);
  f.host_own_process = r.environment.earlier_runs_in_process.value_or(0) == 0;
  read_events(r, f);
  if (r.model.buffer_bytes) f.buffer_mib = to_mib(*r.model.buffer_bytes);
  if (r.model.trainable_parameter_bytes) f.trainable_parameter_mib = to_mib(*r.model.trainable_parameter_bytes);
  for (const ModelInfo::NamedBytes& b : r.model.largest_buffers) f.largest_buffers.emplace_back(b.name, to_mib(b.bytes));
  for (const Sample& s : r.samples) {
    if (!s.step && s.phase == Phase::kModelReady && s.tensors) {
      f.held_before_training_mib = std::max(0.0, s.allocated_mib - s.tensors->parameters_mib -
                                                     s.tensors->gradients_mib - s.tensors->optimizer_state_mib -
                                                     f.warmup_mib.value_or(0));
    }
  }
  // Time per step: the median of the steps after the first, which pays for
  // each kernel's first call in the process (x0.24 or x2.20 of the baseline
  // for the same remedy, by its place in a sweep, when step 0 counted), and
  // the spread of those steps. One step: that step, with no spread.
  std::map<int, double> by_step;
  for (const Sample& s : r.samples) {
    if (s.step) by_step[*s.step] += s.elapsed_ms;
  }
  std::vector<double> timed;
  for (const auto& [step, ms] : by_step) {
    if (step >= 1 || by_step.size() == 1) timed.push_back(ms);
  }
  if (!f.steps.empty() && !timed.empty()) {
    std::sort(timed.begin(), timed.end());
    const std::size_t n = timed.size();
    f.ms_per_step = n % 2 ? timed[n / 2] : (timed[n / 2 - 1] + timed[n / 2]) / 2;
    f.ms_per_step_min = timed.front();
    f.ms_per_step_max = timed.back();
    f.timed_steps = static_cast<int>(n);
  }
  forward_increment(f);
  f.step_samples = range_of(f.steps, &StepFigures::samples);
  f.step_tokens = range_of(f.steps, &StepFigures::tokens);
  f.capacity_point.sizes_varied = f.sizes_varied();
  if (!f.walked_steps.empty()) {
    f.walk_covered_every_step = std::all_of(f.steps.begin(), f.steps.end(), [&](const StepFigures& st) {
      return !st.cleanup_allocated_mib ||
             std::find(f.walked_steps.begin(), f.walked_steps.end(), st.step) != f.walked_steps.end();
    });
  }
  f.held_at_cleanups_mib = held_at_cleanups_mib(r);
  post_cleanup_trend(f);
  if (f.id.device_kind == "cpu" && f.id.world_size > 1 && f.id.producer == kProducerPython && f.kept.empty() &&
      f.growth_significant) {
    f.growth_unseen_frees_mib = f.growth_per_step_mib;
    f.growth_significant = false;
    f.retained_growth_mib.reset();
  }
  f.capacity_point.live_grew = f.growth_significant;
  return f;
}

}  // namespace

}  // namespace memdiag
