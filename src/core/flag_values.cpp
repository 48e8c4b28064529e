#include "memdiag/flag_values.hpp"

#include "memdiag/errors.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <sstream>

namespace memdiag {
namespace {

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, ',')) out.push_back(item);
  if (!text.empty() && text.back() == ',') out.emplace_back();
  return out;
}

}  // namespace

std::vector<int> parse_count_list(const std::string& flag, const std::string& text, std::int64_t lo,
                                  std::int64_t hi) {
  std::vector<int> out;
  for (std::int64_t v : parse_integer_list(flag, text, lo, std::min<std::int64_t>(hi, INT32_MAX))) {
    out.push_back(static_cast<int>(v));
  }
  return out;
}

std::vector<std::int64_t> parse_integer_list(const std::string& flag, const std::string& text, std::int64_t lo,
                                             std::int64_t hi) {
  if (text.empty()) throw UsageError(flag + ": empty; give a number or a comma-separated list");
  std::vector<std::int64_t> out;
  for (const std::string& item : split(text)) {
    const bool digits = !item.empty() && item.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || (item.size() > 1 && item[0] == '0')) {
      if (!item.empty() && item[0] == '-') {
        throw UsageError(flag + ": must be at least " + std::to_string(lo) + ", got " + item);
      }
      throw UsageError(flag + ": '" + item + "' is not a whole number in decimal" +
                       (item.empty() ? " (empty item in '" + text + "')" : std::string()));
    }
    // Longer than hi's digits is over hi, and would not fit in 64 bits.
    if (item.size() > std::to_string(hi).size()) {
      throw UsageError(flag + ": must be at most " + std::to_string(hi) + ", got " + item);
    }
    const std::int64_t v = std::stoll(item);
    if (v < lo) throw UsageError(flag + ": must be at least " + std::to_string(lo) + ", got " + item);
    if (v > hi) throw UsageError(flag + ": must be at most " + std::to_string(hi) + ", got " + item);
    out.push_back(v);
  }
  return out;
}

double parse_decimal(const std::string& flag, const std::string& text, double lo, double hi) {
  const auto dot = text.find('.');
  const std::string whole = text.substr(0, dot), fraction = dot == std::string::npos ? "" : text.substr(dot + 1);
  const bool digits = !whole.empty() && whole.find_first_not_of("0123456789") == std::string::npos &&
                      (dot == std::string::npos ||
                       (!fraction.empty() && fraction.find_first_not_of("0123456789") == std::string::npos));
  if (!digits || whole.size() > 18) {
    throw UsageError(flag + ": '" + text + "' is not a decimal number" + (text.empty() ? " (empty)" : ""));
  }
  const double v = std::stod(text);
  auto fmt = [](double x) {
    std::ostringstream os;
    os << x;
    return os.str();
  };
  if (v < lo) throw UsageError(flag + ": must be at least " + fmt(lo) + ", got " + text);
  if (v > hi) throw UsageError(flag + ": must be at most " + fmt(hi) + ", got " + text);
  return v;
}

std::vector<std::string> parse_name_list(const std::string& flag, const std::string& text) {
  if (text.empty()) throw UsageError(flag + ": empty; give a name or a comma-separated list");
  std::vector<std::string> out = split(text);
  for (const std::string& item : out) {
    if (item.empty()) throw UsageError(flag + ": empty item in '" + text + "'");
  }
  return out;
}

}  // namespace memdiag
