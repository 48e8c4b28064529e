#include "compare.hpp"

#include "memdiag/errors.hpp"
#include "memdiag/exit_code.hpp"
#include "memdiag/report_reader.hpp"

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
    if (source != "-") dirs.insert(fs::path(source).parent_path().string());
  }
  for (const std::string& d : dirs) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(d.empty() ? "." : d, ec)) {
      if (e.path().extension() == ".json") out.insert((fs::path(d) / e.path().filename()).string());
    }
  }
  return out;
}

void print_gate_failure(const GateFailure& f, std::ostream& err) {
  err << kProgram << ": gate failed: ";
  if (!f.actual) {
    err << "no report of case " << f.case_name << "\n";
  } else if (f.fail_on) {
    err << f.case_name << " is " << to_string(*f.actual) << " (--fail-on)\n";
  } else {
    err << f.case_name << " is " << to_string(*f.actual) << ", expected " << to_string(*f.expected) << " ("
        << f.group_key << ")\n";
  }
}

}  // namespace

std::pair<std::string, Cause> parse_expectation(const std::string& arg) {
  // The last '=': a case name may hold one, a cause never does.
  const auto eq = arg.rfind('=');
  const auto cause = eq == std::string::npos ? std::nullopt : cause_from_string(arg.substr(eq + 1));
  if (eq == std::string::npos || eq == 0 || !cause) {
    throw UsageError("--expect: '" + arg + "' is not CASE=CAUSE with a known cause");
  }
  return {arg.substr(0, eq), *cause};
}

Cause parse_fail_on(const std::string& arg) {
  const auto cause = cause_from_string(arg);
  if (!cause) throw UsageError("--fail-on: '" + arg + "' is not a known cause");
  return *cause;
}

std::vector<GateFailure> check_gates(const Analysis& a, const CompareOptions& o) {
  std::vector<GateFailure> out;
  auto failure = [&out](const std::string& case_name, const Verdict* v) -> GateFailure& {
    GateFailure& f = out.emplace_back();
    f.case_name = case_name;
    if (v != nullptr) {
      f.group_key = v->group_key;
      f.actual = v->dominant;
    }
    return f;
  };
  for (const auto& [case_name, cause] : o.expect) {
    bool found = false;
    for (const Verdict& v : a.verdicts) {
      if (v.case_name != case_name) continue;
      found = true;
      if (v.dominant != cause) failure(case_name, &v).expected = cause;
    }
    if (!found) failure(case_name, nullptr).expected = cause;
  }
  for (const Verdict& v : a.verdicts) {
    if (o.fail_on.count(v.dominant)) failure(v.case_name, &v).fail_on = true;
  }
  return out;
}

int run_compare(const CompareOptions& o, std::ostream& out, std::ostream& err) {
  const ReportSet set = read_reports(o.inputs);
  for (const InputError& e : set.errors) err << kProgram << ": " << e.what() << "\n";

  const Analysis analysis = analyse(set.reports, reports_beside(set.reports), o.budgets_mib);
  switch (o.format) {
    case OutputFormat::kJson:
      // File names are bytes, not always UTF-8: replaced (U+FFFD) rather
      // than aborting the whole comparison.
      out << render_json(analysis, set.errors).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      break;
    case OutputFormat::kMarkdown: out << render_markdown(analysis); break;
    case OutputFormat::kText: out << render_text(analysis); break;
  }

  const std::vector<GateFailure> failures = check_gates(analysis, o);
  for (const GateFailure& f : failures) print_gate_failure(f, err);

  if (set.reports.empty()) {
    if (set.errors.empty()) err << kProgram << ": no reports to analyse\n";
    return to_int(ExitCode::kUsage);
  }
  if (!set.errors.empty()) return to_int(ExitCode::kUsage);
  return failures.empty() ? to_int(ExitCode::kOk) : to_int(ExitCode::kGateFailed);
}

}  // namespace memdiag
