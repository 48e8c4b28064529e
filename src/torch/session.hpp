// Internal to memdiag::torch: what outlives one run in this process, the
// torch executor's state.
#pragma once

#include "memdiag/distributed.hpp"
#include "memdiag/probe.hpp"
#include "memdiag/workload.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace memdiag::detail {

struct Session {
  // The device's allocator, and the process group once the first run of a
  // launched job has joined it.
  std::unique_ptr<MemoryProbe> probe;
  std::unique_ptr<Communicator> comm;
  // What the session did to the CPU's thread pool (a data-parallel CPU
  // job), noted in every report.
  std::optional<std::string> threads_note;
  // The limit the device's allocator enforces, in bytes (--memory-limit-mib
  // as the allocator computes it); absent without one.
  std::optional<std::int64_t> limit_bytes;
  // While a search's tries run: their model's first build, kept.
  std::unique_ptr<ModelCache> model_cache;
  // Runs made in this process so far (the report's
  // environment.earlier_runs_in_process).
  int runs_made = 0;
};

}  // namespace memdiag::detail
