// memory_diagnostics's runner (libexec/memdiag/memory_diagnostics-run):
// the front execs it, same arguments, for a run; --isolate's children and
// --find-max-batch's confirming processes start it directly. Flags in (the
// same parser as the front's), memdiag::run_diagnostics out.
#include "diagnostics.hpp"
#include "install_layout.hpp"
#include "signals.hpp"

#include "memdiag/exit_code.hpp"
#include "memdiag/format.hpp"
#include "memdiag/limits.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <limits>
#include <optional>
#include <string>

#include <fcntl.h>
#include <unistd.h>

namespace {

// The run is over and its report written: the process ends without
// LibTorch's and CUDA's teardown (static destructors, thread pools, the
// CUDA context's release in user space), which took 0.22-0.30 s a process
// on the H200 and 0.09 s on the 2-core CPU machine, paid by every fresh
// process of --find-max-batch and --isolate while their parent waits. The
// kernel frees the rest as it does for any exit. Sanitizer builds exit
// normally: their leak check runs at exit.
#if defined(__SANITIZE_ADDRESS__)
#define MEMDIAG_EXIT_NORMALLY 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MEMDIAG_EXIT_NORMALLY 1
#endif
#endif

// A prepared fresh process's batch (memdiag/fresh_processes.hpp): one line
// on stdin, a whole number from 1 to limits::kMaxBatch; anything else, or
// none, and the run ends interrupted.
std::optional<int> read_batch() {
  std::string line;
  if (!std::getline(std::cin, line)) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long b = std::strtoll(line.c_str(), &end, 10);
  if (errno != 0 || end == line.c_str() || *end != '\0' || b < 1 || b > memdiag::limits::kMaxBatch ||
      b > std::numeric_limits<int>::max()) {
    return std::nullopt;
  }
  return static_cast<int>(b);
}

int end_process(int code) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  // Its end tells a parent that reads it (the search's fresh processes,
  // memdiag/isolate.hpp's wait_done) that the report is written: the parent
  // goes on while this process ends (0.10 s on the H200 after _Exit: the
  // kernel's release of the device's memory and context).
  // /dev/null takes its place: the descriptor stays one that writes go
  // nowhere through, whatever still writes before the process ends.
  const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null >= 0) {
    ::dup2(null, STDOUT_FILENO);
    ::close(null);
  } else {
    ::close(STDOUT_FILENO);
  }
#ifndef MEMDIAG_EXIT_NORMALLY
  std::_Exit(code);
#endif
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything slow: a signal during plan resolution is honoured too,
  // and one the front held arrives now.
  memdiag::cli::install_stop_signals();
  memdiag::DiagnosticsOptions diag;
  if (auto code = memdiag::parse_diagnostics_flags(argc, argv, diag, std::cout, std::cerr)) return *code;
  memdiag::HarnessOptions& opts = diag.harness;
  if (diag.batch_from_stdin) opts.await_batch = read_batch;
  opts.self_exe = memdiag::self_executable(argv[0]);
  for (const std::string& d : memdiag::default_case_dirs(opts.self_exe, MEMDIAG_SOURCE_CASES_DIR)) {
    opts.case_dirs.push_back(d);
  }
  try {
    return end_process(memdiag::run_diagnostics(diag, std::cout, std::cerr));
  } catch (const std::exception& e) {
    // Anything run_harness did not turn into a report: one line, exit 1.
    const std::string what = e.what();
    std::cerr << "memory_diagnostics: error: " << memdiag::printable(what.substr(0, what.find('\n'))) << "\n";
    return end_process(memdiag::to_int(memdiag::ExitCode::kFailed));
  }
}
