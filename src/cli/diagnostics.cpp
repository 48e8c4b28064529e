#include "diagnostics.hpp"

#include "console_observer.hpp"
#include "signals.hpp"

#include "memdiag/harness.hpp"
#include "memdiag/torch_executor.hpp"
#include "memdiag/errors.hpp"
#include "memdiag/exit_code.hpp"
#include "memdiag/format.hpp"

#include <ostream>

namespace memdiag {
namespace {
constexpr const char* kProgram = "memory_diagnostics";
}  // namespace

int run_diagnostics(DiagnosticsOptions o, std::ostream& out, std::ostream& err) {
  int code = 0;
  cli::ConsoleObserver console(kProgram, o.quiet, out, err);
  if (o.list_cases) {
    code = print_case_list(o.harness.case_dirs, out, err);
  } else {
    o.harness.observer = &console;
    o.harness.stop = &cli::stop_request();
    TorchExecutor executor;
    code = run_harness(o.harness, executor);
  }
  return flush_output(out, err, code);
}

}  // namespace memdiag
