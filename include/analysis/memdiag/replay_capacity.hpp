// Capacity by replaying the allocator: from a trace of the run and of the
// same configuration at another batch, each request's size as a function
// of its step's samples, and the largest batch whose requests the allocator
// (memdiag/allocator_replay.hpp) serves within a budget.
//
// Each request of the run is matched with the same request at the other
// batch (the longest common sequence of requests whose sizes are equal, or
// in the ratio of their steps' samples). Matched, it is fixed (the same at
// both), or a whole number of bytes per sample (an activation, the batch,
// a gradient of one), or neither: a kernel's workspace whose size follows
// the batch up to a bound of the kernel's choosing (PyTorch's reductions
// size their staging buffer by the blocks they launch, at most a few per
// multiprocessor). A request found at one batch only is a workspace too.
// One kind of workspace is recognised by its shape in the trace: PyTorch's
// multi-block reductions (a bias's gradient summed over the batch) ask for
// a staging buffer and then a few bytes of semaphores, free the semaphores,
// then the buffer. Its size follows the rows reduced until the kernel
// launches no more blocks, a bound the trace measures on the device
// (AllocationTrace::staging_cap_bytes): those grow in proportion up to it.
// Any other workspace's size beyond the batches traced is not known: the
// answer is given twice, with such workspaces growing in proportion (what
// surely fits) and held at their traced size (what may fit); where the two
// agree the answer is the replay's, to the sample.
#pragma once

#include "memdiag/allocator_replay.hpp"
#include "memdiag/report.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memdiag {

struct ScaledRequest {
  enum class Growth { kFixed, kPerSample, kWorkspace, kStaging };
  Growth growth = Growth::kFixed;
  double fixed_bytes = 0;       // kFixed, kPerSample: the part that does not grow
  double bytes_per_sample = 0;  // kPerSample, along the batch
  // kPerSample along the length: fixed + per token x L + per token^2 x L^2
  // (the last a layer's scores), whole numbers of bytes.
  double bytes_per_token = 0, bytes_per_token2 = 0;
  std::int64_t traced_bytes = 0;    // kWorkspace, kStaging: its size at traced_samples
  std::int64_t traced_samples = 0;
};

struct ScaledTrace {
  // What the requests are functions of: the batch (samples per step) at
  // the run's length, or a transformer's length at the run's batch.
  enum class Axis { kBatch, kLength };
  Axis axis = Axis::kBatch;
  std::int64_t length = 0;                // the run's tokens per sample (kLength)
  std::vector<std::int64_t> other_lengths;  // the passes it was fitted against (kLength)
  std::vector<ReplayOp> ops;              // the run's, in order (kAlloc's bytes as traced)
  std::vector<ScaledRequest> requests;    // by allocation id
  std::vector<std::optional<int>> step_of;  // by allocation id: the step it was made in (none: setup)
  std::int64_t batch = 0;                 // the run's
  std::vector<double> step_fraction;      // each step's samples over the batch (a schedule)
  std::int64_t other_batch = 0;           // the pass it was matched against
  bool caching = true;
  int workspaces = 0;
  std::int64_t workspace_bytes = 0;       // their largest at the run's batch
  int staging_buffers = 0;                // reductions' staging buffers that grow
  std::optional<std::int64_t> staging_cap;  // the device's bound on them, where measured
  int unmatched = 0;                      // requests found at one batch only
};

// Nothing when the trace cannot be scaled (no second complete pass at
// another batch, or the first pass did not complete); why in `why`.
std::optional<ScaledTrace> scale_trace(const AllocationTrace& trace, std::string* why = nullptr);

// A pass's reductions' staging buffers, by allocation id, and the largest.
std::vector<bool> staging_buffers(const TracePass& p);
std::int64_t largest_staging_buffer(const TracePass& p);

enum class WorkspaceGrowth { kProportional, kHeld };
// The requests at another batch.
std::vector<ReplayOp> ops_at(const ScaledTrace& t, std::int64_t batch, WorkspaceGrowth w);
std::int64_t samples_at(const ScaledTrace& t, std::int64_t batch, std::optional<int> step);

struct ReplayCapacity {
  double budget_mib = 0;
  std::int64_t limit_bytes = 0;
  // The largest batch the replay fits, with workspaces growing in
  // proportion (sure) and held (possible); equal where no workspace is in
  // the way. 0: not one sample.
  std::int64_t max_batch = 0;
  std::int64_t max_batch_if_held = 0;
  // The first batch that does not fit (max_batch + 1) as replayed: where
  // it fails, what it asks for, and what the allocator held then.
  ReplayResult failure;
  // Of the memory free under the limit at that failure (the limit less
  // what is allocated), what no request can use: free space inside
  // segments that still hold live blocks (the fragmentation the limit
  // exposes).
  std::int64_t stranded_bytes = 0;
  // What the replay stood on: the batches traced, the reductions' staging
  // buffers and their bound, the other workspaces (whose growth beyond the
  // traced batches is what separates the two answers).
  std::int64_t traced_batch = 0, other_batch = 0;
  int staging_buffers = 0;
  std::optional<std::int64_t> staging_cap;
  int workspaces = 0;
  std::int64_t workspace_bytes = 0;
};

ReplayCapacity replay_capacity(const ScaledTrace& t, double budget_mib, std::int64_t limit_bytes);

// Along a transformer's length: its requests at the run's batch as
// functions of the tokens per sample, from passes at three lengths (the
// run's, three quarters and half of it: a request is fixed, or a whole
// number of bytes per token and per token squared, or a workspace).
std::optional<ScaledTrace> scale_trace_along_length(const AllocationTrace& trace, std::string* why = nullptr);
std::vector<ReplayOp> ops_at_length(const ScaledTrace& t, std::int64_t length, WorkspaceGrowth w);
// ReplayCapacity with max_batch and max_batch_if_held read as the longest
// sequence (traced_batch: the run's length).
ReplayCapacity replay_length_capacity(const ScaledTrace& t, double budget_mib, std::int64_t limit_bytes);

}  // namespace memdiag
