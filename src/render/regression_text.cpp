// The regression gate's words: a line per matched run, a table of its
// phases, the component that moved; the same records in JSON.
#include "regression_text.hpp"

#include "memdiag/format.hpp"
#include "memdiag/render.hpp"

#include <cctype>
#include <sstream>

namespace memdiag {
namespace {

// A change as a signed percentage of the baseline: "+20.0%", "-1.5%".
std::string percent(double base, double now) {
  if (!(base > 0)) return "-";
  const double f = (now - base) / base;
  return (f >= 0 ? "+" : "") + format_percent(f, 1);
}

std::string threshold_words(const RegressionThresholds& t) {
  std::string s = "more than " + format_fixed(100.0 * t.max_increase_fraction, 1) + "%";
  if (t.max_increase_mib) s += " and more than " + format_mib(*t.max_increase_mib) + " MiB";
  return s;
}

std::string pair_line(const RegressionPair& p) {
  std::string s = printable(p.key) + ": peak " + format_mib(p.base_peak_mib) + " -> " + format_mib(p.new_peak_mib) + " MiB (" +
                  percent(p.base_peak_mib, p.new_peak_mib) + ")";
  if (p.new_status != p.base_status) {
    s += std::string(", status ") + to_string(p.base_status) + " -> " + to_string(p.new_status);
  }
  for (const auto& [which, word] : {std::pair{p.moved, "moved"}, std::pair{p.fell, "fell"}}) {
    if (!which) continue;
    for (const ComponentDelta& c : p.components) {
      if (c.component == *which) {
        s += std::string("; ") + word + ": " + to_string(c.component) + " " + format_mib(c.base_mib) + " -> " +
             format_mib(c.new_mib) + " MiB" + (c.component == MovedComponent::kGrowthPerStep ? " a step" : "") + " (" +
             format_signed_mib(c.new_mib - c.base_mib) + " MiB)";
      }
    }
    if (*which == MovedComponent::kParameters && word == std::string("moved")) {
      // The weights' gradients and optimizer state follow them.
      double with = 0;
      for (const ComponentDelta& c : p.components) {
        if (c.component == MovedComponent::kParameters || c.component == MovedComponent::kGradients ||
            c.component == MovedComponent::kOptimizerState) {
          with += c.new_mib - c.base_mib;
        }
      }
      s += ", " + format_signed_mib(with) + " MiB with their gradients and optimizer state";
    }
  }
  return s;
}

}  // namespace

Table regression_phase_table(const RegressionPair& p) {
  Table t;
  t.headers = {"phase", "base peak MiB", "new peak MiB", "change", "base end MiB", "new end MiB", ""};
  for (const PhaseDelta& d : p.phases) {
    t.rows.push_back({to_string(d.phase), format_mib(d.base_peak_mib), format_mib(d.new_peak_mib),
                      percent(d.base_peak_mib, d.new_peak_mib), format_mib(d.base_end_mib), format_mib(d.new_end_mib),
                      d.regressed ? "regressed" : ""});
  }
  return t;
}

namespace {
Table phase_table(const RegressionPair& p) { return regression_phase_table(p); }
}  // namespace

std::string describe(const RegressionPair& p) { return pair_line(p); }

std::string describe(const ConfigurationChange& c) {
  return printable(c.new_source) + " matches no baseline: " + printable(c.base_source) + ", the same job, ran " +
         c.changed + " (peak " + format_mib(c.base_peak_mib) + " -> " + format_mib(c.new_peak_mib) + " MiB, " +
         percent(c.base_peak_mib, c.new_peak_mib) +
         "), so the two are not compared and the gate fails: record the baseline again at the new configuration, "
         "or run the job as the baseline did";
}

const ConfigurationChange* change_of(const RegressionReport& r, const std::string& source) {
  for (const ConfigurationChange& c : r.changed) {
    if (c.new_source == source || c.base_source == source) return &c;
  }
  return nullptr;
}

std::string regression_outcome(const RegressionReport& r) {
  if (r.regressed()) return "memory regressed";
  if (r.nothing_matched()) return "nothing matched the baseline, so nothing was compared (the gate fails)";
  if (!r.baseline_without_new.empty()) {
    return "a baseline has no new report to compare (a job's configuration changed, or it did not run): the gate fails";
  }
  return "no regression";
}

namespace detail {

std::string regression_text(const RegressionReport& r) {
  std::ostringstream out;
  out << "== against the baseline (a peak regresses when it grows by " << threshold_words(r.thresholds) << ") ==\n";
  for (const RegressionPair& p : r.pairs) {
    out << (p.regressed ? "REGRESSED " : "ok        ") << pair_line(p) << "\n"
        << phase_table(p).to_text("    ");
  }
  for (const ConfigurationChange& c : r.changed) out << "CHANGED   " << describe(c) << "\n";
  for (const std::string& s : r.new_without_baseline) {
    if (!change_of(r, s)) out << "no baseline for " << printable(s) << "\n";
  }
  for (const std::string& s : r.baseline_without_new) {
    if (!change_of(r, s)) out << "no new report for baseline " << printable(s) << "\n";
  }
  out << "result: " << regression_outcome(r) << "\n";
  return out.str();
}

std::string regression_markdown(const RegressionReport& r) {
  std::ostringstream out;
  out << "## Against the baseline\n\nA peak regresses when it grows by " << threshold_words(r.thresholds) << ".\n\n";
  for (const RegressionPair& p : r.pairs) {
    out << "- " << (p.regressed ? "**regressed** " : "ok ") << markdown_text(pair_line(p)) << "\n";
  }
  for (const RegressionPair& p : r.pairs) {
    if (!p.regressed) continue;
    out << "\n### " << markdown_text(printable(p.key)) << "\n\n" << phase_table(p).to_markdown();
  }
  if (!r.new_without_baseline.empty() || !r.baseline_without_new.empty()) out << "\nUnmatched:\n";
  for (const ConfigurationChange& c : r.changed) out << "- **changed** " << markdown_text(describe(c)) << "\n";
  for (const std::string& s : r.new_without_baseline) {
    if (!change_of(r, s)) out << "- no baseline for " << markdown_text(printable(s)) << "\n";
  }
  for (const std::string& s : r.baseline_without_new) {
    if (!change_of(r, s)) out << "- no new report for baseline " << markdown_text(printable(s)) << "\n";
  }
  std::string outcome = regression_outcome(r);
  outcome[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(outcome[0])));
  out << "\n**" << outcome << ".**\n";
  return out.str();
}

nlohmann::json regression_json(const RegressionReport& r) {
  using nlohmann::json;
  json pairs = json::array();
  for (const RegressionPair& p : r.pairs) {
    json phases = json::array(), comps = json::array();
    for (const PhaseDelta& d : p.phases) {
      phases.push_back({{"phase", to_string(d.phase)}, {"base_peak_mib", d.base_peak_mib}, {"new_peak_mib", d.new_peak_mib},
                        {"base_end_mib", d.base_end_mib}, {"new_end_mib", d.new_end_mib}, {"regressed", d.regressed}});
    }
    for (const ComponentDelta& c : p.components) {
      comps.push_back({{"component", to_string(c.component)}, {"base_mib", c.base_mib}, {"new_mib", c.new_mib}});
    }
    pairs.push_back({{"key", p.key}, {"new_report", p.new_source}, {"baseline_report", p.base_source},
                     {"new_status", to_string(p.new_status)}, {"baseline_status", to_string(p.base_status)},
                     {"base_peak_mib", p.base_peak_mib}, {"new_peak_mib", p.new_peak_mib}, {"regressed", p.regressed},
                     {"moved", p.moved ? json(to_string(*p.moved)) : json(nullptr)},
                     {"fell", p.fell ? json(to_string(*p.fell)) : json(nullptr)}, {"phases", phases},
                     {"components", comps}, {"text", pair_line(p)}});
  }
  json changed = json::array();
  for (const ConfigurationChange& c : r.changed) {
    changed.push_back({{"new_report", c.new_source}, {"baseline_report", c.base_source}, {"changed", c.changed},
                       {"base_peak_mib", c.base_peak_mib}, {"new_peak_mib", c.new_peak_mib}, {"text", describe(c)}});
  }
  return {{"max_increase_fraction", r.thresholds.max_increase_fraction},
          {"max_increase_mib", r.thresholds.max_increase_mib ? json(*r.thresholds.max_increase_mib) : json(nullptr)},
          {"pairs", pairs},
          {"new_without_baseline", r.new_without_baseline},
          {"baseline_without_new", r.baseline_without_new},
          {"changed", changed},
          {"regressed", r.regressed()},
          {"failed", r.failed()},
          {"outcome", regression_outcome(r)}};
}

}  // namespace detail

}  // namespace memdiag
