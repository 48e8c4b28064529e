#include "internal.hpp"
#include "memdiag/format.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

namespace memdiag {
namespace {

std::string num(double v, int prec = 2) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  return buf;
}
std::string mib(double v) { return format_mib(v) + " MiB"; }
// A ratio with as many digits as it needs: x988, x3.97.
std::string times(double v) { return "x" + num(v, v >= 100 ? 0 : (v >= 10 ? 1 : 2)); }
std::string signed_mib(double v) { return (v >= 5e-5 ? "+" : "") + mib(v); }

// Distinct values of one setting among rank-0 runs, keeping the rest equal to
// the primary run's, so a sweep varies one thing at a time.
template <typename Key, typename Same>
std::vector<const RunFeatures*> vary(const Group& g, const RunFeatures& primary, Key key, Same same) {
  std::map<double, const RunFeatures*> by;
  for (const RunFeatures& r : g.runs) {
    if (r.config.rank != 0 || !same(r, primary)) continue;
    by.emplace(key(r), &r);  // first run of each value wins
  }
  std::vector<const RunFeatures*> out;
  for (const auto& kv : by) out.push_back(kv.second);
  return out;
}

std::string base_command(const Group& g, const RunFeatures& p) {
  std::string cmd = "memory_diagnostics --case " + g.case_name;
  if (g.device_kind == "cpu") cmd += " --device cpu";
  cmd += " --preset " + p.config.preset;
  return cmd;
}

std::string sweep_line(const Sweep& s, const std::string& xname, const std::string& yname, const std::string& unit) {
  std::string xs, ys;
  for (const SweepPoint& p : s.points) {
    xs += (xs.empty() ? "" : " -> ") + num(p.x, p.x == std::floor(p.x) ? 0 : 1);
    ys += (ys.empty() ? "" : " -> ") + mib(p.y);
  }
  const SweepPoint& lo = s.points.front();
  const SweepPoint& hi = s.points.back();
  std::string ratio;
  if (lo.x > 0 && lo.y > 0) ratio = " (" + times(hi.y / lo.y) + " for " + times(hi.x / lo.x) + " " + xname + ")";
  return xname + " " + xs + ": " + yname + " " + ys + ratio + "; " + num(s.slope, 4) + " " + unit + ", " +
         (detail::is_linear(s) ? "within " + num(100 * s.max_deviation, 1) + "% of proportional"
                    : std::string(s.increasing ? "not proportional" : "not increasing") + " (largest departure " +
                          num(100 * s.max_deviation, 1) + "%)");
}

const RunFeatures& pick_primary(const Group& g) {
  // The run under the most pressure is the one that would run out first.
  const RunFeatures* best = &g.runs.front();
  for (const RunFeatures& r : g.runs) {
    if (std::make_tuple(r.peak_allocated_mib, r.config.steps) >
        std::make_tuple(best->peak_allocated_mib, best->config.steps)) {
      best = &r;
    }
  }
  return *best;
}


}  // namespace


std::vector<Component> components_of(const RunFeatures& f) {
  std::vector<Component> c;
  if (f.forward_increment_mib) c.push_back({Cause::kActivations, std::max(0.0, *f.forward_increment_mib),
                                            "forward increment (steady state)"});
  if (f.first_step_excess_mib) c.push_back({Cause::kOptimizerState, *f.first_step_excess_mib,
                                            "persistent increase made once, at the first step"});
  if (f.retained_growth_mib) c.push_back({Cause::kRetainedGraph, *f.retained_growth_mib,
                                          "post-cleanup growth over all steps"});
  c.push_back({Cause::kParameters, f.parameter_mib, "parameter bytes"});
  if (f.cache_excess_mib) c.push_back({Cause::kAllocatorCache, *f.cache_excess_mib,
                                       "peak reserved minus peak allocated"});
  std::stable_sort(c.begin(), c.end(), [](const Component& a, const Component& b) { return a.mib > b.mib; });
  return c;
}

Verdict diagnose(const Group& g) {
  Verdict v;
  v.case_name = g.case_name;
  v.group_key = g.key;
  v.distributed = detail::distributed_views(g);
  if (g.runs.empty()) return v;

  const RunFeatures& p = pick_primary(g);
  v.primary_source = p.source;
  v.components = components_of(p);
  for (const std::string& n : p.notes) v.warnings.push_back(p.source + ": " + n);

  const std::string base = base_command(g, p);
  const std::string at = " at batch " + std::to_string(p.local_batch) + ", preset " +
                         p.config.preset + ", " + std::to_string(p.steps.size()) + " step" +
                         (p.steps.size() == 1 ? "" : "s");

  auto same_but_batch = [](const RunFeatures& a, const RunFeatures& b) {
    return a.parameter_mib == b.parameter_mib;
  };
  auto same_but_params = [](const RunFeatures&, const RunFeatures&) { return true; };
  auto same_but_steps = [](const RunFeatures& a, const RunFeatures& b) {
    return a.parameter_mib == b.parameter_mib && a.config.batch_size_per_device == b.config.batch_size_per_device;
  };

  // Sweeps present in the group, whatever the verdict: they are evidence.
  std::vector<SweepPoint> bpts, ppts, spts;
  for (const RunFeatures* r : vary(g, p, [](const RunFeatures& r) { return double(r.config.batch_size_per_device); },
                                   same_but_batch)) {
    if (r->forward_increment_mib) bpts.push_back({double(r->config.batch_size_per_device), *r->forward_increment_mib, r->source});
  }
  for (const RunFeatures* r : vary(g, p, [](const RunFeatures& r) { return r.parameter_mib; }, same_but_params)) {
    if (r->first_step_excess_mib) ppts.push_back({r->parameter_mib, *r->first_step_excess_mib, r->source});
  }
  for (const RunFeatures* r : vary(g, p, [](const RunFeatures& r) { return double(r.steps.size()); }, same_but_steps)) {
    if (r->baseline_mib && !r->steps.empty() && r->steps.back().cleanup_allocated_mib) {
      spts.push_back({double(r->steps.size()), *r->steps.back().cleanup_allocated_mib - *r->baseline_mib, r->source});
    }
  }
  if (bpts.size() >= 2) v.sweeps.push_back(detail::fit_sweep("batch", bpts));
  if (ppts.size() >= 2) v.sweeps.push_back(detail::fit_sweep("parameters", ppts));
  if (spts.size() >= 2) v.sweeps.push_back(detail::fit_sweep("steps", spts));
  auto sweep = [&](const char* kind) -> const Sweep* {
    for (const Sweep& s : v.sweeps) {
      if (s.kind == kind) return &s;
    }
    return nullptr;
  };

  // Decide.
  const Component& top = v.components.front();
  const double second = v.components.size() > 1 ? v.components[1].mib : 0.0;
  const bool one_step = p.steps.size() < 2;
  if (p.steps.empty()) {
    v.dominant = Cause::kInconclusive;
    v.evidence.push_back("no completed step was recorded in " + p.source + " (status " + to_string(p.status) + ")");
  } else if (top.mib < thresholds::kMinimumSignalMib) {
    v.dominant = Cause::kInconclusive;
    v.evidence.push_back("nothing measured reaches " + mib(thresholds::kMinimumSignalMib) + "; largest is " +
                         to_string(top.cause) + " at " + mib(top.mib));
  } else if (one_step && p.first_step_persistent_mib &&
             *p.first_step_persistent_mib * thresholds::kDominanceRatio > top.mib &&
             *p.first_step_persistent_mib > thresholds::kMinimumSignalMib) {
    v.dominant = Cause::kInconclusive;
    v.evidence.push_back("the first step left " + mib(*p.first_step_persistent_mib) +
                         " behind after cleanup, but with one step optimizer state made once cannot be told from "
                         "a graph retained every step");
    v.confirm.push_back(base + " --steps 3");
  } else if (top.mib < thresholds::kDominanceRatio * second) {
    v.dominant = Cause::kInconclusive;
    v.evidence.push_back(std::string(to_string(top.cause)) + " (" + mib(top.mib) + ", " + top.basis + ") and " +
                         to_string(v.components[1].cause) + " (" + mib(second) + ", " + v.components[1].basis +
                         ") are within " + num(100 * (thresholds::kDominanceRatio - 1), 0) + "% of each other");
  } else {
    v.dominant = top.cause;
  }

  const double fwd = p.forward_increment_mib.value_or(0);
  const double slope = p.growth_per_step_mib.value_or(0);
  const std::string stable =
      p.growth_per_step_mib ? "post-cleanup allocation " + std::string(p.growth_significant ? "grows" : "is stable") +
                                  " (" + signed_mib(slope) + " per step over " + std::to_string(p.steps.size()) +
                                  " steps)"
                            : "post-cleanup trend unknown (one step)";

  switch (v.dominant) {
    case Cause::kActivations: {
      v.evidence.push_back("forward adds " + mib(fwd) + " per step" + at + " (" +
                           mib(p.forward_per_sample_mib.value_or(0)) + " per sample), against " +
                           mib(p.parameter_mib) + " of parameters; peak " + mib(p.peak_allocated_mib));
      v.evidence.push_back(stable);
      if (const Sweep* s = sweep("batch")) {
        v.evidence.push_back(sweep_line(*s, "batch", "forward increment", "MiB per sample"));
        v.confirmed = detail::is_linear(*s);
      }
      if (!v.confirmed) {
        v.confirm.push_back(base + " --batch-size-per-device 1 --output " + g.case_name + "-batch1.json");
        v.confirm.push_back(base + " --batch-size-per-device 4 --output " + g.case_name + "-batch4.json");
      }
      break;
    }
    case Cause::kOptimizerState: {
      const double excess = p.first_step_excess_mib.value_or(0);
      std::string setup;
      if (p.model_ready_mib && p.baseline_mib) {
        setup = "building the optimizer added " + signed_mib(*p.baseline_mib - *p.model_ready_mib) + "; ";
      }
      v.evidence.push_back(setup + "after the first step() " + mib(excess) + " stays allocated after cleanup, " +
                           num(p.excess_to_parameter_ratio.value_or(0)) + "x the " + mib(p.parameter_mib) +
                           " of parameters");
      if (!p.steps.empty() && p.steps.front().step_increment_mib) {
        v.evidence.push_back("step() of step 0 added " + signed_mib(*p.steps.front().step_increment_mib) +
                             (p.steps.size() > 1 && p.steps[1].step_increment_mib
                                  ? ", of step 1 " + signed_mib(*p.steps[1].step_increment_mib)
                                  : std::string()));
      }
      v.evidence.push_back(stable + ": made once, then kept");
      if (p.config.world_size > 1) {
        v.evidence.push_back("data parallel over " + std::to_string(p.config.world_size) +
                             " ranks: the persistent increase includes the gradient buckets made in the first "
                             "backward (about 1x the parameters) besides the optimizer's state");
      }
      if (const Sweep* s = sweep("parameters")) {
        v.evidence.push_back(sweep_line(*s, "parameter MiB", "persistent increase", "MiB per parameter MiB"));
        v.confirmed = detail::is_linear(*s);
      }
      if (!v.confirmed) v.confirm.push_back(base.substr(0, base.find(" --preset")) +
                                            " --preset medium --batch-size-per-device 1");
      break;
    }
    case Cause::kRetainedGraph: {
      v.evidence.push_back("post-cleanup allocation grows " + mib(slope) + " every step (" +
                           num(100 * p.growth_positive_share.value_or(0), 0) + "% of steps up), " +
                           mib(p.retained_growth_mib.value_or(0)) + " over " + std::to_string(p.steps.size()) +
                           " steps" + at);
      if (fwd > 0) {
        v.evidence.push_back("each step keeps " + num(100 * slope / fwd, 0) + "% of its forward increment (" +
                             mib(fwd) + "): the step's graph outlives the step");
      }
      if (const Sweep* s = sweep("steps")) {
        v.evidence.push_back(sweep_line(*s, "steps", "growth since optimizer_ready", "MiB per step"));
        v.confirmed = s->increasing;
      }
      if (!v.confirmed) v.confirm.push_back(base + " --steps " + std::to_string(2 * std::max<std::size_t>(p.steps.size(), 5)));
      break;
    }
    case Cause::kParameters: {
      v.evidence.push_back("the weights take " + mib(p.parameter_mib) + " of a " + mib(p.peak_allocated_mib) +
                           " peak" + at + "; forward adds " + mib(fwd) + ", the first step leaves " +
                           mib(p.first_step_excess_mib.value_or(0)));
      v.evidence.push_back(stable);
      if (const Sweep* s = sweep("batch")) {
        v.evidence.push_back(sweep_line(*s, "batch", "forward increment", "MiB per sample"));
      }
      break;
    }
    case Cause::kAllocatorCache: {
      v.evidence.push_back("reserved peaked at " + mib(p.peak_reserved_mib.value_or(0)) + " against " +
                           mib(p.peak_allocated_mib) + " allocated at peak: " + mib(p.cache_excess_mib.value_or(0)) +
                           " cached but free");
      break;
    }
    case Cause::kInconclusive:
      if (v.confirm.empty()) {
        v.confirm.push_back(base + " --batch-size-per-device 1 --output " + g.case_name + "-batch1.json");
        v.confirm.push_back(base + " --batch-size-per-device 4 --output " + g.case_name + "-batch4.json");
        v.confirm.push_back(base + " --steps 10");
      }
      break;
  }

  if (p.max_reserved_gap_mib && *p.max_reserved_gap_mib > 0 && v.dominant != Cause::kAllocatorCache) {
    v.evidence.push_back("reserved - allocated reached " + mib(*p.max_reserved_gap_mib) +
                         " (blocks cached for reuse, not a leak by itself)");
  }
  if (p.device_minus_reserved_mib) {
    v.evidence.push_back("device used - reserved: " + mib(*p.device_minus_reserved_mib) +
                         " (CUDA context, library workspaces outside the allocator, other processes)");
  }
  for (const DistributedView& d : v.distributed) {
    if (d.imbalanced) {
      v.warnings.push_back(d.run_label + ": ranks imbalanced, peak differs by " + num(100 * d.imbalance, 0) +
                           "%; rank " + std::to_string(d.max_rank) + " is the capacity constraint at " +
                           mib(d.max_peak_mib));
    }
  }

  v.response = detail::cause_response(v.dominant);
  for (const char* s : detail::cause_not_helpful(v.dominant)) v.not_helpful.emplace_back(s);
  return v;
}

}  // namespace memdiag
