#include "signals.hpp"

#include <csignal>

#include <signal.h>
#include <unistd.h>

namespace memdiag::cli {
namespace {

StopRequest g_stop;

extern "C" void on_stop_signal(int sig) {
  if (g_stop.request(sig)) {
    // The second signal: nothing waits any longer. Reports are written by
    // rename, so none is left torn; the child goes too.
    if (const int child = g_stop.child(); child > 0) ::kill(child, SIGKILL);
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
