// The CI gates of compare_memory_reports as data: every check made, passed
// or not, so that the exit code, the stderr lines and JUnit's test cases
// come from one list.
#pragma once

#include "memdiag/analysis.hpp"

#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace memdiag {

struct GateSpec {
  std::vector<std::pair<std::string, Cause>> expect;  // --expect CASE=CAUSE: every group of CASE has CAUSE
  std::set<Cause> fail_on;                             // --fail-on CAUSE: no group has it
};

struct GateCheck {
  enum class Kind { kExpect, kFailOn };
  Kind kind = Kind::kExpect;
  std::string case_name;
  std::string group_key;        // empty when no report of the case was given
  std::string group_label;      // the group in words: "alpha, cuda"
  std::optional<Cause> actual;  // the group's verdict
  Cause cause = Cause::kInconclusive;  // expected (kExpect) or refused (kFailOn)
  bool passed = false;
};

// One check per --expect per group of its case (one failing check when the
// case has no group), and one per --fail-on cause per group.
std::vector<GateCheck> check_gates(const Analysis& a, const GateSpec& spec);

}  // namespace memdiag
