#include "memdiag/atomic_file.hpp"

#include "memdiag/errors.hpp"
#include "memdiag/exit_cleanup.hpp"

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include <cstdio>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

// POSIX calls rather than std::filesystem: this file is linked into the
// LibTorch executable too, and libtorch.so exports a std::filesystem of its
// own that crashed when bound instead of libstdc++'s (remove_all, torch 2.11).
namespace memdiag {
namespace {

std::string parent_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string why() { return std::strerror(errno); }

bool is_dir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The directory a missing one would be made in: the nearest ancestor that
// exists (which may be something other than a directory).
std::string nearest_existing(std::string dir) {
  struct stat st {};
  while (::stat(dir.c_str(), &st) != 0 && errno == ENOENT && dir != "/" && dir != ".") dir = parent_of(dir);
  return dir;
}

// mkdir -p: a report named into a directory that does not exist yet
// (-o 'reports/alpha-b{batch}.json' in a fresh checkout) gets it, as
// --output-dir does. Made only when a file is written, after every check.
void make_parents(const std::string& dir, const std::string& path) {
  if (dir.empty() || is_dir(dir)) return;
  make_parents(parent_of(dir), path);
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    throw IoError(path + ": cannot make directory " + dir + " (" + why() + ")");
  }
}

// Writes everything or throws; short writes are retried.
void write_all(int fd, const std::string& text, const std::string& path) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw IoError(path + ": write failed (" + why() + ")");
    done += static_cast<std::size_t>(n);
  }
}

// A short temporary name beside the target: <name>.tmp.<pid> could exceed
// the file-name limit for a legal long name.
std::string temp_beside(const std::string& target) {
  static std::atomic<unsigned> counter{0};
  return parent_of(target) + "/.memdiag-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".tmp";
}

// What write_file_atomically will write to: a regular file (replaced by
// rename), something to write into (a device, a FIFO, a pipe: never
// replaced), one of this process's open descriptors, or nothing yet.
struct Target {
  std::string path;        // for a symlink to a regular file, the file it names
  bool stream = false;     // write into it, do not replace it
  bool exists = false;
  int fd = -1;             // /dev/stdout and the like: written to this descriptor
  mode_t mode = 0644;
};

// The descriptor a path names: /dev/stdin|stdout|stderr, /dev/fd/N,
// /proc/self/fd/N. Through them a regular file behind a redirection
// would resolve to that file and be renamed over, losing what the shell
// had written there ("> log" or ">> log"); writing to the descriptor
// appends where the stream is.
int descriptor_named(const std::string& path) {
  if (path == "/dev/stdin") return 0;
  if (path == "/dev/stdout") return 1;
  if (path == "/dev/stderr") return 2;
  for (const char* prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    const std::string p = prefix;
    if (path.rfind(p, 0) != 0) continue;
    const std::string digits = path.substr(p.size());
    if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
    return std::stoi(digits);
  }
  return -1;
}

// Which standard stream (0, 1, 2) is redirected to the regular file st, or -1.
int stream_writing_to(const struct stat& st) {
  for (int fd = 0; fd <= 2; ++fd) {
    struct stat s {};
    if (::fstat(fd, &s) == 0 && S_ISREG(s.st_mode) && s.st_dev == st.st_dev && s.st_ino == st.st_ino) return fd;
  }
  return -1;
}

const char* stream_name(int fd) { return fd == 0 ? "standard input" : fd == 1 ? "standard output" : "standard error"; }

// A file without a write bit is one its owner marked not to be changed;
// root's access() says yes to it regardless, so the bits decide.
bool read_only(const struct stat& st, const std::string& path) {
  return (st.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) == 0 || ::access(path.c_str(), W_OK) != 0;
}

// why_not stays empty on success; otherwise it says why path cannot be
// written (without the path, which each caller words its own way).
Target resolve(const std::string& path, std::string& why_not) {
  Target t;
  t.path = path;
  if (const int fd = descriptor_named(path); fd >= 0) {
    struct stat fst {};
    if (::fstat(fd, &fst) != 0) {
      why_not = "descriptor " + std::to_string(fd) + " is not open";
    } else if (fd == 0 || (::fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY) {
      why_not = "descriptor " + std::to_string(fd) + " is not open for writing";
    }
    t.fd = fd;
    t.stream = t.exists = true;
    return t;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    struct stat lst {};
    if (errno != ENOENT) why_not = "cannot use (" + why() + ")";
    else if (::lstat(path.c_str(), &lst) == 0) why_not = "a symbolic link to nothing";
    return t;
  }
  if (S_ISDIR(st.st_mode)) {
    why_not = "is a directory";
    return t;
  }
  t.exists = true;
  t.mode = st.st_mode & 07777;
  if (!S_ISREG(st.st_mode)) {
    t.stream = true;
    return t;
  }
  if (const int fd = stream_writing_to(st); fd >= 0) {
    why_not = std::string("is the file ") + stream_name(fd) + " is redirected to; name another (or /dev/" +
              (fd == 2 ? "stderr" : "stdout") + " to append to it)";
    return t;
  }
  if (read_only(st, path)) {
    why_not = "is read-only";
    return t;
  }
  struct stat lst {};
  if (::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
    // Written through: the link stays and the file it names is replaced.
    if (char* real = ::realpath(path.c_str(), nullptr)) {
      t.path = real;
      std::free(real);
    }
  }
  return t;
}

// Creates tmp (registered for removal by the caller) with the text and
// the mode a replaced file keeps; removes it and throws on failure.
void fill_temp(const std::string& tmp, const Target& t, const std::string& path, const std::string& text) {
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError(path + ": cannot create (" + why() + ")");
  try {
    if (t.exists) (void)::fchmod(fd, t.mode);  // a replaced file keeps its permissions
    write_all(fd, text, path);
    if (::close(fd) != 0) throw IoError(path + ": write failed (" + why() + ")");
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
}

// An exclusive flock(2) on a directory while it lives. Best effort: a file
// system without locks (some network ones) is written without it.
class DirectoryLock {
 public:
  explicit DirectoryLock(const std::string& dir) : fd_(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
    if (fd_ < 0) return;
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      ::close(fd_);
      fd_ = -1;
      return;
    }
  }
  ~DirectoryLock() {
    if (fd_ >= 0) ::close(fd_);  // closing the descriptor lets the lock go
  }
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  int fd_;
};

// rename(2) that fails with EEXIST instead of replacing, where the file
// system can say so; plain rename where it cannot (the caller holds the
// directory's lock then).
int rename_no_replace(const std::string& from, const std::string& to) {
#ifdef RENAME_NOREPLACE
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return -1;
#endif
  return ::rename(from.c_str(), to.c_str());
}

// <dir>/<stem>-N<extension> for N from 2: the first name free, taken.
std::string keep_beside(const std::string& tmp, const std::string& target, const std::string& path) {
  const std::string dir = parent_of(target), base = base_of(target);
  const auto dot = base.find_last_of('.');
  const std::string stem = dot == std::string::npos || dot == 0 ? base : base.substr(0, dot);
  const std::string ext = dot == std::string::npos || dot == 0 ? "" : base.substr(dot);
  for (int n = 2; n < 10000; ++n) {
    const std::string candidate = dir + "/" + stem + "-" + std::to_string(n) + ext;
    if (rename_no_replace(tmp, candidate) == 0) return candidate;
    if (errno != EEXIST) throw IoError(path + ": cannot keep the report beside it as " + candidate + " (" + why() + ")");
  }
  throw IoError(path + ": no free name beside it to keep the report");
}

}  // namespace

GuardedWrite write_file_guarded(const std::string& path, const std::string& text,
                                const std::function<std::string()>& refuse) {
  if (path.empty()) throw IoError("empty path");
  std::string why_not;
  const Target t = resolve(path, why_not);
  if (!why_not.empty()) throw IoError(path + ": " + why_not);
  if (t.fd >= 0 || t.stream) {
    write_file_atomically(path, text);
    return {};
  }
  make_parents(parent_of(t.path), path);
  const std::string tmp = temp_beside(t.path);
  CleanupPath cleanup(tmp, CleanupPath::Kind::kFile);
  fill_temp(tmp, t, path, text);
  GuardedWrite out;
  try {
    const DirectoryLock lock(parent_of(t.path));
    for (int attempt = 0;; ++attempt) {
      struct stat st {};
      if (::stat(t.path.c_str(), &st) != 0) {
        if (rename_no_replace(tmp, t.path) == 0) break;
        if (errno != EEXIST) throw IoError(path + ": cannot move into place (" + why() + ")");
        // It appeared meanwhile (a writer without the lock): look at it,
        // unless it is still not there to stat (a link to nothing).
        if (attempt < 2) continue;
        out.refused = "something that is not a file appeared there meanwhile";
      } else {
        out.refused = S_ISREG(st.st_mode) ? refuse() : "is no longer a regular file";
      }
      if (!out.refused.empty()) {
        out.kept_at = keep_beside(tmp, t.path, path);
        break;
      }
      if (::rename(tmp.c_str(), t.path.c_str()) != 0) throw IoError(path + ": cannot move into place (" + why() + ")");
      break;
    }
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  cleanup.release();
  return out;
}

void write_file_atomically(const std::string& path, const std::string& text) {
  if (path.empty()) throw IoError("empty path");
  std::string why_not;
  const Target t = resolve(path, why_not);
  if (!why_not.empty()) throw IoError(path + ": " + why_not);
  if (t.fd >= 0) {
    write_all(t.fd, text, path);
    return;
  }
  if (t.stream) {
    const int fd = ::open(t.path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) throw IoError(path + ": cannot open (" + why() + ")");
    try {
      write_all(fd, text, path);
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(fd);
    return;
  }
  make_parents(parent_of(t.path), path);
  const std::string tmp = temp_beside(t.path);
  // Registered before it exists: a second signal while it is written
  // removes it rather than leaving a torn temporary behind.
  CleanupPath cleanup(tmp, CleanupPath::Kind::kFile);
  fill_temp(tmp, t, path, text);
  if (::rename(tmp.c_str(), t.path.c_str()) != 0) {
    const std::string reason = why();
    ::unlink(tmp.c_str());
    throw IoError(path + ": cannot move into place (" + reason + ")");
  }
  cleanup.release();
}

bool replaces_a_file(const std::string& path) {
  std::string why_not;
  const Target t = resolve(path, why_not);
  return why_not.empty() && t.exists && !t.stream;
}

std::string check_writable(const std::string& path) {
  if (path.empty()) return "path is empty";
  std::string why_not;
  const Target t = resolve(path, why_not);
  if (!why_not.empty()) return why_not;
  if (t.fd >= 0) return {};
  if (t.stream) return ::access(t.path.c_str(), W_OK) == 0 ? std::string() : "cannot write to it (" + why() + ")";
  const std::string dir = parent_of(t.path);
  if (!is_dir(dir)) {
    // Made when the file is written; what must hold now is that the
    // nearest directory that exists lets them be made.
    const std::string base = nearest_existing(dir);
    if (!is_dir(base)) return base + " is not a directory";
    // Proven by doing it, as below (root's access() says yes to /proc).
    const std::string probe = base + "/.memdiag-" + std::to_string(::getpid()) + ".dir";
    if (::mkdir(probe.c_str(), 0700) != 0) {
      return "directory " + dir + " does not exist and cannot be made in " + base + " (" + why() + ")";
    }
    ::rmdir(probe.c_str());
    return {};
  }
  const long name_max = ::pathconf(dir.c_str(), _PC_NAME_MAX);
  if (name_max > 0 && static_cast<long>(base_of(t.path).size()) > name_max) {
    return "file name longer than " + std::to_string(name_max) + " bytes";
  }
  // Proven by doing it: access() says yes to root on /proc and /sys, and
  // to anyone on a file system that later refuses the write.
  const std::string probe = temp_beside(t.path);
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return "directory " + dir + " is not writable (" + why() + ")";
  ::close(fd);
  ::unlink(probe.c_str());
  return {};
}

}  // namespace memdiag
