// The analysis on synthetic reports whose true cause the test knows. Case
// names are chosen to mislead: the verdict must come from the numbers.
#include "memdiag/analysis.hpp"

#include "synthetic.hpp"

#include <gtest/gtest.h>

using namespace memdiag;
using testkit::Synth;
using testkit::synth;

namespace {

Verdict one(const Synth& s) {
  Analysis a = analyse({{"r.json", synth(s)}});
  EXPECT_EQ(a.verdicts.size(), 1u);
  return a.verdicts.front();
}

Synth named(const char* name) {
  Synth s;
  s.case_name = name;
  return s;
}

}  // namespace

TEST(Features, IncrementsAndGrowth) {
  Synth s;
  s.params_mib = 10;
  s.activations_mib = 30;
  s.optimizer_state_mib = 20;
  s.retained_per_step_mib = 2;
  s.steps = 5;
  const RunFeatures f = compute_features(synth(s), "x");
  ASSERT_TRUE(f.forward_increment_mib);
  EXPECT_NEAR(*f.forward_increment_mib, 30, 1e-9);
  EXPECT_NEAR(*f.forward_per_sample_mib, 30.0 / 8, 1e-9);
  EXPECT_NEAR(*f.first_step_persistent_mib, 22, 1e-9);
  EXPECT_NEAR(*f.growth_per_step_mib, 2, 1e-9);
  EXPECT_TRUE(f.growth_significant);
  EXPECT_NEAR(*f.first_step_excess_mib, 20, 1e-9);
  EXPECT_NEAR(*f.excess_to_parameter_ratio, 2, 1e-9);
  EXPECT_NEAR(*f.retained_growth_mib, 10, 1e-9);
  EXPECT_EQ(f.steps.size(), 5u);
}

TEST(Verdict, ActivationsWhateverTheName) {
  Synth s = named("beta");
  s.activations_mib = 100;
  const Verdict v = one(s);
  EXPECT_EQ(v.dominant, Cause::kActivations);
  EXPECT_FALSE(v.confirmed);
  ASSERT_EQ(v.confirm.size(), 2u);  // the batch-1 and batch-4 pair
  EXPECT_NE(v.confirm[0].find("--batch-size-per-device 1"), std::string::npos);
  EXPECT_NE(v.confirm[0].find("--case beta"), std::string::npos);
}

TEST(Verdict, OptimizerStateWhateverTheName) {
  Synth s = named("alpha");
  s.optimizer_state_mib = 20;
  s.activations_mib = 1;
  const Verdict v = one(s);
  EXPECT_EQ(v.dominant, Cause::kOptimizerState);
  EXPECT_NE(v.evidence[0].find("2.00x"), std::string::npos) << v.evidence[0];
}

TEST(Verdict, RetainedGraphWhateverTheName) {
  Synth s = named("alpha");
  s.activations_mib = 5;
  s.retained_per_step_mib = 5;
  s.steps = 6;
  const Verdict v = one(s);
  EXPECT_EQ(v.dominant, Cause::kRetainedGraph);
  EXPECT_FALSE(v.confirm.empty());
}

TEST(Verdict, ParametersWhenTheWeightsAreTheMemory) {
  Synth s;
  s.params_mib = 1000;
  s.activations_mib = 10;
  EXPECT_EQ(one(s).dominant, Cause::kParameters);
}

TEST(Verdict, AllocatorCacheWhenReserveDwarfsTheTensors) {
  Synth s;
  s.params_mib = 10;
  s.activations_mib = 10;
  s.cache_mib = 400;
  EXPECT_EQ(one(s).dominant, Cause::kAllocatorCache);
}

TEST(Verdict, InconclusiveWhenTwoCausesAreClose) {
  Synth s;
  s.params_mib = 10;
  s.activations_mib = 20;
  s.optimizer_state_mib = 20;
  const Verdict v = one(s);
  EXPECT_EQ(v.dominant, Cause::kInconclusive);
  EXPECT_NE(v.evidence[0].find("within 25%"), std::string::npos);
  EXPECT_FALSE(v.confirm.empty());
}

TEST(Verdict, InconclusiveWhenOneStepCannotSeparateStateFromGraph) {
  Synth s;
  s.steps = 1;
  s.params_mib = 1;
  s.retained_per_step_mib = 30;
  s.activations_mib = 30;
  const Verdict v = one(s);
  EXPECT_EQ(v.dominant, Cause::kInconclusive);
  ASSERT_EQ(v.confirm.size(), 1u);
  EXPECT_NE(v.confirm[0].find("--steps 3"), std::string::npos);
}

TEST(Verdict, InconclusiveWhenNothingIsMeasurable) {
  Synth s;
  s.params_mib = 0.01;
  s.activations_mib = 0.01;
  EXPECT_EQ(one(s).dominant, Cause::kInconclusive);
}

TEST(Verdict, NoisyPostCleanupIsNotALeak) {
  Synth s;
  s.activations_mib = 50;
  s.noise_mib = 0.5;
  s.steps = 8;
  const Verdict v = one(s);
  EXPECT_EQ(v.dominant, Cause::kActivations);
}

TEST(Verdict, BatchSweepConfirmsActivations) {
  std::vector<std::pair<std::string, Report>> reports;
  for (int b : {1, 4, 64}) {
    Synth s;
    s.batch = b;
    s.params_mib = 1;
    s.activations_mib = 0.5 * b;
    reports.emplace_back("b" + std::to_string(b) + ".json", synth(s));
  }
  Analysis a = analyse(reports);
  ASSERT_EQ(a.groups.size(), 1u);
  const Verdict& v = a.verdicts[0];
  EXPECT_EQ(v.dominant, Cause::kActivations);
  EXPECT_TRUE(v.confirmed);
  EXPECT_TRUE(v.confirm.empty());
  EXPECT_EQ(v.primary_source, "b64.json");
  ASSERT_EQ(v.sweeps.size(), 1u);
  EXPECT_NEAR(v.sweeps[0].slope, 0.5, 1e-9);
}

TEST(Verdict, SweepThatDoesNotScaleDoesNotConfirm) {
  std::vector<std::pair<std::string, Report>> reports;
  for (int b : {1, 4}) {
    Synth s;
    s.batch = b;
    s.params_mib = 1;
    s.activations_mib = 40;  // the same whatever the batch
    reports.emplace_back("b" + std::to_string(b) + ".json", synth(s));
  }
  const Verdict v = analyse(reports).verdicts[0];
  EXPECT_EQ(v.dominant, Cause::kActivations);
  EXPECT_FALSE(v.confirmed);
}

TEST(Verdict, PresetSweepConfirmsOptimizerState) {
  std::vector<std::pair<std::string, Report>> reports;
  for (double p : {16.0, 64.0}) {
    Synth s;
    s.params_mib = p;
    s.optimizer_state_mib = 2 * p;
    s.preset = p < 20 ? "small" : "medium";
    reports.emplace_back(s.preset + ".json", synth(s));
  }
  const Verdict v = analyse(reports).verdicts[0];
  EXPECT_EQ(v.dominant, Cause::kOptimizerState);
  EXPECT_TRUE(v.confirmed);
}

TEST(Grouping, CasesAndDevicesSeparateSweepsJoin) {
  Synth a = named("a"), b = named("b"), a_cpu = named("a");
  a_cpu.device = "cpu";
  Synth a_b4 = named("a");
  a_b4.batch = 4;
  Analysis an = analyse({{"1", synth(a)}, {"2", synth(b)}, {"3", synth(a_cpu)}, {"4", synth(a_b4)}});
  ASSERT_EQ(an.groups.size(), 3u);
  EXPECT_EQ(an.groups[0].runs.size(), 2u);
}

TEST(Grouping, RanksShowTheCapacityConstraintAndImbalance) {
  std::vector<std::pair<std::string, Report>> reports;
  for (int r : {0, 1}) {
    Synth s;
    s.rank = r;
    s.world_size = 2;
    s.activations_mib = r == 0 ? 60 : 40;  // rank 0 carries extra samples
    reports.emplace_back("rank" + std::to_string(r) + ".json", synth(s));
  }
  const Verdict v = analyse(reports).verdicts[0];
  ASSERT_EQ(v.distributed.size(), 1u);
  const DistributedView& d = v.distributed[0];
  EXPECT_EQ(d.ranks.size(), 2u);
  EXPECT_EQ(d.max_rank, 0);
  EXPECT_TRUE(d.imbalanced);
  EXPECT_FALSE(v.warnings.empty());
}

TEST(Causes, NamesRoundTrip) {
  for (Cause c : all_causes()) EXPECT_EQ(cause_from_string(to_string(c)), c);
  EXPECT_FALSE(cause_from_string("leak"));
}
