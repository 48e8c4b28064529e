#include "memdiag/phase_shape.hpp"

#include <algorithm>
#include <map>

namespace memdiag {

double fixed_mib(const TensorCensus& c) { return c.parameters_mib + c.gradients_mib + c.optimizer_state_mib; }

std::vector<PhaseShape> phase_shapes(const Report& r) {
  std::map<Phase, PhaseShape> by_phase;
  const Sample* prev = nullptr;
  for (const Sample& s : r.samples) {
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

double persistent_other_mib(const Report& r) {
  // Non-census memory at the end of each cleanup, less the last batch the
  // loop was given where the recorder read it (input_mib): a loop holds its
  // batch in a variable until the next one replaces it, and that grows with
  // the batch (an MLP's 8.7 MiB of inputs at batch 4474, read as a fixed
  // 0.06 MiB from batch 32, put its predicted batch 9% over the budget).
  std::vector<double> rests;
  double inputs = 0;
  for (const Sample& s : r.samples) {
    if (s.phase == Phase::kForward && s.input_mib) inputs = *s.input_mib;
    if (s.phase == Phase::kCleanup && s.tensors) {
      rests.push_back(std::max(0.0, s.allocated_mib - fixed_mib(*s.tensors) - inputs));
    }
  }
  if (rests.empty()) return 0;
  const double growth = rests.size() >= 2 ? (rests.back() - rests.front()) / static_cast<double>(rests.size() - 1) : 0.0;
  return std::max(0.0, rests.front() - std::max(0.0, growth));
}

}  // namespace memdiag
