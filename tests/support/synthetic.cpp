#include "synthetic.hpp"

namespace memdiag::testkit {

Report synth(const Synth& s) {
  Report r;
  r.case_info.name = s.case_name;
  r.case_info.description = "synthetic";
  r.case_info.builtin = true;
  r.config.batch_size_per_device = s.batch;
  r.config.preset = s.preset;
  r.config.steps = s.steps;
  r.config.device = s.device;
  r.producer = Producer{kProducerDiagnostics, "test"};
  r.config.parallel.rank = s.rank;
  r.config.parallel.world_size = s.world_size;
  if (s.world_size > 1) {
    r.config.parallel.mode = ParallelMode::kDdp;
    r.config.parallel.backend = s.device == "cpu" ? "gloo" : "nccl";
  }
  r.model.parameter_bytes = static_cast<std::int64_t>(s.params_mib * kMiB);
  r.model.parameters = r.model.parameter_bytes / 4;
  r.environment.device_name = "synthetic";
  r.environment.torch_version = "0";
  r.environment.host = "test";
  r.environment.start_time = "2026-01-01T00:00:00Z";

  const bool cuda = s.device != "cpu";
  double peak_alloc = 0;
  auto add = [&](Phase phase, std::optional<int> step, double alloc, double peak) {
    Sample x;
    x.phase = phase;
    x.step = step;
    x.allocated_mib = alloc;
    x.peak_allocated_mib = std::max(alloc, peak);
    peak_alloc = std::max(peak_alloc, x.peak_allocated_mib);
    if (cuda) {
      x.reserved_mib = peak_alloc + s.cache_mib;
      x.device_used_mib = *x.reserved_mib + 500;
      x.inactive_split_mib = 0;
    }
    x.elapsed_ms = 1;
    r.samples.push_back(x);
  };
  add(Phase::kModelReady, std::nullopt, s.params_mib, s.params_mib);
  add(Phase::kOptimizerReady, std::nullopt, s.params_mib, s.params_mib);
  double base = s.params_mib;
  for (int k = 0; k < s.steps; ++k) {
    const double fwd = base + s.activations_mib;
    add(Phase::kForward, k, fwd, fwd);
    const double bwd = base + s.params_mib + s.retained_per_step_mib;  // grads; activations freed
    add(Phase::kBackward, k, bwd, fwd + s.params_mib);
    if (k == 0) base += s.optimizer_state_mib;
    const double st = base + s.params_mib + s.retained_per_step_mib;
    add(Phase::kStep, k, st, st);
    base += s.retained_per_step_mib;
    const double noise = (k % 2 ? -1 : 1) * s.noise_mib;
    add(Phase::kCleanup, k, base + noise, st);
  }
  r.status = RunStatus::kComplete;
  return r;
}

}  // namespace memdiag::testkit
