// Tensor parallelism (--parallel=tensor) over Gloo at world 2 and 4, real
// processes: every rank trains the same batch as the single process and
// its losses are that run's (within 1e-5 relative); each rank holds what
// the formulas say (P the weights, S the part of them in split layers:
// weights P - S + S/N, model state 4(P - S + S/N) under AdamW); the
// activations between a pair's layers are 1/N of the single process's;
// and the comparer sets the run beside DDP and ZeRO-3, per rank, in every
// format.
//
// The expected figures come from the case file's dimensions, computed here
// apart from the workload: the MLP's Linears in pairs from the first, the
// first of each split by rows with its bias, the second by columns with its
// bias whole, an odd last one whole; between a pair's layers a ReLU's
// output, batch x hidden fp32 (the activation and the row-parallel layer
// keep the same tensor; the column-parallel layer's own output is freed).
#include "launch.hpp"
#include "memdiag/exit_code.hpp"
#include "process.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>

using namespace memdiag;
using namespace memdiag::testkit;

namespace tensor_parallel_test {

const std::string kExe = MEMDIAG_DIAGNOSTICS_EXE;
const std::string kCase = std::string(MEMDIAG_SOURCE_DIR) + "/tests/cases/own-tp.json";

// The case's MLP as the formulas see it: P, S (MiB) and the activations
// between pairs (MiB) at the preset's batch.
struct Expected {
  double p = 0, split = 0, between_pairs = 0;
  int batch = 0;
};

Expected expected_of_case() {
  const nlohmann::json c = nlohmann::json::parse(read_text(kCase));
  const nlohmann::json& m = c["presets"]["small"]["model"];
  const std::int64_t in = m["input_dim"], hidden = m["hidden_dim"], depth = m["depth"], out = m["output_dim"];
  Expected e;
  e.batch = c["presets"]["small"]["batch_size"];
  const std::int64_t linears = depth + 1, paired = linears / 2 * 2;
  std::int64_t all = 0, split = 0;
  for (std::int64_t i = 0; i < linears; ++i) {
    const std::int64_t fan_in = i == 0 ? in : hidden, fan_out = i == depth ? out : hidden;
    all += fan_in * fan_out + fan_out;
    if (i < paired) split += fan_in * fan_out + (i % 2 == 0 ? fan_out : 0);
  }
  e.p = all * 4 / kMiB;
  e.split = split * 4 / kMiB;
  e.between_pairs = static_cast<double>(paired / 2) * e.batch * hidden * 4 / kMiB;
  return e;
}

std::vector<Report> run_world(const TempDir& d, int world, const std::string& name, std::vector<std::string> extra) {
  std::vector<std::string> argv{kExe, "--device", "cpu", "-q", "--dist-timeout-s", "60", "--case", kCase, "--steps", "3"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  LaunchOptions lo;
  lo.world_size = world;
  return launch_and_load(argv, d, name, /*check_schema=*/true, lo);
}

Report run_alone(const TempDir& d, const std::string& name, std::vector<std::string> extra = {}) {
  std::vector<std::string> argv{kExe, "--device", "cpu", "-q", "--case", kCase, "--steps", "3", "-o", d.file(name + ".json")};
  argv.insert(argv.end(), extra.begin(), extra.end());
  const Proc p = run(argv);
  EXPECT_EQ(p.exit_code, 0) << p.err;
  return load_report(d.file(name + ".json"));
}

// What the step's forward added to what the step began with.
double forward_increment(const Report& r) { return alloc_at(r, Phase::kForward, 1) - alloc_at(r, Phase::kCleanup, 0); }

}  // namespace tensor_parallel_test

class TensorParallelAtWorld : public ::testing::TestWithParam<World> {};

TEST_P(TensorParallelAtWorld, TrainsAsOneProcessAndEachRankHoldsItsSlice) {
  using namespace tensor_parallel_test;
  const int n = GetParam().n;
  const Expected e = expected_of_case();
  ASSERT_GT(e.split, 0.5 * e.p);
  ASSERT_LT(e.split, e.p);  // an unpaired output layer and the row-parallel biases stay whole
  TempDir d;
  const Report one = run_alone(d, "one");
  const std::vector<Report> tp = run_world(d, n, "tp", {"--parallel=tensor"});
  ASSERT_EQ(tp.size(), static_cast<std::size_t>(n));
  EXPECT_NEAR(one.model.parameter_bytes / kMiB, e.p, 1e-9);
  const double weights = e.p - e.split + e.split / n;  // P - S + S/N
  for (int k = 0; k < n; ++k) {
    SCOPED_TRACE("rank " + std::to_string(k));
    const Report& r = tp[k];
    EXPECT_EQ(r.config.parallel.mode, ParallelMode::kTensor);
    EXPECT_EQ(r.config.parallel.world_size, n);
    expect_same_training(r, one);
    // The whole model's size as built, and its split part, as the case says.
    EXPECT_EQ(r.model.parameter_bytes, one.model.parameter_bytes);
    ASSERT_TRUE(r.model.split_parameter_bytes);
    EXPECT_NEAR(*r.model.split_parameter_bytes / kMiB, e.split, 1e-9);
    // The census at the end of the last step(): each role a slice.
    const TensorCensus& t = *sample_at(r, Phase::kStep, 2).tensors;
    EXPECT_NEAR(t.parameters_mib, weights, 1e-6 * e.p);
    EXPECT_NEAR(t.gradients_mib, weights, 1e-6 * e.p);
    EXPECT_NEAR(t.optimizer_state_mib, 2 * weights, 1e-6 * e.p);  // AdamW's two moments
    // The weights came to the rank a tensor at a time: never the whole model.
    const Sample& ready = sample_at(r, Phase::kModelReady);
    EXPECT_NEAR(ready.allocated_mib, weights, 0.01 * e.p);
    EXPECT_LT(ready.peak_allocated_mib, weights + 0.01 * e.p);
    // The activations between a pair's layers, 1/N of the single process's:
    // forward keeps (1 - 1/N) of them less; the rest of the forward (the
    // batch, the pairs' whole outputs, the logits) is the same.
    const double saved = forward_increment(one) - forward_increment(r);
    EXPECT_NEAR(saved, (1.0 - 1.0 / n) * e.between_pairs, 0.01 * e.between_pairs)
        << "single process " << forward_increment(one) << " MiB, rank " << forward_increment(r) << " MiB";
  }
}

INSTANTIATE_TEST_SUITE_P(Gloo, TensorParallelAtWorld, ::testing::Values(World{2}, World{4}), world_name);

// The comparer's per-rank table: the replicated run, ZeRO-3 and tensor
// parallelism of one configuration side by side, each against its
// formulas, in text, markdown, HTML and JSON.
TEST(TensorParallel, TheComparerSetsItBesideDdpAndZeroThreePerRank) {
  using namespace tensor_parallel_test;
  const Expected e = expected_of_case();
  TempDir d;
  run_world(d, 2, "ddp", {});
  run_world(d, 2, "zero3", {"--shard=parameters"});
  run_world(d, 2, "tensor", {"--parallel", "tensor"});
  const Proc cmp = run({MEMDIAG_COMPARE_EXE, d.path(), "--format", "json"});
  ASSERT_EQ(cmp.exit_code, to_int(ExitCode::kOk)) << cmp.err;
  const nlohmann::json comparison = nlohmann::json::parse(cmp.out);
  ASSERT_EQ(comparison["groups"].size(), 1u);
  const nlohmann::json modes = comparison["groups"][0]["parallel_modes"];
  ASSERT_TRUE(modes.is_object()) << comparison["groups"][0].dump();
  const nlohmann::json& rows = modes["rows"];
  ASSERT_EQ(rows.size(), 3u) << rows.dump();
  const std::vector<std::string> order = {"ddp", "zero3", "tensor"};
  const std::vector<double> weights = {e.p, e.p / 2, e.p - e.split + e.split / 2};
  for (std::size_t i = 0; i < 3; ++i) {
    const nlohmann::json& r = rows[i];
    SCOPED_TRACE(r.dump());
    EXPECT_EQ(r["mode"], order[i]);
    EXPECT_EQ(r["ranks"], 2);
    // Measured against the formula, and the formula against the case's
    // figures (ZeRO-3 pads each flat unit to a multiple of the ranks).
    EXPECT_NEAR(r["parameters_mib"].get<double>(), r["parameters_formula_mib"].get<double>(), 0.001 * e.p);
    EXPECT_NEAR(r["model_state_mib"].get<double>(), r["model_state_formula_mib"].get<double>(), 0.004 * e.p);
    EXPECT_NEAR(r["parameters_formula_mib"].get<double>(), weights[i], 1e-6 * e.p);
    EXPECT_NEAR(r["model_state_formula_mib"].get<double>(), 4 * weights[i], 4e-6 * e.p);
    EXPECT_LE(r["max_loss_diff"].get<double>(), 1e-5);
  }
  // ZeRO-3 keeps every activation; tensor parallelism half of those between a pair's layers.
  const double ddp_forward = rows[0]["forward_increment_mib"], zero3_forward = rows[1]["forward_increment_mib"],
               tensor_forward = rows[2]["forward_increment_mib"];
  EXPECT_NEAR(zero3_forward, ddp_forward, 0.01 * ddp_forward);
  EXPECT_NEAR(ddp_forward - tensor_forward, e.between_pairs / 2, 0.01 * e.between_pairs);
  EXPECT_NEAR(rows[2]["split_parameter_mib"].get<double>(), e.split, 1e-6);

  // The same table in the other formats, its rows in order.
  const Proc text = run({MEMDIAG_COMPARE_EXE, d.path()});
  const auto heading = text.out.find("per rank under each parallel mode");
  ASSERT_NE(heading, std::string::npos) << text.out;
  const auto ddp = text.out.find("\n  ddp ", heading), zero3 = text.out.find("\n  zero3 ", heading),
             tensor = text.out.find("\n  tensor ", heading);
  EXPECT_TRUE(ddp < zero3 && zero3 < tensor && tensor != std::string::npos) << text.out;
  EXPECT_NE(text.out.find("tensor (the split layers' weights, gradients, optimizer state and activations divided"),
            std::string::npos) << text.out;
  const Proc md = run({MEMDIAG_COMPARE_EXE, d.path(), "--format", "markdown"});
  for (const std::string& m : order) EXPECT_NE(md.out.find("| " + m + " | 2/2 |"), std::string::npos) << m << "\n" << md.out;
  const Proc html = run({MEMDIAG_COMPARE_EXE, d.path(), "--format", "html"});
  EXPECT_NE(html.out.find("<table class=\"parallel-modes\">"), std::string::npos) << html.out.substr(0, 2000);
  for (const std::string& m : order) EXPECT_NE(html.out.find("<td>" + m + "</td>"), std::string::npos) << m;
}

// Gradient accumulation and the source's split forward go through the
// split layers: the same training as one process with the same remedy.
// SGD too: AdamW's update does not change when a gradient is scaled, so a
// gradient N times too large (a bias all-reduced once too often) passes
// with it; momentum SGD's update is the gradient's own size.
TEST(TensorParallel, AccumulationSplitAndSgdTrainAsOneProcess) {
  using namespace tensor_parallel_test;
  TempDir d;
  for (const std::string& remedy : {std::string("accumulate=2"), std::string("split=2"), std::string("sgd")}) {
    SCOPED_TRACE(remedy);
    const Report one = run_alone(d, "one-" + remedy.substr(0, remedy.find('=')), {"--remedy", remedy});
    const std::vector<Report> tp =
        run_world(d, 2, "tp-" + remedy.substr(0, remedy.find('=')), {"--parallel=tensor", "--remedy", remedy});
    for (const Report& r : tp) expect_same_training(r, one);
  }
}

// Under autocast a row-parallel layer's output stays bf16, as one
// process's Linear gives it: the rank's forward keeps less than one
// process's (its slices of the activations between a pair's layers), where
// an fp32 bias added to the bf16 sum would make every pair's output, and
// what follows, twice the bytes.
TEST(TensorParallel, AutocastKeepsTheRowParallelOutputInBf16) {
  using namespace tensor_parallel_test;
  TempDir d;
  const Report one = run_alone(d, "one-autocast", {"--remedy", "autocast-bf16"});
  for (const Report& r : run_world(d, 2, "tp-autocast", {"--parallel=tensor", "--remedy", "autocast-bf16"})) {
    EXPECT_LT(forward_increment(r), forward_increment(one));
  }
}

// What tensor parallelism cannot do is refused in one line, exit 2, before
// any rank joins or writes a report.
TEST(TensorParallel, WhatItCannotDoIsAUsageError) {
  using namespace tensor_parallel_test;
  TempDir d;
  struct Bad {
    std::vector<std::string> args;
    int world;
    std::string says;
  };
  for (const Bad& bad : std::vector<Bad>{
           {{"--case", "delta", "--parallel=tensor"}, 2, "is a transformer"},
           {{"--case", "alpha", "--parallel=tensor"}, 3, "which 3 ranks do not divide"},
           {{"--case", "alpha", "--parallel=tensor"}, 1, "a world of one rank splits nothing"},
           {{"--case", "alpha", "--parallel=tensor", "--remedy", "checkpoint"}, 2, "not with --remedy checkpoint"},
           {{"--case", "alpha", "--parallel=tensor", "--remedy", "offload-activations"}, 2, "not with --remedy offload-activations"},
           {{"--case", "beta", "--parallel=tensor", "--remedy", "adafactor"}, 2, "not with --remedy adafactor"},
           {{"--case", "alpha", "--parallel=tensor", "--shard=parameters"}, 2, "--parallel=tensor: not with --shard"},
           {{"--case", "alpha", "--parallel=tensor", "--shard-optimizer-state"}, 2, "not with --shard-optimizer-state"},
           {{"--case", "alpha", "--parallel=tensor", "--rank-zero-extra-samples", "4"}, 2, "the same batch"},
           {{"--case", "alpha", "--parallel=pipeline"}, 2, "is not data or tensor"},
       }) {
    SCOPED_TRACE(testing::PrintToString(bad.args));
    std::vector<std::string> argv{kExe, "--device", "cpu", "-q", "-o", d.file("x-{rank}.json")};
    argv.insert(argv.end(), bad.args.begin(), bad.args.end());
    LaunchOptions lo;
    lo.world_size = bad.world;
    for (const Proc& r : launch_ranks(argv, d, lo)) {
      EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage)) << r.err;
      EXPECT_EQ(count_lines(r.err), 1) << r.err;
      EXPECT_NE(r.err.find(bad.says), std::string::npos) << r.err;
    }
  }
  // One process has nothing to split over.
  const Proc alone = run({kExe, "--device", "cpu", "-q", "--parallel", "tensor", "-o", d.file("x-0.json")});
  EXPECT_EQ(alone.exit_code, to_int(ExitCode::kUsage));
  EXPECT_EQ(count_lines(alone.err), 1) << alone.err;
  EXPECT_NE(alone.err.find("start it under a launcher"), std::string::npos) << alone.err;
  EXPECT_FALSE(exists(d.file("x-0.json")));
}
