#pragma once

#include <functional>
#include <string>

namespace memdiag {

// Writes text to path via a temporary beside it (".memdiag-<pid>-<n>.tmp")
// and rename(2), so a reader never sees half a file. A symbolic link is
// written through (the link stays, the file it names is replaced); a
// device, FIFO or pipe (/dev/null, process substitution) is written into,
// never replaced; /dev/stdout, /dev/stderr and /dev/fd/N are written to
// that descriptor (appended where a redirection points). Refused: a
// read-only file, and the regular file a standard stream is redirected to
// (renaming over it would lose the log). On any failure the temporary is
// removed and IoError names the path and errno's text; a second signal
// meanwhile removes it too (memdiag/exit_cleanup.hpp).
void write_file_atomically(const std::string& path, const std::string& text);

// write_file_atomically with a last look at what it would replace, made
// with the target's directory locked (flock(2) on the directory, which
// every guarded write takes) right before the rename, so that the look and
// the write are one step for every guarded writer. `refuse` is asked only
// when a file is there then, and says why not to replace it (empty: go
// ahead). Refused, the file stays as it is and the text goes to a new name
// beside it (<stem>-N<extension>, N from 2, created without replacing
// anything): nothing is lost either way. A target with nothing there is
// created without replacing what may have appeared meanwhile
// (renameat2's RENAME_NOREPLACE where the file system has it). Streams and
// descriptors are written as write_file_atomically writes them.
struct GuardedWrite {
  std::string refused;  // why the target was not replaced; empty when it was written
  std::string kept_at;  // where the text went instead
};
GuardedWrite write_file_guarded(const std::string& path, const std::string& text,
                                const std::function<std::string()>& refuse);

// Checks, before a long run, that write_file_atomically(path) will work: its
// directory exists and a file can be created there (tried, then removed:
// access() says yes to root on /proc), the name fits the file system's
// limit, path is not a directory. Returns why not, empty when writable.
std::string check_writable(const std::string& path);

// Whether write_file_atomically(path) would rename over an existing regular
// file (rather than create one, or write into a stream or a descriptor).
bool replaces_a_file(const std::string& path);

}  // namespace memdiag
