#pragma once

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

// Checks, before a long run, that write_file_atomically(path) will work: its
// directory exists and a file can be created there (tried, then removed:
// access() says yes to root on /proc), the name fits the file system's
// limit, path is not a directory. Returns why not, empty when writable.
std::string check_writable(const std::string& path);

// Whether write_file_atomically(path) would rename over an existing regular
// file (rather than create one, or write into a stream or a descriptor).
bool replaces_a_file(const std::string& path);

}  // namespace memdiag
