#include "memdiag/gates.hpp"

namespace memdiag {

std::vector<GateCheck> check_gates(const Analysis& a, const GateSpec& spec) {
  std::vector<GateCheck> out;
  for (const auto& [case_name, cause] : spec.expect) {
    bool found = false;
    for (const Verdict& v : a.verdicts) {
      if (v.case_name != case_name) continue;
      found = true;
      out.push_back({GateCheck::Kind::kExpect, case_name, v.group_key, v.group_label, v.dominant, cause, v.dominant == cause});
    }
    if (!found) out.push_back({GateCheck::Kind::kExpect, case_name, "", "", std::nullopt, cause, false});
  }
  for (const Cause cause : spec.fail_on) {
    for (const Verdict& v : a.verdicts) {
      out.push_back({GateCheck::Kind::kFailOn, v.case_name, v.group_key, v.group_label, v.dominant, cause, v.dominant != cause});
    }
  }
  return out;
}

}  // namespace memdiag
