#include "memdiag/format.hpp"

#include <cmath>
#include <cstdio>

namespace memdiag {

std::string format_fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string format_mib(double v) {
  const double a = std::fabs(v);
  if (a < 5e-5) return "0.00";
  return format_fixed(v, a >= 100 ? 1 : (a >= 1 ? 2 : (a >= 0.01 ? 3 : 4)));
}

std::string format_mib(const std::optional<double>& v) { return v ? format_mib(*v) : "-"; }

std::string format_signed_mib(double v) { return (v >= 5e-5 ? "+" : "") + format_mib(v); }

std::string format_times(double v) { return "x" + format_fixed(v, v >= 100 ? 0 : (v >= 10 ? 1 : 2)); }

std::string format_percent(double fraction, int decimals) { return format_fixed(100 * fraction, decimals) + "%"; }

std::string printable(const std::string& text) {
  static constexpr const char* kReplacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7F) {
      out += kReplacement;
    } else if (c == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9F) {
      out += kReplacement;  // a C1 control (U+0080..U+009F), e.g. CSI
      ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace memdiag
