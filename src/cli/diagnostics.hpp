// memory_diagnostics as a library call: the harness with the console's
// words. The executable is flags in, run_diagnostics out.
#pragma once

#include "diagnostics_flags.hpp"

#include <iosfwd>
#include <string>
#include <vector>

namespace memdiag {

// Lists the cases, or runs the harness with a ConsoleObserver on out and
// err and the process's stop request. Returns the exit code; 1 also when
// what it printed could not be written (a full disk, a closed pipe).
int run_diagnostics(DiagnosticsOptions options, std::ostream& out, std::ostream& err);

}  // namespace memdiag
