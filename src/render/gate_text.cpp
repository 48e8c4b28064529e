// The gate's outcome first: PASS or FAIL, each gate check and each
// regression, and what held, as the head of the markdown (a pull-request
// comment) and the text output, before the diagnoses they come from.
#include "gate_text.hpp"

#include "memdiag/format.hpp"
#include "memdiag/render.hpp"

#include <sstream>

namespace memdiag {
namespace {

using Line = GateLine;

bool passed(const std::vector<Line>& lines) {
  for (const Line& l : lines) {
    if (!l.held) return false;
  }
  return true;
}

}  // namespace

std::string regression_threshold(const RegressionThresholds& t) {
  std::string s = format_fixed(100.0 * t.max_increase_fraction, 1) + "%";
  if (t.max_increase_mib) s += " and " + format_mib(*t.max_increase_mib) + " MiB";
  return s;
}

std::vector<GateLine> gate_lines(const std::vector<GateCheck>& gates, const RegressionReport* r) {
  std::vector<Line> out;
  for (const GateCheck& g : gates) out.push_back({g.passed, describe(g)});
  if (r != nullptr) {
    for (const RegressionPair& p : r->pairs) {
      out.push_back({!p.regressed, (p.regressed ? "regressed: " : "within " + regression_threshold(r->thresholds) + ": ") +
                                       describe(p)});
    }
    for (const ConfigurationChange& c : r->changed) out.push_back({false, "configuration changed: " + describe(c)});
    for (const std::string& s : r->new_without_baseline) {
      if (!change_of(*r, s)) out.push_back({true, "no baseline yet for " + printable(s)});
    }
    for (const std::string& s : r->baseline_without_new) {
      if (!change_of(*r, s)) out.push_back({false, "no new report for baseline " + printable(s)});
    }
    if (r->nothing_matched()) out.push_back({false, regression_outcome(*r)});
  }
  return out;
}

std::string describe(const GateCheck& g) {
  const std::string what = g.kind == GateCheck::Kind::kExpect
                               ? "--expect " + printable(g.case_name) + "=" + to_string(g.cause)
                               : std::string("--fail-on ") + to_string(g.cause);
  if (!g.actual) return what + ": no report of case " + printable(g.case_name);
  const std::string where = printable(g.group_label.empty() ? g.case_name : g.group_label);
  if (g.kind == GateCheck::Kind::kFailOn) {
    return what + ": " + where + " is " + to_string(*g.actual);
  }
  return what + ": " + where + " is " + to_string(*g.actual) +
         (g.passed ? std::string() : std::string(", expected ") + to_string(g.cause));
}

namespace detail {

bool gate_summary_wanted(const std::vector<GateCheck>& gates, const RegressionReport* r) {
  return !gates.empty() || r != nullptr;
}

std::string gate_summary_markdown(const std::vector<GateCheck>& gates, const RegressionReport* r) {
  const std::vector<Line> lines = gate_lines(gates, r);
  std::ostringstream out;
  out << "## Memory gate: " << (passed(lines) ? "PASS" : "FAIL") << "\n\n";
  if (r != nullptr) out << "A peak regresses when it grows by more than " << regression_threshold(r->thresholds) << ".\n\n";
  // Failures first: what a reviewer must act on.
  for (bool ok : {false, true}) {
    for (const Line& l : lines) {
      if (l.held == ok) out << "- " << (ok ? "held: " : "**FAILED:** ") << markdown_text(l.words) << "\n";
    }
  }
  return out.str();
}

std::string gate_summary_text(const std::vector<GateCheck>& gates, const RegressionReport* r) {
  const std::vector<Line> lines = gate_lines(gates, r);
  std::ostringstream out;
  out << "== memory gate: " << (passed(lines) ? "PASS" : "FAIL") << " ==\n";
  for (bool ok : {false, true}) {
    for (const Line& l : lines) {
      if (l.held == ok) out << (ok ? "held    " : "FAILED  ") << l.words << "\n";
    }
  }
  return out.str();
}

}  // namespace detail

}  // namespace memdiag
