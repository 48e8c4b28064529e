#include "memdiag/suggest.hpp"

#include <algorithm>
#include <cctype>

namespace memdiag {
namespace {

char fold(char c) { return c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

std::size_t distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (fold(a[i - 1]) == fold(b[j - 1]) ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string nearest_name(std::string_view typed, const std::vector<std::string>& names) {
  if (typed.size() > 256) return {};  // nothing typed by hand is that long
  std::string best;
  std::size_t best_distance = 0;
  for (const std::string& n : names) {
    const std::size_t d = distance(typed, n);
    if (best.empty() || d < best_distance) best = n, best_distance = d;
  }
  const std::size_t allowed = std::max<std::size_t>(2, best.size() / 3);
  if (!best.empty() && best_distance <= allowed) return best;
  // Too far by edits, but one begins the other: another tool's longer name
  // for the same field (batch_size_per_device where a preset says batch_size).
  for (const std::string& n : names) {
    const std::size_t k = std::min(typed.size(), n.size());
    if (k < 4) continue;
    bool prefix = true;
    for (std::size_t i = 0; i < k && prefix; ++i) prefix = fold(typed[i]) == fold(n[i]);
    if (prefix && (typed.size() > n.size() ? typed[k] : n[k]) == '_') return n;
  }
  return {};
}

std::string did_you_mean(std::string_view typed, const std::vector<std::string>& names) {
  const std::string n = nearest_name(typed, names);
  return n.empty() ? std::string() : " (did you mean " + n + "?)";
}

}  // namespace memdiag
