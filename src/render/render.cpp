// The one way a comparison becomes a document: the renderer its format
// names, each handed the whole comparison.
#include "memdiag/render.hpp"

namespace memdiag {

const std::vector<std::pair<std::string, Report>>& Comparison::no_reports() {
  static const std::vector<std::pair<std::string, Report>> none;
  return none;
}

const std::vector<InputError>& Comparison::no_errors() {
  static const std::vector<InputError> none;
  return none;
}

const std::vector<GateCheck>& Comparison::no_gates() {
  static const std::vector<GateCheck> none;
  return none;
}

std::string render(const Comparison& c, OutputFormat format) {
  switch (format) {
    case OutputFormat::kText: return render_text(c);
    case OutputFormat::kMarkdown: return render_markdown(c);
    case OutputFormat::kJson: return render_json(c);
    case OutputFormat::kJunit: return render_junit(c);
    case OutputFormat::kHtml: return render_html(c);
  }
  return {};  // past the last value
}

}  // namespace memdiag
