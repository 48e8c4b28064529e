// Probe implementations. The CUDA probe reads PyTorch's caching allocator
// (allocated, reserved, peak, inactive split), cudaMemGetInfo (the whole
// device) and, where libnvidia-ml can be loaded, NVML (this process alone).
// The CPU probe reads the tracking allocator.
#pragma once

#include "memdiag/probe.hpp"

#include <c10/core/Device.h>

#include <memory>
#include <optional>
#include <string>

namespace memdiag {

std::unique_ptr<MemoryProbe> make_cpu_probe();

// True when this build has the CUDA probe compiled in (LibTorch with CUDA).
bool cuda_probe_compiled();
// Throws memdiag::Error when the build has no CUDA support.
std::unique_ptr<MemoryProbe> make_cuda_probe(int device_index);

// Hands the caching allocator's cached but free blocks back to the driver
// (torch.cuda.empty_cache()); nothing on the CPU, which caches nothing.
void empty_device_cache(const c10::Device& device);

// Caps the caching allocator for this process at limit_mib (a memory
// fraction of the device), so a run shows whether it fits a smaller GPU.
// Returns the bytes the allocator then enforces (the fraction times the
// device's bytes, as it computes them).
std::int64_t cuda_set_memory_limit(int device_index, double limit_mib);

struct CudaDeviceInfo {
  std::string name;
  double total_mib = 0;
  std::string runtime_version;  // "13.0"
  std::string driver_version;   // CUDA driver API version, "13.0"
  std::optional<std::string> nvml_driver_version;  // "580.159.04"
};
CudaDeviceInfo cuda_device_info(int device_index);

// Process memory on one device from NVML, or nullopt (no NVML, or the process
// is not listed, as inside some containers). pci_bus_id identifies the device
// independently of CUDA_VISIBLE_DEVICES.
std::optional<double> nvml_process_mib(const std::string& pci_bus_id);
std::optional<std::string> nvml_driver_version();

}  // namespace memdiag
