// Data parallel at world 4 on the CPU: four processes over Gloo, started as
// torchrun would start them, with the checks the two-rank tests make.
#include "launch.hpp"
#include "memdiag/exit_code.hpp"
#include "patterns.hpp"
#include "process.hpp"

#include <gtest/gtest.h>

#include <chrono>

using namespace memdiag;
using namespace memdiag::testkit;

namespace {

const std::string kWorld4Exe = MEMDIAG_DIAGNOSTICS_EXE;
constexpr int kWorld = 4;

std::vector<Report> run_four(const TempDir& d, const std::string& name, std::vector<std::string> extra) {
  std::vector<std::string> argv{kWorld4Exe, "--device", "cpu", "-q", "--dist-timeout-s", "60"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  LaunchOptions lo;
  lo.world_size = kWorld;
  return launch_and_load(argv, d, name, /*check_schema=*/true, lo);
}

nlohmann::json compare_json(const std::string& dir) {
  const Proc cmp = run({MEMDIAG_COMPARE_EXE, dir, "--format", "json"});
  EXPECT_EQ(cmp.exit_code, to_int(ExitCode::kOk)) << cmp.err;
  return nlohmann::json::parse(cmp.out);
}

}  // namespace

TEST(DistributedWorld4, EqualWorkloadsGiveEqualFiguresOnEveryRank) {
  TempDir d;
  const std::vector<Report> r = run_four(d, "alpha", {"--case", "alpha", "--steps", "2", "--batch-size-per-device", "256"});
  ASSERT_EQ(r.size(), 4u);
  for (int k = 0; k < kWorld; ++k) {
    EXPECT_EQ(r[k].config.parallel.rank, k);
    EXPECT_EQ(r[k].config.parallel.world_size, kWorld);
    EXPECT_NEAR(forward_increment(r[k]), forward_increment(r[0]), 0.01 * forward_increment(r[0])) << "rank " << k;
    expect_same_measurements(r[0], r[k], "rank " + std::to_string(k) + " against rank 0");
  }
  const auto dist = compare_json(d.path())["groups"][0]["distributed"][0];
  EXPECT_EQ(dist["ranks"].size(), 4u);
  EXPECT_FALSE(dist["imbalanced"]);
}

TEST(DistributedWorld4, RankZeroExtraSamplesMakeRankZeroTheConstraint) {
  TempDir d;
  const std::vector<Report> r = run_four(
      d, "alpha", {"--case", "alpha", "--steps", "2", "--batch-size-per-device", "256", "--rank-zero-extra-samples", "256"});
  ASSERT_EQ(r.size(), 4u);
  EXPECT_NEAR(forward_increment(r[0]) / forward_increment(r[3]), 2.0, 0.1);  // 512 against 256 samples
  const auto dist = compare_json(d.path())["groups"][0]["distributed"][0];
  EXPECT_EQ(dist["ranks"].size(), 4u);
  EXPECT_EQ(dist["capacity_constraint_rank"], 0);
  EXPECT_TRUE(dist["imbalanced"]);
}

TEST(DistributedWorld4, ShardingKeepsAboutTwoQuartersOfTheParametersPerRank) {
  TempDir d;
  const std::vector<Report> full = run_four(d, "full", {"--case", "beta", "--steps", "2"});
  const std::vector<Report> shard = run_four(d, "shard", {"--case", "beta", "--steps", "2", "--shard-optimizer-state"});
  ASSERT_EQ(full.size(), 4u);
  ASSERT_EQ(shard.size(), 4u);
  double total = 0;
  for (int k = 0; k < kWorld; ++k) {
    const double p = to_mib(full[k].model.parameter_bytes);
    const double state_full = sample_at(full[k], Phase::kCleanup, 0).tensors->optimizer_state_mib;
    const double state_shard = sample_at(shard[k], Phase::kCleanup, 0).tensors->optimizer_state_mib;
    EXPECT_NEAR(state_full, 2 * p, 1e-6) << "rank " << k;
    // Four 16 MiB matrices and a small one, greedily balanced: one each.
    EXPECT_NEAR(state_shard, 2 * p / kWorld, 0.05 * 2 * p) << "rank " << k;
    total += state_shard;
    // The persistent increase: AdamW's 2P plus DDP's P of buckets, or 2P/4 plus P.
    const double rise_full = alloc_at(full[k], Phase::kCleanup, 0) - alloc_at(full[k], Phase::kOptimizerReady);
    const double rise_shard = alloc_at(shard[k], Phase::kCleanup, 0) - alloc_at(shard[k], Phase::kOptimizerReady);
    EXPECT_NEAR(rise_full / p, 3.0, 0.05) << "rank " << k;
    EXPECT_NEAR(rise_shard / p, 1.5, 0.1) << "rank " << k;
  }
  EXPECT_NEAR(total, 2 * to_mib(full[0].model.parameter_bytes), 1e-3);  // every parameter has one owner
}

TEST(DistributedWorld4, ARankKilledMidRunStopsTheOtherThree) {
  TempDir d;
  LaunchOptions lo;
  lo.world_size = kWorld;
  lo.kill_rank = 2;
  lo.kill_after_ms = 4000;
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<Proc> p = launch_ranks({kWorld4Exe, "--case", "alpha", "--preset", "medium", "--steps", "200",
                                            "--device", "cpu", "-q", "--dist-timeout-s", "10", "-o",
                                            d.file("a-{rank}.json")},
                                           d, lo);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[2].exit_code, 128 + 9);
  for (int k : {0, 1, 3}) {
    EXPECT_EQ(p[k].exit_code, to_int(ExitCode::kFailed)) << "rank " << k << ": " << p[k].err;
    EXPECT_EQ(load_report(d.file("a-" + std::to_string(k) + ".json")).status, RunStatus::kFailed) << "rank " << k;
  }
  EXPECT_LT(s, 90);
}
