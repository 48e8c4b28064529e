// CPU memory accounting: a c10 CPU allocator that counts every byte it hands
// out, so "allocated" and "peak" mean on the CPU what they mean on CUDA.
#pragma once

#include <cstdint>
#include <optional>

namespace memdiag {

// While one lives, CPU tensors this thread allocates are the host's and not
// the simulated device's: counted nowhere and never refused by the limit
// (freed like any other). On the CPU the tracking allocator stands for the
// device, so this is where a model is built before it is copied onto the
// device a unit at a time, as on CUDA, where it is built in host memory.
class HostStaging {
 public:
  HostStaging();
  ~HostStaging();
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;
};

class CpuTrackingAllocator {
 public:
  // Registers the allocator with c10 (once per process; later calls return the
  // same instance). Only tensors allocated after this are counted.
  static CpuTrackingAllocator& install();

  std::int64_t current_bytes() const;
  std::int64_t peak_bytes() const;
  void reset_peak();

  // A simulated smaller memory: an allocation that would take current bytes
  // past the limit throws c10::OutOfMemoryError, as the CUDA allocator does.
  void set_limit(std::optional<std::int64_t> bytes);
  std::optional<std::int64_t> limit() const;

  // The last allocation the limit refused: its size and the bytes in use
  // then. Reading it forgets it.
  struct Refusal {
    std::int64_t request_bytes = 0;
    std::int64_t in_use_bytes = 0;
    std::int64_t limit_bytes = 0;
  };
  std::optional<Refusal> take_refusal();

 private:
  CpuTrackingAllocator() = default;
};

}  // namespace memdiag
