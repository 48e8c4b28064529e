// Capacity where the steps' size varied: the rate of memory per unit of a
// step's size, in samples and in tokens, and the largest step that fits a
// budget in the unit memory follows. A job with dynamic batching holds its
// tokens per step nearly constant while its samples vary eightfold: its
// memory follows the tokens, and a per-sample figure read off one step
// would be wrong by the spread of the samples.
#include "step_capacity.hpp"
#include "capacity.hpp"
#include "decide.hpp"

#include <algorithm>
#include <cmath>

namespace memdiag {

const char* to_string(StepSizeCapacity::Unit u) {
  switch (u) {
    case StepSizeCapacity::Unit::kSamples: return "samples";
    case StepSizeCapacity::Unit::kTokens: return "tokens";
  }
  return nullptr;  // past the last value: all_values() stops here
}

namespace detail {
namespace {

struct StepPoint {
  double size = 0;
  double need_mib = 0;  // the step's forward/backward peak above what it started with
  double base_mib = 0;  // what it started with
  double peak_mib = 0;
  double samples = 0;   // its samples, where tokens are the size and the samples are known
  bool backward_peaks = false;  // its peak is in backward (above the forward's end)
};

// need = intercept + rate x tokens + per_length x tokens x length (length:
// tokens over samples), least squares, where the lengths span half again
// and the length's term is real: positive, at least 5% of the rate at the
// longest step, and each step's own rate (its need above the intercept and
// the length's part, over its tokens) at least twice as steady as without
// it. None otherwise.
//
// Three steps fit three terms exactly, which says nothing: from three the
// intercept is given, and the rate and the length's term are fitted with a
// step left to tell them. Given as nothing (a step whose peak is its
// forward's end, before any gradient: an independent check's OPT, its
// rates rising 0.1847 to 0.1905 MiB a token with the length, was told 3686
// tokens where 3104 fit) or as the gradients every step makes (a peak in
// backward: the same check's T5, whose 35.8 MiB of gradients made its
// steps' rates look scattered, 0.237, 0.223, 0.227 at lengths 96, 128,
// 192, read as linear and told 4068 tokens where 2504 fit), whichever
// leaves the steadier rates. There each fit has two terms, and the
// length's is also taken where it is as steady as the line without it and
// that line starts below the gradients (a need bending up with the length
// reads as a line that starts too low: the T5's, 4.9 MiB under 35.8).
// From more steps the same, unless they span five sizes or more and the
// three-term fit earns its third term (fit_with_length).
struct LengthFit {
  double intercept = 0, rate = 0, per_length = 0, spread = 0, steepest = 0;
};

std::optional<LengthFit> length_fit_at(const std::vector<StepPoint>& pts, std::optional<double> given) {
  // Normal equations of [1, T, T L], solved by Cramer's rule (an intercept
  // given: its row and column an identity's, its value 0, the need less it).
  const double known = given.value_or(0.0);
  double m[3][3] = {}, v[3] = {};
  for (const StepPoint& p : pts) {
    const double x[3] = {given ? 0.0 : 1.0, p.size, p.size * p.size / p.samples};
    for (int i = 0; i < 3; ++i) {
      v[i] += x[i] * (p.need_mib - known);
      for (int j = 0; j < 3; ++j) m[i][j] += x[i] * x[j];
    }
  }
  if (given) m[0][0] = 1;
  auto det = [](const double a[3][3]) {
    return a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1]) - a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0]) +
           a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0]);
  };
  const double d = det(m);
  if (std::abs(d) < 1e-12) return std::nullopt;
  double coef[3];
  for (int k = 0; k < 3; ++k) {
    double a[3][3];
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) a[i][j] = j == k ? v[i] : m[i][j];
    }
    coef[k] = det(a) / d;
  }
  LengthFit f{given ? known : std::max(0.0, coef[0]), coef[1], coef[2], 0, 0};
  double longest = 0;
  for (const StepPoint& p : pts) longest = std::max(longest, p.size / p.samples);
  if (f.rate <= 0 || f.per_length <= 0 || f.per_length * longest < 0.05 * f.rate) return std::nullopt;
  double dev = 0;
  for (const StepPoint& p : pts) {
    const double own = (p.need_mib - f.intercept) / p.size - f.per_length * p.size / p.samples;
    f.steepest = std::max(f.steepest, own);
    dev += (own - f.rate) * (own - f.rate);
  }
  f.spread = std::sqrt(dev / static_cast<double>(pts.size())) / f.rate;
  return f;
}

std::optional<LengthFit> fit_with_length(const std::vector<StepPoint>& pts, double spread_without,
                                         double intercept_without, double gradients_mib) {
  if (pts.size() < 3) return std::nullopt;
  double shortest = 0, longest = 0;
  for (const StepPoint& p : pts) {
    if (p.samples <= 0) return std::nullopt;
    const double l = p.size / p.samples;
    shortest = shortest == 0 ? l : std::min(shortest, l);
    longest = std::max(longest, l);
  }
  if (longest < 1.5 * shortest) return std::nullopt;
  std::vector<double> givens{0.0};
  // The gradients only where every step peaked in backward: a peak at the
  // forward's end holds none.
  const bool in_backward = std::all_of(pts.begin(), pts.end(), [](const StepPoint& p) { return p.backward_peaks; });
  if (gradients_mib > 0 && in_backward) givens.push_back(gradients_mib);
  std::optional<LengthFit> best;
  for (const double given : givens) {
    const std::optional<LengthFit> f = length_fit_at(pts, given);
    if (!f) continue;
    const bool below = given > 0 && intercept_without < given && f->spread <= spread_without;
    if (!(2 * f->spread <= spread_without) && !below) continue;
    if (!best || f->spread < best->spread) best = f;
  }
  // The intercept fitted too, where the steps can tell three terms apart:
  // steps of one size measure one need, so it is the sizes that count, and
  // the free fit is taken over the given one only where the small-sample
  // Akaike criterion (AICc) prefers it, its third term paid for. Five
  // distinct sizes at least (the criterion is undefined below): a T5
  // recorded over six steps of four lengths fitted all three terms through
  // them, 8.1 MiB above its gradients and a length term 31% steeper, and
  // was told 2360 tokens where 2504 fit (four steps, the gradients given:
  // 2492); its answer changed with the steps recorded.
  std::vector<StepPoint> sizes;  // one a size, its need the mean of its steps'
  std::vector<double> steps_of;
  for (const StepPoint& p : pts) {
    const auto same = std::find_if(sizes.begin(), sizes.end(), [&](const StepPoint& q) {
      return q.size == p.size && q.samples == p.samples;
    });
    if (same == sizes.end()) {
      sizes.push_back(p);
      steps_of.push_back(1);
    } else {
      double& n = steps_of[static_cast<std::size_t>(same - sizes.begin())];
      same->need_mib = (same->need_mib * n + p.need_mib) / (n + 1);
      n += 1;
    }
  }
  if (sizes.size() < 5) return best;
  const std::optional<LengthFit> free = length_fit_at(pts, std::nullopt);
  if (!free || !(2 * free->spread <= spread_without)) return best;
  if (!best) return free;
  const auto aicc = [&](const LengthFit& f, int terms) {
    double rss = 0;
    for (const StepPoint& p : sizes) {
      const double r = p.need_mib - (f.intercept + f.rate * p.size + f.per_length * p.size * p.size / p.samples);
      rss += r * r;
    }
    const double n = static_cast<double>(sizes.size()), k = terms;
    // A floor for fits through every size: the report's MiB are read to
    // the byte, but a need is the peak's, one block's rounding apart.
    return n * std::log(std::max(rss / n, 1e-6)) + 2 * k + 2 * k * (k + 1) / (n - k - 1);
  };
  return aicc(*free, 3) < aicc(*best, 2) ? free : best;
}

// The most tokens a step of `samples` sequences of one length holds in
// `room` MiB at `rate` a token and `per_length` a token per token of length.
std::int64_t tokens_within(double room, double rate, double per_length, double samples) {
  if (room <= 0) return 0;
  const double q = per_length / samples;
  return static_cast<std::int64_t>(std::floor((-rate + std::sqrt(rate * rate + 4 * q * room)) / (2 * q)));
}

struct UnitFit {
  double rate = 0, steepest = 0, spread = 0;
  double intercept = 0;  // what a step needs whatever its size
};

// need = intercept + rate x size, least squares, where the sizes span at
// least twice over three steps or more (a ramp of batch sizes: the
// gradients backward makes, and a step's own workspaces, do not follow the
// size, and read through zero they made a ResNet's batch-2 step's rate 8x
// its batch-64 step's); through zero otherwise, or where the line would
// start below zero. The spread is the relative RMS deviation of each
// step's own rate (its need above the intercept, over its size) from it.
std::optional<UnitFit> fit(const std::vector<StepPoint>& pts) {
  double sxy = 0, sxx = 0, least = pts.front().size, most = least;
  for (const StepPoint& p : pts) {
    sxy += p.size * p.need_mib;
    sxx += p.size * p.size;
    least = std::min(least, p.size);
    most = std::max(most, p.size);
  }
  if (sxx <= 0 || sxy <= 0) return std::nullopt;
  UnitFit f;
  f.rate = sxy / sxx;
  if (pts.size() >= 3 && most >= 2 * least) {
    const double n = static_cast<double>(pts.size());
    double mx = 0, my = 0;
    for (const StepPoint& p : pts) {
      mx += p.size / n;
      my += p.need_mib / n;
    }
    double num = 0, den = 0;
    for (const StepPoint& p : pts) {
      num += (p.size - mx) * (p.need_mib - my);
      den += (p.size - mx) * (p.size - mx);
    }
    const double rate = den > 0 ? num / den : 0;
    const double intercept = my - rate * mx;
    if (rate > 0 && intercept > 0) {
      f.rate = rate;
      f.intercept = intercept;
    }
  }
  double dev = 0;
  for (const StepPoint& p : pts) {
    const double own = (p.need_mib - f.intercept) / p.size;
    f.steepest = std::max(f.steepest, own);
    dev += (own - f.rate) * (own - f.rate);
  }
  f.spread = std::sqrt(dev / static_cast<double>(pts.size())) / f.rate;
  return f;
}

}  // namespace

std::optional<StepSizeCapacity> step_size_fit(const RunFeatures& p) {
  const bool samples_varied = p.step_samples && p.step_samples->varied();
  const bool tokens_varied = p.step_tokens && p.step_tokens->varied();
  if (!samples_varied && !tokens_varied) return std::nullopt;
  // Each step above the memory that does not follow its size: the
  // weights and the optimizer's state, from the census where the report
  // has one. What the loop holds from one step into the next (the last
  // step's outputs, until the next forward replaces them) grows with the
  // size and belongs to the rate; without a census, the least any step
  // started with stands for it (an overstatement by what the loop holds).
  std::optional<double> fixed;
  if (p.step_optimizer_state_mib) fixed = p.parameter_mib + *p.step_optimizer_state_mib;
  std::vector<StepPoint> by_samples, by_tokens;
  std::optional<double> start = p.baseline_mib;
  if (!fixed) {
    for (const StepFigures& st : p.steps) {
      if (st.cleanup_allocated_mib) fixed = std::min(fixed.value_or(*st.cleanup_allocated_mib), *st.cleanup_allocated_mib);
    }
  }
  const bool skip_first = p.steps.size() >= 4;  // step 0 also pays first calls where others can say
  for (const StepFigures& st : p.steps) {
    const std::optional<double> base = fixed ? fixed : start;
    start = st.cleanup_allocated_mib;
    if (skip_first && st.step == 0) continue;
    if (!base || !st.forward_allocated_mib) continue;
    const double top = std::max(*st.forward_allocated_mib, st.backward_peak_mib.value_or(0));
    const double need = top - *base;
    if (need <= 0) continue;
    if (st.forward_samples && *st.forward_samples > 0) {
      by_samples.push_back({static_cast<double>(*st.forward_samples), need, *base, top});
    }
    if (st.forward_tokens && *st.forward_tokens > 0) {
      by_tokens.push_back({static_cast<double>(*st.forward_tokens), need, *base, top,
                           static_cast<double>(st.forward_samples.value_or(0)),
                           st.backward_peak_mib.value_or(0) > *st.forward_allocated_mib});
    }
  }
  const std::optional<UnitFit> fs = by_samples.size() >= 2 ? fit(by_samples) : std::nullopt;
  const std::optional<UnitFit> ft = by_tokens.size() >= 2 ? fit(by_tokens) : std::nullopt;
  if (!fs && !ft) return std::nullopt;
  // The unit memory follows: the steadier rate (a size that does not vary
  // cannot be told from the other by its rate: tokens where the length is
  // fixed vary as the samples do, and either reads the same).
  const bool tokens = ft && (!fs || ft->spread < fs->spread);
  const UnitFit& f = tokens ? *ft : *fs;
  const std::vector<StepPoint>& pts = tokens ? by_tokens : by_samples;
  StepSizeCapacity base;
  base.unit = tokens ? StepSizeCapacity::Unit::kTokens : StepSizeCapacity::Unit::kSamples;
  base.steps = static_cast<int>(pts.size());
  base.per_unit_mib = f.rate;
  base.per_step_mib = f.intercept;
  base.steepest_per_unit_mib = f.steepest;
  base.spread = f.spread;
  if (tokens && fs) base.other_spread = fs->spread;
  if (!tokens && ft) base.other_spread = ft->spread;
  const std::vector<StepPoint>& others = tokens ? by_samples : by_tokens;
  for (const StepPoint& pt : others) {
    const auto n = static_cast<std::int64_t>(pt.size);
    base.other_least = std::min(base.other_least.value_or(n), n);
    base.other_most = std::max(base.other_most.value_or(n), n);
  }
  base.least = static_cast<std::int64_t>(pts.front().size);
  base.most = base.least;
  base.largest_step_need_mib = pts.front().peak_mib;
  double largest_samples = pts.front().samples;
  // Of the steps of the largest size, the highest peak: steps of one size
  // whose memory followed something else (a seq2seq job's 8 samples at
  // every step, its target lengths varying) peaked up to 332.5 MiB, and
  // the last of them, 220.6, was said as the job's largest step, "it fits".
  for (const StepPoint& pt : pts) {
    const auto size = static_cast<std::int64_t>(pt.size);
    base.least = std::min(base.least, size);
    if (size > base.most || (size == base.most && pt.peak_mib > base.largest_step_need_mib)) {
      base.most = size;
      base.largest_step_need_mib = pt.peak_mib;
      largest_samples = pt.samples;
    }
  }
  // Tokens whose rate grows with the length: the steps' own rates rose
  // with it, not scattered about one rate (a GPT-2's, +10% from its
  // shortest steps to its longest, read as 4% noise, put its answer 13%
  // over the budget).
  if (tokens && base.least != base.most) {
    // The gradients (the census's most): in every step's need whatever
    // its size (the fixed part above is the weights and the state alone).
    double made = p.max_gradient_mib.value_or(0.0);
    for (const StepPoint& pt : pts) made = std::min(made, pt.need_mib);
    if (const std::optional<LengthFit> lf = fit_with_length(pts, f.spread, f.intercept, made)) {
      base.per_unit_mib = lf->rate;
      base.per_step_mib = lf->intercept;
      base.steepest_per_unit_mib = lf->steepest;
      base.spread = lf->spread;
      base.per_token_per_length_mib = lf->per_length;
      base.length_samples = static_cast<std::int64_t>(largest_samples);
    }
  }
  if (tokens && !base.per_token_per_length_mib && largest_samples > 0) {
    for (const StepPoint& pt : pts) {
      if (pt.samples <= 0) continue;
      const double l = pt.size / pt.samples;
      base.shortest_length = std::min(base.shortest_length.value_or(l), l);
      base.longest_length = std::max(base.longest_length.value_or(l), l);
    }
    if (base.longest_length && *base.longest_length < 1.5 * *base.shortest_length) {
      base.length_samples = static_cast<std::int64_t>(largest_samples);
    } else {
      // Lengths that span enough for fit_with_length to tell a length
      // term, which it found none of: measured linear.
      base.shortest_length.reset();
      base.longest_length.reset();
    }
  }
  for (const StepPoint& pt : pts) base.base_mib = std::max(base.base_mib, pt.base_mib + base.per_step_mib);
  // A leak's growth, not one that follows the steps' size (a curriculum's
  // last step held at its cleanup, larger as the lengths rise).
  if (p.growth_significant && p.growth_per_step_mib && !grows_with_size(p) && !walk_saw_no_leak(p)) {
    base.growth_per_step_mib = p.growth_per_step_mib;
  }
  base.recorded_steps = static_cast<int>(p.steps.size());
  return base;
}

std::vector<StepSizeCapacity> predict_step_capacity(const RunFeatures& p, const std::vector<double>& budgets_mib) {
  std::optional<StepSizeCapacity> fitted = step_size_fit(p);
  if (!fitted) return {};
  for (const RunStop& s : p.stops) {
    if (s.kind == EventKind::kOom && s.step) {
      fitted->failed_step = s.step;
      fitted->failed_phase = s.phase;
    }
  }
  std::vector<StepSizeCapacity> out;
  for (const auto& [budget, source] : capacity_budgets(p, budgets_mib)) {
    StepSizeCapacity c = *fitted;
    c.budget_mib = budget;
    c.source = source;
    const double room = budget - c.base_mib;
    if (c.per_token_per_length_mib && c.length_samples && *c.length_samples > 0) {
      const double samples = static_cast<double>(*c.length_samples);
      // Whole sequences: the step's samples, each of one length.
      const std::int64_t n = *c.length_samples;
      c.max_size = tokens_within(room, c.per_unit_mib, *c.per_token_per_length_mib, samples) / n * n;
      c.max_size_steepest = tokens_within(room, c.steepest_per_unit_mib, *c.per_token_per_length_mib, samples) / n * n;
    } else {
      c.max_size = room > 0 ? static_cast<std::int64_t>(std::floor(room / c.per_unit_mib)) : 0;
      c.max_size_steepest = room > 0 ? static_cast<std::int64_t>(std::floor(room / c.steepest_per_unit_mib)) : 0;
      if (c.longest_length && c.length_samples && *c.length_samples > 0 && c.max_size_steepest > c.most) {
        // Every token's memory at the steepest rate at the longest length,
        // growing in proportion to the length: rate x T x (T / (S x L)).
        const double samples = static_cast<double>(*c.length_samples);
        const std::int64_t n = *c.length_samples;
        const auto low = static_cast<std::int64_t>(
            std::floor(std::sqrt(room * samples * *c.longest_length / c.steepest_per_unit_mib)));
        if (low / n * n < c.max_size_steepest) c.max_size_if_all_grows_with_length = low / n * n;
      }
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace detail
}  // namespace memdiag
