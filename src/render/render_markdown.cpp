// Markdown for a pull-request comment or a document: the same sections as
// the text renderer, laid out with headings, lists and tables.
#include "section.hpp"

namespace memdiag {

std::string render_markdown(const Analysis& a) {
  std::string out;
  for (std::size_t i = 0; i < a.groups.size(); ++i) {
    const detail::Section s = detail::section_of(a.groups[i], a.verdicts[i]);
    if (i) out += "\n";
    out += "### " + s.title + "\n\n";
    out += "**Dominant cause: `" + s.cause + "`** (" + s.label + ")" + (s.confirmed ? ", confirmed by the sweep" : "") +
           ".\n\nEvidence:\n\n";
    if (!s.decision.empty()) out += "- " + s.decision + "\n";
    for (const std::string& e : s.evidence) out += "- " + e + "\n";
    for (const std::string& w : s.warnings) out += "- **warning:** " + w + "\n";
    out += "\nResponse: " + s.response + "\n";
    if (!s.best_remedy.empty()) out += "\n" + s.best_remedy + ".\n";
    if (!s.not_measured.empty()) out += "\nNot measured here: " + s.not_measured + " (run them with `--remedy`).\n";
    for (const std::string& c : s.capacity) out += "\nCapacity: " + c + ".\n";
    if (!s.not_helpful.empty()) {
      out += "\nWould not help:\n\n";
      for (const std::string& n : s.not_helpful) out += "- " + n + "\n";
    }
    if (!s.commands.empty()) {
      out += "\nTo confirm:\n\n```\n";
      for (const std::string& c : s.commands) out += c + "\n";
      out += "```\n";
    }
    if (!s.changes.empty()) {
      std::string heading = detail::changes_heading(s);
      heading[0] = 'T';
      out += "\n" + heading + "\n\n";
      for (const std::string& c : s.changes) out += "- " + c + "\n";
    }
    if (s.remedies) out += "\nRemedies, each against its baseline run:\n\n" + s.remedies->to_markdown();
    out += "\n" + s.runs.to_markdown();
    for (const auto& [label, table] : s.ranks) out += "\nRanks (" + label + "):\n\n" + table.to_markdown();
  }
  return out;
}

}  // namespace memdiag
