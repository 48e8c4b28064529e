// Capacity under data parallelism, from a single-rank run (a what-if: the
// comparer's --world-size): the capacity model's lines of the run, each
// phase's fixed part re-made for a mode and a world size, then the same
// answer as for one process.
//
// A line's fixed part is the census's weights, gradients and optimizer
// state plus the rest (workspaces, step()'s temporaries). Under a mode each
// role the mode shards is divided by N (memdiag's ZeRO-1 divides whole
// parameters between the ranks, which is N within the largest parameter).
// What a mode adds beside them, as memdiag runs it (src/torch):
// - DDP and ZeRO-1: the gradient buckets, one P, from the first backward on
//   (every phase after optimizer_ready: the lines come from the step with
//   the highest peak, a later one where there are two);
// - ZeRO-2: one unit's gradients and their flat copy for its
//   reduce-scatter, in backward;
// - ZeRO-3: also one unit's gathered weights in backward, two units in
//   forward (the gathered buffer and the collective's staging), and at
//   model_ready the slices kept so far and the unit being made: the model
//   is built in host memory and goes to the device a unit at a time, so
//   its whole weights never need to fit one device.
// A unit is taken as the largest module that holds parameters
// (model.largest_module_bytes); without it the answer says so.
#include "sharded_capacity.hpp"
#include "capacity.hpp"

#include "memdiag/phase_shape.hpp"

#include <algorithm>

namespace memdiag::detail {
namespace {

CapacityFit for_mode(const CapacityFit& single, ParallelMode mode, int n, double p_mib, std::optional<double> unit) {
  const ParallelModeDefinition& d = definition(mode);
  const double share = 1.0 / n;
  CapacityFit fit = single;
  fit.bounds.clear();  // a single process's outcomes do not bound another shape
  for (PhaseLine& l : fit.lines) {
    double add = 0;
    if (l.tensors) {
      TensorCensus t = *l.tensors;
      const bool ready = l.phase == Phase::kSetup || l.phase == Phase::kModelReady || l.phase == Phase::kOptimizerReady;
      if (d.shards_parameters) t.parameters_mib *= share;
      if (d.shards_gradients) t.gradients_mib *= share;
      if (d.shards_optimizer_state) t.optimizer_state_mib *= share;
      add += fixed_mib(t) - fixed_mib(*l.tensors);
      l.tensors = t;
      if (!d.shards_gradients && !ready) add += p_mib;  // DDP's buckets
    }
    // A profiled backward's node line holds the gradients made by that
    // node beside its start census: a rank keeps its share of them (the
    // units in flight are added below).
    const double node_gradients = l.gradients_mib;  // made by that node, whole
    if (l.piece == PhaseLine::Piece::kNode && d.shards_gradients) {
      add -= l.gradients_mib * (1 - share);
      l.gradients_mib *= share;
    }
    if (unit) {
      // Units in flight, as measured over Gloo on the CPU (beta, world 2
      // and 4: backward's peak to the MiB): a unit's full gradients and
      // their flat copy in backward; under ZeRO-3 also its gathered weights
      // (and in forward the gather's own staging copy); at model_ready,
      // under ZeRO-3, the unit being made beside the slices already kept
      // (ZeRO-2 makes each unit's buffer straight from the host's copy).
      // Backward's start (the last unit's gradients being made) holds one
      // unit of gradients; its end, where each unit is flattened and
      // reduce-scattered, two. A deep stack of small units (48 of 1 MiB)
      // holds the flat copy too while almost every activation is still
      // live: one unit more than this counts (tests/cases/too-large.json:
      // 115 predicted at 36 MiB over four ranks, 112 the largest to train).
      // At a profiled node no more can be in flight than the gradients
      // made by then (a node before the first unit's are done holds
      // those alone).
      const double grads_in_flight = l.piece == PhaseLine::Piece::kStart  ? *unit
                                     : l.piece == PhaseLine::Piece::kNode ? std::min(node_gradients, 2 * *unit)
                                                                          : 2 * *unit;
      if (d.shards_gradients && l.phase == Phase::kBackward) add += grads_in_flight;
      if (d.shards_parameters && l.phase == Phase::kBackward) add += *unit;
      // ZeRO-1 divides whole parameters between the ranks (greedy by size):
      // a rank's state can exceed its share by up to the largest one's.
      if (d.shards_optimizer_state && !d.shards_gradients && l.tensors && l.tensors->optimizer_state_mib > 0 && p_mib > 0) {
        const double state_per_parameter = l.tensors->optimizer_state_mib * n / p_mib;  // the line's state, unsharded
        add += state_per_parameter * *unit;
      }
      if (d.shards_parameters && l.phase == Phase::kForward) add += 2 * *unit;
      if (l.phase == Phase::kModelReady && d.shards_parameters) add += *unit;
    }
    l.fixed_mib = std::max(0.0, l.fixed_mib + add);
  }
  return fit;
}

}  // namespace

std::vector<ShardedCapacity> predict_sharded_capacity(const Group& g, const RunFeatures& p,
                                                      const std::vector<double>& budgets_mib,
                                                      const std::vector<int>& world_sizes) {
  std::vector<ShardedCapacity> out;
  if (world_sizes.empty() || p.id.world_size != 1 || p.parameter_mib <= 0) return out;
  const std::optional<CapacityFit> fit = fit_capacity(batch_points(g, p));
  if (!fit) return out;
  const double k = p.step_optimizer_state_mib ? *p.step_optimizer_state_mib / p.parameter_mib : 0.0;
  const std::optional<double> unit = p.largest_module_mib;
  for (const auto& [budget, source] : capacity_budgets(p, budgets_mib)) {
    for (int n : world_sizes) {
      for (ParallelMode mode : {ParallelMode::kDdp, ParallelMode::kZero1, ParallelMode::kZero2, ParallelMode::kZero3}) {
        ShardedCapacity c;
        c.mode = mode;
        c.world_size = n;
        c.source = source;
        c.budget_mib = budget;
        c.answer = predict_max_batch(for_mode(*fit, mode, n, p.parameter_mib, unit), budget, /*apply_bounds=*/false);
        c.model_state_mib = model_state_per_rank(mode, p.parameter_mib, k, n);
        c.unit_mib = unit;
        c.parameter_mib = p.parameter_mib;
        c.weights_fit_budget = p.parameter_mib <= budget;
        out.push_back(std::move(c));
      }
    }
  }
  return out;
}

}  // namespace memdiag::detail
