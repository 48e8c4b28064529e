// Running the real executables from tests, and reading what they wrote.
#pragma once

#include "memdiag/report.hpp"
#include "test_paths.hpp"

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
// cwd, when given, is the child's working directory.
pid_t spawn(const std::vector<std::string>& argv, const std::string& in, const std::string& out,
            const std::string& err, const std::vector<std::string>& extra_env = {}, const std::string& cwd = {});
// A TCP port on 127.0.0.1 that was free a moment ago.
int free_port();
int wait_exit_code(pid_t pid);  // 128 + signal when killed
// Whether process pid has a handler installed for sig, or has it blocked
// (/proc's SigCgt and SigBlk masks); false once it is gone.
bool catches_signal(pid_t pid, int sig);
bool blocks_signal(pid_t pid, int sig);

// Runs argv[0] with the rest as arguments (no shell), capturing both streams.
Proc run(const std::vector<std::string>& argv, const std::string& stdin_text = {});
// The same, started in directory cwd (relative paths in argv are from there).
Proc run_in(const std::string& cwd, const std::vector<std::string>& argv);

// A fresh directory under the system temp dir, removed by the destructor.
class TempDir {
 public:
  // Named after the running test unless a name is given; removed, with
  // everything in it, by the destructor.
  TempDir();
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

// The sample of a phase of a step (step -1: a setup phase), found by phase
// and step rather than by position; fails the test when absent.
const Sample& sample_at(const Report& r, Phase phase, int step = -1);
// Its allocation (MiB).
double alloc_at(const Report& r, Phase phase, int step = -1);
// The index of that sample in a report's JSON "samples" array.
std::size_t sample_index(const nlohmann::json& report, Phase phase, int step = -1);
int count_lines(const std::string& s);

// Each step's loss, as the step samples give it.
std::vector<double> step_losses(const Report& r);
// Two runs that must train alike (a sharded or split run against the
// replicated one or a single process): every step's loss, and the weights
// the last step left (their sum and sum of squares), within 1e-5 relative.
void expect_same_training(const Report& a, const Report& b);

}  // namespace memdiag::testkit
