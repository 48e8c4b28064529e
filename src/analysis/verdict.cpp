#include "memdiag/analysis.hpp"

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
std::string mib(double v) {
  // Small figures need more digits to stay meaningful (batch-1 activations);
  // nothing at all reads best as plain zero.
  const double a = std::fabs(v);
  if (a < 5e-5) return "0.00 MiB";
  return num(v, a >= 100 ? 1 : (a >= 1 ? 2 : (a >= 0.01 ? 3 : 4))) + " MiB";
}
// A ratio with as many digits as it needs: x988, x3.97.
std::string times(double v) { return "x" + num(v, v >= 100 ? 0 : (v >= 10 ? 1 : 2)); }
std::string signed_mib(double v) { return (v >= 5e-5 ? "+" : "") + mib(v); }

struct CauseText {
  Cause cause;
  const char* name;
  const char* label;
  const char* response;
  std::vector<const char*> not_helpful;
};

const std::vector<CauseText>& cause_texts() {
  static const std::vector<CauseText> t = {
      {Cause::kActivations, "activations", "forward activations",
       "Reduce the per-device micro-batch (keep the global batch with gradient accumulation), use activation "
       "checkpointing to recompute intermediates in backward, or use lower-precision (bf16) activations or a "
       "memory-efficient kernel.",
       {"empty_cache(): activations are live tensors until backward frees them; the cache holds none of them.",
        "Optimizer-state sharding or a lighter optimizer: the optimizer's state is not what grows with the batch.",
        "Fixing graph lifetime: the post-cleanup allocation is stable, nothing is being retained across steps."}},
      {Cause::kOptimizerState, "optimizer_state", "optimizer state (persistent per-parameter buffers)",
       "Shard optimizer state across data-parallel ranks (ZeRO-1 / FSDP), use a lower-memory optimizer (SGD with "
       "momentum, Adafactor, 8-bit Adam), or keep optimizer state in lower precision where that is acceptable.",
       {"Activation checkpointing: it recomputes forward intermediates; the moment buffers persist between steps "
        "regardless.",
        "A smaller batch: the state is per parameter, not per sample.",
        "empty_cache(): the moments are live tensors held by the optimizer."}},
      {Cause::kRetainedGraph, "retained_graph", "retained autograd graphs (a lifetime bug)",
       "Stop retaining graphs: call backward() without retain_graph, and log losses as detached CPU scalars "
       "(loss.detach().cpu().item(), or a running sum) instead of keeping graph-connected tensors.",
       {"Sharding (FSDP/ZeRO): it divides model state, and merely spreads the leak across processes.",
        "empty_cache(): the retained graphs are live tensors; nothing cached is freed.",
        "Activation checkpointing or a smaller batch: they shrink each retained graph but the growth per step "
        "continues until it runs out.",
        "loss.detach() kept on the GPU: it cuts the graph but keeps the loss tensor's own storage alive."}},
      {Cause::kParameters, "parameters", "model parameters (weights and their gradients)",
       "Shard parameters (FSDP), train in bf16 with fp32 master weights only where needed, or use a smaller "
       "model or parameter-efficient fine-tuning.",
       {"A smaller batch or activation checkpointing: weights do not depend on the batch.",
        "empty_cache(): the weights are live tensors."}},
      {Cause::kAllocatorCache, "allocator_cache", "caching-allocator reserve (cached but free blocks)",
       "Look at fragmentation first (inactive_split_mib); try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, "
       "and call empty_cache() only to hand memory back to other processes.",
       {"Treating the reserved - allocated gap as a leak: cached blocks are reused by later allocations.",
        "Reducing tensors the model holds: allocated memory is not what is large here."}},
      {Cause::kInconclusive, "inconclusive", "no single dominant cause",
       "Run the confirming commands below; compare reports of the same case that differ in one setting.",
       {}},
  };
  return t;
}

const CauseText& text_of(Cause c) {
  for (const CauseText& t : cause_texts()) {
    if (t.cause == c) return t;
  }
  return cause_texts().back();
}

Sweep fit(std::string kind, std::vector<SweepPoint> pts) {
  std::sort(pts.begin(), pts.end(), [](const SweepPoint& a, const SweepPoint& b) { return a.x < b.x; });
  Sweep s;
  s.kind = std::move(kind);
  s.points = std::move(pts);
  double sxy = 0, sxx = 0;
  for (const SweepPoint& p : s.points) {
    sxy += p.x * p.y;
    sxx += p.x * p.x;
  }
  s.slope = sxx > 0 ? sxy / sxx : 0;
  s.increasing = s.points.size() >= 2;
  for (std::size_t i = 0; i < s.points.size(); ++i) {
    const SweepPoint& p = s.points[i];
    if (i > 0 && !(p.y > s.points[i - 1].y)) s.increasing = false;
    if (p.x > 0 && s.slope > 0) s.max_deviation = std::max(s.max_deviation, std::fabs(p.y / p.x - s.slope) / s.slope);
  }
  if (s.slope <= 0) s.max_deviation = 1;
  return s;
}

bool linear(const Sweep& s) { return s.increasing && s.max_deviation <= thresholds::kLinearTolerance; }

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
         (linear(s) ? "within " + num(100 * s.max_deviation, 1) + "% of proportional"
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

std::vector<DistributedView> distributed_views(const Group& g) {
  std::map<std::tuple<double, int, int>, std::vector<const RunFeatures*>> runs;
  for (const RunFeatures& r : g.runs) {
    runs[{r.parameter_mib, r.config.batch_size_per_device, r.config.steps}].push_back(&r);
  }
  std::vector<DistributedView> out;
  for (const auto& [key, rs] : runs) {
    std::set<int> ranks;
    for (const RunFeatures* r : rs) ranks.insert(r->config.rank);
    if (ranks.size() < 2) continue;
    DistributedView v;
    v.run_label = "preset " + rs.front()->config.preset + ", batch " + std::to_string(std::get<1>(key)) + ", " +
                  std::to_string(std::get<2>(key)) + " steps";
    double lo = 1e300;
    for (const RunFeatures* r : rs) {
      v.ranks.push_back({r->config.rank, r->source, r->peak_allocated_mib, r->forward_increment_mib,
                         r->first_step_excess_mib});
      if (r->peak_allocated_mib > v.max_peak_mib) {
        v.max_peak_mib = r->peak_allocated_mib;
        v.max_rank = r->config.rank;
      }
      lo = std::min(lo, r->peak_allocated_mib);
    }
    std::sort(v.ranks.begin(), v.ranks.end(), [](const RankRow& a, const RankRow& b) { return a.rank < b.rank; });
    v.imbalance = v.max_peak_mib > 0 ? (v.max_peak_mib - lo) / v.max_peak_mib : 0;
    v.imbalanced = v.imbalance > thresholds::kRankImbalance;
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace

const char* to_string(Cause c) { return text_of(c).name; }
const char* cause_label(Cause c) { return text_of(c).label; }

std::optional<Cause> cause_from_string(const std::string& s) {
  for (const CauseText& t : cause_texts()) {
    if (s == t.name) return t.cause;
  }
  return std::nullopt;
}

const std::vector<Cause>& all_causes() {
  static const std::vector<Cause> v = {Cause::kActivations,   Cause::kOptimizerState, Cause::kRetainedGraph,
                                       Cause::kParameters,    Cause::kAllocatorCache, Cause::kInconclusive};
  return v;
}

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
  v.distributed = distributed_views(g);
  if (g.runs.empty()) return v;

  const RunFeatures& p = pick_primary(g);
  v.primary_source = p.source;
  v.components = components_of(p);
  for (const std::string& n : p.notes) v.warnings.push_back(p.source + ": " + n);

  const std::string base = base_command(g, p);
  const int local_batch = p.config.batch_size_per_device +
                          (p.config.rank == 0 && p.config.world_size > 1 ? p.config.rank_zero_extra_samples : 0);
  const std::string at = " at batch " + std::to_string(local_batch) + ", preset " +
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
  if (bpts.size() >= 2) v.sweeps.push_back(fit("batch", bpts));
  if (ppts.size() >= 2) v.sweeps.push_back(fit("parameters", ppts));
  if (spts.size() >= 2) v.sweeps.push_back(fit("steps", spts));
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
        v.confirmed = linear(*s);
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
        v.confirmed = linear(*s);
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

  const CauseText& t = text_of(v.dominant);
  v.response = t.response;
  for (const char* s : t.not_helpful) v.not_helpful.emplace_back(s);
  return v;
}

}  // namespace memdiag
