// Sweeps across the runs of one group, and the per-rank view of
// data-parallel runs.
#include "sweeps.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace memdiag::detail {
namespace {

// The runs equal to the primary under the sweep's projection, one per value
// of what the sweep varies (the first run of each value wins).
template <typename Key>
std::vector<const RunFeatures*> vary(const Group& g, const RunFeatures& primary, const Projection& p, Key key) {
  std::map<double, const RunFeatures*> by;
  for (const RunFeatures& r : g.runs) {
    if (same(p, r.id, primary.id)) by.emplace(key(r), &r);
  }
  std::vector<const RunFeatures*> out;
  for (const auto& kv : by) out.push_back(kv.second);
  return out;
}

}  // namespace

std::optional<std::pair<double, double>> fit_linear_quadratic(const std::vector<std::pair<double, double>>& xy) {
  // The normal equations of two unknowns.
  double s2 = 0, s3 = 0, s4 = 0, sy1 = 0, sy2 = 0;
  for (const auto& [l, y] : xy) {
    s2 += l * l;
    s3 += l * l * l;
    s4 += l * l * l * l;
    sy1 += y * l;
    sy2 += y * l * l;
  }
  const double det = s2 * s4 - s3 * s3;
  if (!(det > 0)) return std::nullopt;
  return std::pair<double, double>{(sy1 * s4 - sy2 * s3) / det, (s2 * sy2 - s3 * sy1) / det};
}

Sweep fit_sweep(SweepKind kind, std::vector<SweepPoint> pts) {
  std::sort(pts.begin(), pts.end(), [](const SweepPoint& a, const SweepPoint& b) { return a.x < b.x; });
  Sweep s;
  s.kind = kind;
  s.points = std::move(pts);
  double sxy = 0, sxx = 0;
  for (const SweepPoint& p : s.points) {
    sxy += p.x * p.y;
    sxx += p.x * p.x;
  }
  s.slope = sxx > 0 ? sxy / sxx : 0;
  s.increasing = s.points.size() >= 2;
  for (std::size_t i = 1; i < s.points.size(); ++i) {
    if (!(s.points[i].y > s.points[i - 1].y)) s.increasing = false;
  }
  if (kind == SweepKind::kSteps && s.points.size() >= 2) {
    // Growth since optimizer_ready after n steps is what the first step
    // left for good (the optimizer's state: SGD's momentum, Adam's
    // moments) plus what each step keeps: a line with an intercept, its
    // slope the growth per step (through the origin, 2.00 MiB a step
    // beside 26.6 MiB of momentum read 6.55).
    const double n = static_cast<double>(s.points.size());
    double mx = 0, my = 0;
    for (const SweepPoint& p : s.points) {
      mx += p.x / n;
      my += p.y / n;
    }
    double cxy = 0, cxx = 0;
    for (const SweepPoint& p : s.points) {
      cxy += (p.x - mx) * (p.y - my);
      cxx += (p.x - mx) * (p.x - mx);
    }
    s.slope = cxx > 0 ? cxy / cxx : 0;
    s.intercept_mib = my - s.slope * mx;
    for (const SweepPoint& p : s.points) {
      const double line = *s.intercept_mib + s.slope * p.x;
      // Against what the steps grew by, not the intercept beneath it.
      const double grown = std::max(std::fabs(s.slope * p.x), thresholds::kMinimumSignalMib);
      s.max_deviation = std::max(s.max_deviation, std::fabs(p.y - line) / grown);
    }
  } else {
    for (const SweepPoint& p : s.points) {
      if (p.x > 0 && s.slope > 0) s.max_deviation = std::max(s.max_deviation, std::fabs(p.y / p.x - s.slope) / s.slope);
    }
  }
  if (s.slope <= 0) s.max_deviation = 1;
  s.linear = s.increasing && s.max_deviation <= thresholds::kLinearTolerance;
  if (kind == SweepKind::kSequence && s.points.size() >= 2 && s.points.front().x > 0 && s.points.front().y > 0 &&
      s.points.back().y > 0) {
    std::vector<std::pair<double, double>> xy;
    for (const SweepPoint& p : s.points) xy.emplace_back(p.x, p.y);
    if (const auto fit = fit_linear_quadratic(xy)) {
      const auto [a, b] = *fit;
      s.linear_mib = a;
      s.quadratic_mib = b;
      const double top = s.points.back().x;
      s.quadratic_share = std::clamp(b * top * top / s.points.back().y, 0.0, 1.0);
    }
    s.exponent = std::log(s.points.back().y / s.points.front().y) / std::log(s.points.back().x / s.points.front().x);
  }
  return s;
}

// A rank set whatever each rank's batch: the Python recorder writes each
// rank's own (a job that gives rank 0 more samples says so only there),
// where memory_diagnostics writes the common batch and rank 0's extra.
// One launch where the reports say which: two launches of one job at
// other batches given together are two sets, each whole.
const Projection kRankSetAnyBatch{
    "rank_set_any_batch", "a rank set, each rank at its own batch",
    {Aspect::kCase, Aspect::kProducer, Aspect::kDeviceKind, Aspect::kPreset, Aspect::kSteps, Aspect::kSequence,
     Aspect::kSeed, Aspect::kMemoryLimit, Aspect::kVariant, Aspect::kWorld, Aspect::kLaunch}};

std::vector<Sweep> collect_sweeps(const Group& g, const RunFeatures& p) {
  std::vector<SweepPoint> batch, params, steps, lengths;
  // The forward increment is one forward's: under gradient accumulation a
  // micro-batch's, so its samples are the step's batch over the
  // micro-batches (4 of 8 at batch 32 read "1.73 MiB per sample" where
  // each sample made 6.91).
  int micro_batches = 1;
  std::vector<const RunFeatures*> at_batches = vary(g, p, projection::kBatchSweep, [](const RunFeatures& r) { return double(r.id.batch); });
  // The primary's own rank set, where its ranks ran other batches (a job
  // that gives rank 0 more samples): each rank is a run of the same
  // configuration at its batch. An independent check's DDP GPT-2 at 16 and
  // 4 samples was asked to confirm with the batch its rank 1 had run.
  for (const RunFeatures& r : g.runs) {
    if (r.id.rank == p.id.rank || key(kRankSetAnyBatch, r.id) != key(kRankSetAnyBatch, p.id)) continue;
    const bool known = std::any_of(at_batches.begin(), at_batches.end(),
                                   [&](const RunFeatures* x) { return x->id.batch == r.id.batch; });
    if (!known) at_batches.push_back(&r);
  }
  for (const RunFeatures* r : at_batches) {
    const int k = std::max(1, r->micro_batches);
    micro_batches = std::max(micro_batches, k);
    if (r->forward_increment_mib) {
      // A run whose steps varied in samples: its forward's figure is the
      // steady steps' median, so its samples are theirs too, not step 0's
      // (an LSTM on batches of 12-20 paired step 0's 14 with the median
      // forward).
      double samples = static_cast<double>(r->id.batch) / k;
      if (r->step_samples && r->step_samples->varied()) {
        std::vector<double> seen;
        for (const StepFigures& st : r->steps) {
          if (st.step >= 1 && st.forward_samples) seen.push_back(static_cast<double>(*st.forward_samples));
        }
        if (!seen.empty()) {
          std::nth_element(seen.begin(), seen.begin() + static_cast<std::ptrdiff_t>(seen.size() / 2), seen.end());
          samples = seen[seen.size() / 2];
        }
      }
      batch.push_back({samples, *r->forward_increment_mib, r->source});
    }
  }
  for (const RunFeatures* r : vary(g, p, projection::kParameterSweep, [](const RunFeatures& r) { return r.parameter_mib; })) {
    if (r->first_step_excess_mib) params.push_back({r->parameter_mib, *r->first_step_excess_mib, r->source});
  }
  // Steps completed, not asked for: a run that stopped early grew for the
  // steps it ran.
  for (const RunFeatures* r : vary(g, p, projection::kStepsSweep, [](const RunFeatures& r) { return double(r.steps.size()); })) {
    if (r->baseline_mib && !r->steps.empty() && r->steps.back().cleanup_allocated_mib) {
      steps.push_back({double(r->steps.size()), *r->steps.back().cleanup_allocated_mib - *r->baseline_mib, r->source});
    }
  }
  for (const RunFeatures* r : vary(g, p, projection::kSequenceSweep,
                                   [](const RunFeatures& r) { return double(r.id.sequence_length.value_or(0)); })) {
    if (r->id.sequence_length && r->forward_increment_mib) {
      lengths.push_back({double(*r->id.sequence_length), *r->forward_increment_mib, r->source});
    }
  }
  std::vector<Sweep> out;
  if (lengths.size() >= 2) out.push_back(fit_sweep(SweepKind::kSequence, lengths));
  if (batch.size() >= 2) {
    out.push_back(fit_sweep(SweepKind::kBatch, batch));
    if (micro_batches > 1) out.back().per_micro_batch = true;
  }
  if (params.size() >= 2) out.push_back(fit_sweep(SweepKind::kParameters, params));
  if (steps.size() >= 2) out.push_back(fit_sweep(SweepKind::kSteps, steps));
  return out;
}

const Sweep* find_sweep(const std::vector<Sweep>& sweeps, SweepKind kind) {
  for (const Sweep& s : sweeps) {
    if (s.kind == kind) return &s;
  }
  return nullptr;
}

namespace {

// The rank sets of a group, each by rank.
std::vector<std::vector<const RunFeatures*>> rank_sets(const Group& g) {
  // Ranks that differ only in their batch are one set where each rank is
  // there once; where a rank repeats (the same job at two batches), the
  // sets are told apart by their batch.
  std::map<std::string, std::vector<const RunFeatures*>> loose;
  for (const RunFeatures& r : g.runs) loose[key(kRankSetAnyBatch, r.id)].push_back(&r);
  auto set_key = [&](const RunFeatures& r) {
    const auto& peers = loose[key(kRankSetAnyBatch, r.id)];
    std::set<int> ranks;
    for (const RunFeatures* p : peers) ranks.insert(p->id.rank);
    return ranks.size() == peers.size() ? "any-batch " + key(kRankSetAnyBatch, r.id) : key(projection::kRankSet, r.id);
  };
  std::map<std::string, std::size_t> index;
  std::vector<std::vector<const RunFeatures*>> out;
  for (const RunFeatures& r : g.runs) {
    auto [it, fresh] = index.emplace(set_key(r), out.size());
    if (fresh) out.emplace_back();
    out[it->second].push_back(&r);
  }
  for (auto& set : out) {
    std::stable_sort(set.begin(), set.end(),
                     [](const RunFeatures* a, const RunFeatures* b) { return a->id.rank < b->id.rank; });
  }
  return out;
}

RankGaps rank_gaps(const std::vector<const RunFeatures*>& set) {
  RankGaps gaps;
  if (set.empty()) return gaps;
  gaps.world_size = set.front()->id.world_size;
  std::map<int, int> given;
  for (const RunFeatures* r : set) ++given[r->id.rank];
  for (const auto& [rank, times] : given) {
    if (times > 1) gaps.repeated.push_back(rank);
  }
  gaps.missing_count = gaps.world_size - static_cast<std::int64_t>(given.size());
  for (int rank = 0; rank < gaps.world_size && gaps.missing.size() < RankGaps::kMaxListedRanks; ++rank) {
    if (!given.count(rank)) gaps.missing.push_back(rank);
  }
  return gaps;
}

}  // namespace

std::vector<DistributedView> distributed_views(const Group& g) {
  std::vector<DistributedView> out;
  for (const std::vector<const RunFeatures*>& rs : rank_sets(g)) {
    std::set<int> ranks;
    for (const RunFeatures* r : rs) ranks.insert(r->id.rank);
    if (ranks.size() < 2) continue;
    DistributedView v;
    // Rank 0's configuration names the set (its batch, where they differ).
    const RunFeatures& first = *rs.front();
    v.run = RunPoint{first.id.batch, first.id.preset, first.id.steps};
    v.variant = variant_label(first.id);
    v.launch = first.id.launch;
    v.gaps = rank_gaps(rs);
    double lo = first.peak_allocated_mib;
    std::optional<std::size_t> constraint;
    for (const RunFeatures* r : rs) {
      v.ranks.push_back({r->id.rank, r->source, r->peak_allocated_mib, r->forward_increment_mib, r->first_step_excess_mib,
                         false, r->local_batch, r->step_optimizer_state_mib, std::nullopt, 0});
      const bool named = std::any_of(r->kept.begin(), r->kept.end(), [](const KeptRecord& k) {
        return k.what == KeptRecord::What::kTensor || k.what == KeptRecord::What::kGraph ||
               k.what == KeptRecord::What::kRetainGraph;
      });
      if (r->growth_significant && named && r->growth_per_step_mib && r->steps.size() >= 2) {
        v.ranks.back().kept_growth_per_step_mib = r->growth_per_step_mib;
        v.ranks.back().kept_growth_mib =
            *r->growth_per_step_mib * static_cast<double>(r->steps.back().step - r->steps.front().step);
      }
      if (!constraint || r->peak_allocated_mib > v.max_peak_mib) {
        constraint = v.ranks.size() - 1;
        v.max_peak_mib = r->peak_allocated_mib;
        v.max_rank = r->id.rank;
      }
      lo = std::min(lo, r->peak_allocated_mib);
    }
    v.ranks[*constraint].capacity_constraint = true;
    v.imbalance = v.max_peak_mib > 0 ? (v.max_peak_mib - lo) / v.max_peak_mib : 0;
    v.imbalanced = v.imbalance > thresholds::kRankImbalance;
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<warning::RankSetIncomplete> rank_set_warnings(const Group& g) {
  std::vector<warning::RankSetIncomplete> out;
  for (const std::vector<const RunFeatures*>& rs : rank_sets(g)) {
    warning::RankSetIncomplete w;
    w.gaps = rank_gaps(rs);
    if (w.gaps.world_size < 2 || !w.gaps.any()) continue;
    const RunFeatures& first = *rs.front();
    w.run = RunPoint{first.id.batch, first.id.preset, first.id.steps};
    for (const RunFeatures* r : rs) {
      if (std::count(w.gaps.repeated.begin(), w.gaps.repeated.end(), r->id.rank)) w.repeated_sources.push_back(r->source);
    }
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace memdiag::detail
