// Every closed set has one table of names: its to_string(), a switch with
// no default that returns nullptr after it. -Werror=switch makes a value
// without a name a build error, and everything else (the list of values,
// the parser, the names a help text or an error message lists) is derived
// here by walking the values 0, 1, 2, ... until to_string() has no name,
// so the reader, the writer, the help and the errors cannot disagree.
//
// An enum in this scheme is contiguous from 0 (no explicit values) and has
// its to_string() in its own namespace (found by argument-dependent lookup).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memdiag {

template <typename E>
const std::vector<E>& all_values() {
  static const std::vector<E> values = [] {
    std::vector<E> out;
    // enum class has int as its fixed underlying type: every int is a value.
    for (int i = 0;; ++i) {
      const E e = static_cast<E>(i);
      if (to_string(e) == nullptr) break;
      out.push_back(e);
    }
    return out;
  }();
  return values;
}

// The value spelt s, or nullopt.
template <typename E>
std::optional<E> parse_enum(std::string_view s) {
  for (E e : all_values<E>()) {
    if (s == to_string(e)) return e;
  }
  return std::nullopt;
}

// "a, b, c" (or with another separator), in the enum's order.
template <typename E>
std::string enum_names(const char* separator = ", ") {
  std::string out;
  for (E e : all_values<E>()) out += (out.empty() ? "" : separator) + std::string(to_string(e));
  return out;
}

}  // namespace memdiag
