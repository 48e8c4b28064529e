#include "memdiag/analysis.hpp"

#include <algorithm>
#include <cmath>

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

}  // namespace

RunFeatures compute_features(const Report& r, const std::string& source) {
  RunFeatures f;
  f.source = source;
  f.case_name = r.case_name;
  f.config = r.config;
  f.status = r.status;
  f.parameter_mib = to_mib(r.model.parameter_bytes);
  // Rank 0 of an imbalanced data-parallel run carries extra samples.
  f.local_batch = r.config.batch_size_per_device +
                  (r.config.rank == 0 && r.config.world_size > 1 ? r.config.rank_zero_extra_samples : 0);

  const Sample* prev = nullptr;
  for (const Sample& s : r.samples) {
    f.peak_allocated_mib = std::max(f.peak_allocated_mib, s.peak_allocated_mib);
    auto& pp = f.peak_by_phase[s.phase];
    pp = std::max(pp, s.peak_allocated_mib);
    if (s.reserved_mib) {
      f.peak_reserved_mib = std::max(f.peak_reserved_mib.value_or(0), *s.reserved_mib);
      f.max_reserved_gap_mib = std::max(f.max_reserved_gap_mib.value_or(0), *s.reserved_mib - s.allocated_mib);
    }
    if (!s.step && s.phase == phase::kOptimizerReady) f.baseline_mib = s.allocated_mib;
    if (!s.step && s.phase == phase::kModelReady) f.model_ready_mib = s.allocated_mib;

    if (s.step) {
      if (f.steps.empty() || f.steps.back().step != *s.step) {
        f.steps.push_back(StepFigures{});
        f.steps.back().step = *s.step;
      }
      StepFigures& st = f.steps.back();
      st.peak_mib = std::max(st.peak_mib, s.peak_allocated_mib);
      const std::optional<double> inc =
          prev ? std::optional<double>(s.allocated_mib - prev->allocated_mib) : std::nullopt;
      if (s.phase == phase::kForward) st.forward_increment_mib = inc;
      if (s.phase == phase::kBackward) st.backward_increment_mib = inc;
      if (s.phase == phase::kStep) st.step_increment_mib = inc;
      if (s.phase == phase::kCleanup) st.cleanup_allocated_mib = s.allocated_mib;
    }
    prev = &s;
  }
  if (!r.samples.empty()) {
    const Sample& last = r.samples.back();
    if (last.device_used_mib && last.reserved_mib) {
      f.device_minus_reserved_mib = *last.device_used_mib - *last.reserved_mib;
    }
  }
  if (f.peak_reserved_mib) f.cache_excess_mib = std::max(0.0, *f.peak_reserved_mib - f.peak_allocated_mib);
  for (const Event& e : r.events) {
    if (e.kind == "warmup" && e.mib) f.warmup_mib = *e.mib;
    if (e.kind == "oom") {
      f.notes.push_back("out of memory in " + e.phase + (e.step ? " of step " + std::to_string(*e.step) : ""));
    }
    if (e.kind == "interrupted") f.notes.push_back("interrupted");
    if (e.kind == "error") f.notes.push_back("failed: " + e.message);
  }

  // Forward increment: steady state where there is one. Step 0 also carries
  // one-off library set-up when the run was not warmed up.
  std::vector<double> fwd_steady, fwd_all;
  for (const StepFigures& st : f.steps) {
    if (!st.forward_increment_mib) continue;
    fwd_all.push_back(*st.forward_increment_mib);
    if (st.step >= 1) fwd_steady.push_back(*st.forward_increment_mib);
  }
  if (!fwd_steady.empty()) {
    f.forward_increment_mib = median(fwd_steady);
  } else if (!fwd_all.empty()) {
    f.forward_increment_mib = fwd_all.front();
  }
  if (f.forward_increment_mib && f.local_batch > 0) f.forward_per_sample_mib = *f.forward_increment_mib / f.local_batch;

  // Post-cleanup trajectory.
  std::vector<double> xs, ys;
  for (const StepFigures& st : f.steps) {
    if (st.cleanup_allocated_mib) {
      xs.push_back(st.step);
      ys.push_back(*st.cleanup_allocated_mib);
    }
  }
  if (f.baseline_mib && !ys.empty() && xs.front() == 0) {
    f.first_step_persistent_mib = ys.front() - *f.baseline_mib;
  }
  if (ys.size() >= 2) {
    const double slope = ols_slope(xs, ys);
    int up = 0;
    for (std::size_t i = 1; i < ys.size(); ++i) up += ys[i] > ys[i - 1] ? 1 : 0;
    const double share = static_cast<double>(up) / static_cast<double>(ys.size() - 1);
    f.growth_per_step_mib = slope;
    f.growth_positive_share = share;
    const double floor = std::max(thresholds::kGrowthFloorMib,
                                  thresholds::kGrowthBaselineFraction * f.baseline_mib.value_or(0));
    f.growth_significant = slope > floor && share >= thresholds::kGrowthPositiveShare;
    if (f.first_step_persistent_mib) {
      // Growth that recurs every step also happened in step 0; what is left
      // is made once.
      const double per_step = f.growth_significant ? slope : 0.0;
      f.first_step_excess_mib = std::max(0.0, *f.first_step_persistent_mib - per_step);
    }
    if (f.growth_significant) {
      f.retained_growth_mib = slope * static_cast<double>(ys.size());
    }
  }
  if (f.first_step_excess_mib && f.parameter_mib > 0) {
    f.excess_to_parameter_ratio = *f.first_step_excess_mib / f.parameter_mib;
  }
  return f;
}

}  // namespace memdiag
