// The run-configuration model: each projection's meaning, stated on pairs
// of configurations that differ in one aspect at a time, and the upgrade of
// schema 1 and 2 reports into it.
#include "memdiag/report_json.hpp"
#include "memdiag/report_reader.hpp"
#include "memdiag/run_identity.hpp"
#include "memdiag/suggest.hpp"

#include "synthetic.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <set>

using namespace memdiag;

namespace {

RunIdentity base() {
  RunIdentity id;
  id.case_name = "mycase";
  id.device_kind = "cuda";
  id.device_index = 0;
  id.preset = "small";
  id.batch = 8;
  id.steps = 4;
  id.seed = 0;
  id.world_size = 2;
  id.mode = ParallelMode::kDdp;
  id.rank = 0;
  return id;
}

// One change per aspect, named as the test table below names them.
const std::map<std::string, std::function<void(RunIdentity&)>>& changes() {
  static const std::map<std::string, std::function<void(RunIdentity&)>> c = {
      {"case", [](RunIdentity& i) { i.case_name = "other"; }},
      {"producer", [](RunIdentity& i) { i.producer = kProducerRecorder; }},
      {"device kind", [](RunIdentity& i) { i.device_kind = "cpu"; }},
      {"device index", [](RunIdentity& i) { i.device_index = 1; }},
      {"preset", [](RunIdentity& i) { i.preset = "medium"; }},
      {"batch", [](RunIdentity& i) { i.batch = 16; }},
      {"steps", [](RunIdentity& i) { i.steps = 10; }},
      {"sequence length", [](RunIdentity& i) { i.sequence_length = 512; }},
      {"seed", [](RunIdentity& i) { i.seed = 7; }},
      {"memory limit", [](RunIdentity& i) { i.memory_limit_mib = 4096; }},
      {"remedy", [](RunIdentity& i) { i.remedies = {Remedy{RemedyKind::kCheckpoint, 3}}; }},
      {"sharding", [](RunIdentity& i) { i.mode = ParallelMode::kZero1; }},
      {"allocator settings", [](RunIdentity& i) { i.allocator_settings = "expandable_segments:True"; }},
      {"writer's variant", [](RunIdentity& i) { i.variant_name = "grad-checkpointing"; }},
      {"world", [](RunIdentity& i) { i.world_size = 4; }},
      {"rank 0's extra samples", [](RunIdentity& i) { i.rank_zero_extra_samples = 8; }},
      {"rank", [](RunIdentity& i) { i.rank = 1; }},
  };
  return c;
}

// Each projection's meaning: the changes after which two runs are still
// "the same" under it. Every other change makes them differ.
const std::vector<std::pair<const Projection*, std::set<std::string>>>& meanings() {
  static const std::vector<std::pair<const Projection*, std::set<std::string>>> m = {
      // A verdict pools sweeps, ranks and variants of one case on one kind of device.
      {&projection::kVerdictPool,
       {"device index", "preset", "batch", "steps", "sequence length", "seed", "remedy", "sharding", "allocator settings",
        "writer's variant", "rank"}},
      // --baseline pairs the same run on another machine of the same kind.
      {&projection::kBaselineMatch, {"device index"}},
      // A remedy row's baseline differs in the variant only.
      {&projection::kVariantBaseline, {"device index", "remedy", "sharding", "allocator settings", "writer's variant"}},
      // A batch sweep (and a capacity fit) varies the batch; the seed changes values, not memory.
      {&projection::kBatchSweep, {"device index", "batch", "seed"}},
      // A parameters sweep varies the model: preset, and the batch and steps that go with it.
      {&projection::kParameterSweep, {"device index", "preset", "batch", "steps", "sequence length", "seed"}},
      // A steps sweep varies the steps.
      {&projection::kStepsSweep, {"device index", "steps", "seed"}},
      // A sequence sweep varies a transformer's sequence length.
      {&projection::kSequenceSweep, {"device index", "sequence length", "seed"}},
      // The ranks of one data-parallel run.
      {&projection::kRankSet, {"device index", "rank"}},
  };
  return m;
}

}  // namespace

TEST(RunIdentity, EachProjectionMeansWhatItSaysOnPairsDifferingInOneAspect) {
  ASSERT_EQ(meanings().size(), projection::all().size());
  for (const auto& [p, same_after] : meanings()) {
    for (const auto& [name, change] : changes()) {
      RunIdentity other = base();
      change(other);
      EXPECT_EQ(same(*p, base(), other), same_after.count(name) == 1) << p->name << " after a change of " << name;
      EXPECT_EQ(same(*p, base(), other), key(*p, base()) == key(*p, other));
    }
    EXPECT_TRUE(same(*p, base(), base())) << p->name;
  }
}

TEST(RunIdentity, TheVariantIsRemediesShardingAndAllocatorSettings) {
  RunIdentity id = base();
  EXPECT_TRUE(is_baseline_variant(id));
  EXPECT_EQ(variant_label(id), "none");
  id.remedies = {Remedy{RemedyKind::kAccumulate, 4}, Remedy{RemedyKind::kBf16, 0}};
  id.mode = ParallelMode::kZero1;
  id.allocator_settings = "expandable_segments:True";
  EXPECT_FALSE(is_baseline_variant(id));
  EXPECT_EQ(variant_label(id), "accumulate=4+bf16+zero1+expandable_segments:True");
  // A writer's own label (a Python job's variant=) leads the label.
  id.variant_name = "grad-checkpointing";
  EXPECT_EQ(variant_label(id), "grad-checkpointing+accumulate=4+bf16+zero1+expandable_segments:True");
  RunIdentity labelled = base();
  labelled.variant_name = "torch.compile";
  EXPECT_FALSE(is_baseline_variant(labelled));
  EXPECT_EQ(variant_label(labelled), "torch.compile");
  // Replicated data parallel is the baseline of a world, not a variant.
  RunIdentity ddp = base();
  ddp.mode = ParallelMode::kDdp;
  EXPECT_TRUE(is_baseline_variant(ddp));
}

TEST(RunIdentity, DescribeNamesTheKeptAspectsInWords) {
  RunIdentity id = base();
  id.memory_limit_mib = 40;
  id.seed = 3;
  EXPECT_EQ(describe(projection::kVerdictPool, id), "mycase, cuda, world 2, limit 40 MiB");
  EXPECT_EQ(describe(projection::kBaselineMatch, id),
            "mycase, cuda, preset small, batch 8, 4 steps, seed 3, limit 40 MiB, world 2, rank 0");
  id.world_size = 1;
  id.mode = ParallelMode::kNone;
  id.memory_limit_mib.reset();
  EXPECT_EQ(describe(projection::kVerdictPool, id), "mycase, cuda");
}

TEST(RunIdentity, VaryingAspectsAreThoseThatDifferWithinACaseInLinearTime) {
  std::vector<RunIdentity> runs;
  for (int i = 0; i < 40000; ++i) {
    RunIdentity id = base();
    id.case_name = i % 2 ? "a" : "b";
    id.batch = 1 + i % 5;
    id.steps = i % 2 ? 3 : 4;  // constant within each case
    runs.push_back(id);
  }
  const auto v = varying_aspects(runs, {Aspect::kCase, Aspect::kPreset, Aspect::kBatch, Aspect::kSteps});
  EXPECT_EQ(v, (std::vector<Aspect>{Aspect::kCase, Aspect::kBatch}));
}

TEST(RunIdentity, SchemaTwoReportsAreUpgradedIntoTheParallelismObject) {
  // A report as schema 2 wrote it: flat rank fields and a sharding flag.
  testkit::Synth s;
  s.world_size = 2;
  s.rank = 1;
  nlohmann::json j = nlohmann::json::parse(dump_report(testkit::synth(s)));
  j["schema_version"] = 2;
  j.erase("producer");
  nlohmann::json& c = j["config"];
  c.erase("parallelism");
  c.erase("allocator_settings");
  c["rank"] = 1;
  c["local_rank"] = 1;
  c["world_size"] = 2;
  c["backend"] = "nccl";
  c["rank_zero_extra_samples"] = 16;
  c["shard_optimizer_state"] = true;
  const ReadResult r = parse_report_text(j.dump(), "v2.json");
  ASSERT_TRUE(r.report) << r.error->what();
  const Parallelism& p = r.report->config.parallel;
  EXPECT_EQ(p.mode, ParallelMode::kZero1);
  EXPECT_EQ(p.world_size, 2);
  EXPECT_EQ(p.rank, 1);
  EXPECT_EQ(p.backend, "nccl");
  EXPECT_EQ(p.rank_zero_extra_samples, 16);
  EXPECT_EQ(r.report->producer.name, kProducerDiagnostics);  // a built-in case: memory_diagnostics wrote it
  // Unsharded, launched: ddp; one process: none.
  c["shard_optimizer_state"] = false;
  EXPECT_EQ(parse_report_text(j.dump(), "v2.json").report->config.parallel.mode, ParallelMode::kDdp);
  c["world_size"] = 1;
  c["rank"] = 0;
  c["backend"] = "none";
  EXPECT_EQ(parse_report_text(j.dump(), "v2.json").report->config.parallel.mode, ParallelMode::kNone);
  // A loop of one's own (no case file, not built in) was memdiag::Recorder's.
  j["case"]["builtin"] = false;
  j["case"]["source"] = "";
  EXPECT_EQ(parse_report_text(j.dump(), "v2.json").report->producer.name, kProducerRecorder);
}

TEST(RunIdentity, SchemaThreeRefusesAModeThatContradictsTheWorld) {
  testkit::Synth s;
  nlohmann::json j = nlohmann::json::parse(dump_report(testkit::synth(s)));
  ASSERT_EQ(j["schema_version"], 3);
  j["config"]["parallelism"]["mode"] = "zero1";  // one process cannot shard
  const ReadResult r = parse_report_text(j.dump(), "x.json");
  ASSERT_FALSE(r.report);
  EXPECT_NE(std::string(r.error->what()).find("$.config.parallelism.mode"), std::string::npos) << r.error->what();
  j["config"]["parallelism"]["mode"] = "fsdp";
  const ReadResult u = parse_report_text(j.dump(), "x.json");
  ASSERT_FALSE(u.report);
  EXPECT_NE(std::string(u.error->what()).find("'fsdp' is not one of: none, ddp, zero1"), std::string::npos)
      << u.error->what();
}

TEST(Suggest, TheNearestNameIsSuggestedOnlyWhenItIsNear) {
  const std::vector<std::string> causes = {"activations", "optimizer_state", "retained_graph", "parameters"};
  EXPECT_EQ(nearest_name("retained-graph", causes), "retained_graph");
  EXPECT_EQ(nearest_name("activation", causes), "activations");
  EXPECT_EQ(nearest_name("Optimizer-State", causes), "optimizer_state");
  EXPECT_EQ(nearest_name("banana", causes), "");
  EXPECT_EQ(did_you_mean("paramters", causes), " (did you mean parameters?)");
  EXPECT_EQ(did_you_mean(std::string(300, 'a'), causes), "");
  // Another tool's longer (or shorter) name for a field: one begins the other at a word's end.
  const std::vector<std::string> preset{"model", "batch_size", "steps"};
  EXPECT_EQ(nearest_name("batch_size_per_device", preset), "batch_size");
  EXPECT_EQ(nearest_name("batch", {"name", "case", "batch_size_per_device"}), "batch_size_per_device");
  EXPECT_EQ(nearest_name("batch_sizes", preset), "batch_size");  // by edits, as before
  EXPECT_EQ(nearest_name("steps_total", preset), "steps");
  EXPECT_EQ(nearest_name("stepsize", preset), "");  // a prefix, not at a word's end
}
