#include "memdiag/atomic_file.hpp"

#include "memdiag/errors.hpp"

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
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
// replaced), or nothing yet.
struct Target {
  std::string path;        // for a symlink to a regular file, the file it names
  bool stream = false;     // write into it, do not replace it
  bool exists = false;
  mode_t mode = 0644;
};

// why_not stays empty on success; otherwise it says why path cannot be
// written (without the path, which each caller words its own way).
Target resolve(const std::string& path, std::string& why_not) {
  Target t;
  t.path = path;
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

}  // namespace

void write_file_atomically(const std::string& path, const std::string& text) {
  if (path.empty()) throw IoError("empty path");
  std::string why_not;
  const Target t = resolve(path, why_not);
  if (!why_not.empty()) throw IoError(path + ": " + why_not);
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
  const std::string tmp = temp_beside(t.path);
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
  if (::rename(tmp.c_str(), t.path.c_str()) != 0) {
    const std::string reason = why();
    ::unlink(tmp.c_str());
    throw IoError(path + ": cannot move into place (" + reason + ")");
  }
}

std::string check_writable(const std::string& path) {
  if (path.empty()) return "path is empty";
  std::string why_not;
  const Target t = resolve(path, why_not);
  if (!why_not.empty()) return why_not;
  if (t.stream) return ::access(t.path.c_str(), W_OK) == 0 ? std::string() : "cannot write to it (" + why() + ")";
  const std::string dir = parent_of(t.path);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return "directory " + dir + " does not exist";
  const long name_max = ::pathconf(dir.c_str(), _PC_NAME_MAX);
  if (name_max > 0 && static_cast<long>(base_of(t.path).size()) > name_max) {
    return "file name longer than " + std::to_string(name_max) + " bytes";
  }
  if (t.exists && ::access(t.path.c_str(), W_OK) != 0) return "file is not writable";
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
