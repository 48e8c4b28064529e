#include "memdiag/recorder.hpp"

#include <algorithm>

namespace memdiag {

Recorder::Recorder(MemoryProbe& probe) : probe_(probe) {
  // A loop of one's own unless its caller says otherwise (the harness
  // names memory_diagnostics).
  report_.producer = Producer{kProducerRecorder, MEMDIAG_VERSION};
  restart_phase();
}

void Recorder::restart_phase() {
  probe_.reset_peak();
  carried_peak_mib_ = 0;
  phase_start_ = std::chrono::steady_clock::now();
}

void Recorder::begin_step(int step) {
  step_ = step;
  restart_phase();
}

const Sample& Recorder::mark(Phase phase, std::optional<TensorCensus> census, std::optional<int> micro_batch,
                             std::optional<double> loss) {
  // Read before taking the time so that the device synchronisation inside the
  // probe is counted in this phase: kernels queued here finish here.
  const ProbeReading r = probe_.read();
  const auto now = std::chrono::steady_clock::now();
  Sample s;
  s.phase = phase;
  s.step = step_;
  s.allocated_mib = r.allocated_mib;
  s.reserved_mib = r.reserved_mib;
  s.device_used_mib = r.device_used_mib;
  s.peak_allocated_mib = std::max({r.peak_allocated_mib, r.allocated_mib, carried_peak_mib_});
  s.inactive_split_mib = r.inactive_split_mib;
  s.alloc_retries = r.alloc_retries;
  s.process_device_mib = r.process_device_mib;
  s.host_resident_mib = r.host_resident_mib;
  s.host_pinned_mib = r.host_pinned_mib;
  s.elapsed_ms = std::chrono::duration<double, std::milli>(now - phase_start_).count();
  s.tensors = census;
  s.micro_batch = micro_batch;
  s.loss = loss;
  report_.samples.push_back(std::move(s));
  if (listener_) listener_(report_.samples.back());
  restart_phase();
  return report_.samples.back();
}

void Recorder::note_inputs(std::int64_t samples, std::optional<std::int64_t> tokens) {
  if (report_.samples.empty()) return;
  report_.samples.back().samples = samples;
  report_.samples.back().tokens = tokens;
}

void Recorder::add_event(Event event) { report_.events.push_back(std::move(event)); }

void Recorder::add_event(EventKind kind, const std::string& message, std::optional<double> mib) {
  Event e;
  e.kind = kind;
  e.step = step_;
  e.message = message;
  e.mib = mib;
  add_event(std::move(e));
}

Report Recorder::finish(RunStatus status) {
  report_.status = status;
  report_.schema_version = kSchemaVersion;
  return report_;
}

}  // namespace memdiag
