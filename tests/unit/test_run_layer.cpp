// The run layer without LibTorch: the plan resolved over a machine the test
// describes, the single options' ranges checked once, and a sweep run
// through a fake executor (tests/support/fake_executor.hpp).
#include "fake_executor.hpp"
#include "process.hpp"
#include "test_paths.hpp"

#include "memdiag/errors.hpp"
#include "memdiag/exit_code.hpp"
#include "memdiag/harness.hpp"
#include "memdiag/machine.hpp"
#include "memdiag/run_plan.hpp"

#include <gtest/gtest.h>

#include <filesystem>

using namespace memdiag;
using namespace memdiag::testkit;

namespace {

// A machine as the front sees one: CUDA in the runner or not, and devices
// known (a count) or not (a driver is there, and only CUDA can say more).
class SeenMachine final : public Machine {
 public:
  SeenMachine(bool compiled, std::optional<int> devices) : compiled_(compiled), devices_(devices) {}
  bool cuda_compiled() const override { return compiled_; }
  std::optional<int> cuda_device_count() const override { return devices_; }
  std::string allocator_settings() const override { return "expandable_segments:True"; }

 private:
  bool compiled_;
  std::optional<int> devices_;
};

HarnessOptions alpha(const TempDir& d, const std::string& device = "auto") {
  HarnessOptions opts;
  opts.runs = {RunRequest{"", "alpha", std::nullopt, 2, 1, {}, std::nullopt}};
  opts.device = device;
  opts.output = d.file("r.json");
  opts.case_dirs = {MEMDIAG_CASES_DIR};
  return opts;
}

std::string usage_error(const HarnessOptions& opts, const Machine& m) {
  try {
    resolve_plan(opts, m);
  } catch (const UsageError& e) {
    return e.what();
  }
  return {};
}

}  // namespace

TEST(RunPlan, TheDeviceIsAPlainValueResolvedOverTheMachine) {
  TempDir d;
  EXPECT_EQ(resolve_plan(alpha(d), SeenMachine(false, 0)).device.str(), "cpu");
  EXPECT_EQ(resolve_plan(alpha(d), SeenMachine(true, 0)).device.str(), "cpu");
  const ResolvedPlan cuda = resolve_plan(alpha(d), SeenMachine(true, 2));
  EXPECT_EQ(cuda.device.str(), "cuda:0");
  // A CUDA run's configuration starts from the process's allocator settings.
  EXPECT_EQ(cuda.process_allocator_settings, "expandable_segments:True");
  EXPECT_EQ(config_of(cuda.runs.front(), cuda, alpha(d)).allocator_settings, "expandable_segments:True");
  EXPECT_EQ(resolve_plan(alpha(d, "cuda:1"), SeenMachine(true, 2)).device.index, 1);
  EXPECT_NE(usage_error(alpha(d, "cuda:2"), SeenMachine(true, 2)).find("--device: cuda:2 does not exist"),
            std::string::npos);
  EXPECT_NE(usage_error(alpha(d, "cuda"), SeenMachine(false, 0)).find("no CUDA support"), std::string::npos);
  EXPECT_NE(usage_error(alpha(d, "cuda"), SeenMachine(true, 0)).find("CUDA is not available"), std::string::npos);
  EXPECT_NE(usage_error(alpha(d, "tpu"), SeenMachine(true, 1)).find("--device: 'tpu'"), std::string::npos);
}

// Where the machine cannot tell the device (the front, where a CUDA driver
// is present), the plan is still checked for all the device does not
// decide, and what it does is left: a snapshot's CUDA, a search's CPU, a
// report of another configuration (the device is part of it), the folder.
TEST(RunPlan, WithoutTheDeviceEveryCheckThatNeedsNoneIsMade) {
  TempDir d;
  const SeenMachine driver(true, std::nullopt);
  EXPECT_FALSE(check_plan(alpha(d), driver));
  EXPECT_TRUE(check_plan(alpha(d), SeenMachine(true, 0)));
  HarnessOptions unknown = alpha(d);
  unknown.runs.front().case_arg = "alfa";
  EXPECT_THROW(check_plan(unknown, driver), UsageError);
  HarnessOptions clash = alpha(d);
  clash.runs.push_back(clash.runs.front());
  EXPECT_THROW(check_plan(clash, driver), UsageError);
  HarnessOptions snapshot = alpha(d);
  snapshot.memory_snapshot = d.file("s.pickle");
  EXPECT_FALSE(check_plan(snapshot, driver));
  EXPECT_THROW(check_plan(snapshot, SeenMachine(true, 0)), UsageError);
  HarnessOptions folder = alpha(d);
  folder.output.clear();
  folder.output_dir = d.file("reports");
  EXPECT_FALSE(check_plan(folder, driver));
  EXPECT_FALSE(std::filesystem::exists(d.file("reports")));
  EXPECT_TRUE(check_plan(folder, SeenMachine(false, 0)));
  EXPECT_TRUE(std::filesystem::is_directory(d.file("reports")));
  // resolve_plan needs the device.
  EXPECT_THROW(resolve_plan(alpha(d), driver), Error);
}

// Each single option's range is checked in one place, resolve_plan: a
// program that sets the options itself meets the same refusal as the
// command line.
TEST(RunPlan, EachOptionsRangeIsOneCheck) {
  TempDir d;
  const SeenMachine cpu(false, 0);
  auto refused = [&](auto set, const std::string& flag) {
    HarnessOptions o = alpha(d);
    set(o);
    const std::string why = usage_error(o, cpu);
    EXPECT_EQ(why.rfind(flag + ": must be", 0), 0u) << why;
  };
  refused([](HarnessOptions& o) { o.memory_limit_mib = 0; }, "--memory-limit-mib");
  refused([](HarnessOptions& o) { o.memory_limit_mib = 2e9; }, "--memory-limit-mib");
  refused([](HarnessOptions& o) { o.dist_timeout_s = 0; }, "--dist-timeout-s");
  refused([](HarnessOptions& o) { o.dist_timeout_s = 1e6; }, "--dist-timeout-s");
  refused([](HarnessOptions& o) { o.rank_zero_extra_samples = -1; }, "--rank-zero-extra-samples");
  refused([](HarnessOptions& o) { o.shard_unit_modules = 0; }, "--shard-unit-modules");
  refused([](HarnessOptions& o) { o.snapshot_max_entries = 0; }, "--snapshot-max-entries");
  refused([](HarnessOptions& o) { o.seed = (std::uint64_t{1} << 53) + 1; }, "--seed");
  EXPECT_EQ(usage_error(alpha(d), cpu), "");
}

// A sweep through the executor: each run from a fresh state, each report
// written, the exit code the worst status's.
TEST(RunHarness, ASweepRunsEachConfigurationThroughTheExecutor) {
  TempDir d;
  FakeExecutor ex;
  HarnessOptions opts = alpha(d, "cpu");
  opts.runs = {RunRequest{"", "alpha", std::nullopt, 1000, 1, {}, std::nullopt},
               RunRequest{"", "alpha", std::nullopt, 2000, 1, {}, std::nullopt}};
  opts.output = d.file("r-{batch}.json");
  SearchLog log;
  opts.observer = &log;
  EXPECT_EQ(run_harness(opts, ex), to_int(ExitCode::kOom));
  EXPECT_EQ(ex.runs, (std::vector<std::pair<std::int64_t, bool>>{{1000, false}, {2000, false}}));
  EXPECT_EQ(ex.resets, 1);
  ASSERT_EQ(log.rows.size(), 2u);
  EXPECT_EQ(log.rows[0].status, RunStatus::kComplete);
  EXPECT_EQ(log.rows[1].status, RunStatus::kOom);
  EXPECT_TRUE(exists(d.file("r-1000.json")));
  EXPECT_TRUE(exists(d.file("r-2000.json")));
  EXPECT_TRUE(log.problems.empty());
}
