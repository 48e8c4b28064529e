// What an output may land on. An invocation never replaces a file it reads
// (a case or plan file, a report, a baseline), the file one of its standard
// streams is redirected to, or a read-only file; memory_diagnostics
// replaces only its own reports (and, for names it made, only reports of the
// same configuration unless told to). One set of rules for both executables.
#pragma once

#include "memdiag/atomic_file.hpp"
#include "memdiag/report.hpp"

#include <string>
#include <vector>

#include <sys/types.h>

namespace memdiag {

// The files an invocation reads, by device and inode: another name for the
// same file ("./x", a symlink, a hard link) is still that file.
class InputFiles {
 public:
  // A path that is not there, or not a regular file, is not recorded
  // (standard input, a FIFO: nothing to replace).
  void add(const std::string& path, const std::string& role);
  // "the case file cases/mymodel.json" when output is one of them, else empty.
  std::string find(const std::string& output) const;

 private:
  struct File {
    dev_t dev;
    ino_t ino;
    std::string described;
  };
  std::vector<File> files_;
};

// Why output must not be written by this invocation (without the path:
// each caller words its own way), empty when it may: it is an input, the
// regular file a standard stream goes to (written through /dev/stdout or
// /dev/stderr it is appended to instead: see write_file_atomically), a
// read-only file, or what check_writable refuses.
std::string check_output(const std::string& output, const InputFiles& inputs);

// For memory_diagnostics: why an existing regular file at output is not a
// memdiag report it may replace, empty when it is one or nothing is there.
std::string check_replaces_only_a_report(const std::string& output);

// For memory_diagnostics: what is at output now (nothing, or that file:
// device, inode, size, times) is what its checks looked at, so its write
// may replace it. Called once the checks of a run's output passed.
void remember_output(const std::string& output);

// memory_diagnostics writing its report (write_file_guarded): the check and
// the write are one step. A file at output that is not the one this
// process's checks looked at, or its own last write (another run's,
// written while this one ran), is replaced only when it is a report of the
// same configuration (projection::kBaselineMatch); otherwise it stays and
// this report goes beside it, and the result says why and where.
GuardedWrite write_own_report(const std::string& output, const Report& report);

}  // namespace memdiag
