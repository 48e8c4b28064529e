// NVML, loaded at run time: the driver ships libnvidia-ml.so.1, the toolkit
// may not ship nvml.h, and a missing NVML must not stop a run. The few
// declarations needed are spelled out here from NVML's public API.
#include "memdiag/probes.hpp"
#include "memdiag/report.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <mutex>
#include <vector>

namespace memdiag {
namespace {

using nvmlReturn = int;
using nvmlDevice = void*;
constexpr nvmlReturn kNvmlSuccess = 0;
constexpr nvmlReturn kNvmlInsufficientSize = 7;

struct NvmlProcessInfo {  // nvmlProcessInfo_t as taken by the _v3 query
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};

struct Nvml {
  bool ok = false;
  nvmlReturn (*init)() = nullptr;
  nvmlReturn (*by_pci)(const char*, nvmlDevice*) = nullptr;
  nvmlReturn (*procs)(nvmlDevice, unsigned int*, NvmlProcessInfo*) = nullptr;
  nvmlReturn (*driver)(char*, unsigned int) = nullptr;
};

const Nvml& nvml() {
  static Nvml n;
  static std::once_flag once;
  std::call_once(once, [] {
    void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    n.init = reinterpret_cast<nvmlReturn (*)()>(dlsym(h, "nvmlInit_v2"));
    n.by_pci = reinterpret_cast<nvmlReturn (*)(const char*, nvmlDevice*)>(
        dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2"));
    n.procs = reinterpret_cast<nvmlReturn (*)(nvmlDevice, unsigned int*, NvmlProcessInfo*)>(
        dlsym(h, "nvmlDeviceGetComputeRunningProcesses_v3"));
    n.driver = reinterpret_cast<nvmlReturn (*)(char*, unsigned int)>(
        dlsym(h, "nvmlSystemGetDriverVersion"));
    n.ok = n.init && n.by_pci && n.procs && n.driver && n.init() == kNvmlSuccess;
  });
  return n;
}

}  // namespace

std::optional<double> nvml_process_mib(const std::string& pci_bus_id) {
  const Nvml& n = nvml();
  if (!n.ok) return std::nullopt;
  nvmlDevice dev = nullptr;
  if (n.by_pci(pci_bus_id.c_str(), &dev) != kNvmlSuccess) return std::nullopt;
  std::vector<NvmlProcessInfo> infos(64);
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto count = static_cast<unsigned int>(infos.size());
    const nvmlReturn rc = n.procs(dev, &count, infos.data());
    if (rc == kNvmlInsufficientSize) {
      infos.resize(count + 16);
      continue;
    }
    if (rc != kNvmlSuccess) return std::nullopt;
    const auto me = static_cast<unsigned int>(::getpid());
    for (unsigned int i = 0; i < count; ++i) {
      if (infos[i].pid == me) return to_mib(static_cast<std::int64_t>(infos[i].used_gpu_memory));
    }
    return std::nullopt;
  }
  return std::nullopt;
}

std::optional<std::string> nvml_driver_version() {
  const Nvml& n = nvml();
  if (!n.ok) return std::nullopt;
  char buf[96] = {0};
  if (n.driver(buf, sizeof buf) != kNvmlSuccess) return std::nullopt;
  return std::string(buf);
}

}  // namespace memdiag
