#include "memdiag/exit_cleanup.hpp"

#include <atomic>
#include <cstring>

#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace memdiag {
namespace {

constexpr int kSlots = 32;
constexpr std::size_t kMaxPath = 4096;

// A slot is free (0), being written (1) or ready (2); the handler reads
// only ready slots.
struct Slot {
  std::atomic<int> state{0};
  bool directory = false;
  char path[kMaxPath] = {};
};
static_assert(std::atomic<int>::is_always_lock_free, "a signal handler may only touch lock-free atomics");

Slot g_slots[kSlots];

// Removes the entries of one directory (not recursive: the folders
// registered hold files only) through getdents64, which, unlike readdir,
// does not allocate.
void empty_directory(const char* path) noexcept {
  const int fd = ::open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  alignas(8) char buf[4096];
  for (;;) {
    const long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
    if (n <= 0) break;
    for (long at = 0; at < n;) {
      struct Entry {
        unsigned long long ino;
        long long off;
        unsigned short reclen;
        unsigned char type;
        char name[1];
      };
      const auto* e = reinterpret_cast<const Entry*>(buf + at);
      if (std::strcmp(e->name, ".") != 0 && std::strcmp(e->name, "..") != 0) ::unlinkat(fd, e->name, 0);
      at += e->reclen;
    }
  }
  ::close(fd);
}

}  // namespace

CleanupPath::CleanupPath(const std::string& path, Kind kind) {
  if (path.size() >= kMaxPath) return;
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (!g_slots[i].state.compare_exchange_strong(expected, 1)) continue;
    g_slots[i].directory = kind == Kind::kDirectory;
    std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
    g_slots[i].state.store(2);
    slot_ = i;
    return;
  }
  // Table full: the path is left to the ordinary clean-up (a second signal
  // at that moment would leave it).
}

CleanupPath::~CleanupPath() { release(); }

void CleanupPath::release() noexcept {
  if (slot_ < 0) return;
  g_slots[slot_].state.store(0);
  slot_ = -1;
}

void remove_cleanup_paths_now() noexcept {
  for (Slot& s : g_slots) {
    if (s.state.load() == 2 && !s.directory) ::unlink(s.path);
  }
  for (Slot& s : g_slots) {
    if (s.state.load() != 2 || !s.directory) continue;
    empty_directory(s.path);
    ::rmdir(s.path);
  }
}

}  // namespace memdiag
