// --isolate: each configuration of a sweep in a fresh child process, for
// anyone who wants a sweep's isolation by construction rather than by the
// allocator's reset; and the search's fresh processes. The child is this
// executable running one configuration quietly; its report is read back.
#include "memdiag/isolate.hpp"

#include "memdiag/errors.hpp"
#include "memdiag/exit_cleanup.hpp"
#include "memdiag/exit_code.hpp"
#include "memdiag/report_reader.hpp"
#include "memdiag/run_spec.hpp"
#include "memdiag/sweep_row.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

extern char** environ;

namespace memdiag {
namespace {

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
  if (run.sequence_length > 0) spec.sequence_length = run.sequence_length;
  if (opts.seed != 0) spec.seed = opts.seed;
  spec.memory_limit_mib = opts.memory_limit_mib;
  spec.remedies = run.remedies;
  spec.warm_up_kernels = opts.warm_up_kernels;
  spec.quiet = true;
  // The parent checked the outputs under --overwrite; the child must not
  // refuse what the parent accepted.
  spec.overwrite = opts.overwrite;
  spec.case_dirs = opts.case_dirs;
  spec.output = output;
  return to_argv(spec, opts.self_exe);
}

int spawn_child(const std::vector<std::string>& argv, bool silent, int stdin_fd, int stdout_fd) {
  std::vector<char*> args;
  for (const std::string& s : argv) args.push_back(const_cast<char*>(s.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (stdin_fd >= 0) posix_spawn_file_actions_adddup2(&actions, stdin_fd, 0);
  if (stdout_fd >= 0) {
    posix_spawn_file_actions_adddup2(&actions, stdout_fd, 1);
  } else if (silent) {
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  }
  if (silent) posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  // A process group of its own: a Ctrl-C at the terminal reaches this
  // process only, which passes it on once; the child sees one signal.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  // The child ends with this process, whatever ends it: it is told which
  // process to outlive no longer (kParentPidVariable; its runner sets
  // PR_SET_PDEATHSIG for it).
  const std::string parent = std::string(kParentPidVariable) + "=" + std::to_string(::getpid());
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, kParentPidVariable, std::strlen(kParentPidVariable)) != 0 ||
        (*e)[std::strlen(kParentPidVariable)] != '=') {
      env.push_back(*e);
    }
  }
  env.push_back(const_cast<char*>(parent.c_str()));
  env.push_back(nullptr);
  const int rc = posix_spawn(&pid, args[0], &actions, &attr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw Error("cannot start " + argv[0] + ": " + std::strerror(rc));
  return pid;
}

int wait_child(int pid, const StopRequest* stop) {
  if (stop != nullptr) stop->set_child(pid);
  bool forwarded = false;
  int status = 0;
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) break;
    if (stop != nullptr && stop->requested() && !forwarded) {
      kill(pid, stop->signal());  // the same signal: the child writes its report as interrupted
      forwarded = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (stop != nullptr) stop->set_child(0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void wait_done(int pid, int done_fd, const StopRequest* stop) {
  if (stop != nullptr) stop->set_child(pid);
  bool forwarded = false;
  char drop[4096];
  for (;;) {
    pollfd p{done_fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, 10);
    if (ready > 0) {
      const ssize_t n = ::read(done_fd, drop, sizeof drop);
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) break;  // its end, or nothing more to read
    } else if (ready < 0 && errno != EINTR) {
      break;
    }
    if (stop != nullptr && stop->requested() && !forwarded) {
      ::kill(pid, stop->signal());  // the same signal: the child writes its report as interrupted
      forwarded = true;
    }
  }
  if (stop != nullptr) stop->set_child(0);
}

std::thread reap_later(int pid) {
  return std::thread([pid] {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  });
}

int run_child(const std::vector<std::string>& argv, const StopRequest* stop, bool silent) {
  return wait_child(spawn_child(argv, silent), stop);
}

Report run_in_child(const PlannedRun& run, const ResolvedPlan& plan, const HarnessOptions& opts, RunObserver& obs) {
  int exit_code = to_int(ExitCode::kFailed);
  try {
    exit_code = run_child(child_argv(run, plan, opts, run.output), opts.stop);
  } catch (const Error& e) {
    obs.problem(e.what());
  }
  // Read back only from a regular file: a FIFO or a pipe already gave its
  // report to whoever reads it, and opening it again would wait forever.
  // A child that exits with a usage error wrote nothing there of its own
  // (another run's report may be there: its own went beside it, and it
  // said so).
  struct stat st {};
  const bool readable = exit_code != to_int(ExitCode::kUsage) && ::stat(run.output.c_str(), &st) == 0 &&
                        S_ISREG(st.st_mode);
  ReadResult read = readable ? read_report_file(run.output) : ReadResult{};
  Report report;
  if (read.report) report = *read.report;
  report.status = read.report ? read.report->status : status_from_exit(exit_code);
  return report;
}

int run_isolated(const ResolvedPlan& plan, const HarnessOptions& opts, RunObserver& obs) {
  std::vector<SweepRow> rows;
  std::vector<RunStatus> statuses;
  for (std::size_t i = 0; i < plan.runs.size(); ++i) {
    const PlannedRun& run = plan.runs[i];
    const auto t0 = std::chrono::steady_clock::now();
    const Report report = run_in_child(run, plan, opts, obs);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rows.push_back(sweep_row(run, plan.varying, report, seconds));
    statuses.push_back(rows.back().status);
    obs.sweep_run_finished(rows.back(), i + 1, plan.runs.size());
    if (rows.back().status == RunStatus::kInterrupted || (opts.stop != nullptr && opts.stop->requested())) {
      statuses.push_back(RunStatus::kInterrupted);
      break;
    }
  }
  obs.sweep_finished(rows, plan.runs.size());
  return to_int(exit_code_for(statuses));
}

}  // namespace memdiag
