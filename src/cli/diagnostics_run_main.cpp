// memory_diagnostics's runner (libexec/memdiag/memory_diagnostics-run):
// the front execs it, same arguments, for a run; --isolate's children and
// --find-max-batch's confirming processes start it directly. Flags in (the
// same parser as the front's), memdiag::run_diagnostics out.
#include "diagnostics.hpp"
#include "install_layout.hpp"
#include "signals.hpp"

#include "memdiag/exit_code.hpp"
#include "memdiag/format.hpp"

#include <exception>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
  // Before anything slow: a signal during plan resolution is honoured too,
  // and one the front held arrives now.
  memdiag::cli::install_stop_signals();
  memdiag::DiagnosticsOptions diag;
  if (auto code = memdiag::parse_diagnostics_flags(argc, argv, diag, std::cout, std::cerr)) return *code;
  memdiag::HarnessOptions& opts = diag.harness;
  opts.self_exe = memdiag::self_executable(argv[0]);
  for (const std::string& d : memdiag::default_case_dirs(opts.self_exe, MEMDIAG_SOURCE_CASES_DIR)) {
    opts.case_dirs.push_back(d);
  }
  try {
    return memdiag::run_diagnostics(diag, std::cout, std::cerr);
  } catch (const std::exception& e) {
    // Anything run_harness did not turn into a report: one line, exit 1.
    const std::string what = e.what();
    std::cerr << "memory_diagnostics: error: " << memdiag::printable(what.substr(0, what.find('\n'))) << "\n";
    return memdiag::to_int(memdiag::ExitCode::kFailed);
  }
}
