// diagnose(): the steps of a verdict, in order. Each lives in its own file;
// this one only puts them together.
#include "internal.hpp"

namespace memdiag {

Verdict diagnose(const Group& g, const std::set<std::string>& taken) {
  Verdict v;
  v.case_name = g.case_name;
  v.group_key = g.key;
  v.distributed = detail::distributed_views(g);
  if (g.runs.empty()) return v;

  const RunFeatures& p = detail::pick_primary(g);
  v.primary_source = p.source;
  v.components = components_of(p);
  v.sweeps = detail::collect_sweeps(g, p);
  v.decision = detail::decide(p, v.components);
  v.dominant = v.decision.rule == DecisionRule::kDominant ? v.decision.top->cause : Cause::kInconclusive;
  v.evidence = detail::cause_evidence(v.dominant, p, v.sweeps, v.confirmed);
  for (Evidence& e : detail::general_evidence(v.dominant, p)) v.evidence.push_back(std::move(e));
  v.warnings = detail::collect_warnings(p, v.distributed);
  v.confirm = detail::confirming_runs(v.decision, v.dominant, v.confirmed, g, p, taken);
  return v;
}

}  // namespace memdiag
