// Capacity: the largest batch that fits a budget, predicted from the peaks
// measured, without searching.
#include "internal.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace memdiag::detail {
namespace {

struct Fit {
  double fixed = 0;       // the forward peak's part that does not scale with the batch
  double per_sample = 0;  // the forward peak's part per sample
  double floor = 0;       // the highest peak of the phases that do not hold activations
  double overhead = 0;    // reserved beyond allocated at the peak (CUDA)
  int runs = 0;
};

double phase_peak(const RunFeatures& r, Phase ph) {
  const auto it = r.peak_by_phase.find(ph);
  return it == r.peak_by_phase.end() ? 0.0 : it->second;
}

// Forward's peak is the weights, the batch and the activations it saves:
// linear in the batch. Backward's peak is either the same activations plus
// what its first gradients add (scaling with the batch too: at alpha's 256
// and 866 samples it is 0.001 MiB per sample) or, at small batches, the
// weights with all their gradients once the activations are gone (not
// scaling). A run whose forward peak stays under the phases that hold no
// activations (step, cleanup) is in the second regime; its backward peak
// is then a floor and the line is forward's alone.
struct RunLine {
  double fixed = 0;
  double per_sample = 0;
  double floor = 0;
};

std::optional<RunLine> run_line(const RunFeatures& r) {
  if (!r.forward_increment_mib || r.local_batch <= 0) return std::nullopt;
  const double batch = static_cast<double>(r.local_batch);
  const double fwd = phase_peak(r, Phase::kForward), bwd = phase_peak(r, Phase::kBackward);
  RunLine l;
  l.per_sample = (*r.forward_increment_mib + r.retained_growth_mib.value_or(0)) / batch;
  if (!(l.per_sample > 0)) return std::nullopt;
  double steady = 0;  // the phases that hold no activations: step, cleanup, setup
  for (const auto& [ph, v] : r.peak_by_phase) {
    if (ph != Phase::kForward && ph != Phase::kBackward) steady = std::max(steady, v);
  }
  const double extra = std::max(0.0, bwd - fwd);
  const bool activation_bound = fwd > steady;
  if (activation_bound) l.per_sample += extra / batch;
  l.fixed = std::max(fwd, activation_bound ? bwd : fwd) - l.per_sample * batch;
  l.floor = activation_bound ? steady : std::max(steady, bwd);
  return l;
}

std::optional<Fit> fit_peak(const Group& g, const RunFeatures& p) {
  std::map<std::int64_t, const RunFeatures*> runs;
  for (const RunFeatures& r : g.runs) {
    if (!same(projection::kBatchSweep, r.id, p.id) || r.status != RunStatus::kComplete || !r.forward_increment_mib) {
      continue;
    }
    runs.emplace(r.local_batch, &r);
  }
  if (runs.empty()) return std::nullopt;
  // The largest batch's run anchors the fit (nearest the limit); with a
  // second run in the same regime, the line goes through both peaks.
  const RunFeatures& big = *runs.rbegin()->second;
  const std::optional<RunLine> line = run_line(big);
  if (!line) return std::nullopt;
  Fit f;
  f.fixed = line->fixed;
  f.per_sample = line->per_sample;
  f.floor = line->floor;
  f.runs = 1;
  // A CUDA memory limit bounds reserved memory, not allocated: what the
  // allocator held beyond the live tensors at the run's peak (rounding,
  // split blocks, cached free blocks) is not available to them. Measured on
  // the H200 at 4096 MiB, it put alpha's prediction 2.6-3.3% over the batch
  // found by searching without it, and within 1.1% with it.
  f.overhead = big.cache_excess_mib.value_or(0);
  if (runs.size() >= 2) {
    const RunFeatures& next = *std::next(runs.rbegin())->second;
    const std::optional<RunLine> other = run_line(next);
    const auto peak_at = [](const RunFeatures& r, const RunLine& l) { return l.fixed + l.per_sample * r.local_batch; };
    if (other && other->floor <= peak_at(next, *other)) {
      const double slope = (peak_at(big, *line) - peak_at(next, *other)) /
                           static_cast<double>(big.local_batch - next.local_batch);
      if (slope > 0) {
        f.per_sample = slope;
        f.fixed = peak_at(big, *line) - slope * static_cast<double>(big.local_batch);
        f.runs = 2;
      }
    }
  }
  return f;
}

}  // namespace

namespace {

// A search in the group over the same configuration and budget (within
// half a MiB: limits are given in whole MiB, device budgets are measured).
std::optional<CapacityPrediction::Searched> searched_for(const Group& g, const RunFeatures& p, double budget) {
  for (const RunFeatures& r : g.runs) {
    if (!r.capacity_search || !same(projection::kBatchSweep, r.id, p.id) ||
        std::fabs(r.capacity_search->limit_mib - budget) > 0.5) {
      continue;
    }
    const CapacitySearch& s = *r.capacity_search;
    return CapacityPrediction::Searched{s.max_batch, s.first_failing_batch, s.confirmed, r.source};
  }
  return std::nullopt;
}

}  // namespace

std::vector<CapacityPrediction> predict_capacity(const Group& g, const RunFeatures& p,
                                                 const std::vector<double>& budgets_mib) {
  std::vector<std::pair<double, CapacityPrediction::Budget>> budgets;
  for (double b : budgets_mib) budgets.emplace_back(b, CapacityPrediction::Budget::kGiven);
  if (budgets.empty()) {
    if (p.config.memory_limit_mib) {
      budgets.emplace_back(*p.config.memory_limit_mib, CapacityPrediction::Budget::kMemoryLimit);
    } else if (p.device_total_mib && p.device_minus_reserved_mib) {
      // What the allocator can have: the device less what sits outside it
      // (the CUDA context, libraries, other processes) as measured.
      budgets.emplace_back(*p.device_total_mib - *p.device_minus_reserved_mib, CapacityPrediction::Budget::kDevice);
    }
  }
  std::vector<CapacityPrediction> out;
  const std::optional<Fit> fit = fit_peak(g, p);
  if (!fit) return out;
  for (const auto& [budget, source] : budgets) {
    CapacityPrediction c;
    c.budget_mib = budget;
    c.source = source;
    c.fixed_mib = fit->fixed;
    c.allocator_overhead_mib = fit->overhead;
    c.per_sample_mib = fit->per_sample;
    c.fitted_runs = fit->runs;
    const double room = budget - fit->overhead - fit->fixed;
    c.max_batch = room > 0 && budget - fit->overhead >= fit->floor ? static_cast<std::int64_t>(std::floor(room / fit->per_sample)) : 0;
    c.preset = p.config.preset;
    c.steps = static_cast<int>(p.steps.size());
    c.searched = searched_for(g, p, budget);
    out.push_back(c);
  }
  return out;
}

}  // namespace memdiag::detail
