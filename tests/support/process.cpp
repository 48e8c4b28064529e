#include "process.hpp"

#include <ftw.h>
#include <cstdio>

#include "memdiag/exit_code.hpp"

#include "json_schema.hpp"
#include "memdiag/report_reader.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace memdiag::testkit {
namespace fs = std::filesystem;

pid_t spawn(const std::vector<std::string>& argv, const std::string& in, const std::string& out,
            const std::string& err, const std::vector<std::string>& extra_env, const std::string& cwd) {
  // posix_spawn rather than fork: a test process that has touched CUDA must
  // not run fork handlers in a child (it crashed the gpu suite that way).
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, in.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_text(extra_env);
  for (char** e = environ; *e != nullptr; ++e) env_text.emplace_back(*e);  // first definition wins
  std::vector<char*> envp;
  for (std::string& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
  return pid;
}

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    throw std::runtime_error("cannot find a free port");
  }
  close(fd);
  return ntohs(a.sin_port);
}

namespace {

bool in_signal_mask(pid_t pid, const char* field, int sig) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field, 0) == 0) {
      return (std::stoull(line.substr(std::strlen(field)), nullptr, 16) & (1ULL << (sig - 1))) != 0;
    }
  }
  return false;
}

}  // namespace

bool catches_signal(pid_t pid, int sig) { return in_signal_mask(pid, "SigCgt:", sig); }
bool blocks_signal(pid_t pid, int sig) { return in_signal_mask(pid, "SigBlk:", sig); }

int wait_exit_code(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

namespace {
Proc run_with(const std::vector<std::string>& argv, const std::string& stdin_text, const std::string& cwd) {
  TempDir io("memdiag_io");
  const std::string in = io.file("in"), out = io.file("out"), err = io.file("err");
  write_text(in, stdin_text);
  Proc r;
  r.exit_code = wait_exit_code(spawn(argv, in, out, err, {}, cwd));
  r.out = read_text(out);
  r.err = read_text(err);
  return r;
}
}  // namespace

Proc run(const std::vector<std::string>& argv, const std::string& stdin_text) { return run_with(argv, stdin_text, {}); }
Proc run_in(const std::string& cwd, const std::vector<std::string>& argv) { return run_with(argv, {}, cwd); }

namespace {
std::string current_test_name() {
  const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = t ? std::string("memdiag_") + t->test_suite_name() + "_" + t->name() : "memdiag_test";
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  return name;
}
}  // namespace

TempDir::TempDir() : TempDir(current_test_name()) {}

TempDir::TempDir(const std::string& name) {
  std::string templ = (fs::temp_directory_path() / (name + ".XXXXXX")).string();
  if (!mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed");
  path_ = templ;
}
namespace {
int remove_entry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }
}  // namespace

// nftw rather than std::filesystem::remove_all: a test linked with
// libtorch.so binds that to libtorch's own export, which crashes.
TempDir::~TempDir() { ::nftw(path_.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS); }
std::string TempDir::file(const std::string& name) const { return (fs::path(path_) / name).string(); }

Report load_report(const std::string& path) {
  ReadResult r = read_report_file(path);
  if (r.error) {
    ADD_FAILURE() << r.error->what();
    return Report{};
  }
  return *r.report;
}

std::vector<std::string> schema_errors(const std::string& report_path) {
  return validate(load_json(MEMDIAG_SCHEMA_FILE), load_json(report_path));
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

bool exists(const std::string& path) { return fs::exists(path); }

std::string device_unavailable(const std::string& exe, const std::string& device) {
  TempDir d;
  const Proc r = run({exe, "--case", "gamma", "--steps", "1", "--device", device, "-q", "-o", d.file("p.json")});
  if (r.exit_code == to_int(ExitCode::kOk)) return {};
  return r.err.empty() ? "memory_diagnostics --device " + device + " exited " + std::to_string(r.exit_code) : r.err;
}

const Sample& sample_at(const Report& r, Phase phase, int step) {
  for (const Sample& s : r.samples) {
    if (s.phase == phase && (step < 0 ? !s.step : s.step == step)) return s;
  }
  ADD_FAILURE() << "no sample " << to_string(phase) << " step " << step;
  static const Sample none;
  return none;
}

double alloc_at(const Report& r, Phase phase, int step) { return sample_at(r, phase, step).allocated_mib; }

std::size_t sample_index(const nlohmann::json& report, Phase phase, int step) {
  const auto& samples = report.at("samples");
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const auto& s = samples[i];
    if (s.at("phase") == to_string(phase) && (step < 0 ? s.at("step").is_null() : s.at("step") == step)) return i;
  }
  ADD_FAILURE() << "no sample " << to_string(phase) << " step " << step;
  return 0;
}

int count_lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

std::vector<double> step_losses(const Report& r) {
  std::vector<double> out;
  for (const Sample& s : r.samples) {
    if (s.phase == Phase::kStep && s.loss) out.push_back(*s.loss);
  }
  return out;
}

void expect_same_training(const Report& a, const Report& b) {
  const std::vector<double> la = step_losses(a), lb = step_losses(b);
  ASSERT_EQ(la.size(), lb.size());
  ASSERT_FALSE(la.empty());
  for (std::size_t i = 0; i < la.size(); ++i) EXPECT_NEAR(la[i], lb[i], 1e-5 * std::fabs(lb[i])) << "step " << i;
  ASSERT_TRUE(a.model.final_parameter_sum_of_squares && b.model.final_parameter_sum_of_squares);
  const double squares = *b.model.final_parameter_sum_of_squares;
  EXPECT_NEAR(*a.model.final_parameter_sum_of_squares, squares, 1e-5 * squares);
  ASSERT_TRUE(a.model.final_parameter_sum && b.model.final_parameter_sum);
  EXPECT_NEAR(*a.model.final_parameter_sum, *b.model.final_parameter_sum, 1e-5 * std::sqrt(squares));
}

}  // namespace memdiag::testkit
