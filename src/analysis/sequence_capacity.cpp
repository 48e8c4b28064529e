// Capacity along the sequence length: the longest length of the primary
// run's configuration (its batch) that fits each budget, from the group's
// runs that differ from it only in length (projection::kSequenceSweep).
//
// Measured on the H200 (docs/measurements/h200/sequence-capacity.txt): what
// a transformer holds at the end of forward is a L + b L^2 to the MiB over
// 256..7216 tokens; what backward adds above it is a per-token part (the
// logits' gradients) until one layer's length x length gradients, which
// grow with the square, overtake it. A sweep of short lengths sees only the
// first; the second is then assumed from the scores the sweep measured.
#include "sequence_capacity.hpp"
#include "capacity.hpp"
#include "sweeps.hpp"

#include "memdiag/limits.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace memdiag::detail {
namespace {

const PhaseShape* phase_of(const CapacityPoint& p, Phase phase) {
  for (const PhaseShape& s : p.phases) {
    if (s.phase == phase) return &s;
  }
  return nullptr;
}

struct LengthPoint {
  double length = 0;
  const RunFeatures* run = nullptr;
  double fixed = 0;       // held at forward's start
  double held = 0;        // forward's end less its start
  double forward_extra = 0;   // forward's peak above its ends
  double backward_extra = 0;  // backward's peak above its ends
  std::map<Phase, double> other_peaks;  // the phases around forward and backward
  double reserve_share = 0;
};

// y = a L + b L^2 by least squares, neither part negative.
std::pair<double, double> fit_held(const std::vector<LengthPoint>& pts) {
  std::vector<std::pair<double, double>> xy;
  double s2 = 0, s4 = 0, y1 = 0, y2 = 0;
  for (const LengthPoint& p : pts) {
    xy.emplace_back(p.length, p.held);
    s2 += p.length * p.length;
    s4 += std::pow(p.length, 4);
    y1 += p.held * p.length;
    y2 += p.held * p.length * p.length;
  }
  if (const auto fit = fit_linear_quadratic(xy); fit && fit->first >= 0 && fit->second >= 0) return *fit;
  // One part alone: the one that fits better.
  const double a = s2 > 0 ? y1 / s2 : 0, b = s4 > 0 ? y2 / s4 : 0;
  double ea = 0, eb = 0;
  for (const LengthPoint& p : pts) {
    ea += std::pow(p.held - a * p.length, 2);
    eb += std::pow(p.held - b * p.length * p.length, 2);
  }
  return ea <= eb ? std::pair<double, double>{std::max(0.0, a), 0.0} : std::pair<double, double>{0.0, std::max(0.0, b)};
}

// A line in L through the two longest points' values (flat from one, never
// falling).
struct LengthLine {
  double at_longest = 0, slope = 0, longest = 0;
  double at(double l) const { return at_longest + slope * (l - longest); }
};
template <typename Value>
LengthLine line_of(const std::vector<LengthPoint>& pts, Value value) {
  LengthLine line;
  const LengthPoint& hi = pts.back();
  line.longest = hi.length;
  line.at_longest = value(hi);
  if (pts.size() >= 2) {
    const LengthPoint& lo = pts[pts.size() - 2];
    line.slope = std::max(0.0, (value(hi) - value(lo)) / (hi.length - lo.length));
  }
  return line;
}

struct Model {
  LengthLine fixed;
  double a = 0, b = 0;
  double forward_extra_per_token = 0;
  double backward_linear = 0, backward_quadratic = 0;
  bool quadratic_assumed = false;
  std::map<Phase, LengthLine> others;
  double reserve_share = 0;

  struct At {
    double need = 0;  // allocated, before the reserve
    Phase binding = Phase::kBackward;
    double transient = 0;
  };
  At at(double l) const {
    const double base = fixed.at(l) + a * l + b * l * l;
    At r;
    const double forward = base + forward_extra_per_token * l;
    const double transient = std::max(backward_linear * l, backward_quadratic * l * l);
    const double backward = base + transient;
    r.need = backward;
    r.transient = transient;
    if (forward > backward) {
      r.need = forward;
      r.binding = Phase::kForward;
      r.transient = forward_extra_per_token * l;
    }
    for (const auto& [phase, line] : others) {
      if (line.at(l) > r.need) {
        r.need = line.at(l);
        r.binding = phase;
        r.transient = 0;
      }
    }
    return r;
  }
};

std::optional<Model> model_of(const std::vector<LengthPoint>& pts, const RunFeatures& primary) {
  if (pts.size() < 2) return std::nullopt;
  Model m;
  m.fixed = line_of(pts, [](const LengthPoint& p) { return p.fixed; });
  std::tie(m.a, m.b) = fit_held(pts);
  const LengthPoint &lo = pts.front(), &hi = pts.back();
  m.forward_extra_per_token = hi.forward_extra / hi.length;
  m.backward_linear = lo.backward_extra / lo.length;
  if (hi.backward_extra / hi.length > 1.1 * m.backward_linear) {
    // The longest run's backward grew faster than its length: its own
    // square part is measured.
    m.backward_quadratic = hi.backward_extra / (hi.length * hi.length);
  } else if (primary.model_attention == "math" && primary.model_layers && *primary.model_layers > 0 && m.b > 0) {
    // Not yet seen: assumed as two of the length x length tensors a layer
    // holds. Measured (docs/measurements/h200/backward-scores.txt), the
    // math kernel's backward makes three score-sized tensors at once while
    // the head's vocab-sized ones are freed: net 2.15 of them at 2048 and
    // 2.30 at 2493 for delta medium, so two can promise a few tokens too
    // many; the exact form needs a layer's score size, which reports lack.
    m.backward_quadratic = 2 * m.b / static_cast<double>(*primary.model_layers);
    m.quadratic_assumed = true;
  }
  for (const auto& [phase, peak] : hi.other_peaks) {
    std::vector<LengthPoint> with;
    for (const LengthPoint& p : pts) {
      if (p.other_peaks.count(phase)) with.push_back(p);
    }
    m.others[phase] = line_of(with, [phase = phase](const LengthPoint& p) { return p.other_peaks.at(phase); });
  }
  for (const LengthPoint& p : pts) m.reserve_share = std::max(m.reserve_share, p.reserve_share);
  return m;
}

std::vector<LengthPoint> points_of(const Group& g, const RunFeatures& primary) {
  std::map<std::int64_t, LengthPoint> by_length;
  for (const RunFeatures& r : g.runs) {
    if (r.status != RunStatus::kComplete || !r.id.sequence_length || !same(projection::kSequenceSweep, r.id, primary.id)) {
      continue;
    }
    const CapacityPoint& c = r.capacity_point;
    const PhaseShape* f = phase_of(c, Phase::kForward);
    const PhaseShape* b = phase_of(c, Phase::kBackward);
    if (f == nullptr || b == nullptr) continue;
    LengthPoint p;
    p.length = static_cast<double>(*r.id.sequence_length);
    p.run = &r;
    p.fixed = f->start_mib;
    p.held = std::max(0.0, f->end_mib - f->start_mib);
    p.forward_extra = std::max(0.0, f->peak_mib - std::max(f->start_mib, f->end_mib));
    p.backward_extra = std::max(0.0, b->peak_mib - std::max(b->start_mib, b->end_mib));
    double peak = 0;
    for (const PhaseShape& s : c.phases) {
      peak = std::max(peak, s.peak_mib);
      if (s.phase != Phase::kForward && s.phase != Phase::kBackward) p.other_peaks[s.phase] = s.peak_mib;
    }
    p.reserve_share = peak > 0 ? c.reserve_overhead_mib / peak : 0;
    by_length.emplace(*r.id.sequence_length, p);  // the first run of each length
  }
  std::vector<LengthPoint> out;
  for (auto& kv : by_length) out.push_back(kv.second);
  return out;
}

}  // namespace

// The longest length by replaying a traced run's allocations, in place of
// (or without) the lines' answer.
void replay_length(SequenceCapacity& c, const ScaledTrace& t, const RunFeatures& p) {
  if (t.caching && (!p.device_total_mib || !(*p.device_total_mib > 0))) return;
  const std::int64_t limit = t.caching ? cuda_limit_bytes(c.budget_mib, *p.device_total_mib)
                                       : static_cast<std::int64_t>(c.budget_mib * kMiB);
  c.replay = replay_length_capacity(t, c.budget_mib, limit);
  c.lines_max_sequence_length = c.max_sequence_length;
  c.max_sequence_length = c.replay->max_batch;
  if (!c.replay->failure.completed) c.binding_phase = c.replay->failure.phase;
}

std::vector<SequenceCapacity> predict_sequence_capacity(const Group& g, const RunFeatures& p,
                                                        const std::vector<double>& budgets_mib) {
  const std::vector<LengthPoint> pts = points_of(g, p);
  const std::optional<Model> model = model_of(pts, p);
  std::vector<SequenceCapacity> out;
  // A budget's answer, before either way fills in its lengths.
  auto at_budget = [&p](double budget, CapacityPrediction::Budget source) {
    SequenceCapacity c;
    c.source = source;
    c.budget_mib = budget;
    c.batch = p.local_batch;
    c.preset = p.config.preset;
    c.steps = p.config.steps;
    return c;
  };
  if (!model) {
    // No sweep to fit, but a traced run replays along its length.
    if (!p.length_trace) return out;
    for (const auto& [budget, source] : capacity_budgets(p, budgets_mib)) {
      SequenceCapacity c = at_budget(budget, source);
      c.fitted_lengths = {p.length_trace->length};
      for (const std::int64_t l : p.length_trace->other_lengths) c.fitted_lengths.push_back(l);
      replay_length(c, *p.length_trace, p);
      if (c.replay) {
        c.extrapolation = static_cast<double>(c.max_sequence_length) / static_cast<double>(p.length_trace->length);
        out.push_back(std::move(c));
      }
    }
    return out;
  }
  auto fits = [&](std::int64_t l, double budget) {
    return model->at(static_cast<double>(l)).need * (1 + model->reserve_share) <= budget;
  };
  for (const auto& [budget, source] : capacity_budgets(p, budgets_mib)) {
    SequenceCapacity c = at_budget(budget, source);
    for (const LengthPoint& pt : pts) c.fitted_lengths.push_back(static_cast<std::int64_t>(pt.length));
    // The need grows with the length: the longest that fits, by bisection.
    std::int64_t lo = 0, hi = limits::kMaxSequenceLength + 1;
    while (hi - lo > 1) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      (fits(mid, budget) ? lo : hi) = mid;
    }
    c.max_sequence_length = std::min(lo, limits::kMaxSequenceLength);
    const double at = static_cast<double>(std::max<std::int64_t>(1, c.max_sequence_length));
    const Model::At r = model->at(at);
    c.binding_phase = r.binding;
    c.fixed_mib = model->fixed.at(at);
    c.held_linear_mib = model->a;
    c.held_quadratic_mib = model->b;
    c.transient_mib = r.transient;
    c.transient_quadratic_assumed = model->quadratic_assumed && r.binding == Phase::kBackward &&
                                    model->backward_quadratic * at * at > model->backward_linear * at;
    c.reserve_share = model->reserve_share;
    c.needs_mib = r.need * (1 + model->reserve_share);
    const double held = model->a * at + model->b * at * at;
    c.exponent_at_answer = held > 0 ? (model->a * at + 2 * model->b * at * at) / held : 0;
    c.extrapolation = at / pts.back().length;
    if (p.length_trace) replay_length(c, *p.length_trace, p);
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace memdiag::detail
