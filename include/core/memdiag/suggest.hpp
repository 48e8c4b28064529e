// "Did you mean": the name of a closed set nearest to what was typed, for
// messages that list what is allowed (a cause, a field, a flag's value).
#pragma once

#include "memdiag/enum_names.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace memdiag {

// The name nearest to `typed` by edit distance, '-' and '_' and case taken
// as equal, when it is near enough to be what was meant (at most a third
// of its length, at least 2, apart); empty otherwise.
std::string nearest_name(std::string_view typed, const std::vector<std::string>& names);

// " (did you mean retained_graph?)", or empty.
std::string did_you_mean(std::string_view typed, const std::vector<std::string>& names);

template <typename E>
std::string did_you_mean_enum(std::string_view typed) {
  std::vector<std::string> names;
  for (E e : all_values<E>()) names.emplace_back(to_string(e));
  return did_you_mean(typed, names);
}

}  // namespace memdiag
