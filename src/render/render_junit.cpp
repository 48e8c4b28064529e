// The gates as JUnit XML, the format CI systems show as test results: a
// test suite per kind of gate, a test case per check (per --expect and
// --fail-on per group, per run matched against the baseline), failures with
// the evidence in the message and in the body.
#include "memdiag/format.hpp"
#include "memdiag/render.hpp"
#include "section.hpp"
#include "xml_text.hpp"

#include <sstream>

namespace memdiag {
namespace {

using detail::xml_escape;

struct Case {
  std::string classname, name;
  std::optional<std::string> failure_message;
  std::string failure_body;
  // Not a failure: an input that could not be read (<error>), or a check
  // that had nothing to check (<skipped>, a report without a baseline).
  std::optional<std::string> error_message;
  std::optional<std::string> skipped_message;
};

struct Counts {
  std::size_t tests = 0, failures = 0, errors = 0, skipped = 0;
  void add(const Case& c) {
    ++tests;
    failures += c.failure_message ? 1 : 0;
    errors += c.error_message ? 1 : 0;
    skipped += c.skipped_message ? 1 : 0;
  }
};

// The group's section, a line each: what a CI page shows under a failure.
std::string evidence_body(const Analysis& a, const std::string& group_key) {
  for (std::size_t i = 0; i < a.verdicts.size(); ++i) {
    if (a.verdicts[i].group_key != group_key) continue;
    const detail::Section s = detail::section_of(a.groups[i], a.verdicts[i]);
    std::string body = detail::cause_line(s) + "\n";
    if (!s.decision.empty()) body += "- " + s.decision + "\n";
    for (const std::string& e : s.evidence) body += "- " + e + "\n";
    for (const std::string& w : s.warnings) body += "! " + w + "\n";
    return body;
  }
  return "";
}

Case gate_case(const Analysis& a, const GateCheck& g) {
  Case c;
  c.classname = std::string("memdiag.") + (g.kind == GateCheck::Kind::kExpect ? "expect" : "fail_on");
  const std::string where = g.group_label.empty() ? g.case_name : g.group_label;
  c.name = g.kind == GateCheck::Kind::kExpect ? where + " is " + to_string(g.cause)
                                              : where + " is not " + to_string(g.cause);
  if (g.passed) return c;
  if (!g.actual) {
    c.failure_message = "no report of case " + g.case_name;
  } else {
    c.failure_message = g.case_name + " is " + to_string(*g.actual) +
                        (g.kind == GateCheck::Kind::kExpect ? std::string(", expected ") + to_string(g.cause)
                                                            : std::string(" (--fail-on)"));
  }
  c.failure_body = *c.failure_message + "\n" + evidence_body(a, g.group_key);
  return c;
}

Counts counts_of(const std::vector<Case>& cases) {
  Counts n;
  for (const Case& c : cases) n.add(c);
  return n;
}

void write_suite(std::ostringstream& out, const std::string& name, const std::vector<Case>& cases, double seconds) {
  const Counts n = counts_of(cases);
  out << "  <testsuite name=\"" << xml_escape(name) << "\" tests=\"" << n.tests << "\" failures=\"" << n.failures
      << "\" errors=\"" << n.errors << "\" skipped=\"" << n.skipped << "\" time=\"" << format_fixed(seconds, 3) << "\">\n";
  for (const Case& c : cases) {
    out << "    <testcase classname=\"" << xml_escape(c.classname) << "\" name=\"" << xml_escape(c.name)
        << "\" time=\"0\"";
    if (!c.failure_message && !c.error_message && !c.skipped_message) {
      out << "/>\n";
      continue;
    }
    out << ">\n";
    if (c.failure_message) {
      out << "      <failure message=\"" << xml_escape(*c.failure_message) << "\" type=\"memdiag\">"
          << xml_escape(c.failure_body) << "</failure>\n";
    }
    if (c.error_message) {
      out << "      <error message=\"" << xml_escape(*c.error_message) << "\" type=\"unreadable\"/>\n";
    }
    if (c.skipped_message) out << "      <skipped message=\"" << xml_escape(*c.skipped_message) << "\"/>\n";
    out << "    </testcase>\n";
  }
  out << "  </testsuite>\n";
}

}  // namespace

std::string render_junit(const Comparison& comparison) {
  const Analysis& a = comparison.analysis;
  const std::vector<GateCheck>& gates = comparison.gates;
  const RegressionReport* regression = comparison.baseline;
  const double seconds = comparison.seconds;
  std::vector<Case> expect, fail_on, baseline;
  for (const GateCheck& g : gates) (g.kind == GateCheck::Kind::kExpect ? expect : fail_on).push_back(gate_case(a, g));
  if (regression != nullptr) {
    for (const RegressionPair& p : regression->pairs) {
      Case c{"memdiag.baseline", printable(p.key) + " peak", std::nullopt, "", std::nullopt, std::nullopt};
      if (p.regressed) {
        c.failure_message = describe(p);
        c.failure_body = describe(p) + "\n";
        for (const PhaseDelta& d : p.phases) {
          c.failure_body += std::string(to_string(d.phase)) + ": peak " + format_mib(d.base_peak_mib) + " -> " +
                            format_mib(d.new_peak_mib) + " MiB" + (d.regressed ? " (regressed)" : "") + "\n";
        }
      }
      baseline.push_back(c);
    }
    for (const std::string& s : regression->new_without_baseline) {
      if (change_of(*regression, s)) continue;  // its baseline's case says it
      Case c{"memdiag.baseline", printable(s) + " has a baseline", std::nullopt, "", std::nullopt, std::nullopt};
      c.skipped_message = "no baseline report matches " + printable(s) + " (listed, not compared)";
      baseline.push_back(c);
    }
    // A baseline left without a new report fails: what the gate guards
    // went unchecked (a job whose batch changed passed unseen).
    for (const std::string& s : regression->baseline_without_new) {
      Case c{"memdiag.baseline", printable(s) + " has a new report", std::nullopt, "", std::nullopt, std::nullopt};
      const ConfigurationChange* ch = change_of(*regression, s);
      c.failure_message = ch ? describe(*ch) : "no new report matches the baseline " + printable(s);
      c.failure_body = *c.failure_message + "\n";
      baseline.push_back(c);
    }
    if (regression->nothing_matched()) {
      Case c{"memdiag.baseline", "a report matches the baseline", std::nullopt, "", std::nullopt, std::nullopt};
      c.failure_message = regression_outcome(*regression);
      c.failure_body = *c.failure_message + "\n";
      baseline.push_back(c);
    }
  }
  std::vector<Case> inputs;
  for (const std::string& u : a.unreadable) {
    Case c{"memdiag.inputs", printable(u.substr(0, u.find(": "))) + " is readable", std::nullopt, "", printable(u),
           std::nullopt};
    inputs.push_back(c);
  }
  // A rank set the reports do not make whole: the per-rank checks read only
  // the ranks given, so the check of the set is shown as not made (skipped,
  // with the warning), not as passed, and fails nothing.
  for (std::size_t i = 0; i < a.verdicts.size() && i < a.groups.size(); ++i) {
    for (const Warning& w : a.verdicts[i].warnings) {
      const auto* gaps = std::get_if<warning::RankSetIncomplete>(&w);
      if (gaps == nullptr) continue;
      Case c{"memdiag.inputs", a.groups[i].label + ": the ranks of " + describe_rank_run(gaps->run) + " make its world",
             std::nullopt, "", std::nullopt, describe(w)};
      inputs.push_back(c);
    }
  }
  Counts all;
  for (const auto* v : {&expect, &fail_on, &baseline, &inputs}) {
    for (const Case& c : *v) all.add(c);
  }
  std::ostringstream out;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"compare_memory_reports\" tests=\"" << all.tests
      << "\" failures=\"" << all.failures << "\" errors=\"" << all.errors << "\" skipped=\"" << all.skipped
      << "\" time=\"" << format_fixed(seconds, 3) << "\">\n";
  if (!expect.empty()) write_suite(out, "memdiag expect", expect, seconds);
  if (!fail_on.empty()) write_suite(out, "memdiag fail-on", fail_on, seconds);
  if (regression != nullptr) write_suite(out, "memdiag baseline", baseline, seconds);
  if (!inputs.empty()) write_suite(out, "memdiag inputs", inputs, seconds);
  out << "</testsuites>\n";
  return out.str();
}

}  // namespace memdiag
