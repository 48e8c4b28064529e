// Markdown for a pull-request comment or a document: the same sections as
// the text renderer, laid out with headings, lists and tables.
#include "gate_text.hpp"
#include "regression_text.hpp"
#include "section.hpp"

#include "memdiag/format.hpp"

#include <algorithm>

namespace memdiag {

namespace {

// A code fence longer than any run of backticks in the block, so no
// command can close it early.
std::string fence_for(const std::vector<std::string>& lines) {
  std::size_t longest = 0;
  for (const std::string& l : lines) {
    std::size_t run = 0;
    for (const char c : l) {
      run = c == '`' ? run + 1 : 0;
      longest = std::max(longest, run);
    }
  }
  return std::string(std::max<std::size_t>(3, longest + 1), '`');
}

// A section's prose with its names escaped for markdown.
detail::Section escaped(detail::Section s) {
  for (std::string* f : {&s.title, &s.label, &s.decision, &s.response, &s.best_remedy, &s.sharding, &s.not_measured,
                         &s.changes_producer, &s.parallel_modes_note}) {
    *f = markdown_text(*f);
  }
  for (std::vector<std::string>* v : {&s.evidence, &s.warnings, &s.not_helpful, &s.changes, &s.capacity}) {
    for (std::string& x : *v) x = markdown_text(x);
  }
  for (auto& [label, table] : s.ranks) label = markdown_text(label);
  return s;
}

std::string sections_markdown(const Analysis& a) {
  std::string out;
  for (std::size_t i = 0; i < a.groups.size(); ++i) {
    const detail::Section s = escaped(detail::section_of(a.groups[i], a.verdicts[i]));
    if (i) out += "\n";
    out += "### " + s.title + "\n\n";
    out += "**Dominant cause: `" + s.cause + "`** (" + s.label + ")" + (s.confirmed ? ", confirmed by the sweep" : "") +
           ".\n\nEvidence:\n\n";
    if (!s.decision.empty()) out += "- " + s.decision + "\n";
    for (const std::string& e : s.evidence) out += "- " + e + "\n";
    for (const std::string& w : s.warnings) out += "- **warning:** " + w + "\n";
    out += "\nResponse: " + s.response + "\n";
    if (!s.best_remedy.empty()) out += "\n" + s.best_remedy + ".\n";
    if (!s.sharding.empty()) out += "\n" + s.sharding + ".\n";
    if (!s.not_measured.empty()) out += "\nNot measured here: " + s.not_measured + ".\n";
    for (const std::string& c : s.capacity) out += "\nCapacity: " + c + ".\n";
    if (!s.not_helpful.empty()) {
      out += "\nWould not help:\n\n";
      for (const std::string& n : s.not_helpful) out += "- " + n + "\n";
    }
    if (!s.commands.empty()) {
      const std::string fence = fence_for(s.commands);
      out += "\nTo confirm:\n\n" + fence + "\n";
      for (std::size_t k = 0; k < s.commands.size(); ++k) {
        // A comment line: the block still runs as pasted.
        if (!s.command_costs[k].empty()) out += "# " + s.command_costs[k] + "\n";
        out += s.commands[k] + "\n";
      }
      out += fence + "\n";
    }
    if (!s.changes.empty()) {
      std::string heading = detail::changes_heading(s);
      heading[0] = 'T';
      out += "\n" + heading + "\n\n";
      for (const std::string& c : s.changes) out += "- " + c + "\n";
    }
    if (s.remedies) out += "\nRemedies, each against its baseline run:\n\n" + s.remedies->to_markdown();
    if (s.parallel_modes) {
      std::string note = s.parallel_modes_note;
      note[0] = 'P';
      out += "\n" + note + ":\n\n" + s.parallel_modes->to_markdown();
    }
    if (s.searches) out += "\nLargest batch found per variant (--find-max-batch):\n\n" + s.searches->to_markdown();
    if (s.sharded_capacity) {
      out += "\nLargest batch per rank under each parallel mode (predicted from the single-rank run):\n\n" +
             s.sharded_capacity->to_markdown();
    }
    out += "\n" + s.runs.to_markdown();
    for (const auto& [label, table] : s.ranks) out += "\nRanks (" + label + "):\n\n" + table.to_markdown();
  }
  if (!a.unreadable.empty()) {
    out += std::string(out.empty() ? "" : "\n") + "### Not analysed: " + std::to_string(a.unreadable.size()) +
           " input" + (a.unreadable.size() == 1 ? "" : "s") + " could not be read\n\n";
    for (const std::string& u : a.unreadable) out += "- " + markdown_text(printable(u)) + "\n";
  }
  return out;
}

}  // namespace

std::string render_markdown(const Comparison& c) {
  std::string out;
  if (detail::gate_summary_wanted(c.gates, c.baseline)) {
    out += detail::gate_summary_markdown(c.gates, c.baseline) + "\n";
  }
  out += sections_markdown(c.analysis);
  if (c.baseline != nullptr) out += "\n" + detail::regression_markdown(*c.baseline);
  return out;
}

}  // namespace memdiag
