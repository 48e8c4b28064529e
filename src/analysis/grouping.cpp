// Grouping reports into configurations, and the whole pipeline.
#include "memdiag/analysis.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace memdiag {

namespace {

// Reports of one configuration given no variant label that differ in what
// the reports show the model did (checkpointing on, autocast): the one
// that did it is that variant, named by it, and measured against the one
// that did not. Two reports of a GPT-2 with and without
// gradient_checkpointing_enable() were read as one run merged, still told
// to try checkpointing (independent-s70-jobs P9).
void name_observed_variants(Group& g) {
  std::map<std::string, std::vector<RunFeatures*>> same;
  for (RunFeatures& r : g.runs) {
    if (is_baseline_variant(r.id)) same[key(projection::kVariantBaseline, r.id)].push_back(&r);
  }
  for (auto& entry : same) {
    std::vector<RunFeatures*>& runs = entry.second;
    const auto differs = [&](auto feature) {
      return std::any_of(runs.begin(), runs.end(), [&](const RunFeatures* r) { return feature(*r); }) &&
             !std::all_of(runs.begin(), runs.end(), [&](const RunFeatures* r) { return feature(*r); });
    };
    const auto checkpointed = [](const RunFeatures& r) { return r.model_checkpointing; };
    const auto autocast = [](const RunFeatures& r) { return !r.model_autocast.empty(); };
    const bool by_checkpointing = differs(checkpointed), by_autocast = differs(autocast);
    if (!by_checkpointing && !by_autocast) continue;
    for (RunFeatures* r : runs) {
      std::string name;
      if (by_checkpointing && r->model_checkpointing) name = "checkpointing";
      if (by_autocast && !r->model_autocast.empty()) {
        const std::string& dtype = r->model_autocast;
        name += std::string(name.empty() ? "" : "+") + "autocast-" +
                (dtype == "bfloat16" ? "bf16" : dtype == "float16" ? "fp16" : dtype);
      }
      if (!name.empty()) r->id.variant_name = name;
    }
  }
}

}  // namespace

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
    name_observed_variants(g);
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
