#pragma once

#include <string>

namespace memdiag {

// Writes text to path via "<path>.tmp.<pid>" and rename(2). On any failure the
// temporary is removed and IoError names the path and errno text.
void write_file_atomically(const std::string& path, const std::string& text);

// Checks, before a long run, that path can be created: its directory exists
// and is writable, and path itself is not a directory. Returns an error
// message, empty when writable. Leaves nothing behind.
std::string check_writable(const std::string& path);

}  // namespace memdiag
