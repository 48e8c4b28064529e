// The capacity model against the search, for every built-in case and a case
// of the tests' own, at two budgets each: the comparer's prediction from a
// single run at the case's own batch lands within 2% of the largest batch
// --find-max-batch finds (which fresh processes confirm), and given the
// search's report the comparer gives the search's own prediction: one fit
// over the same points.
#include "launch.hpp"
#include "memdiag/exit_code.hpp"
#include "process.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>

using namespace memdiag;
using namespace memdiag::testkit;

struct Budgets {
  std::string name;
  std::string case_arg;  // a built-in name, or "own" for the tests' case file
  int steps;
  std::vector<int> budgets_mib;
};
void PrintTo(const Budgets& b, std::ostream* os) { *os << b.name; }

namespace {


nlohmann::json capacity_of(const std::string& report, int budget) {
  const Proc cmp = run({MEMDIAG_COMPARE_EXE, report, "--format", "json", "--budget-mib", std::to_string(budget)});
  EXPECT_EQ(cmp.exit_code, to_int(ExitCode::kOk)) << cmp.err;
  return nlohmann::json::parse(cmp.out)["groups"][0]["capacity"][0];
}

}  // namespace

class CapacityModel : public ::testing::TestWithParam<Budgets> {};

TEST_P(CapacityModel, APredictionFromOneRunIsWithinTwoPercentOfTheSearch) {
  const Budgets& b = GetParam();
  TempDir d;
  std::string case_arg = b.case_arg;
  // tests/cases/own.json: tanh, Adam, a first layer wider than the rest,
  // shapes no built-in case has.
  // tests/cases/own-wide.json: a wide GELU MLP whose first weight gradient
  // (8 MiB) is made while every activation is held (backward read node by
  // node; from phase boundaries alone it was 8% over).
  if (case_arg == "own" || case_arg == "own-wide") case_arg = std::string(MEMDIAG_SOURCE_DIR) + "/tests/cases/" + case_arg + ".json";
  const std::vector<std::string> base = {MEMDIAG_DIAGNOSTICS_EXE, "--device", "cpu", "-q", "--case", case_arg,
                                         "--steps", std::to_string(b.steps)};
  std::vector<std::string> one = base;
  one.insert(one.end(), {"-o", d.file("one.json")});
  ASSERT_EQ(run(one).exit_code, to_int(ExitCode::kOk));
  for (int budget : b.budgets_mib) {
    SCOPED_TRACE(b.name + " at " + std::to_string(budget) + " MiB");
    std::vector<std::string> search = base;
    search.insert(search.end(), {"--find-max-batch", "--memory-limit-mib", std::to_string(budget), "-o",
                                 d.file("max-" + std::to_string(budget) + ".json")});
    const Proc s = run(search);
    ASSERT_EQ(s.exit_code, to_int(ExitCode::kOk)) << s.err;
    const auto found = nlohmann::json::parse(read_text(d.file("max-" + std::to_string(budget) + ".json")))["capacity"];
    ASSERT_EQ(found["confirmed"], true) << "fresh processes disagree with the search";
    const std::int64_t max_batch = found["max_batch"];
    ASSERT_GT(max_batch, 10);

    const nlohmann::json predicted = capacity_of(d.file("one.json"), budget);
    const std::int64_t p = predicted["max_batch"];
    EXPECT_LE(std::llabs(p - max_batch), std::max<std::int64_t>(1, max_batch / 50))
        << "predicted " << p << ", found " << max_batch << ": " << predicted["text"];
    EXPECT_EQ(predicted["fitted_batches"].size(), 1u);
    // The range one run allows holds the answer (on CUDA the one-run
    // answers miss by up to 46%; the gpu test holds the same range there).
    // Its low end is left open where the steps varied in size (epsilon's
    // schedule) or kept more step by step (gamma's graphs).
    const auto& cv = predicted["caveats"];
    const bool open_below = b.name == "epsilon" || b.name == "gamma";
    EXPECT_EQ(cv["low_end_unknown"].is_string(), open_below) << predicted["text"];
    ASSERT_EQ(cv["batch_if_all_grows"].is_number(), !open_below) << predicted;
    if (!open_below) {
      EXPECT_LE(cv["batch_if_all_grows"].get<std::int64_t>(), max_batch) << predicted["text"];
    }
    ASSERT_TRUE(cv["batch_if_activations_grow"].is_number()) << predicted;
    EXPECT_GE(cv["batch_if_activations_grow"].get<std::int64_t>(), max_batch) << predicted["text"];
    EXPECT_NE(predicted["text"].get<std::string>().find(" binds, "), std::string::npos) << predicted["text"];

    // The search's report: the comparer's prediction is the search's own.
    const nlohmann::json same = capacity_of(d.file("max-" + std::to_string(budget) + ".json"), budget);
    EXPECT_TRUE(same["from_search"].get<bool>());
    EXPECT_EQ(same["max_batch"], found["predicted_max_batch"]);
    EXPECT_EQ(same["binding"]["phase"], found["fit"]["binding_phase"]);
    EXPECT_EQ(same["searched"]["max_batch"], max_batch);
    // Its traced try's replay (the search's own answer before fresh
    // processes checked it) is said beside the lines' figure.
    if (found["replayed_max_batch"].is_number()) {
      EXPECT_EQ(same["searched"]["replayed_max_batch"], found["replayed_max_batch"]);
      EXPECT_NE(same["text"].get<std::string>().find(
                    "had answered " + std::to_string(found["replayed_max_batch"].get<std::int64_t>())),
                std::string::npos)
          << same["text"];
    } else {
      EXPECT_TRUE(same["searched"]["replayed_max_batch"].is_null()) << same;
    }
  }
}

// Budgets that keep every search under a few thousand samples on two cores;
// beta's step() floor (weights, gradients, AdamW's moments and its
// temporaries, 288.6 MiB) leaves room for a few hundred samples above it.
INSTANTIATE_TEST_SUITE_P(EveryCase, CapacityModel,
                         ::testing::Values(Budgets{"alpha", "alpha", 2, {40, 60}},
                                           Budgets{"beta", "beta", 1, {290, 292}},
                                           Budgets{"gamma", "gamma", 2, {30, 45}},
                                           // The whole ramp of epsilon's batch schedule (0.5 to 1.0).
                                           Budgets{"epsilon", "epsilon", 6, {50, 70}},
                                           Budgets{"delta", "delta", 2, {100, 140}},
                                           Budgets{"own", "own", 2, {40, 50}},
                                           Budgets{"own_wide", "own-wide", 3, {200, 256}}),
                         [](const ::testing::TestParamInfo<Budgets>& i) { return i.param.name; });

// A traced run (--trace-allocations: its requests and the same at half the
// batch) predicts by replaying the allocator: the batch it names completes
// under the budget and the next one runs out, in fresh processes, for
// every case and the tests' own, at two budgets each.
TEST(Capacity, ATracedRunPredictsEveryCaseToTheSampleOnTheCpu) {
  TempDir d;
  for (const Budgets& b : {Budgets{"alpha", "alpha", 2, {40, 60}}, Budgets{"beta", "beta", 1, {290, 300}},
                           Budgets{"gamma", "gamma", 2, {30, 45}}, Budgets{"epsilon", "epsilon", 6, {50, 70}},
                           Budgets{"delta", "delta", 2, {100, 140}}, Budgets{"own", "own", 2, {40, 50}},
                           Budgets{"own_wide", "own-wide", 3, {200}}}) {
    const std::string case_arg = b.case_arg.rfind("own", 0) == 0
                                     ? std::string(MEMDIAG_SOURCE_DIR) + "/tests/cases/" + b.case_arg + ".json"
                                     : b.case_arg;
    const std::vector<std::string> base = {MEMDIAG_DIAGNOSTICS_EXE, "--device", "cpu", "-q", "--case", case_arg,
                                           "--steps", std::to_string(b.steps)};
    std::vector<std::string> traced = base;
    traced.insert(traced.end(), {"--trace-allocations", "-o", d.file(b.name + ".json")});
    ASSERT_EQ(run(traced).exit_code, to_int(ExitCode::kOk)) << b.name;
    for (int budget : b.budgets_mib) {
      SCOPED_TRACE(b.name + " at " + std::to_string(budget) + " MiB");
      const nlohmann::json c = capacity_of(d.file(b.name + ".json"), budget);
      ASSERT_TRUE(c["replay"].is_object()) << c["text"] << " " << c["replay_unusable"];
      const std::int64_t p = c["max_batch"];
      ASSERT_GT(p, 0) << c["text"];
      EXPECT_EQ(c["replay"]["max_batch_if_workspaces_held"], p) << "the CPU has no workspaces of its own choosing";
      EXPECT_NE(c["text"].get<std::string>().find("replaying the allocator"), std::string::npos) << c["text"];
      for (const std::int64_t batch : {p, p + 1}) {
        std::vector<std::string> fresh = base;
        fresh.insert(fresh.end(), {"--batch-size-per-device", std::to_string(batch), "--memory-limit-mib",
                                   std::to_string(budget), "-o", d.file("fresh.json"), "--overwrite"});
        EXPECT_EQ(run(fresh).exit_code, to_int(batch == p ? ExitCode::kOk : ExitCode::kOom))
            << "batch " << batch << " (predicted " << p << ")";
      }
    }
  }
}

// The search's answer is checked in processes started while it tried
// (FreshProcesses::prepare): each made its model and optimizer, then
// waited for its batch. The report the search writes is that process's, and
// it is the run a user gets starting that batch alone: the same figures at
// every phase and the same losses, for a batch schedule under gradient
// accumulation (micro-batches made from the batch that came) and the tests'
// own case file; and the trained weights' sums.
TEST(Capacity, TheSearchsReportIsTheRunOfItsAnswerStartedAlone) {
  struct Job {
    std::string name;
    std::vector<std::string> flags;
    int budget;
  };
  const std::string own = std::string(MEMDIAG_SOURCE_DIR) + "/tests/cases/own.json";
  for (const Job& j : {Job{"epsilon accumulate=2", {"--case", "epsilon", "--steps", "4", "--remedy", "accumulate=2"}, 50},
                       Job{"own", {"--case", own, "--steps", "2"}, 40}}) {
    SCOPED_TRACE(j.name);
    TempDir d;
    std::vector<std::string> base = {MEMDIAG_DIAGNOSTICS_EXE, "--device", "cpu", "-q", "--memory-limit-mib",
                                     std::to_string(j.budget)};
    base.insert(base.end(), j.flags.begin(), j.flags.end());
    std::vector<std::string> search = base;
    search.insert(search.end(), {"--find-max-batch", "-o", d.file("max.json")});
    const Proc s = run(search);
    ASSERT_EQ(s.exit_code, to_int(ExitCode::kOk)) << s.err;
    const nlohmann::json found = nlohmann::json::parse(read_text(d.file("max.json")));
    ASSERT_EQ(found["capacity"]["confirmed"], true) << s.err;
    const std::int64_t batch = found["capacity"]["max_batch"];
    EXPECT_EQ(found["config"]["batch_size_per_device"], batch);
    std::vector<std::string> alone = base;
    alone.insert(alone.end(), {"--batch-size-per-device", std::to_string(batch), "-o", d.file("alone.json")});
    ASSERT_EQ(run(alone).exit_code, to_int(ExitCode::kOk));
    const nlohmann::json a = nlohmann::json::parse(read_text(d.file("alone.json")));
    EXPECT_EQ(found["status"], "complete");
    // The same weights trained the same way.
    EXPECT_EQ(found["model"], a["model"]);
    ASSERT_EQ(found["samples"].size(), a["samples"].size());
    ASSERT_GT(a["samples"].size(), 4u);
    for (std::size_t i = 0; i < a["samples"].size(); ++i) {
      const nlohmann::json& x = found["samples"][i];
      const nlohmann::json& y = a["samples"][i];
      SCOPED_TRACE("sample " + std::to_string(i) + " " + y["phase"].get<std::string>());
      for (const char* key : {"phase", "step", "allocated_mib", "peak_allocated_mib", "samples", "loss"}) {
        EXPECT_EQ(x.value(key, nlohmann::json()), y.value(key, nlohmann::json())) << key;
      }
    }
  }
}

// memory_diagnostics reads step 1's backward node by node, as the Python
// recorder does (src/torch/backward_profile.cpp): every node and every
// accumulation in order, the gradients made by the end being the model's,
// and the backward's sample keeping the peak the readings carried (they
// reset the probe's). Under accumulation it is the second micro-batch's;
// where gradients are reduced by unit (ZeRO-2) there is none.
TEST(Capacity, MemoryDiagnosticsReadsStepOnesBackwardNodeByNode) {
  TempDir d;
  const std::string own = std::string(MEMDIAG_SOURCE_DIR) + "/tests/cases/own.json";
  const std::vector<std::string> base = {MEMDIAG_DIAGNOSTICS_EXE, "--device", "cpu", "-q", "--case", own, "--steps", "2",
                                         "--batch-size-per-device", "96"};
  std::vector<std::string> plain = base;
  plain.insert(plain.end(), {"-o", d.file("plain.json")});
  ASSERT_EQ(run(plain).exit_code, to_int(ExitCode::kOk));
  const Report r = load_report(d.file("plain.json"));
  ASSERT_TRUE(r.model.backward_profile.has_value());
  const BackwardProfile& b = *r.model.backward_profile;
  EXPECT_EQ(b.step, 1);
  EXPECT_EQ(b.samples, 96);
  ASSERT_EQ(b.names.size(), b.rise_mib.size());
  ASSERT_EQ(b.names.size(), b.gradients_mib.size());
  // own.json: four Linears (tanh between) under a log-softmax loss. Each
  // Linear's weight and bias reach their parameters (the weight through a
  // TBackward0), the first Linear's input needing no gradient.
  EXPECT_EQ(b.names.front(), "NllLossBackward0");
  EXPECT_EQ(std::count(b.names.begin(), b.names.end(), "AddmmBackward0"), 4);
  EXPECT_EQ(std::count(b.names.begin(), b.names.end(), "AccumulateGrad"), 8);
  const double params = r.model.parameter_bytes / (1024.0 * 1024.0);
  EXPECT_NEAR(b.gradients_mib.back(), params, 1e-5);
  EXPECT_TRUE(std::is_sorted(b.gradients_mib.begin(), b.gradients_mib.end()));
  const Sample* backward = nullptr;
  for (const Sample& s : r.samples) {
    if (s.step == 1 && s.phase == Phase::kBackward) backward = &s;
  }
  ASSERT_NE(backward, nullptr);
  EXPECT_NEAR(b.start_mib, r.samples[r.samples.size() - 4].allocated_mib, 1e-5) << "the forward's end";
  const double top = *std::max_element(b.rise_mib.begin(), b.rise_mib.end());
  EXPECT_GE(backward->peak_allocated_mib + 1e-5, b.start_mib + top);
  // Its peak is within the readings (nothing after the last node rises).
  EXPECT_NEAR(backward->peak_allocated_mib, b.start_mib + top, 1e-3);
  // What each node held when done is at most its peak; the batch's
  // gradients it took and gave: none on a weight's way (TBackward0,
  // AccumulateGrad); the last Linear's incoming 96 x 10 and its input's 96 x
  // 768, the first Linear's incoming 96 x 768 alone (its input needs none).
  ASSERT_EQ(b.names.size(), b.held_mib.size());
  ASSERT_EQ(b.names.size(), b.operands_mib.size());
  std::vector<double> addmm;
  for (std::size_t i = 0; i < b.names.size(); ++i) {
    EXPECT_LE(b.held_mib[i], b.rise_mib[i] + 2e-6) << i;
    if (b.names[i] == "TBackward0" || b.names[i] == "AccumulateGrad") {
      EXPECT_EQ(b.operands_mib[i], 0) << i;
    }
    if (b.names[i] == "AddmmBackward0") addmm.push_back(b.operands_mib[i]);
  }
  ASSERT_EQ(addmm.size(), 4u);
  const double mib = 1024.0 * 1024.0;
  EXPECT_NEAR(addmm.front(), 96.0 * (10 + 768) * 4 / mib, 1e-6);
  EXPECT_NEAR(addmm.back(), 96.0 * 768 * 4 / mib, 1e-6);

  std::vector<std::string> accumulated = base;
  accumulated.insert(accumulated.end(), {"--remedy", "accumulate=3", "-o", d.file("accumulated.json")});
  ASSERT_EQ(run(accumulated).exit_code, to_int(ExitCode::kOk));
  const Report a = load_report(d.file("accumulated.json"));
  ASSERT_TRUE(a.model.backward_profile.has_value());
  EXPECT_EQ(a.model.backward_profile->samples, 32);
  // The second micro-batch's gradients are added to those the first made:
  // none is made anew, and those counted are the ones in flight to their
  // parameter, never the whole model's.
  const std::vector<double>& g = a.model.backward_profile->gradients_mib;
  EXPECT_GT(*std::max_element(g.begin(), g.end()), 0.0);
  EXPECT_LT(*std::max_element(g.begin(), g.end()), 0.5 * params);

  std::vector<std::string> sharded = base;
  sharded.insert(sharded.end(), {"--shard=gradients", "--dist-timeout-s", "60", "-o", d.file("sharded-{rank}.json")});
  for (const Proc& p : launch_ranks(sharded, d, LaunchOptions{})) ASSERT_EQ(p.exit_code, to_int(ExitCode::kOk)) << p.err;
  EXPECT_FALSE(load_report(d.file("sharded-0.json")).model.backward_profile.has_value());
}
