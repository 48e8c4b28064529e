// --isolate: each configuration of a sweep in a fresh child process, for
// anyone who wants a sweep's isolation by construction rather than by the
// allocator's reset. The child is this executable running one configuration
// quietly; its report is read back for the progress line.
#include "memdiag/exit_code.hpp"
#include "memdiag/report_reader.hpp"
#include "memdiag/run_spec.hpp"
#include "run_plan.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <ostream>
#include <thread>

extern char** environ;

namespace memdiag::detail {
namespace {

std::atomic<bool> g_isolate_interrupt{false};
extern "C" void on_isolate_sigint(int) { g_isolate_interrupt.store(true); }


RunStatus status_from_exit(int code) {
  if (code == to_int(ExitCode::kOk)) return RunStatus::kComplete;
  if (code == to_int(ExitCode::kOom)) return RunStatus::kOom;
  if (code == to_int(ExitCode::kInterrupted)) return RunStatus::kInterrupted;
  return RunStatus::kFailed;
}

}  // namespace

// The same RunSpec-to-flags spelling as the comparer's suggested runs.
std::vector<std::string> child_argv(const PlannedRun& run, const ResolvedPlan& plan, const HarnessOptions& opts,
                                    const std::string& output) {
  RunSpec spec;
  spec.case_ref = run.case_arg;
  spec.device = plan.device.str();
  spec.preset = run.preset;
  spec.batch_size_per_device = run.batch;
  spec.steps = run.steps;
  if (opts.seed != 0) spec.seed = opts.seed;
  spec.memory_limit_mib = opts.memory_limit_mib;
  spec.remedies = run.remedies;
  spec.warm_up_kernels = opts.warm_up_kernels;
  spec.quiet = true;
  spec.case_dirs = opts.case_dirs;
  spec.output = output;
  return to_argv(spec, opts.self_exe);
}

// A SIGINT to this process is passed on to the child, which then writes its
// report as interrupted.
int run_child(const std::vector<std::string>& argv, bool silent) {
  std::vector<char*> args;
  for (const std::string& s : argv) args.push_back(const_cast<char*>(s.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (silent) {
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  }
  const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    throw Error("cannot start " + argv[0] + ": " + std::strerror(rc));
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
      exit_code = run_child(child_argv(run, plan, opts, run.output));
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
