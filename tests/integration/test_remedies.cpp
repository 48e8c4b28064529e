// Remedies measured on the CPU: each one's effect on the memory it targets,
// and the training it leaves unchanged (same seed, same data: the losses).
#include "memdiag/exit_code.hpp"
#include "memdiag/features.hpp"
#include "patterns.hpp"
#include "process.hpp"

#include <gtest/gtest.h>

#include <cmath>

using namespace memdiag;
using namespace memdiag::testkit;

namespace {

const std::string kRemedyExe = MEMDIAG_DIAGNOSTICS_EXE;

// One sweep of the case over the remedies; reports by remedy label.
std::map<std::string, Report> remedy_sweep(const TempDir& d, const std::string& case_name, const std::string& steps,
                                           const std::string& remedies, bool isolate = false) {
  // glibc's mmap threshold fixed (it rises with each large block freed,
  // after which such blocks stay in the heap's resident set or not as the
  // threads' timing has it): the host figures then follow the live tensors.
  // offload-state's host growth at its first step() read 194.6 or 210.4 MiB
  // from run to run without it, 194.3-194.6 with it (beta small, 3 steps).
  std::vector<std::string> argv{"/usr/bin/env", "MALLOC_MMAP_THRESHOLD_=131072", kRemedyExe, "--device", "cpu",
                                "--quiet", "--case", case_name, "--steps", steps, "--remedy", remedies,
                                "-o", d.file(case_name + "-{remedy}.json")};
  if (isolate) argv.push_back("--isolate");
  const Proc r = run(argv);
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kOk)) << r.err;
  std::map<std::string, Report> out;
  for (const auto& e : std::filesystem::directory_iterator(d.path())) {
    const Report rep = load_report(e.path().string());
    EXPECT_TRUE(schema_errors(e.path().string()).empty()) << e.path();
    out[remedies_label(rep.config.remedies)] = rep;
  }
  return out;
}

std::vector<double> losses(const Report& r) {
  std::vector<double> out;
  for (const Sample& s : r.samples) {
    if (s.phase == Phase::kStep && s.loss) out.push_back(*s.loss);
  }
  return out;
}

double max_relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    worst = std::max(worst, std::fabs(a[i] - b[i]) / std::fabs(b[i]));
  }
  return worst;
}

double peak(const Report& r) {
  double p = 0;
  for (const Sample& s : r.samples) p = std::max(p, s.peak_allocated_mib);
  return p;
}

}  // namespace

TEST(Remedies, ActivationRemediesShrinkAlphaAndKeepItsTraining) {
  TempDir d;
  auto runs = remedy_sweep(d, "alpha", "2", "none,checkpoint,accumulate=4,bf16,autocast-bf16");
  ASSERT_EQ(runs.size(), 5u);
  const Report& base = runs.at("none");
  const double fwd = forward_increment(base);
  ASSERT_EQ(losses(base).size(), 2u);

  // Checkpointing: the default sqrt(32) = 6 segments, the same losses.
  const Report& cp = runs.at("checkpoint=6");
  EXPECT_LT(forward_increment(cp), 0.5 * fwd);
  EXPECT_LT(peak(cp), 0.6 * peak(base));
  EXPECT_LE(max_relative_difference(losses(cp), losses(base)), 1e-6);

  // Accumulation: four micro-batches, each with its forward and backward.
  const Report& acc = runs.at("accumulate=4");
  int forwards = 0;
  for (const Sample& s : acc.samples) {
    if (s.phase == Phase::kForward && s.step == 0) {
      EXPECT_EQ(s.micro_batch, forwards);
      ++forwards;
    }
  }
  EXPECT_EQ(forwards, 4);
  EXPECT_NEAR(forward_increment(acc), fwd / 4, 0.1 * fwd / 4);
  EXPECT_LT(peak(acc), 0.6 * peak(base));
  EXPECT_LE(max_relative_difference(losses(acc), losses(base)), 1e-4);

  // bf16: half the bytes for weights and activations; the losses differ a little.
  const Report& bf16 = runs.at("bf16");
  EXPECT_EQ(2 * bf16.model.parameter_bytes, base.model.parameter_bytes);
  EXPECT_NEAR(forward_increment(bf16) / fwd, 0.5, 0.05);
  EXPECT_LT(max_relative_difference(losses(bf16), losses(base)), 0.05);

  // Autocast: fp32 weights, bf16 matmuls and activations.
  const Report& ac = runs.at("autocast-bf16");
  EXPECT_EQ(ac.model.parameter_bytes, base.model.parameter_bytes);
  EXPECT_LT(forward_increment(ac), 0.8 * fwd);
  EXPECT_LT(max_relative_difference(losses(ac), losses(base)), 0.05);
}

TEST(Remedies, FixGraphStopsGammasGrowthAndKeepsItsTraining) {
  TempDir d;
  auto runs = remedy_sweep(d, "gamma", "4", "none,fix-graph");
  const RunFeatures base = compute_features(runs.at("none"), "base");
  const RunFeatures fixed = compute_features(runs.at("fix-graph"), "fixed");
  EXPECT_TRUE(base.growth_significant);
  EXPECT_FALSE(fixed.growth_significant);
  EXPECT_NEAR(*fixed.growth_per_step_mib, 0, 0.01);
  EXPECT_LE(max_relative_difference(losses(runs.at("fix-graph")), losses(runs.at("none"))), 1e-6);
}

TEST(Remedies, SgdRemovesBetasOptimizerStateAndEmptyCacheIsANoteOnTheCpu) {
  TempDir d;
  auto runs = remedy_sweep(d, "beta", "2", "none,sgd,empty-cache");
  const Sample& base = sample_at(runs.at("none"), Phase::kCleanup, 0);
  const Sample& sgd = sample_at(runs.at("sgd"), Phase::kCleanup, 0);
  ASSERT_TRUE(base.tensors && sgd.tensors);
  EXPECT_NEAR(base.tensors->optimizer_state_mib, 2 * base.tensors->parameters_mib, 1e-6);
  EXPECT_EQ(sgd.tensors->optimizer_state_mib, 0);
  // Another optimizer trains differently: the comparison will say so.
  EXPECT_GT(max_relative_difference(losses(runs.at("sgd")), losses(runs.at("none"))), 0);
  const Report& ec = runs.at("empty-cache");
  bool noted = false;
  for (const Event& e : ec.events) noted = noted || (e.kind == EventKind::kNote && e.message.find("empty-cache") == 0);
  EXPECT_TRUE(noted);
  expect_same_measurements(runs.at("none"), ec, "empty-cache on the CPU changes nothing");
}

TEST(Remedies, CompareMeasuresEachAgainstTheBaselineAndNamesTheBest) {
  TempDir d;
  remedy_sweep(d, "alpha", "2", "none,checkpoint,bf16,fix-graph");
  const Proc cmp = run({MEMDIAG_COMPARE_EXE, d.path(), "--format", "json"});
  ASSERT_EQ(cmp.exit_code, to_int(ExitCode::kOk)) << cmp.err;
  const auto g = nlohmann::json::parse(cmp.out)["groups"];
  ASSERT_EQ(g.size(), 1u);  // one group: the remedies join their baseline
  EXPECT_EQ(g[0]["dominant_cause"], "activations");
  std::map<std::string, nlohmann::json> rows;
  for (const auto& r : g[0]["remedies"]) rows[r["remedy"]] = r;
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_TRUE(rows["checkpoint=6"]["reduces_cause"]);
  EXPECT_TRUE(rows["bf16"]["reduces_cause"]);
  EXPECT_FALSE(rows["fix-graph"]["reduces_cause"]);  // nothing retained to fix
  EXPECT_LT(rows["checkpoint=6"]["max_loss_diff"].get<double>(), 1e-6);
  EXPECT_GT(rows["bf16"]["max_loss_diff"].get<double>(), 1e-6);
  ASSERT_FALSE(g[0]["best_remedy"].is_null());
  EXPECT_EQ(g[0]["remedies"][g[0]["best_remedy"].get<int>()]["remedy"], "checkpoint=6");
  const auto not_measured = g[0]["remedies_not_measured"].get<std::vector<std::string>>();
  // Tensor parallelism divides the activations between a pair's layers: a mode that answers them.
  EXPECT_EQ(not_measured, (std::vector<std::string>{"accumulate", "autocast-bf16", "offload-activations", "tensor"}));
  // One process ran them all: the host's figures of a later run carry the
  // earlier runs' heap, so no row compares them.
  for (const auto& r : g[0]["remedies"]) EXPECT_TRUE(r["host_peak_mib"].is_null()) << r["remedy"];
}

namespace {

// beta small's layers: 2048 x 2048 four times, then 16 x 2048; a bias each.
struct Shape {
  std::int64_t rows, cols;
};
const std::vector<Shape> kBetaSmall = {{2048, 2048}, {2048, 2048}, {2048, 2048}, {2048, 2048}, {16, 2048}};

double optimizer_state(const Report& r) {
  const Sample& s = sample_at(r, Phase::kCleanup, 0);
  EXPECT_TRUE(s.tensors.has_value());
  return s.tensors ? s.tensors->optimizer_state_mib : -1;
}

}  // namespace

// What each way of keeping the optimizer's state holds on the device, from
// the layers' shapes: bf16 moments 4 bytes a parameter; 8-bit codes a byte
// each for the two moments in blocks of 256 with a float scale per block;
// Adafactor a row and a column factor per matrix and a vector per bias;
// offloaded, nothing on the device and, on the host, the two moments and an
// fp32 copy of the weights (12 bytes a parameter; each run in a process of
// its own, so the host figures are its alone). The training of those that
// do not change it by design
// is the baseline's to the last bit (offload-state steps the same arithmetic
// on the host); the others' differences stay within what their definitions
// state (bf16 0.07%, 8-bit 5.6% on a step of beta small's ten:
// docs/measurements/cpu/optimizer-state.txt).
TEST(Remedies, OptimizerStateRemediesHoldWhatTheirFormulasSay) {
  TempDir d;
  auto runs = remedy_sweep(d, "beta", "3", "none,state-bf16,state-8bit,adafactor,offload-state", /*isolate=*/true);
  ASSERT_EQ(runs.size(), 5u);
  std::int64_t params = 0, blocks = 0, factors = 0;
  for (const Shape& s : kBetaSmall) {
    params += s.rows * s.cols + s.rows;
    blocks += (s.rows * s.cols + 255) / 256 + (s.rows + 255) / 256;
    factors += s.rows + s.cols + s.rows;
  }
  const double base = optimizer_state(runs.at("none"));
  EXPECT_NEAR(base, to_mib(8 * params), 1e-6);
  EXPECT_NEAR(optimizer_state(runs.at("state-bf16")), to_mib(4 * params), 1e-6);
  EXPECT_NEAR(optimizer_state(runs.at("state-8bit")), to_mib(2 * (256 + 4) * blocks), 1e-6);
  EXPECT_NEAR(optimizer_state(runs.at("adafactor")), to_mib(4 * factors), 1e-6);
  EXPECT_EQ(optimizer_state(runs.at("offload-state")), 0);
  // The host: on the CPU every tensor is in the process's resident set, and
  // what offload-state keeps beside the device's tensors is its state, made
  // at the first step(): the resident set beyond the device's tensors grows
  // there by the moments and the weights' copy. (Within the run: between
  // runs that figure moves by tens of MiB with what the C library keeps of
  // freed heap.)
  const auto host_beyond_device = [](const Report& r, Phase phase) {
    for (const Sample& s : r.samples) {
      EXPECT_TRUE(s.host_resident_mib.has_value());
      EXPECT_GE(s.host_resident_mib.value_or(0), s.allocated_mib);
    }
    EXPECT_EQ(r.environment.earlier_runs_in_process, 0);
    for (const Sample& s : r.samples) {
      if (s.step == 0 && s.phase == phase) return s.host_resident_mib.value_or(0) - s.allocated_mib;
    }
    ADD_FAILURE() << "no " << to_string(phase) << " sample";
    return 0.0;
  };
  const Report& off = runs.at("offload-state");
  const double offloaded = host_beyond_device(off, Phase::kStep) - host_beyond_device(off, Phase::kBackward);
  EXPECT_NEAR(offloaded, to_mib(12 * params), 0.05 * to_mib(12 * params));
  // The comparison shows each remedy's host beside its baseline's.
  const Proc cmp = run({MEMDIAG_COMPARE_EXE, d.path(), "--format", "json"});
  ASSERT_EQ(cmp.exit_code, to_int(ExitCode::kOk)) << cmp.err;
  const auto rows = nlohmann::json::parse(cmp.out)["groups"][0]["remedies"];
  ASSERT_EQ(rows.size(), 4u);
  for (const auto& row : rows) {
    EXPECT_TRUE(row["host_peak_mib"].is_number()) << row["remedy"];
    EXPECT_TRUE(row["baseline_host_peak_mib"].is_number()) << row["remedy"];
  }
  const Proc text = run({MEMDIAG_COMPARE_EXE, d.path()});
  EXPECT_NE(text.out.find("host vs baseline"), std::string::npos) << text.out;
  // Their peaks follow: each below the baseline's, offloaded lowest.
  for (const char* r : {"state-bf16", "state-8bit", "adafactor", "offload-state"}) {
    EXPECT_LT(peak(runs.at(r)), peak(runs.at("none"))) << r;
  }
  EXPECT_LT(peak(runs.at("offload-state")), peak(runs.at("adafactor")) + 1);
  EXPECT_EQ(losses(runs.at("offload-state")), losses(runs.at("none")));
  EXPECT_LT(max_relative_difference(losses(runs.at("state-bf16")), losses(runs.at("none"))), 0.002);
  EXPECT_LT(max_relative_difference(losses(runs.at("state-8bit")), losses(runs.at("none"))), 0.1);
}

// offload-activations keeps what an MLP's layers save for backward on the
// host: alpha's forward leaves little on the device and trains as the
// baseline does, to the last bit. The source's batch splitting (split=4:
// four forwards concatenated, one backward) keeps every chunk's activations
// until that backward, so its peak stays where the baseline's is, while
// accumulate=4 divides it.
TEST(Remedies, OffloadingActivationsMovesThemAndTheSourcesSplittingDoesNot) {
  TempDir d;
  auto runs = remedy_sweep(d, "alpha", "2", "none,offload-activations,split=4,accumulate=4");
  const Report& base = runs.at("none");
  const double fwd = forward_increment(base);
  EXPECT_LT(forward_increment(runs.at("offload-activations")), 0.2 * fwd);
  EXPECT_LT(peak(runs.at("offload-activations")), 0.4 * peak(base));
  EXPECT_EQ(losses(runs.at("offload-activations")), losses(base));
  EXPECT_NEAR(forward_increment(runs.at("split=4")), fwd, 0.02 * fwd);
  EXPECT_GT(peak(runs.at("split=4")), 0.95 * peak(base));
  EXPECT_LT(peak(runs.at("accumulate=4")), 0.6 * peak(base));
  // Split changes only the order the chunks' gradients are summed in.
  EXPECT_LE(max_relative_difference(losses(runs.at("split=4")), losses(base)), 1e-4);
}

TEST(Remedies, TheNewRemediesAreRefusedWhereTheyCannotApply) {
  TempDir d;
  struct Refusal {
    std::vector<std::string> args;
    std::string says;
  };
  for (const Refusal& r : std::vector<Refusal>{
           {{"--case", "alpha", "--remedy", "state-bf16"}, "alpha's optimizer has none"},
           {{"--case", "beta", "--remedy", "state-bf16+adafactor"}, "exclude each other"},
           {{"--case", "beta", "--remedy", "bf16+state-8bit"}, "fp32 weights"},
           {{"--case", "delta", "--remedy", "offload-activations"}, "transformer"},
           {{"--case", "alpha", "--remedy", "offload-activations+checkpoint"}, "exclude each other"},
           {{"--case", "alpha", "--batch-size-per-device", "2", "--remedy", "split=4"}, "at least that many samples"}}) {
    std::vector<std::string> argv{kRemedyExe, "--device", "cpu", "-q", "-o", d.file("r.json")};
    argv.insert(argv.end(), r.args.begin(), r.args.end());
    const Proc p = run(argv);
    EXPECT_EQ(p.exit_code, to_int(ExitCode::kUsage)) << r.args.back();
    EXPECT_NE(p.err.find(r.says), std::string::npos) << p.err;
    EXPECT_EQ(std::count(p.err.begin(), p.err.end(), '\n'), 1) << p.err;
  }
}
