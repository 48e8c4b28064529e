#include "memdiag/run_spec.hpp"

#include <gtest/gtest.h>

using namespace memdiag;

TEST(RunSpec, ArgvSpellsOnlyWhatIsSet) {
  RunSpec r;
  r.case_ref = "alpha";
  r.output = "out/alpha-batch1.json";
  r.batch_size_per_device = 1;
  EXPECT_EQ(to_argv(r), (std::vector<std::string>{"memory_diagnostics", "--case", "alpha", "--batch-size-per-device",
                                                  "1", "--output", "out/alpha-batch1.json"}));
  r.device = "cpu";
  r.preset = "small";
  r.memory_limit_mib = 512.5;
  r.seed = 7;
  EXPECT_EQ(shell_command(to_argv(r, "bin/memory_diagnostics")),
            "bin/memory_diagnostics --case alpha --device cpu --preset small --batch-size-per-device 1 --seed 7 "
            "--memory-limit-mib 512.5 --output out/alpha-batch1.json");
  // The search for what fits: its flag after the limit it searches under.
  r.batch_size_per_device.reset();
  r.find_max_batch = true;
  EXPECT_EQ(shell_command(to_argv(r)), "memory_diagnostics --case alpha --device cpu --preset small --seed 7 "
                                       "--memory-limit-mib 512.5 --find-max-batch --output out/alpha-batch1.json");
}

TEST(RunSpec, DataParallelRunsUnderTorchrun) {
  RunSpec r;
  r.case_ref = "beta";
  r.world_size = 2;
  r.mode = ParallelMode::kZero1;
  r.output = "beta-{rank}.json";
  const auto a = to_argv(r);
  ASSERT_GE(a.size(), 4u);
  EXPECT_EQ(a[0], "torchrun");
  EXPECT_EQ(a[1], "--nproc-per-node=2");
  EXPECT_EQ(a[3], "memory_diagnostics");
  EXPECT_EQ(a.back(), "beta-{rank}.json");
  EXPECT_NE(shell_command(a).find("--shard=optimizer --output 'beta-{rank}.json'"), std::string::npos);
}

TEST(RunSpec, ShellQuotingSurvivesAnyPath) {
  EXPECT_EQ(shell_quote("plain/path-1.json"), "plain/path-1.json");
  EXPECT_EQ(shell_quote("my model.json"), "'my model.json'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("$(rm -rf x)"), "'$(rm -rf x)'");
}
