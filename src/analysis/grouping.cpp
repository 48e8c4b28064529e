// Grouping reports into configurations, and the whole pipeline.
#include "memdiag/analysis.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

namespace memdiag {

namespace {

std::string device_kind(const std::string& device) {
  const auto colon = device.find(':');
  return colon == std::string::npos ? device : device.substr(0, colon);
}

// Everything in the configuration except what a sweep varies (batch size,
// preset, steps, rank and its device index) and the seed.
std::string group_key(const RunFeatures& f) {
  const RunConfig& c = f.config;
  std::ostringstream os;
  os << f.case_name << " | " << device_kind(c.device) << " | world " << c.world_size << " | " << c.backend;
  if (c.memory_limit_mib) os << " | limit " << *c.memory_limit_mib << " MiB";
  if (c.rank_zero_extra_samples) os << " | rank0 +" << c.rank_zero_extra_samples;
  return os.str();
}

}  // namespace

std::vector<Group> group_runs(std::vector<RunFeatures> runs) {
  std::map<std::string, Group> by_key;
  std::vector<std::string> order;
  for (RunFeatures& f : runs) {
    const std::string key = group_key(f);
    auto it = by_key.find(key);
    if (it == by_key.end()) {
      Group g;
      g.key = key;
      g.case_name = f.case_name;
      g.device_kind = device_kind(f.config.device);
      g.world_size = f.config.world_size;
      it = by_key.emplace(key, std::move(g)).first;
      order.push_back(key);
    }
    it->second.runs.push_back(std::move(f));
  }
  std::vector<Group> out;
  for (const std::string& key : order) {
    Group g = std::move(by_key[key]);
    std::stable_sort(g.runs.begin(), g.runs.end(), [](const RunFeatures& a, const RunFeatures& b) {
      return std::make_tuple(a.parameter_mib, a.config.batch_size_per_device, a.config.steps, a.config.rank) <
             std::make_tuple(b.parameter_mib, b.config.batch_size_per_device, b.config.steps, b.config.rank);
    });
    out.push_back(std::move(g));
  }
  return out;
}

Analysis analyse(const std::vector<std::pair<std::string, Report>>& reports, const std::set<std::string>& taken,
                 const std::vector<double>& budgets_mib) {
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
    a.verdicts.push_back(diagnose(g, sources, budgets_mib));
    // Two groups must not suggest the same output either.
    for (const ConfirmingRun& c : a.verdicts.back().confirm) sources.insert(c.run.output);
  }
  return a;
}

}  // namespace memdiag
