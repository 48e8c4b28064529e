// Running the real executables from tests, and reading what they wrote.
#pragma once

#include "memdiag/report.hpp"

#include <nlohmann/json.hpp>

#include <sys/types.h>

#include <string>
#include <vector>

namespace memdiag::testkit {

struct Proc {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Starts argv[0] (no shell) with stdin, stdout and stderr on the given files.
// extra_env ("NAME=value") is added to this process's environment.
pid_t spawn(const std::vector<std::string>& argv, const std::string& in, const std::string& out,
            const std::string& err, const std::vector<std::string>& extra_env = {});
// A TCP port on 127.0.0.1 that was free a moment ago.
int free_port();
int wait_exit_code(pid_t pid);  // 128 + signal when killed

// Runs argv[0] with the rest as arguments (no shell), capturing both streams.
Proc run(const std::vector<std::string>& argv, const std::string& stdin_text = {});

// A fresh directory under the system temp dir, removed by the destructor.
class TempDir {
 public:
  explicit TempDir(const std::string& name);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

Report load_report(const std::string& path);  // fails the test on error
std::vector<std::string> schema_errors(const std::string& report_path);
std::string read_text(const std::string& path);
void write_text(const std::string& path, const std::string& text);
bool exists(const std::string& path);

// Empty when memory_diagnostics (exe) can run a one-step case on device;
// otherwise its own one-line reason. Asks a child process so that the test
// process never initialises CUDA itself.
std::string device_unavailable(const std::string& exe, const std::string& device);

// Allocation (MiB) at the end of a phase of a step, or of a setup phase.
double alloc_at(const Report& r, const std::string& phase, int step = -1);
int count_lines(const std::string& s);

}  // namespace memdiag::testkit
