// What resolving a plan asks of the machine it runs on: whether --device
// can mean a CUDA device, and the caching allocator's settings a CUDA run
// starts from. The runner answers from LibTorch (the torch layer's
// executor); the front, which does not load LibTorch, answers what it can
// tell without it.
#pragma once

#include "memdiag/device.hpp"

#include <optional>
#include <string>

namespace memdiag {

class Machine {
 public:
  virtual ~Machine() = default;
  // The runner was built with CUDA support (LibTorch with CUDA).
  virtual bool cuda_compiled() const = 0;
  // The CUDA devices this process could use (0: CUDA is not available
  // here); nullopt where that cannot be told without loading CUDA.
  virtual std::optional<int> cuda_device_count() const = 0;
  // The caching allocator's settings this process runs under before any
  // run's own (the environment's), in PYTORCH_ALLOC_CONF's syntax; asked
  // only for a CUDA device.
  virtual std::string allocator_settings() const = 0;
};

// --device's value as a device: auto (the first CUDA device where there is
// one, else the CPU), cpu, cuda or cuda:K. Throws UsageError naming
// --device; nullopt where the machine cannot tell.
std::optional<Device> resolve_device(const std::string& arg, const Machine& machine);

}  // namespace memdiag
