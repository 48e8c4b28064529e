// Internal to memdiag::torch: the run layer's device as LibTorch's.
#pragma once

#include "memdiag/device.hpp"

#include <c10/core/Device.h>

namespace memdiag {

inline c10::Device to_c10(const Device& d) {
  return d.is_cuda() ? c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(d.index))
                     : c10::Device(c10::DeviceType::CPU);
}

}  // namespace memdiag
