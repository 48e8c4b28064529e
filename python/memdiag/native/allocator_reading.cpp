// One call for every allocator figure the recorder samples at a phase's end.
//
// torch.cuda's Python API builds a nested dict of every statistic the
// caching allocator keeps (torch._C._cuda_memoryStats: 12-18 us idle on the
// H200, about three times that inside a training loop) for the four the
// recorder reads. This reads them from the allocator's DeviceStats struct
// directly and, in the same call, resets the peak for the next phase and
// asks cudaMemGetInfo where wanted; and counts the census's gradients
// (gradient_bytes) without a Python object a gradient. Built on first use by
// torch.utils.cpp_extension against the torch that runs the job
// (memdiag/_native.py); the recorder falls back to the Python API without it.
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstddef>
#include <cstdint>
#include <unordered_set>

namespace py = pybind11;

namespace {

constexpr std::size_t kAll = static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE);

// (allocated, peak allocated since the last reset, reserved, inactive split
// bytes, allocation retries, device used or -1): bytes. reset_peak: the
// peak starts again from allocated. device_used: cudaMemGetInfo's total -
// free (the whole device, every process), else -1.
py::tuple read_figures(int device, bool reset_peak, bool device_used) {
  const auto index = static_cast<c10::DeviceIndex>(device);
  const auto s = c10::cuda::CUDACachingAllocator::getDeviceStats(index);
  std::int64_t used = -1;
  if (device_used) {
    std::size_t free = 0;
    std::size_t total = 0;
    if (cudaMemGetInfo(&free, &total) == cudaSuccess) used = static_cast<std::int64_t>(total - free);
  }
  if (reset_peak) c10::cuda::CUDACachingAllocator::resetPeakStats(index);
  return py::make_tuple(s.allocated_bytes[kAll].current, s.allocated_bytes[kAll].peak, s.reserved_bytes[kAll].current,
                        s.inactive_split_bytes[kAll].current, s.num_alloc_retries, used);
}

// Allocated bytes alone: the per-module readings of the forward.
std::int64_t allocated(int device) {
  return c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device))
      .allocated_bytes[kAll]
      .current;
}

void reset_peak(int device) { c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(device)); }

// The largest free block the allocator has cached (what a request could
// have reused at an out-of-memory error), without a snapshot.
std::int64_t largest_cached_block(int device) {
  std::size_t largest = 0;
  c10::cuda::CUDACachingAllocator::cacheInfo(static_cast<c10::DeviceIndex>(device), &largest);
  return static_cast<std::int64_t>(largest);
}

// The census's gradients (memdiag/_census.py, gradients_mib): the bytes of
// the distinct storages of the parameters' gradients, each storage once (by
// its data pointer; one with none is not counted), on CUDA only (device 1),
// off it (0) or on any device (-1). Read here, a gradient costs no Python
// object: counted from Python, the gradients set_to_none makes anew every
// step each cost a tensor and a storage object, at backward. -1 where
// Python must count: an element that is not a tensor, or a parameter or
// gradient with Python dispatch (DTensor's shards: its local tensor).
std::int64_t gradient_bytes(const py::sequence& params, int device) {
  std::unordered_set<std::uintptr_t> seen;
  std::int64_t total = 0;
  for (const py::handle h : params) {
    if (!THPVariable_Check(h.ptr())) return -1;
    const at::Tensor& p = THPVariable_Unpack(h.ptr());
    if (p.key_set().has(c10::DispatchKey::Python)) return -1;
    const at::Tensor& g = p.grad();
    if (!g.defined()) continue;
    if (g.key_set().has(c10::DispatchKey::Python)) return -1;
    if (device >= 0 && g.is_cuda() != (device == 1)) continue;
    if (!g.has_storage()) continue;  // sparse: no storage to count, as in Python
    const c10::Storage& storage = g.storage();
    const auto key = reinterpret_cast<std::uintptr_t>(storage.data());
    if (key == 0 || !seen.insert(key).second) continue;
    total += static_cast<std::int64_t>(storage.nbytes());
  }
  return total;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "memdiag's allocator readings in one call";
  m.def("read", &read_figures, py::arg("device"), py::arg("reset_peak"), py::arg("device_used"));
  m.def("allocated", &allocated, py::arg("device"));
  m.def("reset_peak", &reset_peak, py::arg("device"));
  m.def("largest_cached_block", &largest_cached_block, py::arg("device"));
  m.def("gradient_bytes", &gradient_bytes, py::arg("params"), py::arg("device"));
}
