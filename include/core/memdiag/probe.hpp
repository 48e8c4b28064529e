// The one interface every memory probe implements. Probes know how to read a
// device's memory; they know nothing of phases, steps or reports.
#pragma once

#include "memdiag/report.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace memdiag {

struct ProbeReading {
  double allocated_mib = 0;
  std::optional<double> reserved_mib;
  std::optional<double> device_used_mib;
  double peak_allocated_mib = 0;  // since the last reset_peak()
  std::optional<double> inactive_split_mib;
  std::optional<std::int64_t> alloc_retries;  // since the run's start (CUDA)
  std::optional<double> process_device_mib;
  // The host: this process's resident set and the page-locked memory the
  // CUDA host allocator holds (pinned copies; empty without CUDA).
  std::optional<double> host_resident_mib;
  std::optional<double> host_pinned_mib;
};

class MemoryProbe {
 public:
  virtual ~MemoryProbe() = default;
  // Short identifier written to reports: "cuda-caching-allocator", "cpu-tracking-allocator".
  virtual std::string name() const = 0;
  // Reads the counters now. Implementations wait for queued device work first,
  // so the figures describe the phase that just ended, not part of it.
  virtual ProbeReading read() = 0;
  virtual void reset_peak() = 0;
  // Allocated bytes now and their peak since the last reset_peak(), from
  // the allocator's own counts alone: no synchronisation, no device or host
  // query. For readings inside a phase, where a hook runs at each autograd
  // node (CUDA's counts are of requests as the host made them, which is
  // when the allocator must find the memory). Empty where a probe cannot.
  virtual std::optional<std::pair<std::int64_t, std::int64_t>> allocator_bytes() { return std::nullopt; }
  // Between the runs of a sweep in one process: frees the kernel libraries'
  // workspaces, hands every cached but free block back, and resets the peak
  // and the accumulated statistics, so the next run's warm-up starts from
  // what a fresh process holds.
  virtual void reset_between_runs() = 0;
  // After an out-of-memory error: what the allocator recorded when the
  // failing request was refused (then forgotten). Empty when it recorded
  // nothing.
  virtual std::optional<OomDetails> take_oom_details() { return std::nullopt; }
};

}  // namespace memdiag
