// Plain text for a terminal: the section of each group, indented lists.
#include "section.hpp"

#include "memdiag/format.hpp"

namespace memdiag {

std::string render_text(const Analysis& a) {
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

}  // namespace memdiag
