// Numbers and names as a flag spells them: plain decimals and
// comma-separated lists, each refusal a UsageError naming the flag. Both
// executables' flag parsers read their values through these.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace memdiag {

// "1,4,1024" -> {1, 4, 1024}: decimal only (no sign, no leading zero, so
// "010" is not a silent 8), each in [lo, hi]; an empty list or item is an
// error. Throws UsageError naming the flag.
std::vector<int> parse_count_list(const std::string& flag, const std::string& text, std::int64_t lo,
                                  std::int64_t hi);
// The same for 64-bit values (a seed): hi may be up to 2^62.
std::vector<std::int64_t> parse_integer_list(const std::string& flag, const std::string& text, std::int64_t lo,
                                             std::int64_t hi);
// One decimal number as a flag takes it: digits with an optional fraction
// ("4096", "0.5"), no sign, exponent, hex, "inf" or "nan", in [lo, hi].
// Throws UsageError naming the flag.
double parse_decimal(const std::string& flag, const std::string& text, double lo, double hi);

// "alpha,beta" -> {"alpha", "beta"}; empty items are an error.
std::vector<std::string> parse_name_list(const std::string& flag, const std::string& text);

}  // namespace memdiag
