#include "install_layout.hpp"

#include <cstdlib>
#include <filesystem>

namespace memdiag {
namespace fs = std::filesystem;

namespace {

// <root> of an executable in bin/ or in libexec/memdiag/.
fs::path root_of(const std::string& exe) {
  const fs::path dir = fs::path(exe).parent_path();
  const fs::path runner_dir = fs::path(kRunnerInRoot).parent_path();
  if (dir.filename() == runner_dir.filename() && dir.parent_path().filename() == runner_dir.parent_path()) {
    return dir.parent_path().parent_path();
  }
  return dir.parent_path();
}

}  // namespace

std::string self_executable(const std::string& argv0) {
  std::error_code ec;
  const fs::path exe = fs::canonical("/proc/self/exe", ec);
  return ec ? argv0 : exe.string();
}

std::string runner_of(const std::string& front_exe) {
  return (root_of(front_exe) / kRunnerInRoot).lexically_normal().string();
}

std::string cpu_runner_of(const std::string& front_exe) {
  return (root_of(front_exe) / kCpuRunnerInRoot).lexically_normal().string();
}

std::vector<std::string> default_case_dirs(const std::string& exe, const std::string& source_cases_dir) {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("MEMDIAG_CASES_DIR"); env && *env) dirs.emplace_back(env);
  dirs.push_back((root_of(exe) / "share" / "memdiag" / "cases").lexically_normal().string());
  if (!source_cases_dir.empty()) dirs.push_back(source_cases_dir);
  return dirs;
}

}  // namespace memdiag
