#include "signals.hpp"

#include "memdiag/exit_cleanup.hpp"

#include <cerrno>
#include <csignal>
#include <ctime>

#include <sys/wait.h>

#include <signal.h>
#include <unistd.h>

namespace memdiag::cli {
namespace {

StopRequest g_stop;

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

}  // namespace

StopRequest& stop_request() { return g_stop; }

void install_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocking wait returns and sees the request
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGPIPE, &ignore, nullptr);
}

}  // namespace memdiag::cli
