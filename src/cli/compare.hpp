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
  std::string output;               // -o: write here (atomically) instead of stdout
  std::vector<std::pair<std::string, Cause>> expect;  // every group of CASE has CAUSE
  std::set<Cause> fail_on;                             // no group has any of these
  std::vector<int> world_sizes;                        // --world-size: per-rank capacity under each mode (a what-if)
  std::vector<double> budgets_mib;                     // --budget-mib: predict the largest batch for each
  std::vector<std::string> baseline;                   // --baseline: reports to compare the inputs against
  RegressionThresholds thresholds;                     // --max-increase, --max-increase-mib
  bool check = false;  // --check: validate the reports only, a line each
};

// "CASE=CAUSE" as --expect takes it; throws UsageError naming the flag.
std::pair<std::string, Cause> parse_expectation(const std::string& arg);
// A cause as --fail-on takes it; throws UsageError naming the flag.
Cause parse_fail_on(const std::string& arg);
// "5%" or "0.05" as --max-increase takes it; throws UsageError.
double parse_fraction(const std::string& flag, const std::string& arg);

// Exit codes: kOk, kGateFailed (a gate failed, or a peak grew beyond the
// threshold against the baseline), kUsage (a report could not be read; the
// others are still analysed and printed), kFailed (-o could not be written).
int run_compare(const CompareOptions& options, std::ostream& out, std::ostream& err);
// --check: each input read with the reader's full rules (schema, phase
// order, consecutive steps, bounds); "FILE: valid (...)" on out or the
// error on err, a line each. kOk when all are valid, else kUsage.
int run_check(const CompareOptions& options, std::ostream& out, std::ostream& err);

}  // namespace memdiag
