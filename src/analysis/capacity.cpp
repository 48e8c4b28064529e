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
  double backward_extra = 0;  // how far backward's peak rose above forward's (gradients made while activations live)
  double floor = 0;       // the highest peak of the phases that do not hold activations
  int runs = 0;
};

double phase_peak(const RunFeatures& r, Phase ph) {
  const auto it = r.peak_by_phase.find(ph);
  return it == r.peak_by_phase.end() ? 0.0 : it->second;
}

// Forward's peak is the weights, the batch and the activations it saves:
// linear in the batch. Backward adds gradients while activations are still
// held; the other phases hold no activations and do not scale.
std::optional<Fit> fit_peak(const Group& g, const RunFeatures& p) {
  std::map<std::int64_t, const RunFeatures*> runs;
  for (const RunFeatures& r : g.runs) {
    if (r.config.rank != 0 || r.status != RunStatus::kComplete || r.parameter_mib != p.parameter_mib ||
        r.steps.size() != p.steps.size() || !r.forward_increment_mib) {
      continue;
    }
    runs.emplace(r.local_batch, &r);
  }
  if (runs.empty()) return std::nullopt;
  // The largest batch's run anchors the fit; its forward increment per
  // sample is the slope (the activations scale with the batch, checked by
  // the batch sweep where there is one).
  const RunFeatures& big = *runs.rbegin()->second;
  Fit f;
  f.per_sample = (*big.forward_increment_mib + big.retained_growth_mib.value_or(0)) / static_cast<double>(big.local_batch);
  if (!(f.per_sample > 0)) return std::nullopt;
  f.fixed = phase_peak(big, Phase::kForward) - f.per_sample * static_cast<double>(big.local_batch);
  f.backward_extra = std::max(0.0, phase_peak(big, Phase::kBackward) - phase_peak(big, Phase::kForward));
  for (const auto& [ph, v] : big.peak_by_phase) {
    if (ph != Phase::kForward && ph != Phase::kBackward) f.floor = std::max(f.floor, v);
  }
  f.runs = static_cast<int>(runs.size());
  return f;
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
    c.fixed_mib = fit->fixed + fit->backward_extra;
    c.per_sample_mib = fit->per_sample;
    c.fitted_runs = fit->runs;
    const double room = budget - fit->fixed - fit->backward_extra;
    c.max_batch = room > 0 && budget >= fit->floor ? static_cast<std::int64_t>(std::floor(room / fit->per_sample)) : 0;
    c.preset = p.config.preset;
    c.steps = static_cast<int>(p.steps.size());
    out.push_back(c);
  }
  return out;
}

}  // namespace memdiag::detail
