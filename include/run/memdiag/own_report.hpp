// memory_diagnostics writing a run's report (write_own_report: never over
// another configuration's report written meanwhile), what went wrong said
// through the observer. A plain run, a sweep's runs and a search's answer
// write theirs this one way.
#pragma once

#include "memdiag/report.hpp"
#include "memdiag/run_observer.hpp"

#include <string>

namespace memdiag {

struct OwnReportWritten {
  bool ok = false;           // written, at output or beside it
  std::string at;            // where it went
  bool kept_beside = false;  // another run wrote output meanwhile: both reports stay
};

// A write that failed, or a report kept beside another's, is one problem()
// line ("--output: OUT: why; this run's report is at KEPT").
OwnReportWritten write_run_report(const std::string& output, const Report& report, RunObserver& obs);

}  // namespace memdiag
