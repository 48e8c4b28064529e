// A request to stop, from a signal. The executables install the handlers
// (src/cli/signals.cpp, first thing in main); the measuring half only asks
// whether a stop was requested, between phases, and which signal asked, to
// name it in the report and to pass the same signal on to a child process.
// Async-signal-safe: a lock-free atomic set from the handler.
#pragma once

#include <atomic>
#include <string>

namespace memdiag {

class StopRequest {
 public:
  // From a signal handler: the first request is kept; returns whether one
  // was already pending (a second signal).
  bool request(int signal) noexcept {
    int none = 0;
    return !signal_.compare_exchange_strong(none, signal);
  }
  bool requested() const noexcept { return signal_.load() != 0; }
  int signal() const noexcept { return signal_.load(); }
  void clear() noexcept { signal_.store(0); }

  // The child process running now (--isolate, a confirmation), so that a
  // second signal, which ends this process at once, ends it too.
  void set_child(int pid) const noexcept { child_.store(pid); }
  int child() const noexcept { return child_.load(); }

 private:
  std::atomic<int> signal_{0};
  mutable std::atomic<int> child_{0};
  static_assert(std::atomic<int>::is_always_lock_free, "a signal handler may only touch lock-free atomics");
};

// "SIGINT", "SIGTERM", "SIGHUP", or "signal N".
std::string signal_name(int signal);

// The environment variable a memdiag process sets, to its pid, for a child
// it starts (--isolate's runs, --find-max-batch's confirmations): the child
// is sent SIGTERM when that parent dies, whatever ended it (SIGKILL
// included), and stops as for any stop signal (src/cli/signals.cpp).
inline constexpr const char* kParentPidVariable = "MEMDIAG_PARENT_PID";

}  // namespace memdiag
