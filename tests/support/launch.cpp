#include "launch.hpp"

#include "memdiag/exit_code.hpp"

#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <thread>

namespace memdiag::testkit {

std::vector<Proc> launch_ranks(const std::vector<std::string>& argv, const TempDir& dir, const LaunchOptions& o) {
  const int port = free_port();
  const int n = o.start_ranks < 0 ? o.world_size : o.start_ranks;
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    const std::string tag = "rank" + std::to_string(r);
    std::vector<std::string> env{"RANK=" + std::to_string(r), "LOCAL_RANK=" + std::to_string(r),
                                 "WORLD_SIZE=" + std::to_string(o.world_size), "MASTER_ADDR=127.0.0.1",
                                 "MASTER_PORT=" + std::to_string(port), "NCCL_NVLS_ENABLE=0"};
    env.insert(env.end(), o.env.begin(), o.env.end());
    pids.push_back(spawn(argv, "/dev/null", dir.file(tag + ".out"), dir.file(tag + ".err"), env));
  }
  if (o.kill_rank >= 0 && o.kill_rank < n) {
    std::this_thread::sleep_for(std::chrono::milliseconds(o.kill_after_ms));
    kill(pids[static_cast<std::size_t>(o.kill_rank)], SIGKILL);
  }
  std::vector<Proc> out;
  for (int r = 0; r < n; ++r) {
    Proc p;
    p.exit_code = wait_exit_code(pids[static_cast<std::size_t>(r)]);
    p.out = read_text(dir.file("rank" + std::to_string(r) + ".out"));
    p.err = read_text(dir.file("rank" + std::to_string(r) + ".err"));
    out.push_back(p);
  }
  return out;
}

std::vector<Report> launch_and_load(std::vector<std::string> argv, const TempDir& dir, const std::string& name,
                                    bool check_schema, const LaunchOptions& o) {
  argv.push_back("-o");
  argv.push_back(dir.file(name + "-{rank}.json"));
  const std::vector<Proc> procs = launch_ranks(argv, dir, o);
  std::vector<Report> reports;
  for (std::size_t r = 0; r < procs.size(); ++r) {
    EXPECT_EQ(procs[r].exit_code, to_int(ExitCode::kOk)) << "rank " << r << ": " << procs[r].err;
    const std::string path = dir.file(name + "-" + std::to_string(r) + ".json");
    if (check_schema) {
      EXPECT_TRUE(schema_errors(path).empty());
    }
    reports.push_back(load_report(path));
  }
  return reports;
}

void PrintTo(const World& w, std::ostream* os) { *os << "world" << w.n; }

std::string world_name(const ::testing::TestParamInfo<World>& i) { return "world" + std::to_string(i.param.n); }

}  // namespace memdiag::testkit
