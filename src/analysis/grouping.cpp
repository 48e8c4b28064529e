// Grouping reports into configurations, and the whole pipeline.
#include "memdiag/analysis.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace memdiag {

std::vector<Group> group_runs(std::vector<RunFeatures> runs) {
  // The verdict pool: one case on one kind of device, world and memory
  // limit, by one producer (memdiag/run_identity.hpp).
  std::map<std::string, Group> by_key;
  std::vector<std::string> order;
  for (RunFeatures& f : runs) {
    const std::string key = memdiag::key(projection::kVerdictPool, f.id);
    auto it = by_key.find(key);
    if (it == by_key.end()) {
      Group g;
      g.key = key;
      g.label = describe(projection::kVerdictPool, f.id);
      g.case_name = f.case_name;
      g.device_kind = f.id.device_kind;
      g.world_size = f.id.world_size;
      it = by_key.emplace(key, std::move(g)).first;
      order.push_back(key);
    }
    it->second.runs.push_back(std::move(f));
  }
  std::vector<Group> out;
  for (const std::string& key : order) {
    Group g = std::move(by_key[key]);
    std::stable_sort(g.runs.begin(), g.runs.end(), [](const RunFeatures& a, const RunFeatures& b) {
      return std::make_tuple(a.parameter_mib, a.id.batch, a.id.steps, a.id.rank) <
             std::make_tuple(b.parameter_mib, b.id.batch, b.id.steps, b.id.rank);
    });
    out.push_back(std::move(g));
  }
  return out;
}

Analysis analyse(const std::vector<std::pair<std::string, Report>>& reports, const std::set<std::string>& taken,
                 const std::vector<double>& budgets_mib, const std::vector<int>& world_sizes) {
  std::vector<RunFeatures> runs;
  runs.reserve(reports.size());
  std::set<std::string> sources = taken;
  for (const auto& [source, report] : reports) {
    runs.push_back(compute_features(report, source));
    sources.insert(source);
  }
  Analysis a;
  a.groups = group_runs(std::move(runs));
  for (const Group& g : a.groups) {
    a.verdicts.push_back(diagnose(g, sources, budgets_mib, world_sizes));
    // Two groups must not suggest the same output either.
    for (const ConfirmingRun& c : a.verdicts.back().confirm) {
      if (c.runnable) sources.insert(c.run.output);
    }
  }
  return a;
}

}  // namespace memdiag
