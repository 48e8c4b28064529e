// The capacity model: the largest batch a configuration fits in a budget,
// phase by phase. Each phase's peak is a line in the batch, peak = fixed +
// per_sample x batch (backward is the higher of two: its start, with the
// activations still held, and its end, with every gradient made); the
// answer is the largest batch every line keeps under the budget, and the
// phase whose line gets there first binds. --find-max-batch (over its tries)
// and compare_memory_reports (over the runs it is given, or a search's
// tries) predict through this one fit.
#pragma once

#include "memdiag/report.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memdiag {

// One run of the configuration at one batch.
struct CapacityPoint {
  std::int64_t batch = 0;  // the samples a step of this rank ran
  RunStatus status = RunStatus::kComplete;
  std::vector<PhaseShape> phases;  // as far as it got
  double reserve_overhead_mib = 0;  // CUDA: reserved beyond allocated at its peak
  // Fixed, though outside the census: workspaces, gradient buckets
  // (memdiag/phase_shape.hpp's persistent_other_mib).
  double persistent_other_mib = 0;
  // Of it, what the report names as held at every step beside the census:
  // the recorder's resident tensors on the run's device and the model's
  // registered buffers (not the warm-up's workspaces or DDP's buckets).
  double resident_mib = 0;
  // A run that ran out: the budget it ran out of, the phase, and what it
  // held plus what it asked for then (a floor of what that phase needs).
  std::optional<double> budget_mib;
  std::optional<Phase> failed_phase;
  std::optional<double> needed_mib;
  // ... and what the allocator held reserved but not allocated then.
  std::optional<double> trapped_mib;
  // Its steps' samples or tokens varied (epsilon's schedule, dynamic
  // batching), or what stayed allocated grew step by step (a retained
  // graph): under a budget the allocator may strand blocks between the
  // steps' tensors, which a run with room to spare never shows.
  bool sizes_varied = false;
  bool live_grew = false;
  // Forwards that trained nothing (an evaluation under no_grad between
  // steps): the highest they reached, and the most samples one was given.
  // Their batch is their own, not the training batch's.
  std::optional<double> evaluation_peak_mib;
  std::optional<std::int64_t> evaluation_samples;
  // Its gradients are sharded by unit (ZeRO-2/3, FSDP): backward's
  // transient holds a unit's unsharded gradients, per parameter.
  bool shards_gradients = false;
  // Where its weights are sharded (ZeRO-3, FSDP2's fully_shard): one
  // unit's whole weights (model.largest_module_bytes, the largest module
  // holding parameters), which a rank gathers to run that unit. The
  // forward's and backward's peaks hold up to two of them (the gathered
  // weights and the collective's buffer) whatever the batch: per
  // parameter, not per sample. 0 where not sharded or not known.
  double gathered_unit_mib = 0;
  // Backward node by node at one step of this batch (the Python
  // recorder's): where present, backward's peak is a line per node, its
  // gradients fixed and the rest per sample, instead of its start and end.
  std::optional<BackwardProfile> backward_profile;
  // The forward span by span at one step of this batch (the Python
  // recorder's): where present, the forward's peak is a line per span, a
  // span's own workspace fixed and the rest per sample.
  std::optional<BackwardProfile> forward_profile;
  std::string source;
};

// The points a report gives: the run itself, or a --find-max-batch's tries
// when it has them (the same points the search fitted).
CapacityPoint capacity_point(const Report& r, std::int64_t local_batch, const std::string& source);
std::vector<CapacityPoint> capacity_points(const CapacitySearch& s, const std::string& source);
// What a search's own prediction is fitted on: its tries and, where it was
// confirmed at a batch it never tried in its own process (its traced try's
// replay settled it), `answer`, the fresh process's run of that batch (the
// search's report). *with_answer says whether it was added. A search that
// tried one sample and a quarter of its answer missed the confirmed answer
// by 3-37% on the H200 with its tries alone (session 50).
std::vector<CapacityPoint> search_capacity_points(const CapacitySearch& s, const std::optional<CapacityPoint>& answer,
                                                  const std::string& source, bool* with_answer = nullptr);

// One phase's line.
struct PhaseLine {
  Phase phase = Phase::kForward;
  // For backward: which of its two pieces (start: activations held; end:
  // every gradient made). The other phases have one.
  // kNode: at one autograd node of a profiled backward (the report's
  // model.backward_profile), node of nodes, with gradients_mib of its
  // fixed part the gradients made or in flight there; for the forward, at
  // one span of its profile (model.forward_profile), span of spans.
  // kEvaluation: the forwards that trained nothing (a validation pass
  // under no_grad between steps, the report's samples' evaluation): their
  // peak, fixed_mib, with nothing per sample of the training batch; its
  // own batch is evaluation_samples.
  enum class Piece { kWhole, kStart, kEnd, kNode, kEvaluation };
  Piece piece = Piece::kWhole;
  std::size_t node = 0, nodes = 0;
  std::string node_name;
  double gradients_mib = 0;
  // kNode: a temporary of the node's own taken as fixed (far larger than
  // the gradients it works on: thresholds::kTemporaryScale), part of
  // fixed_mib; 0 where none was or two batches measured the node's line.
  double temporary_mib = 0;
  double fixed_mib = 0;
  double per_sample_mib = 0;
  // What the fixed part is made of, where a census says: weights,
  // gradients, optimizer state; other_mib is the rest that does not grow
  // with the batch (step()'s temporaries, the allocator's workspaces).
  std::optional<TensorCensus> tensors;
  double other_mib = 0;
  // Of the fixed part beside the census, what the loop holds at every step
  // (the points' persistent_other_mib: a buffer, data, another model's
  // weights): not the phase's own, which other_mib is.
  double held_mib = 0;
  std::optional<std::int64_t> evaluation_samples;  // kEvaluation: the most samples one was given
  double at(std::int64_t batch) const { return fixed_mib + per_sample_mib * static_cast<double>(batch); }
};

struct CapacityFit {
  std::vector<PhaseLine> lines;
  // The completed batches the lines come from: one (extrapolated from its
  // composition) or two and more (lines through the points nearest the
  // answer).
  std::vector<std::int64_t> batches;
  double reserve_overhead_mib = 0;  // kept out of the budget (CUDA): the largest run's
  // backward's start (activations held) was never the peak of a run fitted:
  // what it adds above them is assumed (twice forward's largest temporary).
  bool backward_start_assumed = false;
  // Bounds the runs themselves set at a budget: the largest batch that
  // completed under it, the smallest that ran out under it or less.
  std::vector<CapacityPoint> bounds;
  // What forward held at its end beyond its start at the largest batch
  // fitted: the activations saved for backward. One run cannot tell what
  // of its peak grows with the batch; this is the least that does (the
  // range of a one-run answer).
  std::optional<double> forward_held_mib;
  bool sizes_varied = false;  // the largest batch's run: its steps varied in size
  bool live_grew = false;     // ... or what it kept allocated grew step by step
};

// Nothing to fit (no completed run): nullopt.
std::optional<CapacityFit> fit_capacity(const std::vector<CapacityPoint>& points);

struct CapacityAnswer {
  double budget_mib = 0;
  std::int64_t max_batch = 0;  // 0: not even one sample fits
  PhaseLine binding;           // the phase that reaches the budget first
  // The batches fitted, and how far the answer is beyond the largest of them
  // (max_batch / largest batch fitted).
  std::vector<std::int64_t> fitted_batches;
  double extrapolation = 1;
  // A measured run bounded the answer: the smallest batch that ran out
  // (the line had said it fits), or the largest that completed (the line
  // had said it does not).
  std::optional<std::int64_t> capped_by_oom;
  std::optional<std::int64_t> raised_by_run;
  double reserve_overhead_mib = 0;
  // Why it may be off, with the figures: extrapolated from one batch;
  // backward's start assumed; the CUDA allocator's reserve beyond its
  // tensors varying between the runs (it is taken from the largest); a run
  // that ran out with memory reserved but not allocated (fragmentation: the
  // lines say nothing of it).
  struct Caveats {
    bool one_run = false;
    bool backward_start_assumed = false;
    std::optional<double> reserve_min_mib, reserve_max_mib;
    // The answer with the largest reserve seen kept out instead, and with
    // the smallest: the range the reserve's variation alone allows.
    std::optional<std::int64_t> batch_at_max_reserve, batch_at_min_reserve;
    std::optional<double> trapped_at_oom_mib;
    // The answer with that much held unusable: how far the stranding may
    // take it below the lines'.
    std::optional<std::int64_t> batch_if_trapped;
    // One run: the range its composition allows. At the low end the
    // allocator's reserve beyond its tensors (reserve_grows_mib at the
    // run's peak) grows with the batch as the line's part above its fixed
    // part does; at the high end only what forward held for backward
    // (activations_mib) grows, and the reserve is given back under the
    // budget (a run with room to spare keeps blocks cached that a run at
    // its limit frees: beta medium held 460.5 MiB beyond its tensors at
    // batch 3616 unconstrained, 2.5 MiB at 4087 under 2600 MiB). Each end
    // widened by the 2% the lines are held to elsewhere. Where the steps
    // varied in size or what they kept grew step by step, the low end is
    // not known (low_end_unknown says which): under a budget the allocator
    // strands blocks between the steps' tensors, which the run, with room
    // to spare, did not show (gamma medium, a graph kept every step: 4785
    // predicted from batch 2048, 3413 found under 2000 MiB on an H100).
    std::optional<std::int64_t> batch_if_all_grows, batch_if_activations_grow;
    std::optional<double> reserve_grows_mib, activations_mib;
    std::optional<std::string> low_end_unknown;  // "sizes_varied", "live_memory_grew"
    // Three batches or more whose peaks grow faster than the batch (a B x B
    // similarity matrix, attention over the batch): the answer where the
    // peak follows the parabola through the three largest (the peaks of
    // the phase highest at all three, bent by over 5%), where it lies below
    // the lines' and beyond the largest batch run. An independent check's SimCLR: 12408 predicted
    // within 1024 MiB from batches 1024-4096; 8192 measured 1226 MiB.
    std::optional<std::int64_t> batch_if_superlinear;
    // One run on CUDA under the default allocator, answered at a batch this
    // many times the run's (twice or more): the blocks that follow the
    // batch are that much larger there, and how much memory the allocator
    // strands between them one run with smaller blocks cannot show (on an
    // H100, library jobs answered 13x and 330x beyond their run completed
    // 8-12% and 25% fewer samples than said under the default allocator,
    // and the said batch under expandable segments:
    // docs/measurements/h100-s64).
    std::optional<double> default_allocator_extrapolated;
  };
  Caveats caveats;
};

// apply_bounds: let the runs' own outcomes at this budget correct the lines
// (a search's prediction leaves them out, to be compared with what it found).
CapacityAnswer predict_max_batch(const CapacityFit& fit, double budget_mib, bool apply_bounds = true);
// The memory a batch needs: the highest line there, plus the reserve overhead.
double needed_mib(const CapacityFit& fit, std::int64_t batch);

}  // namespace memdiag
