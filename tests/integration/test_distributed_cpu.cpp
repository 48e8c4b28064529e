// Data-parallel runs on the CPU: two real processes joined over Gloo, started
// with the launcher's variables as torchrun would set them.
#include "launch.hpp"
#include "patterns.hpp"
#include "memdiag/exit_code.hpp"
#include "process.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

using namespace memdiag;
using namespace memdiag::testkit;

namespace {

const std::string kDistExe = MEMDIAG_DIAGNOSTICS_EXE;

std::vector<Report> run_two(const TempDir& d, const std::string& name, std::vector<std::string> extra) {
  std::vector<std::string> argv{kDistExe, "--device", "cpu", "-q", "--dist-timeout-s", "30"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return launch_and_load(argv, d, name, /*check_schema=*/true);
}

}  // namespace

TEST(DistributedCpu, TwoRanksOverGlooWithPersistentGradientBuckets) {
  TempDir d;
  const std::vector<Report> r = run_two(d, "alpha", {"--case", "alpha", "--steps", "3"});
  ASSERT_EQ(r.size(), 2u);
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(r[k].config.parallel.rank, k);
    EXPECT_EQ(r[k].config.parallel.world_size, 2);
    EXPECT_EQ(r[k].config.parallel.backend, "gloo");
    EXPECT_EQ(r[k].status, RunStatus::kComplete);
    // DDP's buckets: one flat copy of the gradients, made at the first
    // backward and kept, shifts the baseline by the parameter bytes.
    const double p = to_mib(r[k].model.parameter_bytes);
    EXPECT_NEAR(alloc_at(r[k], Phase::kCleanup, 0) - alloc_at(r[k], Phase::kOptimizerReady), p, 0.03 * p);
    EXPECT_NEAR(alloc_at(r[k], Phase::kCleanup, 2), alloc_at(r[k], Phase::kCleanup, 0), 0.01 * p);
  }
  EXPECT_NEAR(forward_increment(r[0]), forward_increment(r[1]), 0.01 * forward_increment(r[1]));
  const Proc cmp = run({MEMDIAG_COMPARE_EXE, d.path(), "--format", "json"});
  const auto j = nlohmann::json::parse(cmp.out);
  ASSERT_EQ(j["groups"].size(), 1u);
  ASSERT_EQ(j["groups"][0]["distributed"].size(), 1u);
  EXPECT_EQ(j["groups"][0]["distributed"][0]["ranks"].size(), 2u);
  EXPECT_FALSE(j["groups"][0]["distributed"][0]["imbalanced"]);
  EXPECT_EQ(j["groups"][0]["dominant_cause"], "activations");
}

TEST(DistributedCpu, RankZeroExtraSamplesMakeRankZeroTheConstraint) {
  TempDir d;
  const std::vector<Report> r =
      run_two(d, "alpha", {"--case", "alpha", "--steps", "2", "--rank-zero-extra-samples", "512"});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_NEAR(forward_increment(r[0]) / forward_increment(r[1]), 1.5, 0.05);  // 1536 against 1024 samples
  const Proc cmp = run({MEMDIAG_COMPARE_EXE, d.path(), "--format", "json"});
  const auto dist = nlohmann::json::parse(cmp.out)["groups"][0]["distributed"][0];
  EXPECT_EQ(dist["capacity_constraint_rank"], 0);
  EXPECT_TRUE(dist["imbalanced"]);
}

TEST(DistributedCpu, ShardedOptimizerStateIsHalfPerRank) {
  TempDir d;
  const std::vector<Report> full = run_two(d, "full", {"--case", "beta", "--steps", "2"});
  const std::vector<Report> shard = run_two(d, "shard", {"--case", "beta", "--steps", "2", "--shard-optimizer-state"});
  for (int k = 0; k < 2; ++k) {
    const double state_full = sample_at(full[k], Phase::kCleanup, 0).tensors->optimizer_state_mib;
    const double state_shard = sample_at(shard[k], Phase::kCleanup, 0).tensors->optimizer_state_mib;
    EXPECT_NEAR(state_full, 2 * to_mib(full[k].model.parameter_bytes), 1e-6);
    EXPECT_NEAR(state_shard, state_full / 2, 0.05 * state_full) << "rank " << k;
    // The allocator sees the same saving.
    EXPECT_NEAR(alloc_at(full[k], Phase::kCleanup, 0) - alloc_at(shard[k], Phase::kCleanup, 0),
                state_full - state_shard, 0.02 * state_full);
    EXPECT_EQ(shard[k].config.parallel.mode, ParallelMode::kZero1);
  }
}

TEST(DistributedCpu, APeerThatNeverJoinsFailsWithinTheTimeout) {
  TempDir d;
  LaunchOptions lo;
  lo.start_ranks = 1;
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<Proc> p = launch_ranks(
      {kDistExe, "--case", "beta", "--device", "cpu", "-q", "--dist-timeout-s", "3", "-o", d.file("b.json")}, d, lo);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(p[0].exit_code, to_int(ExitCode::kFailed));
  EXPECT_NE(p[0].err.find("rank 0: run failed"), std::string::npos) << p[0].err;
  EXPECT_LT(s, 30);
  const Report r = load_report(d.file("b-rank0.json"));  // no {rank}: -rankK is added
  EXPECT_EQ(r.status, RunStatus::kFailed);
}

// Replicated, and fully sharded (the peer dies inside a unit's gather or a
// reduce-scatter rather than an all-reduce).
TEST(DistributedCpu, APeerThatDiesMidRunStopsTheOthers) {
  for (const std::string& mode : {std::string("replicated"), std::string("--shard=parameters")}) {
    SCOPED_TRACE(mode);
    TempDir d;
    LaunchOptions lo;
    lo.kill_rank = 1;
    lo.kill_after_ms = 3000;
    std::vector<std::string> argv{kDistExe, "--case", "alpha", "--preset", "medium", "--steps", "200", "--device", "cpu",
                                  "-q", "--dist-timeout-s", "10", "-o", d.file("a-{rank}.json")};
    if (mode == "--shard=parameters") argv.push_back(mode);
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<Proc> p = launch_ranks(argv, d, lo);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(p[0].exit_code, to_int(ExitCode::kFailed)) << p[0].err;
    EXPECT_EQ(p[1].exit_code, 128 + 9);
    EXPECT_LT(s, 60);
    EXPECT_EQ(load_report(d.file("a-0.json")).status, RunStatus::kFailed);
  }
}

TEST(DistributedCpu, MalformedLauncherVariablesAreAUsageError) {
  TempDir d;
  // A rank outside its world; RANK or WORLD_SIZE without the other (no
  // launcher sets one alone: the run would be a single process that is not
  // the rank the job meant). Each names the variable, exit 2, nothing written.
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"RANK=3", "WORLD_SIZE=2"}, "RANK='3'"},
      {{"RANK=1"}, "RANK='1' is set and WORLD_SIZE is not"},
      {{"WORLD_SIZE=2"}, "WORLD_SIZE='2' is set and RANK is not"},
  };
  for (const auto& [environment, says] : cases) {
    const pid_t pid = spawn({kDistExe, "--case", "beta", "--device", "cpu", "-o", d.file("b.json")}, "/dev/null",
                            d.file("o"), d.file("e"), environment);
    const int code = wait_exit_code(pid);
    const std::string err = read_text(d.file("e"));
    EXPECT_EQ(code, to_int(ExitCode::kUsage)) << says << ": " << err;
    EXPECT_NE(err.find(says), std::string::npos) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_FALSE(exists(d.file("b.json"))) << says;
  }
}

// Ranks sharing a host share its cores: each takes its part of the thread
// pool a lone process would use (measured: four ranks each spinning every
// core's thread ran 3.6x slower), says so in its report, and leaves the
// pool alone where OMP_NUM_THREADS chose.
TEST(DistributedCpu, RanksOnOneHostShareItsCoresUnlessOmpNumThreadsChose) {
  TempDir d;
  auto threads_note = [](const Report& r) -> std::string {
    for (const Event& e : r.events) {
      if (e.kind == EventKind::kNote && e.message.rfind("CPU threads: ", 0) == 0) return e.message;
    }
    return "";
  };
  const std::vector<std::string> argv{kDistExe, "--device", "cpu", "-q", "--dist-timeout-s", "30", "--case", "alpha",
                                      "--steps", "1", "--batch-size-per-device", "8"};
  for (const Report& r : launch_and_load(argv, d, "shared", /*check_schema=*/true)) {
    const std::string note = threads_note(r);
    int mine = 0, all = 0;
    if (std::thread::hardware_concurrency() >= 2) {
      ASSERT_EQ(std::sscanf(note.c_str(), "CPU threads: %d per rank (the %d a lone process would use", &mine, &all), 2)
          << note;
      EXPECT_EQ(mine, std::max(1, all / 2)) << note;
      EXPECT_LT(mine, all) << note;
      EXPECT_NE(note.find("shared among this host's 2 ranks"), std::string::npos) << note;
    }
  }
  LaunchOptions chosen;
  chosen.env = {"OMP_NUM_THREADS=1"};
  for (const Report& r : launch_and_load(argv, d, "chosen", /*check_schema=*/true, chosen)) {
    EXPECT_EQ(threads_note(r), "");
  }
  // One rank per host (LOCAL_WORLD_SIZE=1, as torchrun sets it across hosts): the whole pool.
  LaunchOptions apart;
  apart.env = {"LOCAL_WORLD_SIZE=1"};
  for (const Report& r : launch_and_load(argv, d, "apart", /*check_schema=*/true, apart)) {
    EXPECT_EQ(threads_note(r), "");
  }
}

TEST(DistributedCpu, ASweepWalksTheSameListOnEveryRank) {
  TempDir d;
  const std::vector<Proc> ranks = launch_ranks({kDistExe, "--device", "cpu", "--dist-timeout-s", "30", "--case",
                                                "alpha", "--steps", "2", "--batch-size-per-device", "4,64", "-o",
                                                d.file("a-b{batch}-{rank}.json")},
                                               d, LaunchOptions{});
  ASSERT_EQ(ranks.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(ranks[r].exit_code, to_int(ExitCode::kOk)) << ranks[r].err;
    for (int b : {4, 64}) {
      const std::string f = d.file("a-b" + std::to_string(b) + "-" + std::to_string(r) + ".json");
      ASSERT_TRUE(exists(f)) << f;
      const Report rep = load_report(f);
      EXPECT_EQ(rep.config.parallel.rank, r);
      EXPECT_EQ(rep.config.batch_size_per_device, b);
      EXPECT_EQ(rep.status, RunStatus::kComplete);
    }
  }
  // Only rank 0 talks: its progress lines, none from rank 1.
  EXPECT_NE(ranks[0].err.find("[2/2] alpha batch 64: complete"), std::string::npos) << ranks[0].err;
  EXPECT_EQ(ranks[1].err.find("[1/2]"), std::string::npos) << ranks[1].err;
}
