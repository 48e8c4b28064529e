// A run that ran out of memory, explained from what it holds: the phase and
// step that failed, the request, the budget, what was live by role, and the
// trend of the steps that completed.
#include "internal.hpp"

namespace memdiag::detail {

Cause oom_cause(const RunFeatures& p) {
  const OomAt& o = *p.oom;
  const OomDetails& d = o.details;
  // The steps before it left more behind each time: it would have run out
  // at some step whatever the phase, however the last request was placed.
  if (p.growth_significant) return Cause::kRetainedGraph;
  // The allocator reserved enough free memory for the request, yet no
  // block fit it. By the time it gives up it has released every segment
  // with no live block, so what is left free sits in split segments that
  // still hold one: fragmentation, when those stranded pieces make up the
  // free memory; a cache that is merely large otherwise (or where the
  // allocator did not say what was stranded). Only where the phase had
  // completed before within the budget, or the free reserve is a real share
  // of what was in use: a phase failing on its first occurrence with a few
  // MiB stranded (GPT-2's forward at 6000 MiB: 55 MiB of 5924) ran out
  // because of what it was making, and would have run out a request later.
  const bool phase_ran_before = o.phase && p.peak_by_phase.count(*o.phase) > 0;
  if (d.reserved_mib && d.allocated_mib && d.request_mib && *d.reserved_mib - *d.allocated_mib >= *d.request_mib &&
      (phase_ran_before ||
       *d.reserved_mib - *d.allocated_mib >= thresholds::kReservedFreeShareOfUse * *d.allocated_mib)) {
    const double free_mib = *d.reserved_mib - *d.allocated_mib;
    if (d.inactive_split_mib && *d.inactive_split_mib >= *d.request_mib &&
        *d.inactive_split_mib >= thresholds::kStrandedShareOfFree * free_mib) {
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
  e.largest_free_block_mib = o.details.largest_free_block_mib;
  e.inactive_split_mib = o.details.inactive_split_mib;
  e.inactive_split_blocks = o.details.inactive_split_blocks;
  e.num_alloc_retries = o.details.num_alloc_retries;
  if (p.growth_significant) e.growth_per_step_mib = p.growth_per_step_mib;
  for (const StepFigures& s : p.steps) e.completed_steps += s.cleanup_allocated_mib ? 1 : 0;
  return e;
}

}  // namespace memdiag::detail
