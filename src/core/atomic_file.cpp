#include "memdiag/atomic_file.hpp"

#include "memdiag/errors.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <unistd.h>

namespace memdiag {
namespace fs = std::filesystem;

namespace {
std::string parent_of(const std::string& path) {
  fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}
}  // namespace

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      throw IoError(path + ": cannot create (" + std::strerror(errno) + ")");
    }
    out << text;
    out.flush();
    if (!out) {
      const std::string why = std::strerror(errno);
      out.close();
      std::remove(tmp.c_str());
      throw IoError(path + ": write failed (" + why + ")");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw IoError(path + ": cannot move into place (" + why + ")");
  }
}

std::string check_writable(const std::string& path) {
  if (path.empty()) return "path is empty";
  std::error_code ec;
  if (fs::is_directory(path, ec)) return "is a directory";
  const std::string dir = parent_of(path);
  if (!fs::is_directory(dir, ec)) return "directory " + dir + " does not exist";
  if (::access(dir.c_str(), W_OK) != 0) return "directory " + dir + " is not writable";
  if (fs::exists(path, ec) && ::access(path.c_str(), W_OK) != 0) return "file is not writable";
  return {};
}

}  // namespace memdiag
