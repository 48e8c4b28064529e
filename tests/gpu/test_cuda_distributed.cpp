// Two ranks over NCCL, one GPU each (device kind nvidia-h200-x2). Skips,
// saying why, on a machine with fewer than two CUDA devices.
#include "launch.hpp"
#include "patterns.hpp"
#include "memdiag/exit_code.hpp"
#include "process.hpp"

#include <gtest/gtest.h>

#include <chrono>

using namespace memdiag;
using namespace memdiag::testkit;

namespace {

const std::string kDistExe = MEMDIAG_DIAGNOSTICS_EXE;

const std::string& two_gpus_unavailable() {
  static const std::string reason = device_unavailable(kDistExe, "cuda:1");
  return reason;
}

#define REQUIRE_TWO_GPUS()                                                                              \
  do {                                                                                                  \
    if (!two_gpus_unavailable().empty()) GTEST_SKIP() << "needs two CUDA devices: " << two_gpus_unavailable(); \
  } while (0)

std::vector<Report> run_two(const TempDir& d, const std::string& name, std::vector<std::string> extra) {
  std::vector<std::string> argv{kDistExe, "--device", "cuda", "-q"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return launch_and_load(argv, d, name, /*check_schema=*/false);
}

}  // namespace

TEST(CudaDistributed, TwoRanksOverNcclOneGpuEach) {
  REQUIRE_TWO_GPUS();
  TempDir d;
  const auto r = run_two(d, "beta", {"--case", "beta", "--steps", "3"});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].config.device, "cuda:0");
  EXPECT_EQ(r[1].config.device, "cuda:1");
  EXPECT_EQ(r[1].config.parallel.backend, "nccl");
  EXPECT_NEAR(forward_increment(r[0]), forward_increment(r[1]), 0.02 * forward_increment(r[1]));
  for (const Report& k : r) {
    // AdamW's two moments plus DDP's gradient buckets, all made in step 0.
    const double p = to_mib(k.model.parameter_bytes);
    EXPECT_NEAR(alloc_at(k, Phase::kCleanup, 0) - alloc_at(k, Phase::kOptimizerReady), 3 * p, 0.03 * 3 * p);
  }
}

TEST(CudaDistributed, RankZeroExtraSamplesAndSharding) {
  REQUIRE_TWO_GPUS();
  TempDir d;
  const auto extra = run_two(d, "alpha", {"--case", "alpha", "--steps", "2", "--rank-zero-extra-samples", "512"});
  EXPECT_NEAR(forward_increment(extra[0]) / forward_increment(extra[1]), 1.5, 0.05);
  const auto shard = run_two(d, "beta", {"--case", "beta", "--steps", "2", "--shard-optimizer-state"});
  for (const Report& k : shard) {
    const double p = to_mib(k.model.parameter_bytes);
    EXPECT_NEAR(sample_at(k, Phase::kCleanup, 0).tensors->optimizer_state_mib, p, 0.05 * p);  // 2P over 2 ranks
  }
}

TEST(CudaDistributed, APeerThatDiesStopsTheOtherWithAReport) {
  REQUIRE_TWO_GPUS();
  TempDir d;
  LaunchOptions lo;
  lo.kill_rank = 1;
  lo.kill_after_ms = 6000;
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<Proc> p = launch_ranks({kDistExe, "--case", "alpha", "--preset", "large", "--steps", "100000",
                                            "--device", "cuda", "-q", "--dist-timeout-s", "15", "-o",
                                            d.file("a-{rank}.json")},
                                           d, lo);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(p[1].exit_code, 128 + 9);
  EXPECT_EQ(p[0].exit_code, to_int(ExitCode::kFailed)) << p[0].err;
  EXPECT_LT(s, 120) << "rank 0 should give up within its 15 s timeout, plus start-up";
  EXPECT_EQ(load_report(d.file("a-0.json")).status, RunStatus::kFailed);
}
