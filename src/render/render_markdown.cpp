#include "memdiag/render.hpp"

namespace memdiag {

std::string render_markdown(const Analysis& a) {
  std::string out;
  for (std::size_t i = 0; i < a.groups.size(); ++i) {
    const Group& g = a.groups[i];
    const Verdict& v = a.verdicts[i];
    if (i) out += "\n";
    out += "### " + group_title(g) + "\n\n";
    out += "**Dominant cause: `" + std::string(to_string(v.dominant)) + "`** (" + cause_label(v.dominant) + ")";
    if (v.confirmed) out += ", confirmed by the sweep";
    out += ".\n\nEvidence:\n\n";
    for (const std::string& e : v.evidence) out += "- " + e + "\n";
    for (const std::string& w : v.warnings) out += "- **warning:** " + w + "\n";
    out += "\nResponse: " + v.response + "\n";
    if (!v.not_helpful.empty()) {
      out += "\nWould not help:\n\n";
      for (const std::string& n : v.not_helpful) out += "- " + n + "\n";
    }
    if (!v.confirm.empty()) {
      out += "\nTo confirm:\n\n```\n";
      for (const std::string& c : v.confirm) out += c + "\n";
      out += "```\n";
    }
    out += "\n" + runs_table(g).to_markdown();
    for (const DistributedView& d : v.distributed) {
      out += "\nRanks (" + d.run_label + "):\n\n" + ranks_table(d).to_markdown();
    }
  }
  return out;
}

}  // namespace memdiag
