#include "memdiag/allocation_tracer.hpp"
#include "build_config.hpp"

#include "memdiag/errors.hpp"

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "memdiag/replay_capacity.hpp"

#include <c10/util/Exception.h>
#include <ATen/ATen.h>

#ifdef MEMDIAG_HAVE_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace memdiag::tracer {
namespace {

// The pass in progress. The CUDA tracker runs under the allocator's lock
// (from any thread: backward runs on autograd's device thread), the marks
// on the main thread: one mutex orders them.
std::mutex g_mutex;
std::atomic<bool> g_active{false};
TracePass g_pass;
std::int64_t g_allocs = 0;
// Live allocations by address, to name what a free releases.
std::unordered_map<std::uintptr_t, std::int64_t> g_live;

void push(TraceEvent e) { g_pass.events.push_back(std::move(e)); }

void on_alloc(std::uintptr_t address, std::int64_t bytes) {
  TraceEvent e;
  e.kind = TraceEvent::Kind::kAlloc;
  e.bytes = bytes;
  push(e);
  g_live[address] = g_allocs++;
}

void on_free(std::uintptr_t address) {
  const auto it = g_live.find(address);
  if (it == g_live.end()) return;  // made before the pass began
  TraceEvent e;
  e.kind = TraceEvent::Kind::kFree;
  e.id = it->second;
  g_live.erase(it);
  push(e);
}

void on_simple(TraceEvent::Kind kind, std::int64_t bytes, std::int64_t address = 0) {
  TraceEvent e;
  e.kind = kind;
  e.bytes = bytes;
  e.address = address;
  push(e);
}

#ifdef MEMDIAG_HAVE_CUDA
// Attached once for the process (a tracker cannot be detached); it keeps
// nothing unless a pass is open.
void on_cuda_trace(const c10::CachingDeviceAllocator::TraceEntry& te) {
  if (!g_active.load(std::memory_order_acquire)) return;
  using A = c10::CachingDeviceAllocator::TraceEntry::Action;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_active.load(std::memory_order_relaxed)) return;
  const auto bytes = static_cast<std::int64_t>(te.size_);
  switch (te.action_) {
    case A::ALLOC: on_alloc(te.addr_, bytes); break;
    // A free completes when the block goes back to the pool (later than
    // its request where another stream still used it).
    case A::FREE_COMPLETED: on_free(te.addr_); break;
    case A::SEGMENT_ALLOC: on_simple(TraceEvent::Kind::kSegmentAlloc, bytes, static_cast<std::int64_t>(te.addr_)); break;
    case A::SEGMENT_FREE: on_simple(TraceEvent::Kind::kSegmentFree, bytes, static_cast<std::int64_t>(te.addr_)); break;
    case A::OOM: on_simple(TraceEvent::Kind::kFailed, bytes); break;
    default: break;
  }
}

void attach_cuda_tracker_once() {
  static std::once_flag once;
  std::call_once(once, [] { c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker(on_cuda_trace); });
}
#endif

}  // namespace

void start_pass(const c10::Device& device) {
  if (device.is_cuda()) {
#ifdef MEMDIAG_HAVE_CUDA
    attach_cuda_tracker_once();
#else
    throw Error("--trace-allocations: this build has no CUDA to trace");
#endif
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  g_pass = TracePass{};
  g_allocs = 0;
  g_live.clear();
  g_active.store(true, std::memory_order_release);
}

bool active() { return g_active.load(std::memory_order_acquire); }

TracePass finish_pass(std::int64_t batch, std::vector<std::int64_t> step_samples, RunStatus status) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_active.store(false, std::memory_order_release);
  TracePass p = std::move(g_pass);
  g_pass = TracePass{};
  g_live.clear();
  p.batch = batch;
  p.step_samples = std::move(step_samples);
  p.status = status;
  // A step that never began (the run stopped first) has no samples to say.
  int last_step = -1;
  for (const TraceEvent& e : p.events) {
    if (e.kind == TraceEvent::Kind::kPhase && e.step) last_step = std::max(last_step, *e.step);
  }
  if (p.step_samples.size() > static_cast<std::size_t>(last_step + 1)) p.step_samples.resize(static_cast<std::size_t>(last_step + 1));
  return p;
}

std::optional<std::int64_t> measure_staging_cap(const c10::Device& device) {
  if (!device.is_cuda()) return std::nullopt;
  constexpr std::int64_t kWidth = 512;
  std::int64_t previous = 0;
  for (std::int64_t rows = 4096; rows <= (std::int64_t{1} << 17); rows *= 2) {
    start_pass(device);
    try {
      at::Tensor x = at::ones({rows, kWidth}, at::TensorOptions().device(device).dtype(at::kFloat));
      at::Tensor s = x.sum(0);
#ifdef MEMDIAG_HAVE_CUDA
      c10::cuda::device_synchronize();
#endif
    } catch (const c10::OutOfMemoryError&) {
      finish_pass(rows, {}, RunStatus::kOom);
      return std::nullopt;
    }
    const std::int64_t staged = largest_staging_buffer(finish_pass(rows, {}, RunStatus::kComplete));
    if (previous > 0 && 2 * staged < 3 * previous) return std::max(staged, previous);
    previous = staged;
  }
  return std::nullopt;
}

void mark_phase(Phase phase, std::optional<int> step) {
  if (!active()) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  TraceEvent e;
  e.kind = TraceEvent::Kind::kPhase;
  e.phase = phase;
  e.step = is_setup_phase(phase) ? std::nullopt : step;
  push(e);
}

void mark_empty_cache() {
  if (!active()) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  on_simple(TraceEvent::Kind::kEmptyCache, 0);
}

void cpu_allocated(const void* data, std::int64_t bytes) {
  if (!active()) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_active.load(std::memory_order_relaxed)) on_alloc(reinterpret_cast<std::uintptr_t>(data), bytes);
}

void cpu_freed(const void* data) {
  if (!active()) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_active.load(std::memory_order_relaxed)) on_free(reinterpret_cast<std::uintptr_t>(data));
}

void cpu_refused(std::int64_t bytes) {
  if (!active()) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_active.load(std::memory_order_relaxed)) on_simple(TraceEvent::Kind::kFailed, bytes);
}

}  // namespace memdiag::tracer
