#include "memdiag/environment.hpp"

#include "memdiag/probes.hpp"

#include <torch/version.h>

#include <unistd.h>

#include <chrono>
#include <ctime>

namespace memdiag {

namespace {
std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}
}  // namespace

Environment describe_environment(const c10::Device& device) {
  Environment e;
  e.torch_version = std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
                    std::to_string(TORCH_VERSION_PATCH);
  e.host = host_name();
  e.start_time = utc_now();
  e.memdiag_version = MEMDIAG_VERSION;
  if (device.is_cuda()) {
    const CudaDeviceInfo info = cuda_device_info(device.index());
    e.device_name = info.name;
    e.device_total_mib = info.total_mib;
    e.cuda_runtime_version = info.runtime_version;
    e.driver_version = info.nvml_driver_version ? *info.nvml_driver_version : "CUDA " + info.driver_version;
  } else {
    e.device_name = "cpu";
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) e.device_total_mib = static_cast<double>(pages) * page / kMiB;
  }
  return e;
}

}  // namespace memdiag
