// A run that ran out of memory, explained from what it holds: the phase and
// step that failed, the request, the budget, what was live by role, and the
// trend of the steps that completed.
#include "oom.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>
#include <vector>

namespace memdiag::detail {

namespace {

// What the allocator asks the device for to serve a request that no cached
// block fits (CUDACachingAllocator.cpp's get_allocation_size): 2 MiB for a
// request of at most 1 MiB, 20 MiB below 10 MiB, else the request rounded up
// to 2 MiB. The unreserved rest of the budget must hold that, not the request.
double segment_for(double request_mib) {
  if (request_mib <= 1.0) return 2.0;
  if (request_mib < 10.0) return 20.0;
  return 2.0 * std::ceil(request_mib / 2.0 - 1e-9);
}

// y = a + b x by least squares; none unless the x take two values.
std::optional<std::pair<double, double>> line_through(const std::vector<std::pair<double, double>>& xy) {
  if (xy.size() < 2) return std::nullopt;
  double sx = 0, sy = 0;
  for (const auto& [x, y] : xy) sx += x, sy += y;
  const double n = static_cast<double>(xy.size()), mx = sx / n, my = sy / n;
  double num = 0, den = 0;
  for (const auto& [x, y] : xy) num += (x - mx) * (y - my), den += (x - mx) * (x - mx);
  if (den <= 0) return std::nullopt;
  const double b = num / den;
  return std::pair{my - b * mx, b};
}

// Allocated when a step began: the previous step's cleanup, or the
// optimizer's set-up before the first.
std::optional<double> start_of(const RunFeatures& p, int step) {
  if (step == 0) return p.baseline_mib;
  for (const StepFigures& st : p.steps) {
    if (st.step == step - 1) return st.cleanup_allocated_mib;
  }
  return std::nullopt;
}

}  // namespace

std::optional<StepNeed> failing_step_need(const RunFeatures& p) {
  const OomAt& o = *p.oom;
  if (!o.step) return std::nullopt;
  const StepFigures* failing = nullptr;
  std::vector<const StepFigures*> done;
  for (const StepFigures& st : p.steps) {
    if (st.step == *o.step) failing = &st;
    if (st.step < *o.step && st.cleanup_allocated_mib && st.forward_allocated_mib && st.backward_peak_mib) {
      done.push_back(&st);
    }
  }
  if (done.empty()) return std::nullopt;
  // The size the memory follows: tokens where only they vary (variable
  // lengths at a fixed batch), else samples.
  const auto size_of = [&](const StepFigures* st, bool tokens) -> std::optional<double> {
    const std::optional<std::int64_t> v = st != nullptr ? (tokens ? st->forward_tokens : st->forward_samples)
                                                        : (tokens ? o.details.tokens : o.details.samples);
    return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
  };
  const auto failing_size = [&](bool tokens) {
    // The failure's own record first: a forward that failed has no sample.
    const std::optional<double> own = size_of(nullptr, tokens);
    return own ? own : failing != nullptr ? size_of(failing, tokens) : std::nullopt;
  };
  const auto varies = [&](bool tokens) {
    std::set<double> seen;
    for (const StepFigures* st : done) {
      const std::optional<double> v = size_of(st, tokens);
      if (!v) return false;
      seen.insert(*v);
    }
    if (const std::optional<double> f = failing_size(tokens)) seen.insert(*f);
    return seen.size() > 1;
  };
  const bool tokens = !varies(false) && varies(true);
  const std::optional<double> n = failing_size(tokens);
  StepNeed need;
  need.from_steps = static_cast<int>(done.size());
  // A report that does not say the failing step's size cannot say what
  // it needs (a schedule may make it larger than any completed).
  if (!n) return std::nullopt;
  if (!varies(tokens)) {
    // Every step the same size: the completed steps' peaks are the failing
    // step's.
    for (const StepFigures* st : done) need.mib = std::max(need.mib, st->peak_mib);
    need.measured = true;
    return need;
  }
  // A completed step at least as large fit: its peak bounds the need.
  std::optional<double> bound;
  std::vector<std::pair<double, double>> ends, transients;
  for (const StepFigures* st : done) {
    const double x = *size_of(st, tokens);
    if (x >= *n) bound = std::min(bound.value_or(st->peak_mib), st->peak_mib);
    ends.emplace_back(x, *st->forward_allocated_mib);
    transients.emplace_back(x, *st->backward_peak_mib - *st->forward_allocated_mib);
  }
  if (bound) {
    need.mib = *bound;
    need.measured = true;
    return need;
  }
  // Larger than any completed step: forward's end (measured where the
  // failing step's forward completed) plus backward's transient over it,
  // each a line along the size.
  const auto end_line = line_through(ends), transient_line = line_through(transients);
  if (!end_line || !transient_line) {
    // One size completed: what it made above what it started from, scaled
    // with the size (proportional, which leaves no fixed part to what a
    // step makes: it errs high, so a step is called stranded only when even
    // that estimate fits), on what the failing step started from.
    const StepFigures* ref = done.back();
    for (const StepFigures* st : done) {
      if (*size_of(st, tokens) > *size_of(ref, tokens)) ref = st;
    }
    const std::optional<double> ref_start = start_of(p, ref->step), now = start_of(p, *o.step);
    if (!ref_start || !now) return std::nullopt;
    need.mib = *now + std::max(0.0, ref->peak_mib - *ref_start) * *n / *size_of(ref, tokens);
    return need;
  }
  const bool forward_done = failing != nullptr && failing->forward_allocated_mib && o.phase != Phase::kForward;
  const double end = forward_done ? *failing->forward_allocated_mib : end_line->first + end_line->second * *n;
  need.mib = end + std::max(0.0, transient_line->first + transient_line->second * *n);
  return need;
}

std::optional<FreeUnderBudget> free_under_budget(const OomAt& o, const std::string& allocator_settings) {
  const OomDetails& d = o.details;
  if (!d.reserved_mib || !d.allocated_mib || !d.request_mib) return std::nullopt;
  FreeUnderBudget f;
  f.cached_mib = std::max(0.0, *d.reserved_mib - *d.allocated_mib);
  // The budget the allocator checks a new segment against: its limit, else
  // the run's, else the device's; and never more than the device had free.
  std::optional<double> room;
  if (o.budget_mib) room = std::max(0.0, *o.budget_mib - *d.reserved_mib);
  if (d.device_free_mib) room = room ? std::min(*room, *d.device_free_mib) : *d.device_free_mib;
  f.unreserved_mib = room.value_or(0.0);
  f.total_mib = f.cached_mib + f.unreserved_mib;
  // A largest free block the allocator did not give: no cached piece held
  // the request (it failed after looking), but none can be said to either.
  const bool a_piece_holds = d.largest_free_block_mib && *d.largest_free_block_mib >= *d.request_mib;
  const bool the_rest_holds = f.unreserved_mib >= segment_for(*d.request_mib);
  f.one_place_holds_it = a_piece_holds || the_rest_holds || expandable_segments_on(allocator_settings);
  return f;
}

Cause oom_cause(const RunFeatures& p) {
  const OomAt& o = *p.oom;
  const OomDetails& d = o.details;
  // The steps before it left more behind each time: it would have run out
  // at some step whatever the phase, however the last request was placed.
  if (p.growth_significant) return Cause::kRetainedGraph;
  // Free memory under the budget that no single place could give: the
  // allocator's state at the failure read against the limit, not the
  // reserve alone. By the time it gives up it has released every cached
  // segment without a live block and retried, so what is left free is in
  // two kinds of place: pieces of split segments that still hold a live
  // block (cached but free), and the part of the limit never reserved. The
  // request fails when neither the largest cached piece nor that unreserved
  // rest holds it; when the two together would have, the memory existed,
  // stranded (epsilon medium at 2650 MiB on the H200: 128 MiB asked, 117.1
  // free in 6 pieces, the largest 52, and 82 never reserved). Only where the
  // phase had completed before within the budget, or the free memory is a
  // real share of what was in use: a phase failing on its first occurrence
  // with a few MiB free (GPT-2's forward at 6000 MiB: 75.5 MiB of 5924) ran
  // out because of what it was making, and would have run out a request
  // later. Under expandable segments nothing is stranded this way: at a
  // failure the allocator unmaps every free page, and a segment grows where
  // it is needed, so a request that fails there did not fit the budget.
  //
  // The free memory must also be enough for the whole step, not this one
  // request: a step larger than any completed (a ramp, a longer bucket)
  // fails where expandable segments fail too when its need exceeds the
  // budget (epsilon medium at 2590 MiB: 64 MiB asked with 170 free, but the
  // step needs 2580 at its peak). Where the completed steps say what the
  // failing one needs, that need decides; where they cannot, the phase must
  // have completed before or the free memory be a real share of the use.
  const bool phase_ran_before = o.phase && p.peak_by_phase.count(*o.phase) > 0;
  const std::optional<StepNeed> need = failing_step_need(p);
  const auto fits = [&](const FreeUnderBudget& free) {
    if (need && o.budget_mib) {
      return need->measured ? need->mib <= *o.budget_mib : need->mib + thresholds::kGranuleMarginMib <= *o.budget_mib;
    }
    return phase_ran_before || free.total_mib >= thresholds::kReservedFreeShareOfUse * *d.allocated_mib;
  };
  if (const std::optional<FreeUnderBudget> free = free_under_budget(o, p.config.allocator_settings);
      free && free->total_mib >= *d.request_mib && !free->one_place_holds_it && fits(*free)) {
    // Fragmentation when the cached free memory is in pieces of segments
    // that still hold a live block; a cache merely large otherwise (or where
    // the allocator did not say what was stranded).
    if (d.inactive_split_mib && *d.inactive_split_mib > 0 &&
        *d.inactive_split_mib >= thresholds::kStrandedShareOfFree * free->cached_mib) {
      return Cause::kFragmentation;
    }
    return Cause::kAllocatorCache;
  }
  if (!o.phase) return Cause::kInconclusive;
  switch (*o.phase) {
    case Phase::kSetup:
    case Phase::kModelReady: return Cause::kParameters;  // the weights did not fit as they were moved
    case Phase::kOptimizerReady: return Cause::kOptimizerState;  // state made eagerly
    case Phase::kForward: return Cause::kActivations;
    case Phase::kBackward: {
      // Gradients appear while the saved activations are still held: the
      // larger of the two made backward exceed the budget.
      if (!d.tensors || !o.other_mib) return Cause::kInconclusive;
      return p.parameter_mib >= *o.other_mib ? Cause::kParameters : Cause::kActivations;
    }
    case Phase::kStep:
      // No optimizer state before this step(): what it was making was state.
      return o.state_before_mib.value_or(0) == 0 ? Cause::kOptimizerState : Cause::kInconclusive;
    case Phase::kCleanup: return Cause::kInconclusive;
  }
  return Cause::kInconclusive;
}

evidence::OutOfMemory oom_evidence(const RunFeatures& p, Cause cause) {
  const OomAt& o = *p.oom;
  evidence::OutOfMemory e;
  e.cause = cause;
  e.phase = o.phase;
  e.step = o.step;
  e.request_mib = o.details.request_mib;
  e.budget_mib = o.budget_mib;
  e.in_use_mib = o.details.allocated_mib;
  e.tensors = o.details.tensors;
  e.other_mib = o.other_mib;
  e.parameter_mib = p.parameter_mib;
  if (o.details.reserved_mib && o.details.allocated_mib) e.cached_free_mib = *o.details.reserved_mib - *o.details.allocated_mib;
  if (const std::optional<FreeUnderBudget> free = free_under_budget(o, p.config.allocator_settings)) {
    e.unreserved_mib = free->unreserved_mib;
  }
  if (const std::optional<StepNeed> need = failing_step_need(p)) {
    e.step_need_mib = need->mib;
    e.step_need_measured = need->measured;
    e.step_need_from_steps = need->from_steps;
  }
  e.largest_free_block_mib = o.details.largest_free_block_mib;
  e.inactive_split_mib = o.details.inactive_split_mib;
  e.inactive_split_blocks = o.details.inactive_split_blocks;
  e.num_alloc_retries = o.details.num_alloc_retries;
  if (p.growth_significant) e.growth_per_step_mib = p.growth_per_step_mib;
  for (const StepFigures& s : p.steps) e.completed_steps += s.cleanup_allocated_mib ? 1 : 0;
  return e;
}

}  // namespace memdiag::detail
