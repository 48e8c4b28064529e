#include "memdiag/regression.hpp"

#include "memdiag/phase_shape.hpp"
#include "memdiag/run_identity.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

namespace memdiag {
namespace {

// What must be equal for two runs to be compared: projection::kBaselineMatch,
// everything but the device index (cuda:0 vs cuda:1 is the same machine
// kind; the seed is kept, since data and weights follow it).
std::string match_key(const Report& r) { return key(projection::kBaselineMatch, identity_of(r)); }

struct PhaseFigures {
  double peak = 0;
  double end = 0;
};

std::map<Phase, PhaseFigures> by_phase(const Report& r) {
  std::map<Phase, PhaseFigures> out;
  for (const Sample& s : r.samples) {
    PhaseFigures& f = out[s.phase];
    f.peak = std::max(f.peak, s.peak_allocated_mib);
    f.end = s.allocated_mib;  // samples are in order: the last occurrence wins
  }
  return out;
}

bool grew_beyond(double base, double now, const RegressionThresholds& t) {
  const double rise = now - base;
  if (!(rise > t.max_increase_fraction * base)) return false;
  return !t.max_increase_mib || rise > *t.max_increase_mib;
}

// The most gradient memory the tensor census saw in the run, when it looked.
std::optional<double> gradients_mib(const Report& r) {
  std::optional<double> most;
  for (const Sample& s : r.samples) {
    if (s.tensors) most = std::max(most.value_or(0.0), s.tensors->gradients_mib);
  }
  return most;
}

// The optimizer's state: the census's at the last step() where the run
// has one (what the first step left counts a loop's kept outputs too: a
// leak read as state, an SGD job's held tensors as 3 MiB of it), else that.
std::optional<double> optimizer_state_mib(const RunFeatures& f) {
  return f.step_optimizer_state_mib ? f.step_optimizer_state_mib : f.first_step_persistent_mib;
}

// What the loop holds between steps beside the model state: the median of
// what the cleanups after the first held beyond the census (the first
// cleanup comes before anything of a step before it is held: an
// evaluation's graph kept from one step to the next, made after the
// step's zero_grad(), is at every cleanup but the first), less the run's
// growth per step since the first cleanup: a leak is its growth, not what
// it held by the later cleanups (a 3-step leak of 31.25 MiB a step read
// "held_between_steps 101.8" before).
std::optional<double> held_between_steps_mib(const Report& r, double growth_per_step_mib) {
  std::vector<double> rests;
  const auto cleanups = beyond_census_at_cleanups(r);
  for (const auto& [step, mib] : cleanups) {
    rests.push_back(std::max(0.0, mib - growth_per_step_mib * (step - cleanups.front().first)));
  }
  if (rests.empty()) return std::nullopt;
  if (rests.size() > 1) rests.erase(rests.begin());
  std::sort(rests.begin(), rests.end());
  return rests[rests.size() / 2];
}

std::vector<ComponentDelta> components(const Report& br, const Report& nr, const RunFeatures& b, const RunFeatures& n) {
  std::vector<ComponentDelta> out;
  out.push_back({MovedComponent::kParameters, b.parameter_mib, n.parameter_mib});
  const auto bg = gradients_mib(br), ng = gradients_mib(nr);
  if (bg || ng) out.push_back({MovedComponent::kGradients, bg.value_or(0), ng.value_or(0)});
  const auto bs = optimizer_state_mib(b), ns = optimizer_state_mib(n);
  if (bs || ns) out.push_back({MovedComponent::kOptimizerState, bs.value_or(0), ns.value_or(0)});
  if (b.forward_increment_mib || n.forward_increment_mib) {
    out.push_back({MovedComponent::kActivations, b.forward_increment_mib.value_or(0), n.forward_increment_mib.value_or(0)});
  }
  if (b.growth_per_step_mib || n.growth_per_step_mib) {
    out.push_back({MovedComponent::kGrowthPerStep, b.growth_per_step_mib.value_or(0), n.growth_per_step_mib.value_or(0)});
  }
  // Detrended only by a growth the analysis believes (a rise that stopped
  // is what is held, not a growth).
  const auto growth = [](const RunFeatures& f) { return f.growth_significant ? f.growth_per_step_mib.value_or(0) : 0.0; };
  const auto bh = held_between_steps_mib(br, growth(b)), nh = held_between_steps_mib(nr, growth(n));
  if (bh || nh) out.push_back({MovedComponent::kHeldBetweenSteps, bh.value_or(0), nh.value_or(0)});
  return out;
}

// What a component's change does to the peak, to weigh one against
// another: a growth per step by what it kept over the run's steps (one a
// step), the rest as they are.
double weight(const ComponentDelta& c, int steps) {
  const double d = c.new_mib - c.base_mib;
  return c.component == MovedComponent::kGrowthPerStep ? d * std::max(1, steps) : d;
}

// The component that moved most in the peak's direction (up: moved; down:
// fell), by more than 0.5 MiB. Weights that grew are named first: their
// gradients and state follow them.
std::optional<MovedComponent> most_moved(const std::vector<ComponentDelta>& cs, int steps, bool up) {
  if (up) {
    for (const ComponentDelta& c : cs) {
      if (c.component == MovedComponent::kParameters && c.new_mib - c.base_mib > 0.5) return c.component;
    }
  }
  std::optional<MovedComponent> out;
  double most = 0.5;
  for (const ComponentDelta& c : cs) {
    const double w = up ? weight(c, steps) : -weight(c, steps);
    if (w > most) {
      most = w;
      out = c.component;
    }
  }
  return out;
}

}  // namespace

const char* to_string(MovedComponent c) {
  switch (c) {
    case MovedComponent::kParameters: return "parameters";
    case MovedComponent::kGradients: return "gradients";
    case MovedComponent::kOptimizerState: return "optimizer_state";
    case MovedComponent::kActivations: return "activations";
    case MovedComponent::kGrowthPerStep: return "growth_per_step";
    case MovedComponent::kHeldBetweenSteps: return "held_between_steps";
  }
  return nullptr;  // past the last value: all_values() stops here
}

bool RegressionReport::regressed() const {
  return std::any_of(pairs.begin(), pairs.end(), [](const RegressionPair& p) { return p.regressed; });
}

RegressionReport compare_to_baseline(const std::vector<SourcedReport>& now, const std::vector<SourcedReport>& baseline,
                                     const RegressionThresholds& t) {
  RegressionReport out;
  out.thresholds = t;
  std::map<std::string, const SourcedReport*> base_by_key;
  for (const SourcedReport& b : baseline) base_by_key.emplace(match_key(b.second), &b);
  std::map<std::string, bool> used;
  for (const SourcedReport& n : now) {
    const std::string k = match_key(n.second);
    const auto it = base_by_key.find(k);
    if (it == base_by_key.end()) {
      out.new_without_baseline.push_back(n.first);
      continue;
    }
    used[k] = true;
    const SourcedReport& b = *it->second;
    RegressionPair p;
    p.key = describe(projection::kBaselineMatch, identity_of(n.second));
    p.new_source = n.first;
    p.base_source = b.first;
    p.new_status = n.second.status;
    p.base_status = b.second.status;
    p.base_peak_mib = peak_allocated_mib(b.second);
    p.new_peak_mib = peak_allocated_mib(n.second);
    p.regressed = grew_beyond(p.base_peak_mib, p.new_peak_mib, t);
    const auto bp = by_phase(b.second), np = by_phase(n.second);
    for (const auto& [phase, nf] : np) {
      const auto bit = bp.find(phase);
      if (bit == bp.end()) continue;
      PhaseDelta d{phase, bit->second.peak, nf.peak, bit->second.end, nf.end, grew_beyond(bit->second.peak, nf.peak, t)};
      p.regressed = p.regressed || d.regressed;
      p.phases.push_back(d);
    }
    // A run that completed before and does not now has regressed, whatever
    // its peak says (an out-of-memory stops before the peak it would reach).
    if (b.second.status == RunStatus::kComplete && n.second.status != RunStatus::kComplete) p.regressed = true;
    p.components =
        components(b.second, n.second, compute_features(b.second, b.first), compute_features(n.second, n.first));
    const int steps = static_cast<int>(n.second.config.steps);
    p.moved = most_moved(p.components, steps, true);
    if (p.new_peak_mib < p.base_peak_mib) p.fell = most_moved(p.components, steps, false);
    out.pairs.push_back(std::move(p));
  }
  for (const SourcedReport& b : baseline) {
    if (!used.count(match_key(b.second))) out.baseline_without_new.push_back(b.first);
  }
  // The unmatched of one job on both sides (its case, producer, device
  // kind, rank and variant): its configuration changed.
  std::set<std::string> new_left(out.new_without_baseline.begin(), out.new_without_baseline.end());
  std::set<std::string> base_left(out.baseline_without_new.begin(), out.baseline_without_new.end());
  for (const SourcedReport& n : now) {
    if (!new_left.count(n.first)) continue;
    const RunIdentity ni = identity_of(n.second);
    for (const SourcedReport& b : baseline) {
      if (!base_left.count(b.first)) continue;
      const RunIdentity bi = identity_of(b.second);
      if (ni.case_name != bi.case_name || ni.producer != bi.producer || ni.device_kind != bi.device_kind ||
          ni.rank != bi.rank || variant_label(ni) != variant_label(bi)) {
        continue;
      }
      base_left.erase(b.first);
      out.changed.push_back({n.first, b.first, differences(projection::kBaselineMatch, bi, ni),
                             peak_allocated_mib(b.second), peak_allocated_mib(n.second)});
      break;
    }
  }
  return out;
}

}  // namespace memdiag
