#include "memdiag/render.hpp"

namespace memdiag {
using nlohmann::json;

namespace {
json opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

json run_json(const RunFeatures& r) {
  json steps = json::array();
  for (const StepFigures& s : r.steps) {
    steps.push_back({{"step", s.step},
                     {"forward_increment_mib", opt(s.forward_increment_mib)},
                     {"backward_increment_mib", opt(s.backward_increment_mib)},
                     {"step_increment_mib", opt(s.step_increment_mib)},
                     {"cleanup_allocated_mib", opt(s.cleanup_allocated_mib)},
                     {"peak_mib", s.peak_mib}});
  }
  return {{"source", r.source},
          {"rank", r.config.rank},
          {"world_size", r.config.world_size},
          {"batch_size_per_device", r.config.batch_size_per_device},
          {"preset", r.config.preset},
          {"steps", r.steps.size()},
          {"device", r.config.device},
          {"status", to_string(r.status)},
          {"parameter_mib", r.parameter_mib},
          {"forward_increment_mib", opt(r.forward_increment_mib)},
          {"forward_per_sample_mib", opt(r.forward_per_sample_mib)},
          {"first_step_persistent_mib", opt(r.first_step_persistent_mib)},
          {"first_step_excess_mib", opt(r.first_step_excess_mib)},
          {"excess_to_parameter_ratio", opt(r.excess_to_parameter_ratio)},
          {"growth_per_step_mib", opt(r.growth_per_step_mib)},
          {"growth_significant", r.growth_significant},
          {"retained_growth_mib", opt(r.retained_growth_mib)},
          {"peak_allocated_mib", r.peak_allocated_mib},
          {"peak_reserved_mib", opt(r.peak_reserved_mib)},
          {"max_reserved_gap_mib", opt(r.max_reserved_gap_mib)},
          {"device_minus_reserved_mib", opt(r.device_minus_reserved_mib)},
          {"warmup_mib", opt(r.warmup_mib)},
          {"peak_by_phase_mib", r.peak_by_phase},
          {"per_step", steps},
          {"notes", r.notes}};
}
}  // namespace

json render_json(const Analysis& a, const std::vector<ReadError>& errors) {
  json groups = json::array();
  for (std::size_t i = 0; i < a.groups.size(); ++i) {
    const Group& g = a.groups[i];
    const Verdict& v = a.verdicts[i];
    json comps = json::array();
    for (const Component& c : v.components) {
      comps.push_back({{"cause", to_string(c.cause)}, {"mib", c.mib}, {"basis", c.basis}});
    }
    json sweeps = json::array();
    for (const Sweep& s : v.sweeps) {
      json pts = json::array();
      for (const SweepPoint& p : s.points) pts.push_back({{"x", p.x}, {"y", p.y}, {"source", p.source}});
      sweeps.push_back({{"kind", s.kind}, {"points", pts}, {"slope", s.slope},
                        {"max_deviation", s.max_deviation}, {"increasing", s.increasing}});
    }
    json dist = json::array();
    for (const DistributedView& d : v.distributed) {
      json ranks = json::array();
      for (const RankRow& r : d.ranks) {
        ranks.push_back({{"rank", r.rank}, {"source", r.source}, {"peak_allocated_mib", r.peak_allocated_mib},
                         {"forward_increment_mib", opt(r.forward_increment_mib)},
                         {"first_step_excess_mib", opt(r.first_step_excess_mib)}});
      }
      dist.push_back({{"run", d.run_label}, {"ranks", ranks}, {"capacity_constraint_rank", d.max_rank},
                      {"max_peak_mib", d.max_peak_mib}, {"imbalance", d.imbalance}, {"imbalanced", d.imbalanced}});
    }
    json runs = json::array();
    for (const RunFeatures& r : g.runs) runs.push_back(run_json(r));
    groups.push_back({{"case", g.case_name},
                      {"group", g.key},
                      {"device", g.device_kind},
                      {"world_size", g.world_size},
                      {"dominant_cause", to_string(v.dominant)},
                      {"label", cause_label(v.dominant)},
                      {"confirmed", v.confirmed},
                      {"primary_report", v.primary_source},
                      {"evidence", v.evidence},
                      {"response", v.response},
                      {"not_helpful", v.not_helpful},
                      {"confirm", v.confirm},
                      {"warnings", v.warnings},
                      {"components", comps},
                      {"sweeps", sweeps},
                      {"distributed", dist},
                      {"runs", runs}});
  }
  json errs = json::array();
  for (const ReadError& e : errors) {
    errs.push_back({{"source", e.source}, {"path", e.path}, {"message", e.message}});
  }
  return {{"memdiag_version", MEMDIAG_VERSION}, {"groups", groups}, {"errors", errs}};
}

}  // namespace memdiag
