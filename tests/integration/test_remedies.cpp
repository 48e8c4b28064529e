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
                                           const std::string& remedies) {
  const Proc r = run({kRemedyExe, "--device", "cpu", "--quiet", "--case", case_name, "--steps", steps, "--remedy",
                      remedies, "-o", d.file(case_name + "-{remedy}.json")});
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
  EXPECT_EQ(not_measured, (std::vector<std::string>{"accumulate", "autocast-bf16"}));
}
