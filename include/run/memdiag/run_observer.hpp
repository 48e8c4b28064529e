// What a run has to say while it runs, as calls rather than text: the run
// and torch layers print nothing themselves. memory_diagnostics implements
// this in src/cli (the live table, progress lines, the summary, outcomes);
// a program embedding the harness implements it its own way, or passes
// none.
#pragma once

#include "memdiag/report.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memdiag {

// Who is talking: a single process, or one rank of a launched job (only
// rank 0 speaks for the job).
struct SessionInfo {
  int rank = 0;
  int world_size = 1;
  std::string device;  // "cpu", "cuda:0"
};

// The heading of a single run's live table.
struct RunHeading {
  std::string case_name, preset, remedies, device, device_name;
  int batch = 0;
  int steps = 0;
};

// One run of a sweep, as its progress line and the summary show it.
struct SweepRow {
  std::string label;  // "alpha batch 4", or a plan entry's name
  RunStatus status = RunStatus::kComplete;
  double peak_mib = 0;  // the highest peak reached, the failing phase's included
  std::optional<double> peak_reserved_mib;
  // A run that ran out: the memory in use at the failure, the request and
  // the budget (MiB).
  std::optional<double> oom_in_use_mib, oom_request_mib, oom_budget_mib;
  double seconds = 0;
  std::string output;
};

// The heading of a --find-max-batch search.
struct SearchHeading {
  std::string case_name, preset, device;
  int steps = 0;
  double limit_mib = 0;
  CapacitySearch::LimitSource limit_source = CapacitySearch::LimitSource::kMemoryLimit;
};

class RunObserver {
 public:
  virtual ~RunObserver() = default;
  virtual void session_started(const SessionInfo&) {}
  // A problem the user must see, one line, without the program's name:
  // a flag at fault, a run that failed, a file that could not be written.
  virtual void problem(const std::string&) {}
  // Something worth a line that is not a problem ("no out-of-memory error:
  // x.pickle not written").
  virtual void note(const std::string&) {}
  // A single run: its heading, each sample as it is taken (with the report
  // so far), then its report written (or not: output empty).
  virtual void run_started(const RunHeading&) {}
  virtual void sample_taken(const Sample&, const Report&) {}
  virtual void run_finished(const Report&, const std::string& /*output*/) {}
  // A file written besides a report: a memory snapshot.
  virtual void file_written(const std::string& /*path*/, const std::string& /*what*/, double /*mib*/) {}
  // A sweep: each run as it ends, then all of them.
  virtual void sweep_run_finished(const SweepRow&, std::size_t /*index*/, std::size_t /*total*/) {}
  virtual void sweep_finished(const std::vector<SweepRow>&, std::size_t /*planned*/) {}
  // --find-max-batch: the heading, each try, the fresh-process checks, the answer.
  virtual void search_started(const SearchHeading&) {}
  virtual void search_tried(const CapacityTry&, std::size_t /*index*/) {}
  virtual void search_confirming(std::int64_t /*batch*/, std::optional<RunStatus> /*status*/) {}
  virtual void search_confirmation_skipped(std::optional<double> /*outside_mib*/, double /*limit_mib*/,
                                           std::int64_t /*max_batch*/) {}
  virtual void search_finished(const CapacitySearch&, const std::string& /*output*/) {}
};

}  // namespace memdiag
