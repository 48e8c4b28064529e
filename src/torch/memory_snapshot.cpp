#include "memdiag/memory_snapshot.hpp"
#include "build_config.hpp"

#include "memdiag/errors.hpp"

#include <memory>
#include <mutex>

#ifdef MEMDIAG_HAVE_CUDA
#include <ATen/record_function.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/csrc/cuda/memory_snapshot.h>
#endif

namespace memdiag {
namespace {

std::mutex g_mutex;
bool g_active = false;
[[maybe_unused]] bool g_at_oom = false;  // read and set with CUDA only
std::optional<std::string> g_oom_pickle;

}  // namespace

#ifdef MEMDIAG_HAVE_CUDA
namespace {

// The open phase's user scope; ending it (reset) records its end.
std::unique_ptr<at::RecordFunction> g_scope;
std::string g_scope_name;  // outlives the scope, which may keep a view of it

}  // namespace

bool memory_snapshot_compiled() { return true; }

void start_memory_history(const SnapshotOptions& opts) {
  // std::string, not a literal: a literal binds to the older bool overload.
  const std::string stacks = opts.cpp_stacks ? "all" : "python";
  // Without a context, no stack is captured: "python" in a process without
  // Python would record empty frames at some cost.
  const std::optional<std::string> context =
      opts.cpp_stacks ? std::optional<std::string>(std::string("all")) : std::nullopt;
  torch::cuda::_record_memory_history(std::optional<std::string>(std::string("all")), context, stacks,
                                      opts.max_entries, /*clearHistory=*/true);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_active = true;
  g_at_oom = opts.at_oom;
}

void stop_memory_history() {
  end_phase_annotation();
  torch::cuda::_record_memory_history(std::optional<std::string>(), std::nullopt, std::string("all"), 0, true);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_active = false;
  g_at_oom = false;
  g_oom_pickle.reset();
}

std::string memory_snapshot_pickle() { return torch::cuda::_memory_snapshot_pickled(); }

void annotate_phase(Phase phase, std::optional<int> step) {
  if (!memory_history_active()) return;
  end_phase_annotation();
  const std::string label = std::string("phase=") + to_string(phase) + (step ? " step=" + std::to_string(*step) : "");
  // Every allocation from here on carries the label (device_traces'
  // user_metadata), and the scope brackets the phase on the timeline.
  c10::cuda::CUDACachingAllocator::setUserMetadata(label);
  g_scope_name = step ? std::string(to_string(phase)) + " " + std::to_string(*step) : std::string(to_string(phase));
  g_scope = std::make_unique<at::RecordFunction>(at::RecordScope::USER_SCOPE);
  if (g_scope->isActive()) {
    g_scope->before(std::string_view(g_scope_name));
  }
}

void end_phase_annotation() { g_scope.reset(); }

void capture_oom_snapshot() noexcept {
  try {
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      if (!g_at_oom) return;
    }
    // The observer runs with the allocator's lock released, so taking a
    // snapshot here is allowed (and is what torchtnt does).
    std::string pickle = torch::cuda::_memory_snapshot_pickled();
    std::lock_guard<std::mutex> lock(g_mutex);
    g_oom_pickle = std::move(pickle);
  } catch (...) {
    // The report then lacks the snapshot, not the failure.
  }
}

#else

bool memory_snapshot_compiled() { return false; }
void start_memory_history(const SnapshotOptions&) {
  throw Error("allocator snapshots need LibTorch with CUDA (this build has none)");
}
void stop_memory_history() {}
std::string memory_snapshot_pickle() {
  throw Error("allocator snapshots need LibTorch with CUDA (this build has none)");
}
void annotate_phase(Phase, std::optional<int>) {}
void end_phase_annotation() {}
void capture_oom_snapshot() noexcept {}

#endif

bool memory_history_active() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_active;
}

std::optional<std::string> take_oom_snapshot() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::optional<std::string> s = std::move(g_oom_pickle);
  g_oom_pickle.reset();
  return s;
}

}  // namespace memdiag
