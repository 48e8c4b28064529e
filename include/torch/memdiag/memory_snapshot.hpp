// The CUDA caching allocator's history, in the pickle PyTorch's own
// torch.cuda.memory._snapshot() dumps, so https://pytorch.org/memory_viz and
// `python -m torch.cuda._memory_viz` open what memdiag records. Each phase
// is a user scope in the history (its external_annotations) and the user
// metadata of every allocation made in it ("phase=forward step=0").
#pragma once

#include "memdiag/report.hpp"

#include <cstddef>
#include <optional>
#include <string>

namespace memdiag {

struct SnapshotOptions {
  // Allocation and free events kept (the oldest are dropped first); each
  // costs about 136 bytes while the run lasts.
  std::size_t max_entries = 100000;
  // C++ stacks of every allocation: symbolising them costs minutes, so off
  // unless asked for.
  bool cpp_stacks = false;
  // Also keep the snapshot taken when an allocation is refused.
  bool at_oom = false;
};

// True when this build can record (LibTorch with CUDA).
bool memory_snapshot_compiled();

// Starts recording (CUDA must be initialised: nothing is recorded before
// the allocator exists). Throws memdiag::Error without CUDA.
void start_memory_history(const SnapshotOptions& opts);
// Stops recording and forgets the history.
void stop_memory_history();
bool memory_history_active();

// The snapshot now: segments, blocks and the recorded trace.
std::string memory_snapshot_pickle();

// Marks the start of a phase in the history (a no-op when not recording).
void annotate_phase(Phase phase, std::optional<int> step);
// Ends the last phase's scope.
void end_phase_annotation();

// Called from the out-of-memory observer: keeps the snapshot of this moment
// when SnapshotOptions::at_oom asked for it.
void capture_oom_snapshot() noexcept;
// The snapshot kept at the last out-of-memory error, then forgotten.
std::optional<std::string> take_oom_snapshot();

}  // namespace memdiag
