// Sweeps across runs of one group, and the per-rank view of distributed runs.
#include "internal.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

namespace memdiag::detail {

Sweep fit_sweep(std::string kind, std::vector<SweepPoint> pts) {
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

bool is_linear(const Sweep& s) { return s.increasing && s.max_deviation <= thresholds::kLinearTolerance; }

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

}  // namespace memdiag::detail
