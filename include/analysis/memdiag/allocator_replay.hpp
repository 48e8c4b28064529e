// The device's allocator, replayed: a run's requests (memdiag/report.hpp's
// AllocationTrace) fed to a model of the allocator that served them, at the
// run's batch or another, under its limit or another.
//
// The CUDA model is PyTorch's caching allocator as torch 2.11 has it
// (c10/cuda/CUDACachingAllocator.cpp): sizes rounded to 512 bytes; requests
// up to 1 MiB from a small pool of 2 MiB segments, larger ones from a large
// pool (1-10 MiB in 20 MiB segments, above that their own segment rounded
// to 2 MiB); the smallest free cached block that fits, ties to the lower
// address; a block split where more than 1 MiB (small pool: 512 bytes)
// would remain; freed blocks merged with free neighbours; a new segment
// only where the reserve plus it stays within the limit, else every wholly
// free segment released and one retry, else out of memory. Replayed over
// traces of memdiag's runs on the H200 it made the same segments, at the
// same requests, and failed at the same request, as the allocator did
// (docs/measurements/h200/allocator-replay.txt).
//
// The CPU model is memdiag's tracking allocator: no cache; a request fails
// when what is live plus it exceeds the limit.
#pragma once

#include "memdiag/report.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memdiag {

struct ReplayOp {
  enum class Kind { kAlloc, kFree, kPhase, kEmptyCache };
  Kind kind = Kind::kAlloc;
  std::int64_t bytes = 0;  // kAlloc: what is asked for
  std::int64_t id = 0;     // kAlloc: its number; kFree: the allocation it frees
  Phase phase = Phase::kSetup;  // kPhase: the phase that begins
  std::optional<int> step;
};

struct ReplayAllocator {
  bool caching = true;  // the CUDA caching allocator; false: the CPU's, which caches nothing
  std::optional<std::int64_t> limit_bytes;
};

// What the allocator held at one moment.
struct ReplayState {
  std::int64_t allocated = 0;  // bytes in blocks handed out (rounded)
  std::int64_t reserved = 0;   // bytes in segments
  std::int64_t largest_free_block = 0;
  std::int64_t free_blocks = 0;  // how many free blocks the reserve is in
};

struct ReplayResult {
  bool completed = true;
  // Where it failed: the op, the phase and step it was in, the request as
  // PyTorch's out-of-memory message gives it (the segment it could not
  // make), and the state then (after the release of every wholly free
  // segment, as at a real failure).
  std::optional<std::size_t> failed_op;
  Phase phase = Phase::kSetup;
  std::optional<int> step;
  std::int64_t request = 0;
  ReplayState at_failure;
  std::int64_t peak_allocated = 0;
  std::int64_t peak_reserved = 0;
  // Each segment the replay made, in order (bytes): what a trace's recorded
  // segments are checked against.
  std::vector<std::int64_t> segments_made;
  std::int64_t retries = 0;  // releases of the cache to make room
  // At each phase's end (the next phase's start, or the end), what the
  // allocator reserved and allocated: a report's samples are checked
  // against these.
  struct PhaseEnd {
    Phase phase = Phase::kSetup;
    std::optional<int> step;
    std::int64_t reserved = 0;
    std::int64_t allocated = 0;
  };
  std::vector<PhaseEnd> phase_ends;
};

ReplayResult replay(const std::vector<ReplayOp>& ops, const ReplayAllocator& allocator);

// A pass of a trace as it was: its requests in order, for replaying the run
// itself (the phases and empty_cache calls kept; the allocator's own
// segment events left out, since the replay makes its own).
std::vector<ReplayOp> ops_of(const TracePass& pass);

// Whether the replay of a trace's first pass, at its own batch and limit,
// made the segments the allocator made and failed where it failed: the
// replay's check of itself before anything is predicted from it. Empty
// when they agree; otherwise why not, in a line.
std::string replay_disagreement(const AllocationTrace& trace);

// The byte limit a --memory-limit-mib of budget_mib sets on CUDA, as the
// caching allocator computes it from the device's size (a fraction of it).
std::int64_t cuda_limit_bytes(double budget_mib, double device_total_mib);

}  // namespace memdiag
