#include "compare.hpp"

#include "memdiag/enum_names.hpp"
#include "memdiag/suggest.hpp"
#include "memdiag/errors.hpp"
#include "memdiag/format.hpp"
#include "memdiag/atomic_file.hpp"
#include "memdiag/exit_code.hpp"
#include "memdiag/limits.hpp"
#include "memdiag/flag_values.hpp"
#include "memdiag/output_guard.hpp"
#include "memdiag/report_reader.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <ostream>

namespace memdiag {
namespace fs = std::filesystem;

namespace {

constexpr const char* kProgram = "compare_memory_reports";

// Reports on disk beside the ones given: a confirming run must not write
// over any of them either.
std::set<std::string> reports_beside(const std::vector<std::pair<std::string, Report>>& reports) {
  std::set<std::string> dirs, out;
  for (const auto& [source, report] : reports) {
    // A report from standard input has its confirming runs written into
    // the working directory: the reports already there count too.
    dirs.insert(source == "-" ? std::string() : fs::path(source).parent_path().string());
  }
  for (const std::string& d : dirs) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(d.empty() ? "." : d, ec)) {
      if (e.path().extension() == ".json") out.insert((fs::path(d) / e.path().filename()).string());
    }
  }
  return out;
}

void print_gate_failure(const GateCheck& g, std::ostream& err) {
  err << kProgram << ": gate failed: ";
  if (!g.actual) {
    err << "no report of case " << printable(g.case_name) << "\n";
  } else if (g.kind == GateCheck::Kind::kFailOn) {
    err << printable(g.case_name) << " is " << to_string(*g.actual) << " (--fail-on)\n";
  } else {
    err << printable(g.case_name) << " is " << to_string(*g.actual) << ", expected " << to_string(g.cause) << " ("
        << printable(g.group_label) << ")\n";
  }
}

}  // namespace

std::pair<std::string, Cause> parse_expectation(const std::string& arg) {
  // The last '=': a case name may hold one, a cause never does.
  const auto eq = arg.rfind('=');
  const auto cause = eq == std::string::npos ? std::nullopt : parse_enum<Cause>(arg.substr(eq + 1));
  if (eq == std::string::npos || eq == 0 || !cause) {
    throw UsageError("--expect: '" + arg + "' is not CASE=CAUSE with a known cause");
  }
  return {arg.substr(0, eq), *cause};
}

Cause parse_fail_on(const std::string& arg) {
  const auto cause = parse_enum<Cause>(arg);
  if (!cause) {
    throw UsageError("--fail-on: '" + arg + "' is not a cause" + did_you_mean_enum<Cause>(arg) + "; the causes: " +
                     enum_names<Cause>());
  }
  return *cause;
}

double parse_fraction(const std::string& flag, const std::string& arg) {
  std::string t = arg;
  const bool percent = !t.empty() && t.back() == '%';
  if (percent) t.pop_back();
  // A bare number is a fraction: 5 would be 500%, which nobody gating a
  // memory regression means.
  if (!percent) {
    double bare = 0;
    try {
      bare = parse_decimal(flag, t, 0, limits::kMaxIncreaseFraction);
    } catch (const UsageError&) {
      bare = 0;  // refused below with the usual message
    }
    if (bare > 1) {
      throw UsageError(flag + ": '" + arg + "' is a fraction, " + format_fixed(100 * bare, 0) + "%; write " + arg +
                       "% for " + arg + " percent, or " + format_fixed(100 * bare, 0) + "% if that is meant");
    }
  }
  // Plain decimals only (no hex, exponent, nan or inf), up to a thousandfold.
  double v = 0;
  try {
    v = parse_decimal(flag, t, 0, percent ? 100.0 * limits::kMaxIncreaseFraction : limits::kMaxIncreaseFraction);
  } catch (const UsageError& e) {
    throw UsageError(flag + ": '" + arg + "' is not a percentage (5%) or a fraction (0.05) up to " +
                     std::to_string(static_cast<int>(limits::kMaxIncreaseFraction)));
  }
  return percent ? v / 100.0 : v;
}

int run_check(const CompareOptions& o, std::ostream& out, std::ostream& err) {
  const ReportSet set = read_reports(o.inputs);
  for (const InputError& e : set.errors) err << kProgram << ": " << printable(e.what()) << "\n";
  for (const auto& [source, r] : set.reports) {
    std::size_t steps = 0;
    for (const Sample& s : r.samples) steps = s.step ? std::max<std::size_t>(steps, static_cast<std::size_t>(*s.step) + 1) : steps;
    out << printable(source) << ": valid (schema " << r.schema_version
        << (r.schema_version < kSchemaVersion ? ", read through the upgrade to " + std::to_string(kSchemaVersion) : "")
        << ", written by " << printable(r.producer.name)
        << ", case " << printable(r.case_info.name) << ", " << r.samples.size() << " samples over " << steps << " step"
        << (steps == 1 ? "" : "s") << ", status " << to_string(r.status) << ")\n";
  }
  if (!(out << std::flush)) return to_int(ExitCode::kFailed);
  if (set.reports.empty() && set.errors.empty()) {
    err << kProgram << ": no reports to check\n";
    return to_int(ExitCode::kUsage);
  }
  return set.errors.empty() ? to_int(ExitCode::kOk) : to_int(ExitCode::kUsage);
}

// -o must not be a file this comparison reads (a report, a baseline): it
// would be replaced by the comparison of itself. Checked before reading.
std::string check_compare_output(const CompareOptions& o) {
  InputFiles inputs;
  for (const std::string& f : expand_inputs(o.inputs).files) inputs.add(f, "the report");
  for (const std::string& f : expand_inputs(o.baseline).files) inputs.add(f, "the baseline report");
  return check_output(o.output, inputs);
}

namespace {

// The reports of one list of inputs, each that cannot be read said on err
// (prefix: whose it is).
ReportSet read_said(const std::vector<std::string>& inputs, const std::string& prefix, std::ostream& err) {
  ReportSet set = read_reports(inputs);
  for (const InputError& e : set.errors) err << kProgram << ": " << prefix << printable(e.what()) << "\n";
  return set;
}

// The analysis of the reports, the inputs that could not be read (the
// baseline's too) among what it says.
Analysis analyse_inputs(const CompareOptions& o, const ReportSet& set, const std::optional<ReportSet>& base) {
  Analysis analysis = analyse(set.reports, reports_beside(set.reports), o.budgets_mib, o.world_sizes);
  for (const InputError& e : set.errors) analysis.unreadable.push_back(e.what());
  if (base) {
    for (const InputError& e : base->errors) analysis.unreadable.push_back(std::string("--baseline: ") + e.what());
  }
  return analysis;
}

// The document to standard output or -o's file; 0, or the exit code of a
// write that failed (said on err).
int write_document(const std::string& text, const CompareOptions& o, std::ostream& out, std::ostream& err) {
  if (o.output.empty()) {
    // A full disk or a closed pipe is a failure, not a cut-off success.
    if (out << text << std::flush) return 0;
    err << kProgram << ": cannot write the output (" << std::strerror(errno ? errno : EIO) << ")\n";
    return to_int(ExitCode::kFailed);
  }
  try {
    write_file_atomically(o.output, text);
  } catch (const std::exception& e) {
    err << kProgram << ": -o: " << printable(e.what()) << "\n";
    return to_int(ExitCode::kFailed);
  }
  return 0;
}

// Each gate that failed and each run that regressed, a line on err;
// whether any did (or the baseline matched nothing).
bool say_failures(const std::vector<GateCheck>& gates, const RegressionReport* reg, std::ostream& err) {
  bool failed = false;
  for (const GateCheck& g : gates) {
    if (g.passed) continue;
    print_gate_failure(g, err);
    failed = true;
  }
  if (reg == nullptr) return failed;
  for (const RegressionPair& p : reg->pairs) {
    if (p.regressed) err << kProgram << ": regressed against the baseline: " << describe(p) << "\n";
  }
  if (reg->nothing_matched()) err << kProgram << ": --baseline: " << regression_outcome(*reg) << "\n";
  return failed || reg->failed();
}

// Nothing to analyse or an input unreadable is a usage error (the rest
// was still analysed and written); then the gates decide.
int outcome(const ReportSet& set, const std::optional<ReportSet>& base, bool gate_failed, std::ostream& err) {
  if (set.reports.empty()) {
    if (set.errors.empty()) err << kProgram << ": no reports to analyse\n";
    return to_int(ExitCode::kUsage);
  }
  if (!set.errors.empty() || (base && !base->errors.empty())) return to_int(ExitCode::kUsage);
  return gate_failed ? to_int(ExitCode::kGateFailed) : to_int(ExitCode::kOk);
}

}  // namespace

int run_compare(const CompareOptions& o, std::ostream& out, std::ostream& err) {
  const auto t0 = std::chrono::steady_clock::now();
  if (const std::string why = o.output.empty() ? std::string() : check_compare_output(o); !why.empty()) {
    err << kProgram << ": -o: " << printable(o.output) << ": " << why << "\n";
    return to_int(ExitCode::kUsage);
  }
  const ReportSet set = read_said(o.inputs, "", err);
  std::optional<ReportSet> base;
  std::optional<RegressionReport> regression;
  if (!o.baseline.empty()) {
    base = read_said(o.baseline, "--baseline: ", err);
    regression = compare_to_baseline(set.reports, base->reports, o.thresholds);
  }
  const Analysis analysis = analyse_inputs(o, set, base);
  const std::vector<GateCheck> gates = check_gates(analysis, GateSpec{o.expect, o.fail_on});
  const RegressionReport* reg = regression ? &*regression : nullptr;
  const Comparison comparison{analysis, set.reports, set.errors, gates, reg,
                              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
  if (const int failed = write_document(render(comparison, o.format), o, out, err); failed != 0) return failed;
  return outcome(set, base, say_failures(gates, reg, err), err);
}

}  // namespace memdiag
