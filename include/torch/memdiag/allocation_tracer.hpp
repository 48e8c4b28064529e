// --trace-allocations: records what the run asks of the device's allocator
// (memdiag/report.hpp's AllocationTrace) while a pass is open. On CUDA the
// caching allocator's trace tracker reports every request, release and
// segment; on the CPU the tracking allocator does. Phases are marked by the
// workload as they begin.
#pragma once

#include "memdiag/report.hpp"

#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace memdiag::tracer {

// Opens a pass: from now every request to the device's allocator is kept.
// Throws memdiag::Error where the device's allocator cannot be traced.
void start_pass(const c10::Device& device);
bool active();
// Closes the pass and hands over what it kept.
TracePass finish_pass(std::int64_t batch, std::vector<std::int64_t> step_samples, RunStatus status);

// The most PyTorch's multi-block reductions stage on this CUDA device:
// sums over the rows of ever taller float matrices (512 wide, from 4096
// rows, doubling) until the staging buffer grows by less than half while
// the rows double. nullopt on the CPU, or where memory ran out first.
std::optional<std::int64_t> measure_staging_cap(const c10::Device& device);

// Marks, a no-op with no pass open.
void mark_phase(Phase phase, std::optional<int> step);
void mark_empty_cache();

// The CPU tracking allocator's calls (counted allocations only).
void cpu_allocated(const void* data, std::int64_t bytes);
void cpu_freed(const void* data);
void cpu_refused(std::int64_t bytes);

}  // namespace memdiag::tracer
