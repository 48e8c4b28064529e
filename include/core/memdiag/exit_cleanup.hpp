// Paths to remove when the process ends at once: a second signal _exit()s
// without unwinding, so a report's temporary beside its target or a
// search's folder of confirming runs would otherwise stay behind. Each is
// registered for as long as it exists (RAII) in fixed storage that a signal
// handler can walk without allocating.
#pragma once

#include <string>

namespace memdiag {

class CleanupPath {
 public:
  enum class Kind { kFile, kDirectory };  // a directory is emptied (one level) and removed
  CleanupPath(const std::string& path, Kind kind);
  ~CleanupPath();
  CleanupPath(const CleanupPath&) = delete;
  CleanupPath& operator=(const CleanupPath&) = delete;
  // The path is no longer this process's to remove (renamed into place).
  void release() noexcept;

 private:
  int slot_ = -1;  // -1: not registered (the table was full, or released)
};

// Removes every registered path: files first, then directories. Only
// async-signal-safe calls (unlink, open, getdents64, unlinkat, rmdir).
void remove_cleanup_paths_now() noexcept;

}  // namespace memdiag
