// --isolate: each configuration of a sweep in a fresh child process, for
// anyone who wants a sweep's isolation by construction rather than by the
// allocator's reset. The child is this executable running one configuration
// quietly; its report is read back for the progress line.
#include "memdiag/exit_code.hpp"
#include "memdiag/report_reader.hpp"
#include "run_plan.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <ostream>
#include <sstream>
#include <thread>

extern char** environ;

namespace memdiag::detail {
namespace {

std::atomic<bool> g_isolate_interrupt{false};
extern "C" void on_isolate_sigint(int) { g_isolate_interrupt.store(true); }

std::string number(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

std::vector<std::string> child_argv(const PlannedRun& run, const ResolvedPlan& plan, const HarnessOptions& opts) {
  std::vector<std::string> a = {opts.self_exe,
                                "--case", run.case_arg,
                                "--preset", run.preset,
                                "--batch-size-per-device", std::to_string(run.batch),
                                "--steps", std::to_string(run.steps),
                                "--output", run.output,
                                "--device", plan.device.str(),
                                "--seed", std::to_string(opts.seed),
                                "--remedy", remedies_label(run.remedies),
                                "--quiet"};
  if (opts.memory_limit_mib) a.insert(a.end(), {"--memory-limit-mib", number(*opts.memory_limit_mib)});
  if (!opts.warm_up_kernels) a.push_back("--no-warmup");
  for (const std::string& d : opts.case_dirs) a.insert(a.end(), {"--cases-dir", d});
  return a;
}

// Runs argv to its end; a SIGINT to this process is passed on to the child,
// which then writes its report as interrupted.
int run_child(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& s : argv) args.push_back(const_cast<char*>(s.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  if (const int rc = posix_spawn(&pid, args[0], nullptr, nullptr, args.data(), environ); rc != 0) {
    throw Error("--isolate: cannot start " + argv[0] + ": " + std::strerror(rc));
  }
  bool forwarded = false;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (g_isolate_interrupt.load() && !forwarded) {
      kill(pid, SIGINT);
      forwarded = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

RunStatus status_from_exit(int code) {
  if (code == to_int(ExitCode::kOk)) return RunStatus::kComplete;
  if (code == to_int(ExitCode::kOom)) return RunStatus::kOom;
  if (code == to_int(ExitCode::kInterrupted)) return RunStatus::kInterrupted;
  return RunStatus::kFailed;
}

}  // namespace

int run_isolated(const ResolvedPlan& plan, const HarnessOptions& opts, bool talk, std::ostream& out,
                 std::ostream& err) {
  g_isolate_interrupt.store(false);
  auto previous = std::signal(SIGINT, on_isolate_sigint);
  std::vector<SweepRow> rows;
  int code = to_int(ExitCode::kOk);
  for (std::size_t i = 0; i < plan.runs.size(); ++i) {
    const PlannedRun& run = plan.runs[i];
    const auto t0 = std::chrono::steady_clock::now();
    int exit_code = to_int(ExitCode::kFailed);
    try {
      exit_code = run_child(child_argv(run, plan, opts));
    } catch (const Error& e) {
      err << "memory_diagnostics: " << e.what() << "\n";
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ReadResult read = read_report_file(run.output);
    Report report;
    if (read.report) report = *read.report;
    report.status = read.report ? read.report->status : status_from_exit(exit_code);
    rows.push_back(sweep_row(run, plan.varying, report, seconds));
    if (talk) print_progress_line(rows.back(), i + 1, plan.runs.size(), err);
    // The same precedence as an in-process sweep: interrupted, failed, out of memory.
    const RunStatus s = rows.back().status;
    if (s == RunStatus::kInterrupted || g_isolate_interrupt.load()) {
      code = to_int(ExitCode::kInterrupted);
      break;
    }
    if (s == RunStatus::kFailed) code = to_int(ExitCode::kFailed);
    if (s == RunStatus::kOom && code == to_int(ExitCode::kOk)) code = to_int(ExitCode::kOom);
  }
  std::signal(SIGINT, previous);
  if (talk) print_summary(rows, plan.runs.size(), out);
  return code;
}

}  // namespace memdiag::detail
