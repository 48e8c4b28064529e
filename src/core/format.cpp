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

std::size_t utf8_sequence_length(std::string_view in, std::size_t i) {
  const auto c = static_cast<unsigned char>(in[i]);
  if (c < 0x80) return 1;
  const std::size_t len = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 0;
  if (len == 0 || i + len > in.size()) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    if ((static_cast<unsigned char>(in[i + k]) & 0xC0) != 0x80) return 0;
  }
  const auto c1 = static_cast<unsigned char>(in[i + 1]);
  if (len == 3 && ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0))) return 0;  // overlong, surrogate
  if (len == 4 && ((c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 >= 0x90))) return 0;  // overlong, past U+10FFFF
  return len;
}

char32_t utf8_code_point(std::string_view in, std::size_t i, std::size_t len) {
  const auto c = static_cast<unsigned char>(in[i]);
  if (len == 1) return c;
  char32_t cp = c & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
  for (std::size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(in[i + k]) & 0x3F);
  return cp;
}

std::string printable(const std::string& text) {
  static constexpr const char* kReplacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t len = utf8_sequence_length(text, i);
    const char32_t cp = len ? utf8_code_point(text, i, len) : 0xFFFD;
    // C0, DEL, C1 (CSI and the like), the noncharacters XML refuses, and
    // any byte that starts no well-formed sequence.
    if (len == 0 || cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0xFFFE || cp == 0xFFFF) {
      out += kReplacement;
      i += len ? len : 1;
      continue;
    }
    out.append(text, i, len);
    i += len;
  }
  return out;
}

}  // namespace memdiag
