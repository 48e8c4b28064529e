// Parsing a closed set by its names: the parser walks the values through
// to_string, so it cannot disagree with the writer.
#pragma once

#include <initializer_list>
#include <optional>
#include <string_view>

namespace memdiag {

template <typename E>
std::optional<E> enum_from_string(std::string_view s, std::initializer_list<E> all) {
  for (E e : all) {
    if (s == to_string(e)) return e;
  }
  return std::nullopt;
}

}  // namespace memdiag
