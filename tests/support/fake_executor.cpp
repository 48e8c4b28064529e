#include "fake_executor.hpp"

namespace memdiag::testkit {
namespace {

constexpr std::int64_t kMiBytes = 1024 * 1024;

Sample sample(Phase phase, std::optional<int> step, double end, double peak, double weights) {
  Sample s;
  s.phase = phase;
  s.step = step;
  s.allocated_mib = end;
  s.peak_allocated_mib = peak;
  s.tensors = TensorCensus{weights, 0, 0};
  return s;
}

TraceEvent event(TraceEvent::Kind kind, std::int64_t bytes = 0, std::int64_t id = 0) {
  TraceEvent e;
  e.kind = kind;
  e.bytes = bytes;
  e.id = id;
  return e;
}

// The pass the tracking allocator would record: the weights, then a step's
// activations made and freed.
TracePass pass(const Job& job, std::int64_t batch) {
  TracePass p;
  p.batch = batch;
  p.step_samples = {batch};
  p.events.push_back(event(TraceEvent::Kind::kAlloc, static_cast<std::int64_t>(job.weights_mib * kMiBytes)));
  TraceEvent forward = event(TraceEvent::Kind::kPhase);
  forward.phase = Phase::kForward;
  forward.step = 0;
  p.events.push_back(forward);
  p.events.push_back(
      event(TraceEvent::Kind::kAlloc, static_cast<std::int64_t>(job.per_sample_mib * kMiBytes) * batch));
  p.events.push_back(event(TraceEvent::Kind::kFree, 0, 1));
  return p;
}

}  // namespace

Report Job::report(std::int64_t batch, double limit_mib, bool traced) const {
  Report r;
  r.case_info.name = "job";
  r.config.batch_size_per_device = static_cast<int>(batch);
  r.config.steps = 1;
  r.config.device = "cpu";
  r.config.memory_limit_mib = limit_mib;
  const double w = weights_mib + extra_mib;
  const double held = w + per_sample_mib * static_cast<double>(batch);
  const bool fit = fits(batch, limit_mib);
  if (phases) {
    r.samples.push_back(sample(Phase::kModelReady, std::nullopt, w, w, weights_mib));
    r.samples.push_back(sample(Phase::kOptimizerReady, std::nullopt, w, w, weights_mib));
    if (fit) {
      r.samples.push_back(sample(Phase::kForward, 0, held, held, weights_mib));
      r.samples.push_back(sample(Phase::kBackward, 0, w, held, weights_mib));
      r.samples.push_back(sample(Phase::kStep, 0, w, w, weights_mib));
      r.samples.push_back(sample(Phase::kCleanup, 0, w, w, weights_mib));
    }
  }
  if (!fit) {
    Event e = make_event(EventKind::kOom, Phase::kForward, 0, "out of memory", held);
    r.events.push_back(e);
  }
  r.status = fit ? RunStatus::kComplete : RunStatus::kOom;
  if (traced && fit) {
    AllocationTrace t;
    t.allocator = "cpu-tracking-allocator";
    t.limit_bytes = static_cast<std::int64_t>(limit_mib * kMiBytes);
    t.passes = {pass(*this, batch), pass(*this, batch / 2)};
    r.allocation_trace = t;
  }
  return r;
}

}  // namespace memdiag::testkit
