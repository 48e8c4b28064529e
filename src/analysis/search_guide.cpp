// The capacity model as the guide of --find-max-batch (search_guide.hpp).
#include "memdiag/search_guide.hpp"

#include "memdiag/capacity_model.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace memdiag {
namespace {

// The model's largest batch under the search's limit from its tries, when
// it has a line that grows (a flat one says nothing about where to go).
std::optional<std::int64_t> model_answer(const CapacitySearch& s, std::int64_t max_batch) {
  const std::optional<CapacityFit> fit = fit_capacity(capacity_points(s, ""));
  if (!fit) return std::nullopt;
  const CapacityAnswer a = predict_max_batch(*fit, s.limit_mib, /*apply_bounds=*/false);
  if (a.max_batch >= max_batch && a.binding.per_sample_mib <= 0) return std::nullopt;
  return a.max_batch;
}

// The bracket after each of the tries, to see whether the last two halved it.
double width(std::int64_t lo, std::optional<std::int64_t> hi, std::int64_t max_batch) {
  return static_cast<double>(hi.value_or(max_batch + 1) - lo);
}

}  // namespace

std::optional<std::int64_t> next_search_batch(const CapacitySearch& s, SearchBracket b, std::int64_t max_batch,
                                              std::optional<std::int64_t> growth_cap) {
  if (s.tries.empty() || b.lo <= 0 || b.lo >= max_batch) return std::nullopt;
  if (b.hi && *b.hi - b.lo <= 1) return std::nullopt;
  const std::int64_t lower = b.lo + 1;
  const std::int64_t upper = b.hi ? *b.hi - 1 : max_batch;

  // How many of the last tries landed on the same side as the last one, and
  // the bracket's width before the last two (replayed from the tries).
  int streak = 0;
  for (auto it = s.tries.rbegin(); it != s.tries.rend() && it->status == s.tries.back().status; ++it) ++streak;
  std::int64_t lo = 0;
  std::optional<std::int64_t> hi;
  std::vector<double> widths;
  for (const CapacityTry& t : s.tries) {
    if (t.status == RunStatus::kComplete) lo = std::max(lo, t.batch);
    if (t.status == RunStatus::kOom) hi = std::min(hi.value_or(t.batch), t.batch);
    widths.push_back(width(lo, hi, max_batch));
  }
  const bool stalled = b.hi && widths.size() >= 3 &&
                       widths.back() > 0.5 * widths[widths.size() - 3];

  std::int64_t guess;
  const std::optional<std::int64_t> model = model_answer(s, max_batch);
  const bool last_fit = s.tries.back().status == RunStatus::kComplete;
  if (stalled || !model || (b.hi && *model >= *b.hi)) {
    // No model, one proven wrong from above (on the H200 the allocator's
    // reserve at the limit outgrows the one the tries had, and the model
    // keeps aiming past the batches that ran out), or two tries that did
    // not halve the bracket: bisection, or doubling before anything ran
    // out.
    guess = b.hi ? b.lo + (*b.hi - b.lo) / 2 : std::min(2 * b.lo, max_batch);
  } else {
    // Away from the last try's side by a step that doubles with the streak:
    // 0.2% of the batch there, then 0.4%, 0.8%, ...
    guess = *model;
    const double ref = static_cast<double>(last_fit || !b.hi ? b.lo : *b.hi);
    const double step = std::max(1.0, std::ceil(ref * 0.002 * std::ldexp(1.0, std::min(streak, 40) - 1)));
    const auto st = static_cast<std::int64_t>(std::min(step, static_cast<double>(max_batch)));
    guess = last_fit || !b.hi ? std::max(guess, b.lo + st) : std::min(guess, *b.hi - st);
  }
  if (!b.hi && growth_cap) guess = std::min(guess, *growth_cap * b.lo);
  return std::clamp(guess, lower, upper);
}

}  // namespace memdiag
