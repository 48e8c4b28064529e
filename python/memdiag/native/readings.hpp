// The native readings the recorder makes (memdiag/_native.py builds them):
// shared by the module's one-call readings (allocator_reading.cpp) and the
// steady lane (steady_lane.cpp), which makes the same readings from its
// hooks without a Python frame between.
#pragma once
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#include <unistd.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <unordered_set>
#include <vector>

namespace py = pybind11;

namespace memdiag_native {

inline constexpr std::size_t kAll = static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE);

// Readings made up for the tests of a machine without a device
// (memdiag/_native.py, MEMDIAG_NATIVE_TEST=1): every reading returns the next
// figures of a counter, so that two paths through the recorder that read
// in the same order read the same numbers.
struct FakeReadings {
  bool on = false;
  std::int64_t calls = 0;
  std::int64_t used_calls = 0;
  std::int64_t host_calls = 0;
  std::int64_t resets = 0;
};
inline FakeReadings& fake_readings() {
  static FakeReadings f;
  return f;
}

struct Figures {
  std::int64_t allocated;
  std::int64_t peak;  // since the last reset
  std::int64_t reserved;
  std::int64_t inactive_split;
  std::int64_t retries;
  std::int64_t used;  // cudaMemGetInfo's total - free, or -1: not asked
};

// cudaMemGetInfo's total - free (the whole device, every process), or -1.
inline std::int64_t device_used(int device) {
  FakeReadings& f = fake_readings();
  if (f.on) return (8192 + 2 * ++f.used_calls) * (std::int64_t{1} << 20);
  // On the recorder's device, whichever is current (torch's binding of
  // cudaMemGetInfo switches to it the same way).
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  std::size_t free = 0;
  std::size_t total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return static_cast<std::int64_t>(total - free);
}

// The allocator's figures; reset_peak: the peak starts again from
// allocated; ask_used: cudaMemGetInfo too (else used is -1).
inline Figures figures(int device, bool reset_peak, bool ask_used) {
  FakeReadings& f = fake_readings();
  if (f.on) {
    const std::int64_t n = ++f.calls;
    const std::int64_t mib = std::int64_t{1} << 20;
    // reserved moves every fifth reading: the paths that ask the device
    // where the reserve moved are taken too.
    // The peak counts the resets so far: a reset made or missed shows.
    const Figures out{n * mib, (n + 3 + f.resets) * mib, (1024 + n / 5) * mib, (n % 7) * mib, n / 50,
                      ask_used ? device_used(device) : -1};
    if (reset_peak) ++f.resets;
    return out;
  }
  const auto index = static_cast<c10::DeviceIndex>(device);
  const auto s = c10::cuda::CUDACachingAllocator::getDeviceStats(index);
  const std::int64_t used = ask_used ? device_used(device) : -1;
  if (reset_peak) c10::cuda::CUDACachingAllocator::resetPeakStats(index);
  return Figures{s.allocated_bytes[kAll].current, s.allocated_bytes[kAll].peak, s.reserved_bytes[kAll].current,
                 s.inactive_split_bytes[kAll].current, s.num_alloc_retries, used};
}

// (allocated, peak allocated since the last reset, reserved, inactive split
// bytes, allocation retries, device used or -1): bytes. reset_peak: the
// peak starts again from allocated. device_used: cudaMemGetInfo's total -
// free (the whole device, every process), else -1.
inline py::tuple read_figures(int device, bool reset_peak, bool ask_used) {
  const Figures f = figures(device, reset_peak, ask_used);
  return py::make_tuple(f.allocated, f.peak, f.reserved, f.inactive_split, f.retries, f.used);
}

// Allocated bytes alone: the per-module readings of the forward.
inline std::int64_t allocated(int device) {
  if (fake_readings().on) return ++fake_readings().calls * (std::int64_t{1} << 20);
  return c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device))
      .allocated_bytes[kAll]
      .current;
}

inline void reset_peak(int device) {
  if (fake_readings().on) {
    ++fake_readings().resets;
    return;
  }
  c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(device));
}

// The largest free block the allocator has cached (what a request could
// have reused at an out-of-memory error), without a snapshot.
inline std::int64_t largest_cached_block(int device) {
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
inline std::int64_t gradient_bytes(const py::sequence& params, int device) {
  std::unordered_set<std::uintptr_t> seen;
  std::int64_t total = 0;
  for (const py::handle h : params) {
    if (!THPVariable_Check(h.ptr())) return -1;
    const at::Tensor& p = THPVariable_Unpack(h.ptr());
    if (p.key_set().has(c10::DispatchKey::Python)) return -1;
    const at::Tensor& g = p.grad();
    if (!g.defined()) continue;
    if (g.key_set().has(c10::DispatchKey::Python)) return -1;
    // Made-up readings count the CPU's gradients as the device's.
    if (device >= 0 && g.is_cuda() != (device == 1) && !fake_readings().on) continue;
    if (!g.has_storage()) continue;  // sparse: no storage to count, as in Python
    const c10::Storage& storage = g.storage();
    const auto key = reinterpret_cast<std::uintptr_t>(storage.data());
    if (key == 0 || !seen.insert(key).second) continue;
    total += static_cast<std::int64_t>(storage.nbytes());
  }
  return total;
}

// The host at a phase's end (memdiag/_probe.py, HostReader): this
// process's resident pages, read from /proc/self/statm through `statm_fd`
// (-1: not read, -1 returned), and the bytes PyTorch's page-locked host
// allocator holds, in use or cached (pinned: else -1). From Python the
// latter builds a dict of every host statistic (13 us a step on the H200).
inline py::tuple host_figures(int statm_fd, bool pinned) {
  if (fake_readings().on) return py::make_tuple(++fake_readings().host_calls, -1);
  std::int64_t pages = -1;
  if (statm_fd >= 0) {
    char text[128];
    const ssize_t n = ::pread(statm_fd, text, sizeof text - 1, 0);
    if (n > 0) {
      text[n] = '\0';
      char* end = nullptr;
      std::strtoll(text, &end, 10);  // the size; the resident set follows
      const long long resident = std::strtoll(end, nullptr, 10);
      if (resident >= 0) pages = resident;
    }
  }
  std::int64_t held = -1;
  if (pinned) held = at::getHostAllocator(at::kCUDA)->get_stats().allocated_bytes.current;
  return py::make_tuple(pages, held);
}

// Each step's loss, kept without waiting for the device (memdiag/_losses.py):
// its bytes copied into page-locked memory on the current stream of its
// device, read when recording ends, after the device has been waited for.
// From Python the same copy (a slot's view, copy_ with non_blocking) cost
// 48 us a step on the H200: the host allocator records an event for its
// block at every copy. This memory is cudaHostAlloc's, outside PyTorch's
// host allocator, so it is not in the pinned figure the recorder reads.
class Losses {
 public:
  // The first chunk now, before the first sample: cudaHostAlloc may wait
  // for the device.
  Losses() { grow(); }
  ~Losses() {
    for (const Chunk& c : chunks_) {
      if (c.fake) {
        std::free(c.data);
      } else {
        cudaFreeHost(c.data);
      }
    }
  }
  // The slot the loss was copied into, or -1 (not a one-element CUDA
  // tensor of a floating dtype read here, or the copy failed): the caller
  // keeps it another way.
  std::int64_t add(const py::handle& h) {
    if (!THPVariable_Check(h.ptr())) return -1;
    const at::Tensor& t = THPVariable_Unpack(h.ptr());
    // With made-up readings (tests without a device) a CPU loss is kept
    // the same way, copied by the host: the slots' path is tested there.
    const bool fake = fake_readings().on && t.defined() && t.device().is_cpu();
    if (!t.defined() || !(t.is_cuda() || fake) || t.numel() != 1 || t.key_set().has(c10::DispatchKey::Python))
      return -1;
    const auto type = t.scalar_type();
    if (type != at::kFloat && type != at::kDouble && type != at::kHalf && type != at::kBFloat16) return -1;
    if (used_ == capacity() && !grow()) return -1;
    char* slot = chunks_.back().data + used_ * sizeof(double);
    if (fake) {
      std::memcpy(slot, t.const_data_ptr(), t.element_size());
      kept_.push_back(Kept{chunks_.size() - 1, used_, type});
      ++used_;
      return static_cast<std::int64_t>(kept_.size()) - 1;
    }
    const c10::cuda::CUDAStream stream = at::cuda::getCurrentCUDAStream(t.device().index());
    if (cudaMemcpyAsync(slot, t.const_data_ptr(), t.element_size(), cudaMemcpyDeviceToHost, stream.stream()) !=
        cudaSuccess) {
      cudaGetLastError();
      return -1;
    }
    kept_.push_back(Kept{chunks_.size() - 1, used_, type});
    ++used_;
    return static_cast<std::int64_t>(kept_.size()) - 1;
  }
  // Every kept loss as a float, in the order added.
  std::vector<double> values() const {
    std::vector<double> out;
    out.reserve(kept_.size());
    for (const Kept& k : kept_) {
      const char* p = chunks_[k.chunk].data + k.slot * sizeof(double);
      switch (k.type) {
        case at::kFloat: { float v; std::memcpy(&v, p, sizeof v); out.push_back(v); break; }
        case at::kDouble: { double v; std::memcpy(&v, p, sizeof v); out.push_back(v); break; }
        case at::kHalf: { c10::Half v; std::memcpy(&v, p, sizeof v); out.push_back(static_cast<float>(v)); break; }
        default: { c10::BFloat16 v; std::memcpy(&v, p, sizeof v); out.push_back(static_cast<float>(v)); break; }
      }
    }
    return out;
  }

 private:
  struct Chunk {
    char* data;
    std::size_t slots;
    bool fake;  // malloc's (made-up readings), not cudaHostAlloc's
  };
  struct Kept {
    std::size_t chunk;
    std::size_t slot;
    at::ScalarType type;
  };
  std::size_t capacity() const { return chunks_.empty() ? 0 : chunks_.back().slots; }
  // A chunk twice the last (1024 slots first); false where none could be had.
  bool grow() {
    const std::size_t slots = chunks_.empty() ? 1024 : chunks_.back().slots * 2;
    void* p = nullptr;
    const bool fake = fake_readings().on;
    if (fake) {
      p = std::malloc(slots * sizeof(double));
      if (p == nullptr) return false;
    } else if (cudaHostAlloc(&p, slots * sizeof(double), cudaHostAllocDefault) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    chunks_.push_back(Chunk{static_cast<char*>(p), slots, fake});
    used_ = 0;
    return true;
  }
  std::vector<Chunk> chunks_;
  std::size_t used_ = 0;  // slots used in the last chunk
  std::vector<Kept> kept_;
};

}  // namespace memdiag_native

