// The host memory this process holds, read from the kernel: what offloading
// and pinned buffers cost besides the device's memory. No LibTorch here; the
// pinned bytes come from the CUDA probe (the host allocator is LibTorch's).
#pragma once

#include <optional>

namespace memdiag {

// This process's resident set (pages in RAM: the heap, pinned buffers, the
// libraries' mapped code) from /proc/self/statm, in MiB; empty where the
// file cannot be read (not Linux).
std::optional<double> host_resident_mib();

}  // namespace memdiag
