// The device a run is on, as a plain value: the run layer plans, names and
// checks runs with it; the torch layer makes LibTorch's device of it
// (src/torch/torch_device.hpp) when it runs one.
#pragma once

#include <string>

namespace memdiag {

struct Device {
  enum class Kind { kCpu, kCuda };
  Kind kind = Kind::kCpu;
  int index = 0;  // a CUDA device's ordinal; 0 on the CPU
  bool is_cuda() const { return kind == Kind::kCuda; }
  // "cpu", "cuda:0": as reports, messages and --device spell it.
  std::string str() const;
};

}  // namespace memdiag
