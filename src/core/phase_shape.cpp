#include "memdiag/phase_shape.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace memdiag {

double fixed_mib(const TensorCensus& c) { return c.parameters_mib + c.gradients_mib + c.optimizer_state_mib; }

std::vector<PhaseShape> phase_shapes(const Report& r) {
  std::map<Phase, PhaseShape> by_phase;
  // A sample that carries an evaluation may still hold what it left when
  // its forward returned (its output, freed a moment later: the CPU
  // probe's next phase sees it, 125 MiB of a GPT-2's evaluation logits on
  // a training forward of 2 samples): its phase is read from the others
  // where there are some. Their peak is the evaluation's own line.
  std::set<Phase> clean;
  for (const Sample& s : r.samples) {
    if (!s.evaluation) clean.insert(s.phase);
  }
  const Sample* prev = nullptr;
  for (const Sample& s : r.samples) {
    if (s.evaluation && clean.count(s.phase)) {
      prev = &s;
      continue;
    }
    PhaseShape shape;
    shape.phase = s.phase;
    shape.peak_mib = s.peak_allocated_mib;
    shape.end_mib = s.allocated_mib;
    shape.end_census = s.tensors;
    // The first sample begins from nothing the run made (the warm-up's
    // workspaces are counted in what it reads).
    shape.start_mib = prev ? prev->allocated_mib : 0.0;
    shape.start_census = prev ? prev->tensors : std::optional<TensorCensus>(TensorCensus{});
    auto [it, fresh] = by_phase.emplace(s.phase, shape);
    // Later occurrences win ties: a retained graph's last step is its peak.
    if (!fresh && shape.peak_mib >= it->second.peak_mib) it->second = shape;
    prev = &s;
  }
  std::vector<PhaseShape> out;
  for (const auto& [phase, shape] : by_phase) out.push_back(shape);
  return out;
}

std::vector<std::pair<int, double>> beyond_census_at_cleanups(const Report& r) {
  std::vector<std::pair<int, double>> out;
  for (const Sample& s : r.samples) {
    if (s.phase == Phase::kCleanup && s.step && s.tensors) out.emplace_back(*s.step, s.allocated_mib - fixed_mib(*s.tensors));
  }
  return out;
}

namespace {

// The walk's "held": what the loop holds of a step at its cleanups (the
// last kept event's), 0 where the report has none.
double walked_held_mib(const Report& r) {
  double held = 0;
  for (const Event& e : r.events) {
    if (e.kind != EventKind::kKept) continue;
    for (const KeptRecord& k : e.kept) {
      if (k.what == KeptRecord::What::kHeld) held = k.mib_per_step;
    }
  }
  return held;
}

}  // namespace

double held_at_cleanups_mib(const Report& r) {
  const double held = walked_held_mib(r);
  double inputs = 0;
  for (const Sample& s : r.samples) {
    if (s.phase == Phase::kForward && s.input_mib) inputs = *s.input_mib;
  }
  return std::max(held, inputs);
}

double persistent_other_mib(const Report& r) {
  // Non-census memory at the end of each cleanup, less what of the step the
  // loop still holds there: a loop keeps its batch and its last outputs in
  // variables until the next step replaces them, and those grow with the
  // batch. The recorder's walks measure it (the kept event's "held": a
  // Llama's logits and ids, 17.6 MiB at batch 16, read as fixed put its
  // predicted batch 15% over the budget); else the forward's inputs
  // (input_mib: an MLP's 8.7 MiB of inputs at batch 4474, read as a fixed
  // 0.06 MiB from batch 32, put it 9% over).
  const double held = walked_held_mib(r);
  std::vector<double> rests;
  double inputs = 0;
  for (const Sample& s : r.samples) {
    if (s.phase == Phase::kForward && s.input_mib) inputs = *s.input_mib;
    if (s.phase == Phase::kCleanup && s.tensors) {
      rests.push_back(std::max(0.0, s.allocated_mib - fixed_mib(*s.tensors) - std::max(held, inputs)));
    }
  }
  if (rests.empty()) return 0;
  const double growth = rests.size() >= 2 ? (rests.back() - rests.front()) / static_cast<double>(rests.size() - 1) : 0.0;
  return std::max(0.0, rests.front() - std::max(0.0, growth));
}

}  // namespace memdiag
