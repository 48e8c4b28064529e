#include "memdiag/probes.hpp"
#include "memdiag/allocation_tracer.hpp"
#include "memdiag/errors.hpp"
#include "memdiag/host_memory.hpp"
#include "memdiag/memory_snapshot.hpp"
#include "memdiag/report.hpp"

#include <ATen/Context.h>
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/cuda/CUDAContextLight.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>

namespace memdiag {
namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throw Error(std::string(what) + ": " + cudaGetErrorString(err));
  }
}

std::string version_string(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

// The caching allocator is set up lazily, at the first CUDA tensor; its
// statistics calls before that fail with "Invalid device argument".
void ensure_cuda_initialised() { at::globalContext().lazyInitDevice(c10::DeviceType::CUDA); }

constexpr auto kAggregate = static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE);

// The allocator's out-of-memory observer fires after its own flush-and-retry
// failed, with its lock released and before the exception is thrown: the
// moment to read its state. It is process-wide, so it is attached once and
// what it saw is kept here until the workload reads it.
std::mutex g_oom_mutex;
std::optional<OomDetails> g_oom;

void on_out_of_memory(int64_t device, size_t request, size_t limit_or_total, size_t device_free) {
  try {
    const auto dev = static_cast<c10::DeviceIndex>(device);
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(dev);
    // cacheInfo takes a zero as "guess from the device's free memory" (the
    // whole free device, not a cached block): one byte asks for the
    // cached blocks alone.
    size_t largest = 1;
    c10::cuda::CUDACachingAllocator::cacheInfo(dev, &largest);
    if (largest <= 1) largest = 0;
    OomDetails d;
    d.request_mib = to_mib(static_cast<std::int64_t>(request));
    d.limit_mib = to_mib(static_cast<std::int64_t>(limit_or_total));
    d.device_free_mib = to_mib(static_cast<std::int64_t>(device_free));
    d.allocated_mib = to_mib(stats.allocated_bytes[kAggregate].current);
    d.reserved_mib = to_mib(stats.reserved_bytes[kAggregate].current);
    d.inactive_split_mib = to_mib(stats.inactive_split_bytes[kAggregate].current);
    d.inactive_split_blocks = stats.inactive_split[kAggregate].current;
    d.largest_free_block_mib = to_mib(static_cast<std::int64_t>(largest));
    d.num_alloc_retries = stats.num_alloc_retries;
    d.num_ooms = stats.num_ooms;
    {
      std::lock_guard<std::mutex> lock(g_oom_mutex);
      g_oom = d;
    }
    capture_oom_snapshot();
  } catch (...) {
    // An observer must not throw into the allocator; the report then lacks
    // the details, not the failure.
  }
}

void attach_oom_observer_once() {
  static std::once_flag once;
  std::call_once(once, [] { c10::cuda::CUDACachingAllocator::attachOutOfMemoryObserver(on_out_of_memory); });
}

class CudaProbe final : public MemoryProbe {
 public:
  explicit CudaProbe(int device) : device_(static_cast<c10::DeviceIndex>(device)) {
    // Initialised first: the observer attaches only to allocators that exist.
    ensure_cuda_initialised();
    attach_oom_observer_once();
    char bus[32] = {0};
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, device) == cudaSuccess) pci_bus_id_ = bus;
  }

  std::string name() const override { return "cuda-caching-allocator"; }

  ProbeReading read() override {
    // Kernels run asynchronously; without this a phase's memory is read
    // before its last kernels have released their temporaries.
    c10::cuda::device_synchronize();
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device_);
    ProbeReading r;
    r.allocated_mib = to_mib(stats.allocated_bytes[kAggregate].current);
    r.peak_allocated_mib = to_mib(stats.allocated_bytes[kAggregate].peak);
    r.reserved_mib = to_mib(stats.reserved_bytes[kAggregate].current);
    r.inactive_split_mib = to_mib(stats.inactive_split_bytes[kAggregate].current);
    r.alloc_retries = stats.num_alloc_retries;
    std::size_t free_b = 0, total_b = 0;
    c10::cuda::CUDAGuard guard(device_);
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
      r.device_used_mib = to_mib(static_cast<std::int64_t>(total_b - free_b));
    }
    if (!pci_bus_id_.empty()) r.process_device_mib = nvml_process_mib(pci_bus_id_);
    r.host_resident_mib = host_resident_mib();
    // Pinned blocks the host allocator holds, in use or cached for reuse:
    // the page-locked RAM the process keeps (offloaded state, pinned copies).
    r.host_pinned_mib = to_mib(at::getHostAllocator(at::kCUDA)->get_stats().allocated_bytes.current);
    return r;
  }

  void reset_peak() override { c10::cuda::CUDACachingAllocator::resetPeakStats(device_); }
  std::optional<std::pair<std::int64_t, std::int64_t>> allocator_bytes() override {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device_);
    return std::make_pair(stats.allocated_bytes[kAggregate].current, stats.allocated_bytes[kAggregate].peak);
  }

  std::optional<OomDetails> take_oom_details() override {
    std::lock_guard<std::mutex> lock(g_oom_mutex);
    std::optional<OomDetails> d = g_oom;
    g_oom.reset();
    return d;
  }

  void reset_between_runs() override {
    c10::cuda::device_synchronize();
    // The cuBLAS/cuBLASLt workspaces go too, so that the next run's warm-up
    // makes them again in the order a fresh process does. Kept, with only
    // the cache emptied, they left the next run's blocks in other places: on
    // the H200 delta's fused run at 512 after a math run read 8 MiB apart
    // from a fresh process, and equal with this. (A later run's new segments
    // can still sit at other addresses than a fresh process's, which moves a
    // few MiB in Python's own process too: README, "Isolation".)
    at::cuda::clearCublasWorkspaces();
    c10::cuda::CUDACachingAllocator::emptyCache();
    c10::cuda::CUDACachingAllocator::resetPeakStats(device_);
    c10::cuda::CUDACachingAllocator::resetAccumulatedStats(device_);
    // A run's pinned blocks (offloaded state) would otherwise stay cached
    // into the next run's host figures.
    at::getHostAllocator(at::kCUDA)->empty_cache();
  }

 private:
  c10::DeviceIndex device_;
  std::string pci_bus_id_;
};

}  // namespace

bool cuda_probe_compiled() { return true; }

std::unique_ptr<MemoryProbe> make_cuda_probe(int device_index) {
  return std::make_unique<CudaProbe>(device_index);
}

void empty_device_cache(const c10::Device& device) {
  if (!device.is_cuda()) return;
  c10::cuda::device_synchronize();
  tracer::mark_empty_cache();
  c10::cuda::CUDACachingAllocator::emptyCache();
}

std::int64_t cuda_set_memory_limit(int device_index, double limit_mib) {
  ensure_cuda_initialised();
  std::size_t free_b = 0, total_b = 0;
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_index));
  check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  const double total_mib = to_mib(static_cast<std::int64_t>(total_b));
  const double fraction = std::min(1.0, limit_mib / total_mib);
  c10::cuda::CUDACachingAllocator::setMemoryFraction(fraction, static_cast<c10::DeviceIndex>(device_index));
  // The allocator's own arithmetic (setMemoryFraction): what it refuses beyond.
  return static_cast<std::int64_t>(static_cast<std::size_t>(fraction * static_cast<double>(total_b)));
}

CudaDeviceInfo cuda_device_info(int device_index) {
  CudaDeviceInfo info;
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device_index), "cudaGetDeviceProperties");
  info.name = prop.name;
  info.total_mib = to_mib(static_cast<std::int64_t>(prop.totalGlobalMem));
  int rt = 0, drv = 0;
  check(cudaRuntimeGetVersion(&rt), "cudaRuntimeGetVersion");
  check(cudaDriverGetVersion(&drv), "cudaDriverGetVersion");
  info.runtime_version = version_string(rt);
  info.driver_version = version_string(drv);
  info.nvml_driver_version = nvml_driver_version();
  return info;
}

}  // namespace memdiag
