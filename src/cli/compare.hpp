// compare_memory_reports as a library call: read reports, analyse, render,
// gate. The executable is flags in, run_compare out; tests call run_compare
// directly.
#pragma once

#include "memdiag/analysis.hpp"
#include "memdiag/render.hpp"

#include <iosfwd>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace memdiag {

struct CompareOptions {
  std::vector<std::string> inputs;  // files, directories of *.json, or "-"
  OutputFormat format = OutputFormat::kText;
  std::vector<std::pair<std::string, Cause>> expect;  // every group of CASE has CAUSE
  std::set<Cause> fail_on;                             // no group has any of these
  std::vector<double> budgets_mib;                     // --budget-mib: predict the largest batch for each
};

// "CASE=CAUSE" as --expect takes it; throws UsageError naming the flag.
std::pair<std::string, Cause> parse_expectation(const std::string& arg);
// A cause as --fail-on takes it; throws UsageError naming the flag.
Cause parse_fail_on(const std::string& arg);

// A gate that did not hold, as data; run_compare prints one line for each.
struct GateFailure {
  std::string case_name;
  std::string group_key;                 // empty when no report of the case was given
  std::optional<Cause> actual;           // the group's verdict
  std::optional<Cause> expected;         // --expect
  bool fail_on = false;                  // --fail-on matched
};
std::vector<GateFailure> check_gates(const Analysis& a, const CompareOptions& o);

// Exit codes: kOk, kGateFailed (a gate failed), kUsage (a report could not
// be read; the others are still analysed and printed).
int run_compare(const CompareOptions& options, std::ostream& out, std::ostream& err);

}  // namespace memdiag
