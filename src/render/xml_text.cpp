// Text for XML and HTML: what a report carries (case names, file names,
// messages) is bytes from elsewhere. Escaped, with control characters
// (which XML 1.0 forbids) and invalid UTF-8 replaced by U+FFFD, so the
// document always parses.
#include "xml_text.hpp"

#include "memdiag/format.hpp"

namespace memdiag::detail {

std::string xml_escape(std::string_view in) {
  static constexpr const char* kReplacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size();) {
    const auto c = static_cast<unsigned char>(in[i]);
    if (c < 0x80) {
      switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        case '\'': out += "&#39;"; break;
        case '\t':
        case '\n':
        case '\r': out += static_cast<char>(c); break;
        default: out += (c < 0x20 || c == 0x7F) ? kReplacement : std::string(1, static_cast<char>(c));
      }
      ++i;
      continue;
    }
    // A well-formed UTF-8 sequence of a character XML 1.0 allows is
    // copied; U+FFFE and U+FFFF are not among them.
    const std::size_t len = utf8_sequence_length(in, i);
    const char32_t cp = len ? utf8_code_point(in, i, len) : 0xFFFD;
    if (len > 0 && cp != 0xFFFE && cp != 0xFFFF) {
      out.append(in.substr(i, len));
      i += len;
    } else {
      out += kReplacement;
      i += len ? len : 1;
    }
  }
  return out;
}

}  // namespace memdiag::detail
