// Internal to memory_diagnostics's executables: where the front, the
// runners and the built-in cases sit relative to each other, the same under
// an install prefix and in a build tree, so each finds the others from its
// own path.
//   <root>/bin/memory_diagnostics                    the front: flags, --help, --list-cases,
//                                                    usage errors (no LibTorch: instant)
//   <root>/libexec/memdiag/memory_diagnostics-run    the runner (LibTorch), which the front
//                                                    execs, same argv, for a run
//   <root>/libexec/memdiag/memory_diagnostics-run-cpu  the same runner without LibTorch's CUDA
//                                                    half, for a run that cannot use CUDA
//                                                    (absent where LibTorch has no CUDA)
//   <root>/share/memdiag/cases                       the built-in cases
#pragma once

#include <string>
#include <vector>

namespace memdiag {

// The runner's path relative to the root, for CMake and messages.
inline constexpr const char* kRunnerInRoot = "libexec/memdiag/memory_diagnostics-run";

// This executable's path (/proc/self/exe, else argv0).
std::string self_executable(const std::string& argv0);

inline constexpr const char* kCpuRunnerInRoot = "libexec/memdiag/memory_diagnostics-run-cpu";

// The runners beside a front at front_exe.
std::string runner_of(const std::string& front_exe);
std::string cpu_runner_of(const std::string& front_exe);

// Where built-in cases are looked for, first to last: $MEMDIAG_CASES_DIR,
// <root>/share/memdiag/cases of the executable at exe (the front or the
// runner), then source_cases_dir (a build that was not installed; empty
// for none).
std::vector<std::string> default_case_dirs(const std::string& exe, const std::string& source_cases_dir);

}  // namespace memdiag
