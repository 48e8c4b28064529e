#include "memdiag/device.hpp"
#include "memdiag/machine.hpp"

#include "memdiag/errors.hpp"

namespace memdiag {

std::string Device::str() const { return is_cuda() ? "cuda:" + std::to_string(index) : "cpu"; }

std::optional<Device> resolve_device(const std::string& arg, const Machine& machine) {
  if (arg == "cpu") return Device{};
  const bool cuda_arg = arg == "cuda" || arg.rfind("cuda:", 0) == 0;
  if (arg != "auto" && !cuda_arg) throw UsageError("--device: '" + arg + "' is not auto, cpu, cuda or cuda:K");
  if (!machine.cuda_compiled()) {
    if (arg == "auto") return Device{};
    throw UsageError("--device: this build has no CUDA support (LibTorch without CUDA)");
  }
  const std::optional<int> count = machine.cuda_device_count();
  if (!count) return std::nullopt;
  if (arg == "auto") return *count > 0 ? Device{Device::Kind::kCuda, 0} : Device{};
  if (*count == 0) throw UsageError("--device: '" + arg + "' asked for, but CUDA is not available on this machine");
  int index = 0;
  if (arg.size() > 5) {
    const std::string digits = arg.substr(5);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 4) {
      throw UsageError("--device: '" + arg + "' is not cuda:K with K a device index");
    }
    index = std::stoi(digits);
  }
  if (index >= *count) {
    throw UsageError("--device: cuda:" + std::to_string(index) + " does not exist (this machine has " +
                     std::to_string(*count) + " CUDA device" + (*count == 1 ? "" : "s") + ")");
  }
  return Device{Device::Kind::kCuda, index};
}

}  // namespace memdiag
