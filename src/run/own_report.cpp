#include "memdiag/own_report.hpp"

#include "memdiag/output_guard.hpp"

#include <exception>

namespace memdiag {

OwnReportWritten write_run_report(const std::string& output, const Report& report, RunObserver& obs) {
  GuardedWrite written;
  try {
    written = write_own_report(output, report);
  } catch (const std::exception& e) {
    obs.problem(std::string("--output: ") + e.what());
    return {};
  }
  if (written.refused.empty()) return {true, output, false};
  obs.problem("--output: " + output + ": " + written.refused + "; this run's report is at " + written.kept_at);
  return {true, written.kept_at, true};
}

}  // namespace memdiag
