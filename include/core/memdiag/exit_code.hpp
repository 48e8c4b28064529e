// The exit codes of both executables, in one place: scripts and CI gate on
// them, so they are part of the interface.
#pragma once

#include "memdiag/report.hpp"

#include <vector>

namespace memdiag {

enum class ExitCode : int {
  kOk = 0,
  kFailed = 1,      // memory_diagnostics: the run failed (report status "failed")
  kGateFailed = 1,  // compare_memory_reports: an --expect or --fail-on gate failed
  kUsage = 2,       // bad usage, or (compare) a report that could not be read
  kOom = 3,         // memory_diagnostics: out of memory (report status "oom")
  kInterrupted = 130,  // SIGINT, SIGTERM or SIGHUP; the report holds what was measured
};

constexpr int to_int(ExitCode c) { return static_cast<int>(c); }

// A run's exit code by its status, and the one precedence for many runs (a
// sweep, a plan, --isolate's children): interrupted over failed over out of
// memory over complete.
ExitCode exit_code_for(RunStatus s);
ExitCode exit_code_for(const std::vector<RunStatus>& statuses);

}  // namespace memdiag
