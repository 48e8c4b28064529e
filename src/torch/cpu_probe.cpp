#include "memdiag/probes.hpp"
#include "memdiag/errors.hpp"
#include "memdiag/host_memory.hpp"
#include "build_config.hpp"
#include "memdiag/report.hpp"
#include "memdiag/tracking_allocator.hpp"

namespace memdiag {
namespace {

// CPU has no caching allocator and no device: reserved, device and NVML
// fields stay empty rather than being invented.
class CpuProbe final : public MemoryProbe {
 public:
  CpuProbe() : alloc_(CpuTrackingAllocator::install()) {}
  std::string name() const override { return "cpu-tracking-allocator"; }
  ProbeReading read() override {
    ProbeReading r;
    r.allocated_mib = to_mib(alloc_.current_bytes());
    r.peak_allocated_mib = to_mib(alloc_.peak_bytes());
    r.host_resident_mib = host_resident_mib();
    return r;
  }
  void reset_peak() override { alloc_.reset_peak(); }
  std::optional<std::pair<std::int64_t, std::int64_t>> allocator_bytes() override {
    return std::make_pair(alloc_.current_bytes(), alloc_.peak_bytes());
  }
  // The tracking allocator caches nothing; only the peak carries over.
  void reset_between_runs() override { alloc_.reset_peak(); }
  std::optional<OomDetails> take_oom_details() override {
    const auto refusal = alloc_.take_refusal();
    if (!refusal) return std::nullopt;
    OomDetails d;
    d.request_mib = to_mib(refusal->request_bytes);
    d.limit_mib = to_mib(refusal->limit_bytes);
    d.allocated_mib = to_mib(refusal->in_use_bytes);
    return d;
  }

 private:
  CpuTrackingAllocator& alloc_;
};

}  // namespace

std::unique_ptr<MemoryProbe> make_cpu_probe() { return std::make_unique<CpuProbe>(); }

#ifndef MEMDIAG_HAVE_CUDA
bool cuda_probe_compiled() { return false; }
void empty_device_cache(const c10::Device&) {}
std::unique_ptr<MemoryProbe> make_cuda_probe(int) {
  throw Error("this memdiag was built against LibTorch without CUDA");
}
std::int64_t cuda_set_memory_limit(int, double) {
  throw Error("this memdiag was built against LibTorch without CUDA");
}
CudaDeviceInfo cuda_device_info(int) {
  throw Error("this memdiag was built against LibTorch without CUDA");
}
std::optional<double> nvml_process_mib(const std::string&) { return std::nullopt; }
std::optional<std::string> nvml_driver_version() { return std::nullopt; }
#endif

}  // namespace memdiag
