// ZeRO-2 and ZeRO-3 (--shard gradients|parameters) over Gloo at world 2 and
// 4: the training is the replicated run's, each rank holds what the
// formulas say (fp32 AdamW, P the parameter bytes: replicated 4P, ZeRO-1
// 2P + 2P/N, ZeRO-2 P + 3P/N, ZeRO-3 4P/N), ZeRO-3's unsharded parameters
// are not live between forward and backward, and the seed's claims about
// sharding hold per rank.
#include "launch.hpp"
#include "memdiag/exit_code.hpp"
#include "memdiag/format.hpp"
#include "memdiag/parallelism.hpp"
#include "process.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>

using namespace memdiag;
using namespace memdiag::testkit;

namespace sharding_test {

const std::string kExe = MEMDIAG_DIAGNOSTICS_EXE;
const std::string kOwnTransformer = std::string(MEMDIAG_SOURCE_DIR) + "/tests/cases/own-transformer.json";

std::vector<Report> run_world(const TempDir& d, int world, const std::string& name, std::vector<std::string> extra) {
  std::vector<std::string> argv{kExe, "--device", "cpu", "-q", "--dist-timeout-s", "60"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  LaunchOptions lo;
  lo.world_size = world;
  return launch_and_load(argv, d, name, /*check_schema=*/true, lo);
}

double model_state(const Sample& s) {
  return s.tensors->parameters_mib + s.tensors->gradients_mib + s.tensors->optimizer_state_mib;
}

// Rank by rank (testkit::expect_same_training: losses and final weights).
void expect_same_training(const std::vector<Report>& a, const std::vector<Report>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t k = 0; k < a.size(); ++k) {
    SCOPED_TRACE("rank " + std::to_string(k));
    testkit::expect_same_training(a[k], b[k]);
  }
}

}  // namespace sharding_test

class ShardingAtWorld : public ::testing::TestWithParam<World> {};

TEST_P(ShardingAtWorld, EachModeTrainsAsReplicatedAndHoldsWhatItsFormulaSays) {
  using namespace sharding_test;
  const int n = GetParam().n;
  TempDir d;
  const std::vector<std::string> beta = {"--case", "beta", "--steps", "3"};
  const std::vector<Report> replicated = run_world(d, n, "ddp", beta);
  ASSERT_EQ(replicated.size(), static_cast<std::size_t>(n));
  const double p = replicated[0].model.parameter_bytes / (1024.0 * 1024.0);
  for (const auto& [flag, mode] : std::vector<std::pair<std::string, ParallelMode>>{
           {"optimizer", ParallelMode::kZero1}, {"gradients", ParallelMode::kZero2}, {"parameters", ParallelMode::kZero3}}) {
    SCOPED_TRACE(flag);
    std::vector<std::string> args = beta;
    args.push_back("--shard=" + flag);
    const std::vector<Report> sharded = run_world(d, n, flag, args);
    expect_same_training(sharded, replicated);
    const ParallelModeDefinition& def = definition(mode);
    const double formula = model_state_per_rank(mode, p, 2.0, n);  // AdamW: two moments
    for (int k = 0; k < n; ++k) {
      EXPECT_EQ(sharded[k].config.parallel.mode, mode);
      const Sample& end = sample_at(sharded[k], Phase::kStep, 2);
      // The census: each role's shard, within the padding of the flat units.
      EXPECT_NEAR(model_state(end), formula, 0.01 * p) << "rank " << k;
      // Everything the rank holds at the end of step(): ZeRO-1 keeps DDP's
      // buckets (another P); the unit-sharded modes keep nothing beside
      // their shards but the step's batch and loss.
      const double extra = end.allocated_mib - formula;
      if (def.shards_gradients) {
        EXPECT_LT(extra, 0.05 * p) << "rank " << k;
      } else {
        EXPECT_NEAR(extra, p, 0.05 * p) << "rank " << k;
      }
      EXPECT_EQ(sharded[k].model.parameter_bytes, replicated[k].model.parameter_bytes) << "unsharded bytes";
    }
  }
  // The replicated run: 4P and DDP's buckets.
  EXPECT_NEAR(model_state(sample_at(replicated[0], Phase::kStep, 2)), 4 * p, 0.01 * p);
  // The comparer sets each mode's measurement beside its formula, and says
  // what each mode answers.
  const Proc cmp = run({MEMDIAG_COMPARE_EXE, d.path(), "--format", "json"});
  ASSERT_EQ(cmp.exit_code, to_int(ExitCode::kOk)) << cmp.err;
  const nlohmann::json comparison = nlohmann::json::parse(cmp.out);  // kept: the loop reads into it
  int rows = 0;
  for (const nlohmann::json& r : comparison["groups"][0]["remedies"]) {
    ASSERT_FALSE(r["formula_mib"].is_null()) << r.dump();
    EXPECT_NEAR(r["model_state_mib"].get<double>(), r["formula_mib"].get<double>(), 0.01 * p) << r.dump();
    EXPECT_TRUE(r["reduces_cause"].get<bool>()) << r.dump();
    ++rows;
  }
  EXPECT_EQ(rows, 3);
  const Proc text = run({MEMDIAG_COMPARE_EXE, d.path()});
  EXPECT_NE(text.out.find("sharding, per rank: zero1 (optimizer state divided among the ranks)"), std::string::npos)
      << text.out;
}

INSTANTIATE_TEST_SUITE_P(Gloo, ShardingAtWorld, ::testing::Values(World{2}, World{4}), world_name);

TEST(Sharding, ZeroThreeFreesTheUnshardedParametersBetweenForwardAndBackward) {
  using namespace sharding_test;
  TempDir d;
  // A transformer of the tests' own (untied embeddings, dropout): forward
  // saves views of every block's weights for backward.
  const std::vector<std::string> args = {"--case", kOwnTransformer, "--steps", "2"};
  std::vector<std::string> zero2 = args, zero3 = args;
  zero2.push_back("--shard=gradients");
  zero3.push_back("--shard=parameters");
  const std::vector<Report> two = run_world(d, 2, "z2", zero2);
  const std::vector<Report> three = run_world(d, 2, "z3", zero3);
  expect_same_training(three, two);
  const double p = two[0].model.parameter_bytes / (1024.0 * 1024.0);
  for (int k = 0; k < 2; ++k) {
    const Sample& f2 = sample_at(two[k], Phase::kForward, 1);
    const Sample& f3 = sample_at(three[k], Phase::kForward, 1);
    // At the end of forward, with every activation saved: ZeRO-2 holds the
    // whole weights, ZeRO-3 only its halves of them ...
    EXPECT_NEAR(f2.tensors->parameters_mib, p, 0.01 * p);
    EXPECT_NEAR(f3.tensors->parameters_mib, p / 2, 0.01 * p);
    // ... and everything else is the same: the saved views hold no memory.
    EXPECT_NEAR(f2.allocated_mib - f3.allocated_mib, p / 2, 0.02 * p) << "rank " << k;
  }
}

TEST(Sharding, TheSeedsClaimsHoldPerRank) {
  using namespace sharding_test;
  TempDir d;
  for (const std::string& c : {std::string("alpha"), std::string("gamma")}) {
    SCOPED_TRACE(c);
    const std::vector<std::string> args = {"--case", c, "--steps", "4"};
    std::vector<std::string> zero3 = args;
    zero3.push_back("--shard=parameters");
    const std::vector<Report> rep = run_world(d, 2, c + "-ddp", args);
    const std::vector<Report> fsdp = run_world(d, 2, c + "-zero3", zero3);
    expect_same_training(fsdp, rep);
    for (int k = 0; k < 2; ++k) {
      // Activations stay local: forward adds per rank what it adds unsharded.
      const double inc_rep = alloc_at(rep[k], Phase::kForward, 1) - alloc_at(rep[k], Phase::kCleanup, 0);
      const double inc_fsdp = alloc_at(fsdp[k], Phase::kForward, 1) - alloc_at(fsdp[k], Phase::kCleanup, 0);
      const double p = rep[k].model.parameter_bytes / (1024.0 * 1024.0);
      // ZeRO-3's forward also gathers and frees each unit: at its end the
      // last unit's weights are gone again, so the increments agree to
      // within the largest unit.
      EXPECT_NEAR(inc_fsdp, inc_rep, 0.5 * p + 0.02 * inc_rep) << "rank " << k;
      // A retained graph still grows each step on each rank.
      const double grow_rep = alloc_at(rep[k], Phase::kCleanup, 3) - alloc_at(rep[k], Phase::kCleanup, 1);
      const double grow_fsdp = alloc_at(fsdp[k], Phase::kCleanup, 3) - alloc_at(fsdp[k], Phase::kCleanup, 1);
      if (c == "gamma") {
        EXPECT_GT(grow_fsdp, 0.5 * grow_rep) << "rank " << k;
        EXPECT_GT(grow_fsdp, 1.0) << "rank " << k;
      } else {
        EXPECT_NEAR(grow_fsdp, 0, 0.05) << "rank " << k;
      }
    }
  }
}

TEST(Sharding, AccumulationAndCheckpointingTrainAsReplicated) {
  using namespace sharding_test;
  TempDir d;
  const std::vector<std::string> acc = {"--case", "beta", "--steps", "2", "--remedy", "accumulate=2"};
  const std::vector<Report> rep = run_world(d, 2, "acc-ddp", acc);
  for (const std::string& flag : {std::string("gradients"), std::string("parameters")}) {
    std::vector<std::string> a = acc;
    a.push_back("--shard=" + flag);
    expect_same_training(run_world(d, 2, "acc-" + flag, a), rep);
  }
  const std::vector<std::string> ck = {"--case", "alpha", "--steps", "2", "--remedy", "checkpoint"};
  std::vector<std::string> ck2 = ck;
  ck2.push_back("--shard=gradients");
  expect_same_training(run_world(d, 2, "ck-zero2", ck2), run_world(d, 2, "ck-ddp", ck));
  // Units of two modules, and the next unit gathered ahead: the same training.
  std::vector<std::string> units = {"--case", kOwnTransformer, "--steps", "2", "--shard=parameters"};
  const std::vector<Report> one = run_world(d, 2, "u1", units);
  units.insert(units.end(), {"--shard-unit-modules", "2", "--shard-prefetch", "next"});
  const std::vector<Report> two = run_world(d, 2, "u2", units);
  expect_same_training(two, one);
  EXPECT_EQ(two[0].config.parallel.unit_modules, 2);
  EXPECT_TRUE(two[0].config.parallel.prefetch_next);
}

// delta's head is tied to its token embedding, a weight of the first unit:
// ZeRO-3 gathers that unit with the last one and trains as replicated.
TEST(Sharding, ATiedHeadTrainsUnderZeroThree) {
  using namespace sharding_test;
  TempDir d;
  const std::vector<std::string> args = {"--case", "delta", "--steps", "3"};
  std::vector<std::string> zero3 = args;
  zero3.push_back("--shard=parameters");
  const std::vector<Report> rep = run_world(d, 2, "ddp", args);
  const std::vector<Report> fsdp = run_world(d, 2, "zero3", zero3);
  expect_same_training(fsdp, rep);
  const double p = rep[0].model.parameter_bytes / (1024.0 * 1024.0);
  EXPECT_NEAR(model_state(sample_at(fsdp[0], Phase::kStep, 2)), model_state_per_rank(ParallelMode::kZero3, p, 2.0, 2),
              0.01 * p);
}

TEST(Sharding, WhatShardingCannotDoIsAUsageError) {
  using namespace sharding_test;
  TempDir d;
  for (const std::vector<std::string>& bad : {
           std::vector<std::string>{"--case", "alpha", "--shard=parameters", "--remedy", "checkpoint"},
           std::vector<std::string>{"--case", "alpha", "--shard=everything"},
           std::vector<std::string>{"--case", "alpha", "--shard-unit-modules", "2"},
           std::vector<std::string>{"--case", "alpha", "--shard=optimizer", "--shard-prefetch", "next"},
           std::vector<std::string>{"--case", "alpha", "--shard=gradients", "--shard-unit-modules", "0"},
       }) {
    std::vector<std::string> argv{kExe, "--device", "cpu", "-q", "-o", d.file("x-{rank}.json")};
    argv.insert(argv.end(), bad.begin(), bad.end());
    LaunchOptions lo;
    const std::vector<Proc> p = launch_ranks(argv, d, lo);
    for (const Proc& r : p) {
      EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage)) << testing::PrintToString(bad) << r.err;
      EXPECT_EQ(count_lines(r.err), 1) << r.err;
    }
  }
  EXPECT_FALSE(exists(d.file("x-0.json")));
}

namespace sharding_test {

// --world-size's prediction for each mode from single-rank runs.
std::map<std::string, std::int64_t> predicted(const std::vector<std::string>& reports, int budget, int world) {
  std::vector<std::string> argv{MEMDIAG_COMPARE_EXE, "--format", "json", "--budget-mib", std::to_string(budget),
                                "--world-size", std::to_string(world)};
  argv.insert(argv.end(), reports.begin(), reports.end());
  const Proc cmp = run(argv);
  EXPECT_EQ(cmp.exit_code, to_int(ExitCode::kOk)) << cmp.err;
  std::map<std::string, std::int64_t> out;
  const nlohmann::json comparison = nlohmann::json::parse(cmp.out);  // kept: the loop reads into it
  for (const nlohmann::json& c : comparison["groups"][0]["sharded_capacity"]) {
    EXPECT_EQ(c["world_size"], world);
    out[c["mode"].get<std::string>()] = c["max_batch"].get<std::int64_t>();
  }
  return out;
}

int run_at(const TempDir& d, int world, const std::string& case_arg, const std::string& mode, std::int64_t batch, int budget) {
  std::vector<std::string> argv{kExe, "--device", "cpu", "-q", "--dist-timeout-s", "60", "--case", case_arg, "--steps", "2",
                                "--batch-size-per-device", std::to_string(batch), "--memory-limit-mib", std::to_string(budget),
                                "-o", d.file(mode + "-n" + std::to_string(world) + "-b" + std::to_string(batch) + "-{rank}.json")};
  if (mode != "ddp") argv.push_back(mode == "zero1" ? "--shard=optimizer" : mode == "zero2" ? "--shard=gradients" : "--shard=parameters");
  LaunchOptions lo;
  lo.world_size = world;
  int worst = 0;
  for (const Proc& p : launch_ranks(argv, d, lo)) worst = std::max(worst, p.exit_code);
  return worst;
}

}  // namespace sharding_test

// The per-rank capacity of every mode, predicted from single-rank runs,
// against runs at world 2 and 4: the answer completes, 5% more runs out
// (10% for ZeRO-1, whose answer allows for a rank holding the largest
// module's state beside its share). Measured on this machine's CPU: alpha
// at 60 MiB and the tests' own MLP at 100 MiB within 5% in every mode.
TEST(Sharding, ThePerRankCapacityOfEachModeIsWhatRunsFind) {
  using namespace sharding_test;
  TempDir d;
  const std::string own = std::string(MEMDIAG_SOURCE_DIR) + "/tests/cases/own.json";
  ASSERT_EQ(run({kExe, "--device", "cpu", "-q", "--case", "alpha", "--steps", "2", "-o", d.file("one-alpha.json")}).exit_code, 0);
  ASSERT_EQ(run({kExe, "--device", "cpu", "-q", "--case", own, "--steps", "2", "--batch-size-per-device", "1024,3072", "-o",
                 d.file("one-own-b{batch}.json")}).exit_code, 0);
  struct Check {
    std::string case_arg;
    std::vector<std::string> reports;
    int budget;
    int world;
  };
  for (const Check& c : {Check{"alpha", {d.file("one-alpha.json")}, 60, 2}, Check{"alpha", {d.file("one-alpha.json")}, 60, 4},
                         Check{own, {d.file("one-own-b1024.json"), d.file("one-own-b3072.json")}, 100, 2}}) {
    const std::map<std::string, std::int64_t> batch = predicted(c.reports, c.budget, c.world);
    ASSERT_EQ(batch.size(), 4u);
    for (const auto& [mode, b] : batch) {
      SCOPED_TRACE(c.case_arg + " " + mode + " at world " + std::to_string(c.world) + ": predicted " + std::to_string(b));
      ASSERT_GT(b, 0);
      EXPECT_EQ(run_at(d, c.world, c.case_arg, mode, b, c.budget), 0);
      const double beyond = mode == "zero1" ? 1.10 : 1.05;
      EXPECT_EQ(run_at(d, c.world, c.case_arg, mode, static_cast<std::int64_t>(std::ceil(b * beyond)) + 1, c.budget),
                to_int(ExitCode::kOom));
    }
  }
  // Training state too large for one process but not for four sharded ones:
  // beta's 4P and buckets exceed 300 MiB at any batch; ZeRO-3 over four
  // ranks trains the preset's batch.
  ASSERT_EQ(run({kExe, "--device", "cpu", "-q", "--case", "beta", "--steps", "2", "-o", d.file("one-beta.json")}).exit_code, 0);
  const std::map<std::string, std::int64_t> beta = predicted({d.file("one-beta.json")}, 300, 4);
  EXPECT_EQ(beta.at("ddp"), 0);
  EXPECT_GE(beta.at("zero3"), 8);
  EXPECT_EQ(run_at(d, 4, "beta", "ddp", 1, 300), to_int(ExitCode::kOom));
  EXPECT_EQ(run_at(d, 4, "beta", "zero3", 8, 300), 0);
}

// A model whose whole weights exceed the device (the tests' own 48-layer MLP:
// 48.13 MiB of weights, a 36 MiB limit per rank) trains under ZeRO-3 over
// four ranks, because each unit goes from the host to the device on its own
// and only a rank's slices stay; the what-if from a single-rank run says
// so, every mode that keeps the weights whole fits nothing, and a
// replicated rank runs out at model_ready.
TEST(Sharding, AModelWhoseWeightsExceedTheDeviceTrainsUnderZeroThree) {
  using namespace sharding_test;
  TempDir d;
  const std::string big = std::string(MEMDIAG_SOURCE_DIR) + "/tests/cases/too-large.json";
  const int budget = 36;
  ASSERT_EQ(run({kExe, "--device", "cpu", "-q", "--case", big, "--steps", "2", "-o", d.file("one.json")}).exit_code, 0);
  const Report one = load_report(d.file("one.json"));
  const double p = one.model.parameter_bytes / (1024.0 * 1024.0);
  const double unit = *one.model.largest_module_bytes / (1024.0 * 1024.0);
  ASSERT_GT(p, budget);
  const std::map<std::string, std::int64_t> batch = predicted({d.file("one.json")}, budget, 4);
  EXPECT_EQ(batch.at("ddp"), 0);
  EXPECT_EQ(batch.at("zero1"), 0);
  EXPECT_EQ(batch.at("zero2"), 0);
  const std::int64_t b = batch.at("zero3");
  ASSERT_GT(b, 0);
  const Proc text = run({MEMDIAG_COMPARE_EXE, "--budget-mib", std::to_string(budget), "--world-size", "4", d.file("one.json")});
  EXPECT_NE(text.out.find("the whole weights (" + format_mib(p) + " MiB) exceed the budget"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("zero3 over 4 ranks holds"), std::string::npos) << text.out;

  // A batch 3% below the prediction trains as the replicated run does,
  // within the limit (the what-if counts one unit of gradients at
  // backward's start, where 48 small units hold a unit's flat copy too:
  // predicted 115, the largest that trains 112), and 5% above it runs out.
  const std::int64_t fits = static_cast<std::int64_t>(std::floor(b * 0.97));
  const std::vector<std::string> args = {"--case", big, "--steps", "2", "--batch-size-per-device", std::to_string(fits)};
  std::vector<std::string> limited = args;
  limited.insert(limited.end(), {"--shard=parameters", "--memory-limit-mib", std::to_string(budget)});
  const std::vector<Report> fsdp = run_world(d, 4, "zero3", limited);
  const std::vector<Report> rep = run_world(d, 4, "ddp", args);
  expect_same_training(fsdp, rep);
  for (const Report& r : fsdp) {
    // Never the whole model on a rank: its slices and the unit being made.
    EXPECT_LE(sample_at(r, Phase::kModelReady).peak_allocated_mib, p / 4 + unit + 0.5) << "rank " << r.config.parallel.rank;
    for (const Sample& s : r.samples) EXPECT_LE(s.peak_allocated_mib, budget);
  }
  EXPECT_EQ(run_at(d, 4, big, "zero3", static_cast<std::int64_t>(std::ceil(b * 1.05)) + 1, budget), to_int(ExitCode::kOom));
  // A replicated rank cannot even hold the weights.
  EXPECT_EQ(run_at(d, 4, big, "ddp", 1, budget), to_int(ExitCode::kOom));
  const Report ddp = load_report(d.file("ddp-n4-b1-0.json"));
  bool at_model_ready = false;
  for (const Event& e : ddp.events) at_model_ready = at_model_ready || (e.kind == EventKind::kOom && e.phase == Phase::kModelReady);
  EXPECT_TRUE(at_model_ready);
}
