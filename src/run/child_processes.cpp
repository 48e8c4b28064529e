// The search's fresh processes (memdiag/isolate.hpp's ChildProcesses):
// children of this process, their reports written into a temporary folder
// and read back. Prepared ones are started early and wait, their model and
// optimizer made, for a batch on their stdin: on the H200 a fresh process
// spent 0.65 s starting LibTorch and CUDA and up to 0.5 s building its model
// (beta medium) before its first step, which the search otherwise waited
// for after it knew the answer.
#include "memdiag/isolate.hpp"

#include "memdiag/errors.hpp"
#include "memdiag/exit_cleanup.hpp"
#include "memdiag/report_reader.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pthread.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <thread>

namespace memdiag {

namespace {

// A run's command without its batch and report: two runs with the same key
// differ in their batch only, so a prepared child of one can run the other.
std::vector<std::string> key_of(PlannedRun run, const ResolvedPlan& plan, const HarnessOptions& opts) {
  run.batch = 1;
  return child_argv(run, plan, opts, "");
}

// Writes line to a prepared child's stdin. A child that died waiting
// would make the write raise SIGPIPE, which ends this process by default:
// the signal is held for the write and taken back if it came.
bool tell(int fd, const std::string& line) {
  sigset_t pipe_only, before;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &before);
  const ssize_t n = ::write(fd, line.data(), line.size());
  if (n < 0 && errno == EPIPE) {
    const timespec none{0, 0};
    while (sigtimedwait(&pipe_only, nullptr, &none) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  return n == static_cast<ssize_t>(line.size());
}

// A child's stdout, whose end says that its report is written
// (wait_done): the write end is the child's alone once it has started. A
// pipe that cannot be made is none (-1): the child is then waited for.
class Pipe {
 public:
  Pipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) == 0) {
      read_ = fds[0];
      write_ = fds[1];
    }
  }
  ~Pipe() {
    if (read_ >= 0) ::close(read_);
    if (write_ >= 0) ::close(write_);
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  int write_end() const { return write_; }
  // The read end, this object's no more; the write end closed here (the
  // child holds its copy).
  int take_read_end() {
    if (write_ >= 0) ::close(write_);
    write_ = -1;
    const int fd = read_;
    read_ = -1;
    return fd;
  }

 private:
  int read_ = -1;
  int write_ = -1;
};

// Waits for a child that was killed (its exit status says nothing here).
void reap(int pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

struct ChildProcesses::Waiting {
  int pid = -1;
  int batch_fd = -1;  // the write end of its stdin
  int done_fd = -1;   // the read end of its stdout: its end says the report is written
  std::vector<std::string> key;
  std::string report;
};

// POSIX calls, not std::filesystem: libtorch.so exports its own copy of
// std::filesystem::remove_all, which crashes when it is bound instead of
// libstdc++'s (seen with torch 2.11); the runner links it.
struct ChildProcesses::Folder {
  explicit Folder(std::string p) : path(std::move(p)), cleanup(path, CleanupPath::Kind::kDirectory) {}
  ~Folder() { ::rmdir(path.c_str()); }
  std::string path;
  // A second signal ends this process at once: the folder goes with it.
  CleanupPath cleanup;
};

ChildProcesses::ChildProcesses() = default;

// Unused prepared children are waiting for a batch and hold nothing worth
// keeping: they are killed, then waited for, and what they may have
// written goes with the folder.
// Children still ending are left to end on their own: their reports are
// read, and waiting for the kernel to release their memory would only
// delay this process's own end (their threads outlive this object).
ChildProcesses::~ChildProcesses() {
  for (std::thread& t : ending_) t.detach();
  for (Waiting& w : waiting_) {
    ::close(w.batch_fd);
    if (w.done_fd >= 0) ::close(w.done_fd);
    ::kill(w.pid, SIGKILL);
  }
  for (Waiting& w : waiting_) {
    reap(w.pid);
    ::unlink(w.report.c_str());
  }
}

const std::string& ChildProcesses::folder() {
  if (!folder_) {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/memdiag-max-batch-XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) {
      throw Error("--find-max-batch: cannot make a directory for the confirming runs in " + templ + ": " +
                  std::strerror(errno));
    }
    folder_ = std::make_unique<Folder>(templ);
  }
  return folder_->path;
}

void ChildProcesses::prepare(const PlannedRun& base, const ResolvedPlan& plan, const HarnessOptions& opts,
                             int count) {
  for (int i = 0; i < count; ++i) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return;  // none prepared: run() starts its own
    Pipe done;
    Waiting w;
    w.key = key_of(base, plan, opts);
    w.report = folder() + "/run" + std::to_string(++made_) + ".json";
    std::vector<std::string> argv = child_argv(base, plan, opts, w.report);
    argv.push_back(kBatchFromStdinFlag);
    try {
      w.pid = spawn_child(argv, /*silent=*/true, fds[0], done.write_end());
    } catch (const Error&) {
      ::close(fds[0]);
      ::close(fds[1]);
      return;
    }
    ::close(fds[0]);
    w.batch_fd = fds[1];
    w.done_fd = done.take_read_end();
    waiting_.push_back(std::move(w));
  }
}

void ChildProcesses::settle() {
  for (std::thread& t : ending_) t.join();
  ending_.clear();
}

std::vector<std::optional<Report>> ChildProcesses::run(const std::vector<PlannedRun>& runs, const ResolvedPlan& plan,
                                                       const HarnessOptions& opts) {
  // The device as the last fresh processes left it: released.
  settle();
  const std::string& dir = folder();
  // Each run's process: a prepared one of its configuration, told its
  // batch now, else one started now; all of them side by side (each has
  // its own limit, and the device room for all).
  std::vector<int> pids;
  std::vector<int> done_fds;  // -1: waited for to its exit
  std::vector<std::string> paths;
  auto close_done = [&] {
    for (int fd : done_fds) {
      if (fd >= 0) ::close(fd);
    }
  };
  for (const PlannedRun& run : runs) {
    const std::vector<std::string> key = key_of(run, plan, opts);
    auto it = std::find_if(waiting_.begin(), waiting_.end(), [&](const Waiting& w) { return w.key == key; });
    int pid = -1;
    int done_fd = -1;
    if (it != waiting_.end()) {
      const std::string line = std::to_string(run.batch) + "\n";
      const bool told = tell(it->batch_fd, line);
      ::close(it->batch_fd);
      it->batch_fd = -1;
      if (told) {
        pid = it->pid;
        done_fd = it->done_fd;
        paths.push_back(it->report);
      } else {  // it died waiting: reaped here, and a process started instead
        ::kill(it->pid, SIGKILL);
        reap(it->pid);
        if (it->done_fd >= 0) ::close(it->done_fd);
      }
      it->done_fd = -1;
      waiting_.erase(it);
    }
    if (pid < 0) {
      paths.push_back(dir + "/run" + std::to_string(++made_) + ".json");
      Pipe done;
      try {
        pid = spawn_child(child_argv(run, plan, opts, paths.back()), /*silent=*/true, -1, done.write_end());
      } catch (const Error&) {
        // None is left running behind the error: those told or started
        // already are stopped and waited for, their files removed.
        for (std::size_t i = 0; i < pids.size(); ++i) {
          ::kill(pids[i], SIGKILL);
          reap(pids[i]);
          ::unlink(paths[i].c_str());
        }
        close_done();
        throw;
      }
      done_fd = done.take_read_end();
    }
    pids.push_back(pid);
    done_fds.push_back(done_fd);
  }
  // Each child until its report is written (the end of its stdout), not
  // its exit: that is waited for on a thread of its own (reap_later), which
  // settle() joins.
  auto wait_for = [&](std::size_t i) {
    if (done_fds[i] < 0) {
      wait_child(pids[i], opts.stop);
    } else {
      wait_done(pids[i], done_fds[i], opts.stop);
    }
  };
  std::vector<std::thread> others;
  for (std::size_t i = 1; i < pids.size(); ++i) {
    others.emplace_back([&, i] { wait_for(i); });
  }
  if (!pids.empty()) wait_for(0);
  for (std::thread& t : others) t.join();
  for (std::size_t i = 0; i < pids.size(); ++i) {
    if (done_fds[i] < 0) continue;
    try {
      ending_.push_back(reap_later(pids[i]));
    } catch (const std::system_error&) {  // no thread to be had: its exit waited for here
      reap(pids[i]);
    }
  }
  close_done();
  std::vector<std::optional<Report>> out;
  for (const std::string& p : paths) {
    out.push_back(read_report_file(p).report);
    ::unlink(p.c_str());
  }
  return out;
}

}  // namespace memdiag
