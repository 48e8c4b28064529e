// memory_diagnostics, the front: flags in, and then either an answer of its
// own (--help, --version, --list-cases, a usage error) or the runner. It
// links no LibTorch, so those answers take milliseconds where loading
// LibTorch takes half a second of CPU. A usage error is every one the plan
// can show (memdiag/run_plan.hpp: an unknown case or preset, a value out
// of range, outputs that clash or cannot be written, a combination
// refused), the plan resolved here as the runner will resolve it. For a
// run it execs the runner (install_layout.hpp) with the same
// arguments, in the same process, so a launcher, a shell's job control or
// a test sees one PID. Of the two runners it picks the one without
// LibTorch's CUDA half for a run that cannot use CUDA.
#include "diagnostics_flags.hpp"
#include "install_layout.hpp"
#include "signals.hpp"

#include "build_config.hpp"
#include "memdiag/errors.hpp"
#include "memdiag/exit_code.hpp"
#include "memdiag/format.hpp"
#include "memdiag/machine.hpp"
#include "memdiag/run_plan.hpp"

#include <cerrno>
#include <cstring>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <dlfcn.h>
#include <unistd.h>

namespace {

// Whether CUDA could be used here at all: without the driver's library no
// CUDA runtime finds a device (the check LibTorch's would end in, without
// loading LibTorch's CUDA half to make it).
bool cuda_driver_present() { return ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) != nullptr; }

// What the front can tell of this machine without LibTorch: whether the
// runner has CUDA, and, without a CUDA driver, that no device is there;
// with one, how many devices only CUDA can say, and the checks that need
// the device are the runner's.
class FrontMachine final : public memdiag::Machine {
 public:
  bool cuda_compiled() const override { return MEMDIAG_HAVE_CUDA_VALUE != 0; }
  std::optional<int> cuda_device_count() const override {
    return cuda_driver_present() ? std::nullopt : std::optional<int>(0);
  }
  // Asked only for a CUDA device, which the front never tells.
  std::string allocator_settings() const override { return {}; }
};

// The runner for a run: the one without LibTorch's CUDA half (0.2 s less
// CPU to start) when the run cannot use CUDA and this build has it; the
// full one otherwise, which also says why a CUDA device asked for is not
// there.
std::string runner_for(const std::string& self, const std::string& device) {
  const std::string cpu = memdiag::cpu_runner_of(self);
  const bool cannot_use_cuda = device == "cpu" || (device == "auto" && !cuda_driver_present());
  if (cannot_use_cuda && ::access(cpu.c_str(), X_OK) == 0) return cpu;
  return memdiag::runner_of(self);
}

}  // namespace

int main(int argc, char** argv) {
  // Held, not handled: a signal before the runner's handlers are in waits
  // for them (the runner then ends interrupted, writing nothing it should
  // not), instead of killing the process while LibTorch loads.
  memdiag::cli::hold_stop_signals();
  memdiag::DiagnosticsOptions diag;
  if (auto code = memdiag::parse_diagnostics_flags(argc, argv, diag, std::cout, std::cerr)) return *code;
  const std::string self = memdiag::self_executable(argv[0]);
  memdiag::HarnessOptions& opts = diag.harness;
  for (const std::string& d : memdiag::default_case_dirs(self, MEMDIAG_SOURCE_CASES_DIR)) opts.case_dirs.push_back(d);
  if (diag.list_cases) {
    return memdiag::flush_output(std::cout, std::cerr, memdiag::print_case_list(opts.case_dirs, std::cout, std::cerr));
  }
  try {
    memdiag::check_plan(opts, FrontMachine());
  } catch (const memdiag::UsageError& e) {
    std::cerr << "memory_diagnostics: " << memdiag::printable(e.what()) << "\n";
    return memdiag::to_int(memdiag::ExitCode::kUsage);
  } catch (const std::exception&) {
    // Not a usage error (a file that cannot be read, say): the runner
    // meets it again and says it as it would.
  }
  const std::string runner = runner_for(self, opts.device);
  std::vector<char*> args(argv, argv + argc);
  args[0] = const_cast<char*>(runner.c_str());
  args.push_back(nullptr);
  ::execv(runner.c_str(), args.data());
  std::cerr << "memory_diagnostics: cannot start its runner " << memdiag::printable(runner) << " ("
            << std::strerror(errno) << "); is the installation complete?\n";
  return memdiag::to_int(memdiag::ExitCode::kFailed);
}
