#include "diagnostics.hpp"

#include "console_observer.hpp"
#include "signals.hpp"

#include "memdiag/case_spec.hpp"
#include "memdiag/errors.hpp"
#include "memdiag/exit_code.hpp"
#include "memdiag/format.hpp"

#include <cerrno>
#include <cstring>
#include <iomanip>
#include <ostream>

namespace memdiag {
namespace {

constexpr const char* kProgram = "memory_diagnostics";

int list_all(const std::vector<std::string>& case_dirs, std::ostream& out, std::ostream& err) {
  try {
    for (const CaseSpec& c : list_cases(case_dirs)) {
      std::string presets;
      for (const auto& kv : c.presets) {
        presets += (presets.empty() ? "" : ", ") + kv.first + (kv.first == c.default_preset ? "*" : "");
      }
      out << std::left << std::setw(8) << printable(c.name) << " " << printable(c.description) << "\n"
          << std::setw(8) << "" << " presets: " << printable(presets) << "  (file: " << printable(c.source) << ")\n";
    }
  } catch (const Error& e) {
    err << kProgram << ": " << printable(e.what()) << "\n";
    return to_int(ExitCode::kUsage);
  }
  return to_int(ExitCode::kOk);
}

}  // namespace

int run_diagnostics(DiagnosticsOptions o, std::ostream& out, std::ostream& err) {
  int code = 0;
  cli::ConsoleObserver console(kProgram, o.quiet, out, err);
  if (o.list_cases) {
    code = list_all(o.harness.case_dirs, out, err);
  } else {
    o.harness.observer = &console;
    o.harness.stop = &cli::stop_request();
    code = run_harness(o.harness);
  }
  // What was printed must have arrived: a failed write to stdout is a
  // failure, not a cut-off success.
  if (!(out << std::flush)) {
    err << kProgram << ": cannot write the output (" << std::strerror(errno ? errno : EIO) << ")\n";
    if (code == to_int(ExitCode::kOk)) code = to_int(ExitCode::kFailed);
  }
  return code;
}

}  // namespace memdiag
