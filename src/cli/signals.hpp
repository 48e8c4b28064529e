// The executables' one signal policy, installed first thing in main:
// SIGINT, SIGTERM and SIGHUP ask the run to stop between phases (its report
// is written, marked interrupted); a second one ends the process at once,
// and the child process running then with it. SIGPIPE is ignored, so a
// closed pipe is an ordinary write error rather than a silent death.
#pragma once

#include "memdiag/stop_request.hpp"

namespace memdiag::cli {

StopRequest& stop_request();
void install_stop_signals();

// For an executable that execs another which installs the handlers (the
// front of memory_diagnostics): SIGINT, SIGTERM and SIGHUP blocked from
// its first line through the exec, so that one sent meanwhile waits,
// pending, for the handlers instead of killing the process while LibTorch
// loads; install_stop_signals() then unblocks them (the exec keeps both
// the mask and what is pending). SIGPIPE is ignored.
void hold_stop_signals();

}  // namespace memdiag::cli
