// Number formatting shared by the live table, the analysis's renderers and
// every output format, so a figure reads the same everywhere.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace memdiag {

// A MiB figure with as many decimals as it needs to stay meaningful: 140.4,
// 65.13, 0.256, 0.0636; anything under 0.00005 is "0.00". No unit.
std::string format_mib(double v);
// The same, or "-" when there is no figure.
std::string format_mib(const std::optional<double>& v);
// A MiB figure with an explicit sign: "+8.05", "-0.256", "0.00".
std::string format_signed_mib(double v);
// Fixed decimals: format_fixed(3.14159, 2) == "3.14".
std::string format_fixed(double v, int decimals);
// A ratio with as many digits as it needs: x988, x21.5, x3.97.
std::string format_times(double v);
// A fraction as a percentage with the given decimals: 0.036 -> "3.6%".
std::string format_percent(double fraction, int decimals);

// Text from elsewhere (a report's strings, a file name) made safe to print
// on a terminal as part of one line: control characters (C0 including
// newline and tab, DEL, C1), U+FFFE and U+FFFF, and bytes that are not
// well-formed UTF-8 each become U+FFFD, so a case name cannot move the
// cursor, recolour the terminal, start a line of its own or make the output
// undecodable. Every name printed by either executable goes through it.
std::string printable(const std::string& text);

// The length of the well-formed UTF-8 sequence at text[i] (1 to 4; no
// overlongs, surrogates or code points past U+10FFFF), 0 when there is none.
std::size_t utf8_sequence_length(std::string_view text, std::size_t i);
// The code point of a well-formed sequence of that length at text[i].
char32_t utf8_code_point(std::string_view text, std::size_t i, std::size_t length);

}  // namespace memdiag
