#include "memdiag/render.hpp"

namespace memdiag {

std::string render_text(const Analysis& a) {
  std::string out;
  for (std::size_t i = 0; i < a.groups.size(); ++i) {
    const Group& g = a.groups[i];
    const Verdict& v = a.verdicts[i];
    if (i) out += "\n";
    out += "== " + group_title(g) + " ==\n";
    out += "dominant cause: " + std::string(to_string(v.dominant)) + " (" + cause_label(v.dominant) + ")";
    if (v.confirmed) out += ", confirmed by the sweep";
    out += "\n";
    out += "evidence:\n";
    for (const std::string& e : v.evidence) out += "  - " + e + "\n";
    for (const std::string& w : v.warnings) out += "  ! " + w + "\n";
    out += "response: " + v.response + "\n";
    if (!v.not_helpful.empty()) {
      out += "would not help:\n";
      for (const std::string& n : v.not_helpful) out += "  - " + n + "\n";
    }
    if (!v.confirm.empty()) {
      out += "to confirm, run:\n";
      for (const std::string& c : v.confirm) out += "  $ " + c + "\n";
    }
    out += "runs:\n" + runs_table(g).to_text("  ");
    for (const DistributedView& d : v.distributed) {
      out += "ranks (" + d.run_label + "):\n" + ranks_table(d).to_text("  ");
    }
  }
  return out;
}

}  // namespace memdiag
