#include "signals.hpp"

#include "memdiag/exit_cleanup.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <string>

#include <sys/prctl.h>
#include <sys/wait.h>

#include <signal.h>
#include <unistd.h>

namespace memdiag::cli {
namespace {

StopRequest g_stop;

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};
// Which stop signals the front blocked, for the runner to unblock.
constexpr const char* kHeldVariable = "MEMDIAG_HELD_SIGNALS";

void ignore_sigpipe() {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGPIPE, &ignore, nullptr);
}

// Sleeps ms milliseconds (nanosleep is async-signal-safe).
void pause_ms(long ms) {
  struct timespec ts {ms / 1000, (ms % 1000) * 1000000L};
  ::nanosleep(&ts, nullptr);
}

// The child running now ends as this process does: it is sent the same
// signal, twice so that it takes its own second-signal path (removing its
// temporaries), and is reaped; one that does not end within a second is
// killed.
void end_child(int child, int sig) {
  for (int i = 0; i < 2; ++i) {
    ::kill(child, sig);
    pause_ms(50);
  }
  for (int waited = 0; waited < 1000; waited += 10) {
    int status = 0;
    const pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child || done < 0) return;
    pause_ms(10);
  }
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
}

extern "C" void on_stop_signal(int sig) {
  if (g_stop.request(sig)) {
    // The second signal: nothing waits any longer. Reports are written by
    // rename, so none is torn; temporaries and folders in the making are
    // removed, and the child goes too, reaped rather than orphaned.
    const int saved = errno;
    if (const int child = g_stop.child(); child > 0) end_child(child, sig);
    remove_cleanup_paths_now();
    errno = saved;
    ::_exit(128 + sig);
  }
}

// A process a memdiag parent started (kParentPidVariable): SIGTERM when
// that parent dies, whatever ended it, so a SIGKILLed --isolate parent
// leaves no runner behind; the signal stops the run as any stop signal
// does (its report written, marked interrupted). A parent already gone
// before this line sends it now.
void end_with_parent() {
  const char* parent = std::getenv(kParentPidVariable);
  if (parent == nullptr) return;
  char* end = nullptr;
  const long pid = std::strtol(parent, &end, 10);
  const bool valid = end != parent && *end == '\0' && pid > 0;
  ::unsetenv(kParentPidVariable);  // this process's own children are told of it when it starts them
  if (!valid) return;
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != static_cast<pid_t>(pid)) ::kill(::getpid(), SIGTERM);
}

}  // namespace

StopRequest& stop_request() { return g_stop; }

void install_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocking wait returns and sees the request
  for (int sig : kStopSignals) ::sigaction(sig, &sa, nullptr);
  ignore_sigpipe();
  // A front that held signals across its exec of this process: they are
  // released now that the handlers are in, and one sent meanwhile arrives.
  if (const char* held = std::getenv(kHeldVariable)) {
    sigset_t release;
    sigemptyset(&release);
    const std::string list = held;
    for (std::size_t from = 0; from <= list.size();) {
      const std::size_t comma = std::min(list.find(',', from), list.size());
      for (int sig : kStopSignals) {
        if (list.compare(from, comma - from, std::to_string(sig)) == 0) sigaddset(&release, sig);
      }
      from = comma + 1;
    }
    ::unsetenv(kHeldVariable);
    ::sigprocmask(SIG_UNBLOCK, &release, nullptr);
  }
  end_with_parent();
}

void hold_stop_signals() {
  sigset_t stop, before;
  sigemptyset(&stop);
  for (int sig : kStopSignals) sigaddset(&stop, sig);
  ::sigprocmask(SIG_BLOCK, &stop, &before);
  // Only those this process blocked: one its parent blocked stays blocked.
  std::string held;
  for (int sig : kStopSignals) {
    if (sigismember(&before, sig) == 0) held += (held.empty() ? "" : ",") + std::to_string(sig);
  }
  ::setenv(kHeldVariable, held.c_str(), 1);
  ignore_sigpipe();
}

}  // namespace memdiag::cli
