// One phase of a run as the capacity model reads it: its highest peak over
// the run's steps, and what was allocated when it began and when it ended,
// with the tensor census at both (weights, gradients, optimizer state: what
// does not grow with the batch). A --find-max-batch try keeps these for
// each phase so that the search and compare_memory_reports fit the same
// points.
#pragma once

#include "memdiag/report.hpp"

#include <optional>
#include <utility>
#include <vector>

namespace memdiag {

// PhaseShape itself is part of the report model (memdiag/report.hpp).

double fixed_mib(const TensorCensus& c);  // parameters + gradients + optimizer state

// One shape per phase that completed, in phase order (model_ready first).
// Samples of a stopped run count as far as they go.
std::vector<PhaseShape> phase_shapes(const Report& r);

// What stays allocated between steps without being a weight, a gradient or
// optimizer state, and does not grow from step to step: library workspaces
// (cuBLAS), data-parallel gradient buckets. Read at the end of the first
// cleanup, less one step's growth (a retained graph grows every step, with
// the batch) and less what of the step the loop still holds there (the
// kept event's "held", else the forward's input_mib), which grows with the
// batch. 0 without a census or a completed
// step.
double persistent_other_mib(const Report& r);
// What persistent_other_mib sets aside of each cleanup as the step's, held
// by the loop: the kept event's "held", else the last forward's inputs.
double held_at_cleanups_mib(const Report& r);

// What each cleanup with a census held beyond it (allocated less weights,
// gradients and optimizer state), in the samples' order: (step, MiB), the
// figure unclamped.
std::vector<std::pair<int, double>> beyond_census_at_cleanups(const Report& r);

}  // namespace memdiag
