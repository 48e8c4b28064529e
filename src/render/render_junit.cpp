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

void write_suite(std::ostringstream& out, const std::string& name, const std::vector<Case>& cases, double seconds) {
  int failures = 0;
  for (const Case& c : cases) failures += c.failure_message ? 1 : 0;
  out << "  <testsuite name=\"" << xml_escape(name) << "\" tests=\"" << cases.size() << "\" failures=\"" << failures
      << "\" errors=\"0\" skipped=\"0\" time=\"" << format_fixed(seconds, 3) << "\">\n";
  for (const Case& c : cases) {
    out << "    <testcase classname=\"" << xml_escape(c.classname) << "\" name=\"" << xml_escape(c.name)
        << "\" time=\"0\"";
    if (!c.failure_message) {
      out << "/>\n";
      continue;
    }
    out << ">\n      <failure message=\"" << xml_escape(*c.failure_message) << "\" type=\"memdiag\">"
        << xml_escape(c.failure_body) << "</failure>\n    </testcase>\n";
  }
  out << "  </testsuite>\n";
}

}  // namespace

std::string render_junit(const Analysis& a, const std::vector<GateCheck>& gates, const RegressionReport* regression,
                         double seconds) {
  std::vector<Case> expect, fail_on, baseline;
  for (const GateCheck& g : gates) (g.kind == GateCheck::Kind::kExpect ? expect : fail_on).push_back(gate_case(a, g));
  if (regression != nullptr) {
    for (const RegressionPair& p : regression->pairs) {
      Case c{"memdiag.baseline", p.key + " peak", std::nullopt, ""};
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
      baseline.push_back({"memdiag.baseline", s + " has a baseline", "no baseline report matches " + s, ""});
      baseline.back().failure_body = *baseline.back().failure_message + "\n";
    }
  }
  std::size_t tests = expect.size() + fail_on.size() + baseline.size(), failures = 0;
  for (const auto* v : {&expect, &fail_on, &baseline}) {
    for (const Case& c : *v) failures += c.failure_message ? 1 : 0;
  }
  std::ostringstream out;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"compare_memory_reports\" tests=\"" << tests
      << "\" failures=\"" << failures << "\" errors=\"0\" time=\"" << format_fixed(seconds, 3) << "\">\n";
  if (!expect.empty()) write_suite(out, "memdiag expect", expect, seconds);
  if (!fail_on.empty()) write_suite(out, "memdiag fail-on", fail_on, seconds);
  if (regression != nullptr) write_suite(out, "memdiag baseline", baseline, seconds);
  out << "</testsuites>\n";
  return out.str();
}

}  // namespace memdiag
