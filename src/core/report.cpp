#include "memdiag/report.hpp"

#include <algorithm>


namespace memdiag {

// Each to_string is its enum's one table of names (memdiag/enum_names.hpp):
// a switch without a default, so a value added to an enum but not here fails
// to build (-Werror=switch); parsers and name lists are derived from it.

const char* to_string(Phase p) {
  switch (p) {
    case Phase::kSetup: return "setup";
    case Phase::kModelReady: return "model_ready";
    case Phase::kOptimizerReady: return "optimizer_ready";
    case Phase::kForward: return "forward";
    case Phase::kBackward: return "backward";
    case Phase::kStep: return "step";
    case Phase::kCleanup: return "cleanup";
  }
  return nullptr;  // past the last value: all_values() stops here
}

bool is_setup_phase(Phase p) {
  switch (p) {
    case Phase::kSetup:
    case Phase::kModelReady:
    case Phase::kOptimizerReady: return true;
    case Phase::kForward:
    case Phase::kBackward:
    case Phase::kStep:
    case Phase::kCleanup: return false;
  }
  return false;
}

const char* to_string(KeptRecord::What w) {
  switch (w) {
    case KeptRecord::What::kTensor: return "tensor";
    case KeptRecord::What::kGraph: return "graph";
    case KeptRecord::What::kRetainGraph: return "retain_graph";
    case KeptRecord::What::kHeld: return "held";
    case KeptRecord::What::kHeldGraph: return "held_graph";
    case KeptRecord::What::kResident: return "resident";
  }
  return nullptr;
}

const char* to_string(EventKind k) {
  switch (k) {
    case EventKind::kWarmup: return "warmup";
    case EventKind::kOom: return "oom";
    case EventKind::kInterrupted: return "interrupted";
    case EventKind::kError: return "error";
    case EventKind::kNote: return "note";
    case EventKind::kKept: return "kept";
    case EventKind::kModules: return "modules";
    case EventKind::kRecording: return "recording";
  }
  return nullptr;  // past the last value: all_values() stops here
}

const char* to_string(RunStatus s) {
  switch (s) {
    case RunStatus::kComplete: return "complete";
    case RunStatus::kOom: return "oom";
    case RunStatus::kInterrupted: return "interrupted";
    case RunStatus::kFailed: return "failed";
  }
  return nullptr;  // past the last value: all_values() stops here
}

// A trace event's kind in JSON: one letter, since a trace has thousands.
const char* to_string(TraceEvent::Kind k) {
  switch (k) {
    case TraceEvent::Kind::kAlloc: return "a";
    case TraceEvent::Kind::kFree: return "f";
    case TraceEvent::Kind::kPhase: return "p";
    case TraceEvent::Kind::kSegmentAlloc: return "S";
    case TraceEvent::Kind::kSegmentFree: return "F";
    case TraceEvent::Kind::kFailed: return "x";
    case TraceEvent::Kind::kEmptyCache: return "e";
  }
  return nullptr;  // past the last value: all_values() stops here
}

const char* to_string(CapacitySearch::LimitSource s) {
  switch (s) {
    case CapacitySearch::LimitSource::kMemoryLimit: return "memory_limit";
    case CapacitySearch::LimitSource::kDevice: return "device";
  }
  return nullptr;  // past the last value: all_values() stops here
}

Event make_event(EventKind kind, std::optional<Phase> phase, std::optional<int> step, std::string message,
                 std::optional<double> mib) {
  Event e;
  e.kind = kind;
  e.phase = phase;
  e.step = step;
  e.message = std::move(message);
  e.mib = mib;
  return e;
}

double peak_allocated_mib(const Report& r) {
  double peak = 0;
  for (const Sample& s : r.samples) {
    peak = std::max(peak, s.peak_allocated_mib);
    if (s.evaluation) peak = std::max(peak, s.evaluation->peak_mib);  // the run's, not a phase's
  }
  return peak;
}

std::optional<double> peak_reserved_mib(const Report& r) {
  std::optional<double> peak;
  for (const Sample& s : r.samples) {
    if (s.reserved_mib) peak = std::max(peak.value_or(0.0), *s.reserved_mib);
  }
  return peak;
}

}  // namespace memdiag
