// The capacity model: each phase's peak as a line in the batch.
//
// From two or more batches the line of a phase goes through its peaks at
// the two largest. From one batch it is read off the run's composition: the
// tensor census says what does not grow with the batch (weights, gradients,
// optimizer state); the rest (the batch, activations, retained graphs) is
// taken to grow in proportion. Two phases need more: step()'s own
// temporaries are per parameter, not per sample, and backward has two
// candidate peaks, its start (every activation still held) and its end
// (every gradient made); from one run only the higher one's growth is seen,
// the other's is its lower bound.
#include "memdiag/capacity_model.hpp"

#include "memdiag/analysis.hpp"
#include "memdiag/limits.hpp"
#include "memdiag/parallelism.hpp"
#include "memdiag/phase_shape.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace memdiag {
namespace {

const PhaseShape* find_phase(const std::vector<PhaseShape>& phases, Phase p) {
  for (const PhaseShape& s : phases) {
    if (s.phase == p) return &s;
  }
  return nullptr;
}

// The weights a fully sharded model (FSDP2) gathered in its forward and
// still holds at its end: the census's parameters there above its start.
// They do not grow with the batch.
double gathered_in(const PhaseShape& forward) {
  return forward.start_census && forward.end_census
             ? std::max(0.0, forward.end_census->parameters_mib - forward.start_census->parameters_mib)
             : 0.0;
}

// What a rank whose weights are sharded holds of its units above what its
// forward began with, out of `rise`: up to two units' whole weights (the
// gathered weights and the collective's buffer, as memdiag's ZeRO-3 holds
// them: sharded_capacity.cpp), whatever the batch. From one batch the
// rise cannot tell them from the batch's: an independent check's FSDP2
// rank (an MLP of 60 MiB in units of up to 36 MiB, batch 32) peaked 83.5
// MiB above its forward's start, 0.9 MiB of it the batch's, and was read
// as 2.6 MiB a sample: capacity 59 where its batch 1024 trained in 280 MiB.
double staged_units(double unit_mib, double rise_mib) { return std::min(std::max(0.0, rise_mib), 2 * unit_mib); }

// What does not grow with the batch at a phase boundary: the census's
// weights, gradients and optimizer state and what persists beside them
// (workspaces, buckets), never more than was allocated there; without a
// census the weights as model_ready measured them.
double fixed_at(const std::optional<TensorCensus>& census, double allocated_mib, double weights_mib, double other_mib) {
  return census ? std::min(allocated_mib, fixed_mib(*census) + other_mib) : std::min(allocated_mib, weights_mib);
}

PhaseLine line(Phase phase, PhaseLine::Piece piece, double fixed, double per_sample,
               const std::optional<TensorCensus>& tensors) {
  PhaseLine l;
  l.phase = phase;
  l.piece = piece;
  l.fixed_mib = std::max(0.0, fixed);
  l.per_sample_mib = std::max(0.0, per_sample);
  l.tensors = tensors;
  l.other_mib = tensors ? std::max(0.0, l.fixed_mib - fixed_mib(*tensors)) : 0.0;
  return l;
}

// A quantity of a phase (its peak, or what it holds at its start or end) as
// a line in the batch: through its values at the two largest batches, or
// from one batch through the part that does not grow (floor) and its
// value. Never below the floor at zero samples: a line that would be
// extrapolates a regime the smaller batch was not in, and is anchored there
// instead.
struct Line {
  double fixed = 0;
  double slope = 0;
};

struct Sampled {
  double batch = 0;
  double value = 0;
};

Line line_of(const std::vector<Sampled>& pts, double floor) {
  const Sampled& hi = pts.back();
  Line l;
  if (pts.size() >= 2) {
    const Sampled& lo = pts[pts.size() - 2];
    l.slope = (hi.value - lo.value) / (hi.batch - lo.batch);
    l.fixed = hi.value - l.slope * hi.batch;
    if (l.slope < 0) return Line{std::max(hi.value, lo.value), 0};
    if (l.fixed >= floor) return l;
  }
  l.fixed = std::min(floor, hi.value);
  l.slope = (hi.value - l.fixed) / hi.batch;
  return l;
}

struct Decomposed {
  double batch = 0;
  const PhaseShape* shape = nullptr;
  double start_fixed = 0, end_fixed = 0;
  const PhaseShape* forward = nullptr;  // the same run's forward, for backward's unmeasured temporaries
  bool shards_gradients = false;        // gradients sharded by unit (the run's parallel mode)
  double gathered_mib = 0;              // weights its forward held gathered at its end (the census's rise)
  double unit_mib = 0;                  // one unit's whole weights, where they are sharded (CapacityPoint)
  const BackwardProfile* profile = nullptr;  // backward node by node, at this batch
};

// The lines of a profiled backward, one per node: on the start line (what
// backward began with), the gradients there fixed and the rest of the
// node's rise growing with the batch. The rest is a line through two
// batches' profiles where both have the same nodes (a kernel's temporary
// of its own, a weight-sized buffer, is then seen not to grow), else (or
// where that line would leave less than nothing at zero samples)
// proportional to the batch. Read as the step's batch: under gradient
// accumulation the profile is of one micro-batch, and its rise per sample
// of the step is that micro-batch's over the step's samples. Only the
// lines that are the highest somewhere (the upper envelope) are kept.
// The node's temporary (its peak above what it held when done) where it
// is a workspace of the kernel's own rather than something of the size of
// the gradients it works on (thresholds::kTemporaryScale), else 0. In
// backward the reading since the node before also holds the adds that
// accumulated that node's gradients into their next inputs: its operands
// count too. A forward span's are its module's own inputs and output.
double fixed_temporary(const BackwardProfile& p, std::size_t i, bool backward) {
  if (p.held_mib.size() != p.names.size() || p.operands_mib.size() != p.names.size()) return 0;
  const double temporary = p.rise_mib[i] - p.held_mib[i];
  const double scale = p.operands_mib[i] + (backward && i > 0 ? p.operands_mib[i - 1] : 0.0);
  return temporary > thresholds::kTemporaryScale * scale ? temporary : 0.0;
}

std::vector<PhaseLine> node_lines(Phase phase, const Decomposed* lo, const Decomposed& hi, const Line& start,
                                  const std::optional<TensorCensus>& tensors) {
  const BackwardProfile& h = *hi.profile;
  const bool two = lo != nullptr && lo->profile != nullptr && lo->profile->names == h.names && lo->batch < hi.batch;
  struct Raw {
    double fixed, slope;
    std::size_t i;
    double temporary;
  };
  std::vector<Raw> raw;
  for (std::size_t i = 0; i < h.names.size(); ++i) {
    const double grads = h.gradients_mib[i];
    const double rest_hi = h.rise_mib[i] - grads;
    // From this batch alone: a workspace of the node's own is fixed, the
    // rest grows in proportion (less than nothing where the activations
    // freed by then outweigh what the node adds: the start line's slope
    // carries them).
    double temporary = fixed_temporary(h, i, phase == Phase::kBackward);
    // A sharded rank's units gathered in the span: per parameter.
    const double staged = phase == Phase::kForward ? staged_units(hi.unit_mib, rest_hi - temporary) : 0.0;
    double rest_fixed = temporary + staged, rest_slope = (rest_hi - temporary - staged) / hi.batch;
    if (two) {
      const double rest_lo = lo->profile->rise_mib[i] - lo->profile->gradients_mib[i];
      const double slope = (rest_hi - rest_lo) / (hi.batch - lo->batch);
      // Never below what backward holds at zero samples (the gradients
      // there): a line that would be extrapolates a regime the smaller
      // batch was not in (ResNet-50's from batches 8 and 16: 101 where 105
      // fits, against 104 anchored).
      if (rest_hi - slope * hi.batch >= 0) {
        rest_slope = slope;
        rest_fixed = rest_hi - slope * hi.batch;
        temporary = 0;
      }
    }
    raw.push_back({start.fixed + grads + rest_fixed, start.slope + rest_slope, i, temporary});
  }
  // The upper envelope over batches from one up (the convex hull of the
  // lines): by slope, the highest fixed part of equal slopes; a line is
  // dropped where the next one overtakes the one before it no later than
  // it does; then those highest only below one sample.
  std::sort(raw.begin(), raw.end(), [](const Raw& a, const Raw& b) {
    return a.slope < b.slope || (a.slope == b.slope && a.fixed > b.fixed);
  });
  auto meet = [](const Raw& a, const Raw& b) { return (a.fixed - b.fixed) / (b.slope - a.slope); };
  std::vector<Raw> hull;
  for (const Raw& r : raw) {
    if (!hull.empty() && hull.back().slope == r.slope) continue;
    while (hull.size() >= 2 && meet(hull[hull.size() - 2], r) <= meet(hull[hull.size() - 2], hull.back())) hull.pop_back();
    hull.push_back(r);
  }
  std::size_t first = 0;
  while (first + 1 < hull.size() && meet(hull[first], hull[first + 1]) <= 1) ++first;
  hull.erase(hull.begin(), hull.begin() + static_cast<std::ptrdiff_t>(first));
  std::vector<PhaseLine> out;
  for (const Raw& r : hull) {
    PhaseLine l = line(phase, PhaseLine::Piece::kNode, r.fixed, r.slope, tensors);
    l.node = r.i + 1;
    l.nodes = h.names.size();
    l.node_name = h.names[r.i];
    l.gradients_mib = h.gradients_mib[r.i];
    l.temporary_mib = r.temporary;
    l.other_mib = tensors ? std::max(0.0, l.fixed_mib - fixed_mib(*tensors) - l.gradients_mib - l.temporary_mib) : 0.0;
    out.push_back(std::move(l));
  }
  return out;
}

// The lines of one phase over the completed points that reached it, in
// batch order (at most the two largest are used).
std::vector<PhaseLine> lines_of_phase(Phase phase, const std::vector<Decomposed>& pts, bool& start_assumed) {
  auto series = [&](auto value) {
    std::vector<Sampled> out;
    for (const Decomposed& d : pts) out.push_back({d.batch, value(d)});
    return out;
  };
  const Decomposed& hi = pts.back();
  const PhaseShape& h = *hi.shape;
  std::vector<PhaseLine> out;
  auto add = [&](PhaseLine::Piece piece, Line l, const std::optional<TensorCensus>& tensors) {
    out.push_back(line(phase, piece, l.fixed, l.slope, tensors));
  };
  switch (phase) {
    case Phase::kSetup:
    case Phase::kModelReady:
    case Phase::kOptimizerReady:
      add(PhaseLine::Piece::kWhole, Line{h.peak_mib, 0}, h.end_census);
      break;
    case Phase::kForward: {
      // Everything above the weights and the state grows: the batch and the
      // activations saved for backward. A fully sharded model's gathered
      // weights (the census's parameters at the forward's end above its
      // start: FSDP2) are weights too, whatever the batch.
      const double gathered = gathered_in(h);
      const std::optional<TensorCensus>& census = gathered > 0 ? h.end_census : h.start_census;
      bool peaked_in_spans = false;
      if (hi.profile != nullptr && gathered == 0) {
        // Profiled span by span: a line per span on what the model's call
        // began with (its inputs grow), a span's own workspace fixed.
        const BackwardProfile& f = *hi.profile;
        const Line start =
            line_of(series([](const Decomposed& d) { return d.profile ? d.profile->start_mib : d.shape->start_mib; }),
                    hi.start_fixed);
        for (PhaseLine& l : node_lines(Phase::kForward, pts.size() >= 2 ? &pts[pts.size() - 2] : nullptr, hi, start,
                                       census)) {
          out.push_back(std::move(l));
        }
        const double top = *std::max_element(f.rise_mib.begin(), f.rise_mib.end());
        peaked_in_spans = h.peak_mib <= f.start_mib + top + 0.01;
      }
      // Unprofiled, or the phase's peak outside the model's call (a loss
      // computed by the loop on its outputs): the whole line.
      if (!peaked_in_spans) {
        const double staged = std::max(gathered, staged_units(hi.unit_mib, h.peak_mib - hi.start_fixed));
        add(PhaseLine::Piece::kWhole,
            line_of(series([](const Decomposed& d) { return d.shape->peak_mib; }), hi.start_fixed + staged), census);
      }
      break;
    }
    case Phase::kBackward: {
      if (hi.profile != nullptr) {
        // Profiled node by node: a line per node, then its end (every
        // gradient made: what step() starts from).
        const Line start = line_of(series([](const Decomposed& d) { return d.shape->start_mib; }), hi.start_fixed);
        for (PhaseLine& l : node_lines(Phase::kBackward, pts.size() >= 2 ? &pts[pts.size() - 2] : nullptr, hi, start,
                                       h.start_census)) {
          out.push_back(std::move(l));
        }
        add(PhaseLine::Piece::kEnd, line_of(series([](const Decomposed& d) { return d.shape->end_mib; }), hi.end_fixed),
            h.end_census);
        break;
      }
      // Two candidates: its start (every activation held) and its end (every
      // gradient made), each a line through what it holds, plus the
      // transient above the higher of the two where that one was the higher
      // (per sample, from the largest such batch).
      std::optional<double> start_transient, end_transient;
      // A transient measured only at a batch below the largest (the other
      // end was the higher there) is taken as fixed, not per sample: at a
      // few samples it is mostly what does not grow (autocast's bf16 copies
      // of the weights, a kernel's workspace), and per sample it put 1.00
      // MiB a sample on a job whose batch 2048 held 86 MiB in all (a
      // hostile check's autocast sweep of batches 1, 4 and 2048).
      double start_fixed_transient = 0, end_fixed_transient = 0;
      bool start_below_hi = false, end_below_hi = false;
      for (const Decomposed& d : pts) {
        const PhaseShape& s = *d.shape;
        const double mib = std::max(0.0, s.peak_mib - std::max(s.start_mib, s.end_mib));
        const bool start_side = s.start_mib > s.end_mib;
        // Gradients sharded by unit (FSDP2, ZeRO-2/3): backward holds a
        // unit's unsharded gradients and their copy for the
        // reduce-scatter, per parameter, not per sample. From one run it
        // is taken as up to twice the weights its forward held gathered
        // (a unit's worth: the whole model where the root is the only
        // unit); from two batches the lines see it as what does not grow.
        // An independent check's root-sharded Llama was predicted 273 MiB
        // at batch 1 from batch 4's run, and peaked at 454.2.
        // Where the weights are sharded too, a unit's gathered weights beside
        // its gradients and their copy: three units.
        const double per_parameter =
            d.shards_gradients && pts.size() == 1 ? std::min(mib, std::max(2 * d.gathered_mib, 3 * d.unit_mib)) : 0.0;
        (start_side ? start_transient : end_transient) = (mib - per_parameter) / d.batch;
        (start_side ? start_fixed_transient : end_fixed_transient) = d.batch < hi.batch ? mib : per_parameter;
        // (A later point of the same side overwrites an earlier one's, as
        // the fixed part does: the largest batch's is the one kept.)
        (start_side ? start_below_hi : end_below_hi) = d.batch < hi.batch && mib > 0;
      }
      if (end_below_hi) end_transient.reset();
      if (start_below_hi) start_transient.reset();
      if (!start_transient && !start_below_hi && hi.forward != nullptr) {
        // Its start was never the peak: what backward adds above the
        // activations there (the first gradients of activations) is not
        // measured. Taken as twice forward's largest temporary per sample,
        // which is what it was in the runs where it was measured (alpha,
        // beta, gamma and the tests' own case on the CPU).
        // No more than the forward left held for backward, though: the
        // first gradients are of activations backward has saved, and a
        // forward whose temporaries were a frozen backbone's (made under
        // no gradient and freed within it) saves almost none of them (an
        // independent check's Swin with its backbone frozen was taken
        // at 7.03 MiB a sample, its forward's peak 3.44).
        // Only where backward's end shows the weights mostly frozen: a
        // loop that holds its last outputs until the next forward frees
        // them ends its forward lower than it made, and would be capped
        // too low.
        // A sharded rank's forward temporary is mostly its units' gathered
        // weights (staged_units): backward gathers them again, per
        // parameter, and only the rest is taken per sample.
        const PhaseShape& f = *hi.forward;
        const double forward_temporary = std::max(0.0, f.peak_mib - std::max(f.start_mib, f.end_mib));
        const double staged = staged_units(hi.unit_mib, forward_temporary);
        double assumed = 2 * (forward_temporary - staged) / hi.batch;
        start_fixed_transient = std::max(start_fixed_transient, staged);
        const bool frozen = h.end_census && h.end_census->parameters_mib > 0 &&
                            h.end_census->gradients_mib < thresholds::kFrozenShare * h.end_census->parameters_mib;
        if (frozen) assumed = std::min(assumed, std::max(0.0, f.end_mib - f.start_mib) / hi.batch);
        start_transient = assumed;
        start_assumed = true;
      }
      Line start = line_of(series([](const Decomposed& d) { return d.shape->start_mib; }), hi.start_fixed);
      Line end = line_of(series([](const Decomposed& d) { return d.shape->end_mib; }), hi.end_fixed);
      start.slope += start_transient.value_or(0);
      end.slope += end_transient.value_or(0);
      start.fixed += start_fixed_transient;
      end.fixed += end_fixed_transient;
      add(PhaseLine::Piece::kStart, start, h.start_census);
      add(PhaseLine::Piece::kEnd, end, h.end_census);
      break;
    }
    case Phase::kStep:
    case Phase::kCleanup: {
      // Only what the step still holds of the batch grows; step()'s
      // temporaries are per parameter.
      const double rest = std::max(std::max(0.0, h.start_mib - hi.start_fixed), std::max(0.0, h.end_mib - hi.end_fixed));
      const bool made_state = h.start_census && h.end_census && fixed_mib(*h.end_census) > fixed_mib(*h.start_census);
      add(PhaseLine::Piece::kWhole, line_of(series([](const Decomposed& d) { return d.shape->peak_mib; }), h.peak_mib - rest),
          made_state ? h.end_census : h.start_census);
      break;
    }
  }
  return out;
}

std::vector<PhaseLine> lines_of(const std::vector<const CapacityPoint*>& points, bool& start_assumed) {
  // Per phase, the points (two largest at most) that reached it.
  std::map<Phase, std::vector<Decomposed>> by_phase;
  for (const CapacityPoint* p : points) {
    const PhaseShape* ready = find_phase(p->phases, Phase::kModelReady);
    const double weights = ready ? ready->end_mib : 0.0;
    const PhaseShape* forward = find_phase(p->phases, Phase::kForward);
    const double gathered = forward ? gathered_in(*forward) : 0.0;
    for (const PhaseShape& s : p->phases) {
      by_phase[s.phase].push_back(Decomposed{static_cast<double>(p->batch), &s,
                                             fixed_at(s.start_census, s.start_mib, weights, p->persistent_other_mib),
                                             fixed_at(s.end_census, s.end_mib, weights, p->persistent_other_mib),
                                             forward, p->shards_gradients, gathered, p->gathered_unit_mib,
                                             s.phase == Phase::kBackward && p->backward_profile && !p->shards_gradients
                                                 ? &*p->backward_profile
                                             : s.phase == Phase::kForward && p->forward_profile ? &*p->forward_profile
                                                                                                 : nullptr});
    }
  }
  std::vector<PhaseLine> out;
  for (auto& [phase, pts] : by_phase) {
    // The largest batch and one well below it (at most three quarters of
    // it, else the next): two batches a sample apart, as a search's last
    // tries are, measure noise rather than a slope.
    if (pts.size() > 2) {
      const Decomposed hi = pts.back();
      Decomposed lo = pts[pts.size() - 2];
      for (auto it = pts.rbegin() + 1; it != pts.rend(); ++it) {
        if (4 * it->batch <= 3 * hi.batch) {
          lo = *it;
          break;
        }
      }
      pts = {lo, hi};
    }
    for (PhaseLine& l : lines_of_phase(phase, pts, start_assumed)) out.push_back(std::move(l));
  }
  // Of the rest of each line's fixed part, what the loop holds at every
  // step beside the census (resident_mib: a replay buffer, a target
  // network): said apart from the phase's own (step()'s temporaries read
  // 369.3 MiB where 337.3 were a DQN's buffer and target network, and
  // fused=True was the fix it pointed at).
  double held = 0;
  for (const CapacityPoint* p : points) held = std::max(held, std::min(p->resident_mib, p->persistent_other_mib));
  for (PhaseLine& l : out) {
    l.held_mib = std::min(l.other_mib, held);
    l.other_mib -= l.held_mib;
  }
  return out;
}

}  // namespace

CapacityPoint capacity_point(const Report& r, std::int64_t local_batch, const std::string& source) {
  CapacityPoint p;
  p.batch = local_batch;
  p.status = r.status;
  p.phases = phase_shapes(r);
  p.reserve_overhead_mib = std::max(0.0, peak_reserved_mib(r).value_or(0.0) - peak_allocated_mib(r));
  p.persistent_other_mib = persistent_other_mib(r);
  p.resident_mib = r.model.buffer_bytes ? to_mib(*r.model.buffer_bytes) : 0.0;
  const std::string device_kind = r.config.device.substr(0, r.config.device.find(':'));
  for (const Event& e : r.events) {
    for (const KeptRecord& k : e.kept) {
      if (k.what == KeptRecord::What::kResident && (k.device.empty() || k.device == device_kind)) {
        p.resident_mib += k.mib_per_step;
      }
    }
  }
  for (const Sample& s : r.samples) {
    if (!s.evaluation || s.evaluation->peak_mib < p.evaluation_peak_mib.value_or(0)) continue;
    p.evaluation_peak_mib = s.evaluation->peak_mib;
    p.evaluation_samples = s.evaluation->samples;
  }
  p.shards_gradients = definition(r.config.parallel.mode).shards_gradients;
  if (definition(r.config.parallel.mode).shards_parameters && r.model.largest_module_bytes) {
    p.gathered_unit_mib = to_mib(*r.model.largest_module_bytes);
  }
  // The profile is of one micro-batch: used where the step's forwards
  // (its micro-batches, of the profile's size) make the step's batch.
  if (r.model.backward_profile && !r.model.backward_profile->names.empty()) {
    const BackwardProfile& b = *r.model.backward_profile;
    std::int64_t samples = 0;
    bool sized = true;
    for (const Sample& s : r.samples) {
      if (s.phase != Phase::kForward || s.step != b.step) continue;
      sized = sized && s.samples && *s.samples == b.samples;
      samples += s.samples.value_or(0);
    }
    if (b.samples == local_batch || (sized && samples == local_batch)) p.backward_profile = b;
  }
  // The forward's spans are of one call of the model: used where that call
  // was the step's whole batch (no micro-batches, one call).
  if (r.model.forward_profile && !r.model.forward_profile->names.empty() &&
      r.model.forward_profile->samples == local_batch) {
    p.forward_profile = r.model.forward_profile;
  }
  p.source = source;
  for (const Event& e : r.events) {
    if (e.kind != EventKind::kOom) continue;
    p.failed_phase = e.phase;
    const OomDetails d = e.oom.value_or(OomDetails{});
    if (d.reserved_mib && d.allocated_mib) p.trapped_mib = std::max(0.0, *d.reserved_mib - *d.allocated_mib);
    p.budget_mib = d.limit_mib ? d.limit_mib : r.config.memory_limit_mib ? r.config.memory_limit_mib
                                                                        : r.environment.device_total_mib;
    if (d.allocated_mib && d.request_mib) {
      p.needed_mib = *d.allocated_mib + *d.request_mib;
    } else if (e.mib) {
      p.needed_mib = *e.mib;
    }
  }
  return p;
}

namespace {

CapacityPoint point_of(const CapacityTry& t, double limit_mib, const std::string& source) {
  CapacityPoint p;
  p.batch = t.batch;
  p.status = t.status;
  p.phases = t.phases;
  p.reserve_overhead_mib = t.reserve_overhead_mib.value_or(0);
  p.persistent_other_mib = t.persistent_other_mib.value_or(0);
  if (t.status == RunStatus::kOom) {
    p.budget_mib = limit_mib;
    p.failed_phase = t.failed_phase;
    p.needed_mib = t.needed_mib ? t.needed_mib : std::optional<double>(t.peak_allocated_mib);
    p.trapped_mib = t.reserve_overhead_mib;
  }
  p.source = source;
  return p;
}

}  // namespace

std::vector<CapacityPoint> capacity_points(const CapacitySearch& s, const std::string& source) {
  std::vector<CapacityPoint> out;
  for (const CapacityTry& t : s.tries) out.push_back(point_of(t, s.limit_mib, source));
  return out;
}

std::vector<CapacityPoint> search_capacity_points(const CapacitySearch& s, const std::optional<CapacityPoint>& answer,
                                                  const std::string& source, bool* with_answer) {
  std::vector<CapacityPoint> out = capacity_points(s, source);
  const bool add = answer && s.confirmed.value_or(false) && answer->status == RunStatus::kComplete &&
                   answer->batch == s.max_batch &&
                   std::none_of(out.begin(), out.end(), [&](const CapacityPoint& t) { return t.batch == answer->batch; });
  if (add) out.push_back(*answer);
  if (with_answer != nullptr) *with_answer = add;
  // The fresh process that ran out above the answer: what it held
  // unallocated when it failed is what the lines cannot see (the
  // allocator's rounding, blocks stranded by the schedule), and it bounds
  // them at this limit.
  for (const CapacityTry& t : s.checks) {
    if (t.status == RunStatus::kOom &&
        std::none_of(out.begin(), out.end(), [&](const CapacityPoint& p) { return p.batch == t.batch; })) {
      out.push_back(point_of(t, s.limit_mib, source));
    }
  }
  return out;
}

std::optional<CapacityFit> fit_capacity(const std::vector<CapacityPoint>& points) {
  std::map<std::int64_t, const CapacityPoint*> complete;
  for (const CapacityPoint& p : points) {
    if (p.status == RunStatus::kComplete && !p.phases.empty() && p.batch > 0) complete.emplace(p.batch, &p);
  }
  if (complete.empty()) return std::nullopt;
  CapacityFit fit;
  for (const auto& kv : complete) fit.batches.push_back(kv.first);
  const CapacityPoint& hi = *complete.rbegin()->second;
  std::vector<const CapacityPoint*> ordered;
  for (const auto& kv : complete) ordered.push_back(kv.second);
  fit.lines = lines_of(ordered, fit.backward_start_assumed);
  // An evaluation between steps reaches its peak whatever the training
  // batch: a line of its own, fixed (an independent check's validation at
  // 256 samples between steps of 16 peaked at 401.7 MiB; read as the
  // training forward's, batch 13 was said to fit 350 MiB, and none does).
  const CapacityPoint* evaluated = nullptr;
  for (const CapacityPoint* p : ordered) {
    if (p->evaluation_peak_mib && (evaluated == nullptr || *p->evaluation_peak_mib > *evaluated->evaluation_peak_mib)) {
      evaluated = p;
    }
  }
  if (evaluated != nullptr) {
    PhaseLine e;
    e.piece = PhaseLine::Piece::kEvaluation;
    e.fixed_mib = *evaluated->evaluation_peak_mib;
    e.evaluation_samples = evaluated->evaluation_samples;
    fit.lines.push_back(e);
  }
  // A CUDA limit bounds reserved memory: what the allocator held beyond the
  // live tensors at the largest run's peak is not available to them.
  fit.reserve_overhead_mib = hi.reserve_overhead_mib;
  fit.bounds = points;
  fit.sizes_varied = hi.sizes_varied;
  fit.live_grew = hi.live_grew;
  if (const PhaseShape* f = find_phase(hi.phases, Phase::kForward)) {
    // Less the weights a sharded model gathered and holds (FSDP2's root).
    fit.forward_held_mib = std::max(0.0, f->end_mib - f->start_mib - gathered_in(*f));
  }
  // A run that ran out well past the fitted batches says how much its
  // failing phase needed there: if the phase's highest line says less, that
  // line is raised to meet it, keeping its value at the largest batch
  // fitted. (A run just past them measures noise, and bounds the answer
  // where bounds apply.)
  for (const CapacityPoint& p : points) {
    if (p.status != RunStatus::kOom || !p.failed_phase || !p.needed_mib || 3 * p.batch < 4 * hi.batch) continue;
    PhaseLine* top = nullptr;
    for (PhaseLine& l : fit.lines) {
      if (l.phase == *p.failed_phase && (top == nullptr || l.at(p.batch) > top->at(p.batch))) top = &l;
    }
    if (top == nullptr || top->at(p.batch) >= *p.needed_mib) continue;
    const double at_hi = top->at(hi.batch);
    top->per_sample_mib = (*p.needed_mib - at_hi) / static_cast<double>(p.batch - hi.batch);
    top->fixed_mib = std::max(0.0, at_hi - top->per_sample_mib * static_cast<double>(hi.batch));
    top->other_mib = top->tensors ? std::max(0.0, top->fixed_mib - fixed_mib(*top->tensors)) : 0.0;
  }
  return fit;
}

double needed_mib(const CapacityFit& fit, std::int64_t batch) {
  double need = 0;
  for (const PhaseLine& l : fit.lines) need = std::max(need, l.at(batch));
  return need + fit.reserve_overhead_mib;
}

namespace {

// The largest batch every line keeps under budget less overhead, and the
// line that binds there.
std::pair<std::int64_t, const PhaseLine*> lines_allow(const CapacityFit& fit, double room) {
  std::int64_t best = limits::kMaxBatch;
  const PhaseLine* binding = nullptr;
  for (const PhaseLine& l : fit.lines) {
    std::int64_t allowed = limits::kMaxBatch;
    if (l.fixed_mib > room) {
      allowed = 0;
    } else if (l.per_sample_mib > 0) {
      allowed = static_cast<std::int64_t>(
          std::min(std::floor((room - l.fixed_mib) / l.per_sample_mib), static_cast<double>(limits::kMaxBatch)));
    }
    // Ties go to the higher fixed part: at zero samples it is the floor.
    if (binding == nullptr || allowed < best || (allowed == best && l.fixed_mib > binding->fixed_mib)) {
      best = allowed;
      binding = &l;
    }
  }
  return {best, binding};
}

// What the runs themselves say at a budget: the largest batch that
// completed within it (0: none) and the smallest that ran out under it or a
// smaller one (above the largest batch memdiag runs: none).
std::pair<std::int64_t, std::int64_t> run_bounds(const std::vector<CapacityPoint>& points, double budget_mib) {
  std::int64_t fits = 0, fails = limits::kMaxBatch + 1;
  for (const CapacityPoint& p : points) {
    if (p.status == RunStatus::kComplete && !p.phases.empty()) {
      double peak = p.evaluation_peak_mib.value_or(0);  // its evaluation's too: the run's peak
      for (const PhaseShape& s : p.phases) peak = std::max(peak, s.peak_mib);
      if (peak + p.reserve_overhead_mib <= budget_mib) fits = std::max(fits, p.batch);
    } else if (p.status == RunStatus::kOom && p.budget_mib && *p.budget_mib <= budget_mib + 0.5) {
      fails = std::min(fails, p.batch);
    }
  }
  return {fits, fails};
}

// The three largest completed batches' peaks, where they grow faster than
// the batch: the phase that peaks highest at all three (a step() peak at
// small batches and backward's at large ones would bend the maximum
// without any phase doing so), its tensors' peak (each run's reserve
// varies on its own; the largest run's is kept out of the budget, as the
// lines' is), the middle one below the chord of the other two by more
// than 5%. The largest batch at which the parabola through them stays
// within the budget, past the largest run.
std::optional<std::int64_t> superlinear_answer(const std::vector<CapacityPoint>& points, double budget_mib,
                                               double reserve_mib) {
  std::map<std::int64_t, const CapacityPoint*> complete;
  for (const CapacityPoint& p : points) {
    if (p.status == RunStatus::kComplete && !p.phases.empty() && p.batch > 0) complete[p.batch] = &p;
  }
  if (complete.size() < 3) return std::nullopt;
  std::map<std::int64_t, double> peaks;
  std::optional<Phase> phase;
  for (auto it = complete.rbegin(); it != complete.rend() && peaks.size() < 3; ++it) {
    const PhaseShape* top = nullptr;
    for (const PhaseShape& s : it->second->phases) {
      if (top == nullptr || s.peak_mib > top->peak_mib) top = &s;
    }
    if (phase && top->phase != *phase) return std::nullopt;
    phase = top->phase;
    peaks[it->first] = top->peak_mib;
  }
  budget_mib -= reserve_mib;
  auto it = peaks.rbegin();
  const double x3 = static_cast<double>(it->first), y3 = it->second;
  ++it;
  const double x2 = static_cast<double>(it->first), y2 = it->second;
  ++it;
  const double x1 = static_cast<double>(it->first), y1 = it->second;
  const double chord = y1 + (y3 - y1) * (x2 - x1) / (x3 - x1);
  if (!(y2 < chord - 0.05 * chord) || !(y3 < budget_mib)) return std::nullopt;
  // y = a + b x + c x^2 through the three (divided differences).
  const double d12 = (y2 - y1) / (x2 - x1), d23 = (y3 - y2) / (x3 - x2);
  const double c = (d23 - d12) / (x3 - x1);
  const double b = d12 - c * (x1 + x2);
  const double a0 = y1 - b * x1 - c * x1 * x1;
  if (!(c > 0)) return std::nullopt;
  // The larger root of c x^2 + b x + (a0 - budget) = 0.
  const double disc = b * b - 4 * c * (a0 - budget_mib);
  if (disc < 0) return std::nullopt;
  const double x = (-b + std::sqrt(disc)) / (2 * c);
  if (!(x > x3)) return std::nullopt;
  return static_cast<std::int64_t>(std::min(std::floor(x), static_cast<double>(limits::kMaxBatch)));
}

// One run's range (CapacityAnswer::Caveats::batch_if_all_grows): each line
// that grows with the batch is redrawn through its value at the run's batch
// with the steepest slope the run allows (its part above its fixed part,
// the weights, gradients, optimizer state and the workspaces that persist
// between steps, grows, the allocator's reserve with it) and with the
// shallowest (only forward's held activations grow; the reserve is given
// back). The lines that do not grow (the warm-up, the model's move) are the
// same in both.
void one_run_range(const CapacityFit& fit, double budget_mib, CapacityAnswer& a) {
  const double b0 = static_cast<double>(fit.batches.back());
  const double overhead = fit.reserve_overhead_mib;
  const double held = fit.forward_held_mib.value_or(0.0);
  auto allow = [&](bool all_grows) {
    double best = static_cast<double>(limits::kMaxBatch);
    for (const PhaseLine& l : fit.lines) {
      const double v0 = l.at(fit.batches.back()) + (all_grows ? overhead : 0.0);
      double slope = 0;
      if (l.per_sample_mib > 0) {
        // Nothing held for backward measured (a forward that kept nothing):
        // no shallower slope than the line's is known.
        slope = all_grows ? (v0 - l.fixed_mib + l.temporary_mib) / b0
                          : std::min(l.per_sample_mib, held > 0 ? held / b0 : l.per_sample_mib);
      }
      // At the low end a node's workspace taken as fixed grows too.
      const double fixed = all_grows && slope > 0 ? l.fixed_mib - l.temporary_mib : v0 - slope * b0;
      const double allowed = fixed > budget_mib ? 0.0 : slope > 0 ? std::floor((budget_mib - fixed) / slope) : best;
      best = std::min(best, allowed);
    }
    return static_cast<std::int64_t>(best);
  };
  // Each end widened by the 2% the lines are held to where their own
  // assumption is true (the CPU's runs, where no allocator rounds): gamma
  // small at 30 MiB on the CPU needs 0.4% more than its one run's line
  // says.
  // The runs' own outcomes under this budget bound both ends.
  const auto [fits, fails] = run_bounds(fit.bounds, budget_mib);
  const std::int64_t high = allow(false);
  const std::int64_t widened_high = high >= limits::kMaxBatch ? limits::kMaxBatch
                                                              : std::min(high + (high + 49) / 50, limits::kMaxBatch);
  a.caveats.batch_if_activations_grow = std::max(std::min(widened_high, fails - 1), a.max_batch);
  if (fit.sizes_varied) {
    a.caveats.low_end_unknown = "sizes_varied";
  } else if (fit.live_grew) {
    a.caveats.low_end_unknown = "live_memory_grew";
  } else {
    const std::int64_t low = allow(true);
    const std::int64_t widened_low = low >= limits::kMaxBatch ? low : low - (low + 49) / 50;
    a.caveats.batch_if_all_grows = std::min(std::max(widened_low, fits), a.max_batch);
  }
  a.caveats.reserve_grows_mib = overhead;
  if (held > 0) a.caveats.activations_mib = held;
}

}  // namespace

CapacityAnswer predict_max_batch(const CapacityFit& fit, double budget_mib, bool apply_bounds) {
  CapacityAnswer a;
  a.budget_mib = budget_mib;
  a.fitted_batches = fit.batches;
  a.reserve_overhead_mib = fit.reserve_overhead_mib;
  const auto [best, binding] = lines_allow(fit, budget_mib - fit.reserve_overhead_mib);
  a.max_batch = best;
  if (binding != nullptr) a.binding = *binding;
  if (apply_bounds) {
    const auto [fits, fails] = run_bounds(fit.bounds, budget_mib);
    if (fits > a.max_batch) {
      a.max_batch = fits;
      a.raised_by_run = fits;
    }
    // Out of memory under this budget or a smaller one: it does not fit.
    if (fails <= a.max_batch) {
      a.max_batch = fails - 1;
      a.capped_by_oom = fails;
      a.raised_by_run.reset();
    }
  }
  if (!fit.batches.empty() && a.max_batch > 0) {
    a.extrapolation = static_cast<double>(a.max_batch) / static_cast<double>(fit.batches.back());
  }
  a.caveats.one_run = fit.batches.size() == 1;
  // The assumption matters only where that piece binds.
  a.caveats.backward_start_assumed =
      fit.backward_start_assumed && a.binding.phase == Phase::kBackward && a.binding.piece == PhaseLine::Piece::kStart;
  for (const CapacityPoint& p : fit.bounds) {
    if (p.status == RunStatus::kComplete && !p.phases.empty() && p.reserve_overhead_mib > 0) {
      a.caveats.reserve_min_mib = std::min(a.caveats.reserve_min_mib.value_or(p.reserve_overhead_mib), p.reserve_overhead_mib);
      a.caveats.reserve_max_mib = std::max(a.caveats.reserve_max_mib.value_or(0.0), p.reserve_overhead_mib);
    }
    if (p.status == RunStatus::kOom && p.trapped_mib && *p.trapped_mib > 0) {
      a.caveats.trapped_at_oom_mib = std::max(a.caveats.trapped_at_oom_mib.value_or(0.0), *p.trapped_mib);
    }
  }
  if (a.caveats.trapped_at_oom_mib) {
    a.caveats.batch_if_trapped =
        lines_allow(fit, budget_mib - std::max(fit.reserve_overhead_mib, *a.caveats.trapped_at_oom_mib)).first;
  }
  if (a.caveats.one_run && a.max_batch > 0) one_run_range(fit, budget_mib, a);
  if (a.caveats.reserve_max_mib) {
    a.caveats.batch_at_max_reserve = lines_allow(fit, budget_mib - *a.caveats.reserve_max_mib).first;
    a.caveats.batch_at_min_reserve = lines_allow(fit, budget_mib - *a.caveats.reserve_min_mib).first;
  }
  if (!fit.batches.empty() && a.max_batch > fit.batches.back()) {
    if (const auto b = superlinear_answer(fit.bounds, budget_mib, fit.reserve_overhead_mib); b && *b < a.max_batch) {
      a.caveats.batch_if_superlinear = b;
    }
  }
  return a;
}

}  // namespace memdiag
