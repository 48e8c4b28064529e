// Plain text for a terminal: the gates' outcome, the section of each group
// in indented lists, the baseline's section.
#include "gate_text.hpp"
#include "regression_text.hpp"
#include "section.hpp"

#include "memdiag/format.hpp"

namespace memdiag {
namespace {

std::string sections_text(const Analysis& a) {
  std::string out;
  for (std::size_t i = 0; i < a.groups.size(); ++i) {
    const detail::Section s = detail::section_of(a.groups[i], a.verdicts[i]);
    if (i) out += "\n";
    out += "== " + s.title + " ==\n";
    out += detail::cause_line(s) + "\n";
    out += "evidence:\n";
    if (!s.decision.empty()) out += "  - " + s.decision + "\n";
    for (const std::string& e : s.evidence) out += "  - " + e + "\n";
    for (const std::string& w : s.warnings) out += "  ! " + w + "\n";
    out += "response: " + s.response + "\n";
    if (!s.best_remedy.empty()) out += s.best_remedy + "\n";
    if (!s.sharding.empty()) out += s.sharding + "\n";
    if (!s.not_measured.empty()) out += "not measured here: " + s.not_measured + "\n";
    for (const std::string& c : s.capacity) out += "capacity: " + c + "\n";
    if (!s.not_helpful.empty()) {
      out += "would not help:\n";
      for (const std::string& n : s.not_helpful) out += "  - " + n + "\n";
    }
    if (!s.commands.empty()) {
      out += "to confirm, run:\n";
      for (std::size_t k = 0; k < s.commands.size(); ++k) {
        out += "  $ " + s.commands[k] + "\n";
        if (!s.command_costs[k].empty()) out += "    " + s.command_costs[k] + "\n";
      }
    }
    if (!s.changes.empty()) {
      out += detail::changes_heading(s) + "\n";
      for (const std::string& c : s.changes) out += "  - " + c + "\n";
    }
    if (s.remedies) out += "remedies, each against its baseline run:\n" + s.remedies->to_text("  ");
    if (s.parallel_modes) out += s.parallel_modes_note + ":\n" + s.parallel_modes->to_text("  ");
    if (s.searches) out += "largest batch found per variant (--find-max-batch):\n" + s.searches->to_text("  ");
    if (s.sharded_capacity) {
      out += "largest batch per rank under each parallel mode (predicted from the single-rank run):\n" +
             s.sharded_capacity->to_text("  ");
    }
    out += "runs:\n" + s.runs.to_text("  ");
    for (const auto& [label, table] : s.ranks) out += "ranks (" + label + "):\n" + table.to_text("  ");
  }
  if (!a.unreadable.empty()) {
    out += std::string(out.empty() ? "" : "\n") + "== not analysed: " + std::to_string(a.unreadable.size()) +
           " input" + (a.unreadable.size() == 1 ? "" : "s") + " could not be read ==\n";
    for (const std::string& u : a.unreadable) out += "  - " + printable(u) + "\n";
  }
  return out;
}

}  // namespace

std::string render_text(const Comparison& c) {
  std::string out;
  if (detail::gate_summary_wanted(c.gates, c.baseline)) out += detail::gate_summary_text(c.gates, c.baseline) + "\n";
  out += sections_text(c.analysis);
  if (c.baseline != nullptr) out += "\n" + detail::regression_text(*c.baseline);
  return out;
}

}  // namespace memdiag
