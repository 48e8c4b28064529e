// memory_diagnostics on CUDA: the three patterns, the warm-up accounting, the
// OOM path under a memory limit, and compare's diagnosis. This process never
// touches CUDA itself (it crashed when a test process that had initialised
// CUDA waited on a child using the same GPU); whether CUDA is usable is
// asked of the executable, and every test skips with its answer if not.
#include "patterns.hpp"
#include "memdiag/exit_code.hpp"
#include "process.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

using namespace memdiag;
using namespace memdiag::testkit;

namespace {

const std::string kCudaExe = MEMDIAG_DIAGNOSTICS_EXE;

// Empty when CUDA runs; otherwise the executable's own one-line reason.
const std::string& cuda_unavailable() {
  static const std::string reason = device_unavailable(kCudaExe, "cuda");
  return reason;
}

#define REQUIRE_CUDA() \
  do {                 \
    if (!cuda_unavailable().empty()) GTEST_SKIP() << "no CUDA here: " << cuda_unavailable(); \
  } while (0)

Report run_cuda(const TempDir& d, const std::string& name, std::vector<std::string> extra, int expect_exit = 0) {
  const std::string out = d.file(name + ".json");
  std::vector<std::string> args{kCudaExe, "--device", "cuda", "--quiet", "--output", out};
  args.insert(args.end(), extra.begin(), extra.end());
  const Proc r = run(args);
  EXPECT_EQ(r.exit_code, expect_exit) << r.err;
  EXPECT_TRUE(schema_errors(out).empty());
  return load_report(out);
}

}  // namespace

TEST(CudaDiagnostics, AlphaForwardIncrementScalesWithBatch) {
  REQUIRE_CUDA();
  TempDir d;
  const Report b1 = run_cuda(d, "b1", {"--case", "alpha", "--batch-size-per-device", "1"});
  const Report b4 = run_cuda(d, "b4", {"--case", "alpha", "--batch-size-per-device", "4"});
  expect_activation_scaling(b1, b4);
  EXPECT_TRUE(b1.samples.front().reserved_mib);
  EXPECT_TRUE(b1.environment.cuda_runtime_version);
}

TEST(CudaDiagnostics, BetaOptimizerStateIsTwiceTheParameters) {
  REQUIRE_CUDA();
  TempDir d;
  expect_optimizer_state_pattern(run_cuda(d, "beta", {"--case", "beta"}));
}

TEST(CudaDiagnostics, GammaGrowsEveryStep) {
  REQUIRE_CUDA();
  TempDir d;
  expect_retained_graph_pattern(run_cuda(d, "g6", {"--case", "gamma"}),
                                run_cuda(d, "g10", {"--case", "gamma", "--steps", "10"}));
}

TEST(CudaDiagnostics, WarmupAccountsForTheCublasWorkspaces) {
  REQUIRE_CUDA();
  TempDir d;
  const Report warm = run_cuda(d, "warm", {"--case", "beta", "--steps", "2"});
  double warm_mib = -1;
  for (const Event& e : warm.events) {
    if (e.kind == EventKind::kWarmup) warm_mib = e.mib.value_or(-1);
  }
  EXPECT_GT(warm_mib, 0) << "cuBLAS workspaces should appear in the warm-up";
  // Without the warm-up, step 0 carries the workspaces and the 2x reading is off.
  const Report cold = run_cuda(d, "cold", {"--case", "beta", "--steps", "2", "--no-warmup"});
  const double two_p = 2.0 * to_mib(cold.model.parameter_bytes);
  const double rise = alloc_at(cold, Phase::kCleanup, 0) - alloc_at(cold, Phase::kOptimizerReady);
  EXPECT_GT(rise - two_p, 0.5 * warm_mib);
}

TEST(CudaDiagnostics, OutOfMemoryUnderAMemoryLimit) {
  REQUIRE_CUDA();
  TempDir d;
  const Report r = run_cuda(d, "oom", {"--case", "alpha", "--preset", "large", "--memory-limit-mib", "2048"}, 3);
  EXPECT_EQ(r.status, RunStatus::kOom);
  ASSERT_FALSE(r.events.empty());
  EXPECT_EQ(r.events.back().kind, EventKind::kOom);
  EXPECT_EQ(r.events.back().phase, Phase::kForward);
  EXPECT_NE(r.events.back().message.find("out of memory"), std::string::npos) << r.events.back().message;
}

TEST(CudaDiagnostics, CompareGivesTheSeedDiagnosis) {
  REQUIRE_CUDA();
  TempDir d;
  for (const char* c : {"alpha", "beta", "gamma"}) run_cuda(d, c, {"--case", c});
  const Proc r = run({MEMDIAG_COMPARE_EXE, d.path(), "--expect", "alpha=activations", "--expect",
                     "beta=optimizer_state", "--expect", "gamma=retained_graph"});
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kOk)) << r.out << r.err;
}

TEST(CudaDiagnostics, ASweepInOneProcessEqualsSeparateProcesses) {
  REQUIRE_CUDA();
  TempDir d;
  const Proc one = run({kCudaExe, "--device", "cuda", "--plan", std::string(MEMDIAG_CASES_DIR) + "/plans/reference.json",
                        "--output-dir", d.file("sweep"), "--quiet"});
  ASSERT_EQ(one.exit_code, to_int(ExitCode::kOk)) << one.err;
  const auto runs = plan_as_flags(std::string(MEMDIAG_CASES_DIR) + "/plans/reference.json");
  ASSERT_EQ(runs.size(), 7u);
  for (const auto& [name, args] : runs) {
    const Report alone = run_cuda(d, "separate-" + name, args);
    const Report in_sweep = load_report(d.file("sweep/" + name + ".json"));
    ASSERT_TRUE(in_sweep.samples.front().reserved_mib) << "CUDA reports carry reserved";
    expect_same_measurements(alone, in_sweep, name);
    // Each run's warm-up makes the workspaces again, as a fresh process does.
    double warm_alone = -1, warm_sweep = -1;
    for (const Event& e : alone.events) if (e.kind == EventKind::kWarmup) warm_alone = e.mib.value_or(-1);
    for (const Event& e : in_sweep.events) if (e.kind == EventKind::kWarmup) warm_sweep = e.mib.value_or(-1);
    EXPECT_NEAR(warm_alone, warm_sweep, 0.01) << name;
  }
}

// A run alone on CUDA builds its model on the host while the process starts
// CUDA (build_model_ahead) and takes that build; a sweep's runs build their
// own in the run. The first run of a sweep is otherwise the run alone: the
// same weights (every step's loss and the trained weights' sums, to the
// bit) and the same requests of the allocator.
TEST(CudaDiagnostics, AModelBuiltWhileCudaStartsIsTheModelTheRunWouldBuild) {
  REQUIRE_CUDA();
  TempDir d;
  for (const std::string c : {"alpha", "beta", "gamma"}) {
    const std::vector<std::string> flags{"--case", c, "--preset", "small", "--steps", "3"};
    std::vector<std::string> alone_args = flags;
    alone_args.insert(alone_args.end(), {"--batch-size-per-device", "16"});
    const Report alone = run_cuda(d, c + "-alone", alone_args);
    std::vector<std::string> sweep{kCudaExe, "--device", "cuda", "--quiet", "--output-dir", d.file(c + "-sweep"),
                                   "--batch-size-per-device", "16,17"};
    sweep.insert(sweep.end(), flags.begin(), flags.end());
    const Proc r = run(sweep);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::optional<Report> first;
    for (const auto& f : std::filesystem::directory_iterator(d.file(c + "-sweep"))) {
      const Report x = load_report(f.path().string());
      if (x.config.batch_size_per_device == 16) first = x;
    }
    ASSERT_TRUE(first) << c;
    expect_same_measurements(alone, *first, c);
    std::vector<double> la, lb;
    for (const Sample& s : alone.samples) if (s.loss) la.push_back(*s.loss);
    for (const Sample& s : first->samples) if (s.loss) lb.push_back(*s.loss);
    EXPECT_EQ(la.size(), 3u) << c;
    EXPECT_EQ(la, lb) << c;
    ASSERT_TRUE(alone.model.final_parameter_sum && first->model.final_parameter_sum) << c;
    EXPECT_EQ(*alone.model.final_parameter_sum, *first->model.final_parameter_sum) << c;
    EXPECT_EQ(alone.model.final_parameter_sum_of_squares, first->model.final_parameter_sum_of_squares) << c;
  }
}

// A transformer sweep mixing kernels and lengths. With --isolate every run
// equals the same configuration alone, exactly. In one process the runs after
// the first get their new segments at addresses the earlier runs freed, and
// the allocator's best fit picks among equal free blocks by address: on the
// H200 delta medium at 512 after the fused kernel read up to 7 MiB of
// allocated apart from a fresh process from step 0's backward on, reserved
// equal, and Python's own process read the same 7 MiB running the two jobs
// in a row (torch.cuda.empty_cache and the cuBLAS workspaces cleared between
// them). The bound below is that, with a MiB to spare.
TEST(CudaDiagnostics, ATransformerSweepEqualsSeparateProcessesIsolatedAndWithinTheAllocatorsChoiceInOne) {
  REQUIRE_CUDA();
  TempDir d;
  const std::vector<std::string> common = {"--case", "delta", "--preset", "medium", "--steps", "2"};
  auto sweep = [&](const std::string& prefix, bool isolate) {
    std::vector<std::string> argv = {kCudaExe, "--device", "cuda", "--quiet"};
    if (isolate) argv.push_back("--isolate");
    argv.insert(argv.end(), common.begin(), common.end());
    for (const char* a : {"--sequence-length", "512,256", "--remedy", "efficient-attention,none", "-o"}) argv.push_back(a);
    argv.push_back(d.file(prefix + "-{seq}-{remedy}.json"));
    const Proc p = run(argv);
    ASSERT_EQ(p.exit_code, to_int(ExitCode::kOk)) << p.err;
  };
  sweep("isolated", true);
  sweep("one", false);
  for (const char* seq : {"512", "256"}) {
    for (const char* remedy : {"efficient-attention", "none"}) {
      std::vector<std::string> args = common;
      for (const char* a : {"--sequence-length", seq, "--remedy", remedy}) args.push_back(a);
      const std::string name = std::string(seq) + "-" + remedy;
      const Report alone = run_cuda(d, "alone-" + name, args);
      expect_same_measurements(alone, load_report(d.file("isolated-" + name + ".json")), "delta isolated " + name);
      const Report one = load_report(d.file("one-" + name + ".json"));
      ASSERT_EQ(one.samples.size(), alone.samples.size()) << name;
      for (std::size_t i = 0; i < one.samples.size(); ++i) {
        ASSERT_EQ(one.samples[i].phase, alone.samples[i].phase) << name;
        EXPECT_NEAR(one.samples[i].allocated_mib, alone.samples[i].allocated_mib, 8.0)
            << name << " sample " << i << " " << to_string(one.samples[i].phase);
      }
      // The model, its state and the step's forward are the same bytes: the
      // allocator's choice moves no more than a few blocks.
      EXPECT_NEAR(one.samples.front().allocated_mib, alone.samples.front().allocated_mib, 0.01) << name;
    }
  }
}

TEST(CudaDiagnostics, EmptyCacheLowersReservedButNotAllocated) {
  REQUIRE_CUDA();
  TempDir d;
  const Proc r = run({kCudaExe, "--device", "cuda", "--quiet", "--case", "alpha", "--steps", "3", "--remedy",
                      "none,empty-cache", "-o", d.file("{remedy}.json")});
  ASSERT_EQ(r.exit_code, to_int(ExitCode::kOk)) << r.err;
  const Report base = load_report(d.file("none.json"));
  const Report ec = load_report(d.file("empty-cache.json"));
  for (int step = 0; step < 3; ++step) {
    const Sample& b = sample_at(base, Phase::kCleanup, step);
    const Sample& e = sample_at(ec, Phase::kCleanup, step);
    EXPECT_NEAR(b.allocated_mib, e.allocated_mib, 0.01) << "step " << step;
    ASSERT_TRUE(b.reserved_mib && e.reserved_mib);
    // alpha's activations are freed into the cache at cleanup; emptied, they go.
    EXPECT_LT(*e.reserved_mib, *b.reserved_mib - 32) << "step " << step;
  }
}

TEST(CudaDiagnostics, AutocastBf16HalvesActivationsKeepsFp32Weights) {
  REQUIRE_CUDA();
  TempDir d;
  const Proc r = run({kCudaExe, "--device", "cuda", "--quiet", "--case", "alpha", "--steps", "3", "--remedy",
                      "none,autocast-bf16", "-o", d.file("{remedy}.json")});
  ASSERT_EQ(r.exit_code, to_int(ExitCode::kOk)) << r.err;
  const Report base = load_report(d.file("none.json"));
  const Report ac = load_report(d.file("autocast-bf16.json"));
  EXPECT_EQ(ac.model.parameter_bytes, base.model.parameter_bytes);
  EXPECT_LT(forward_increment(ac), 0.8 * forward_increment(base));
  for (int step = 0; step < 3; ++step) {
    const Sample& b = sample_at(base, Phase::kStep, step);
    const Sample& a = sample_at(ac, Phase::kStep, step);
    ASSERT_TRUE(b.loss && a.loss);
    EXPECT_NEAR(*a.loss, *b.loss, 0.05 * std::fabs(*b.loss)) << "step " << step;
  }
}

TEST(CudaDiagnostics, ARunAfterACheckpointedOneEqualsAFreshProcess) {
  // Checkpointing runs a Linear's forward on autograd's thread, whose first
  // such call makes a cuBLASLt workspace; the warm-up makes it up front, and
  // the reset between runs frees it, so the runs after it see nothing new.
  REQUIRE_CUDA();
  TempDir d;
  const Proc r = run({kCudaExe, "--device", "cuda", "--quiet", "--case", "alpha", "--steps", "2", "--remedy",
                      "checkpoint,none", "-o", d.file("sweep-{remedy}.json")});
  ASSERT_EQ(r.exit_code, to_int(ExitCode::kOk)) << r.err;
  const Report alone = run_cuda(d, "alone", {"--case", "alpha", "--steps", "2"});
  expect_same_measurements(alone, load_report(d.file("sweep-none.json")), "alpha after alpha checkpointed");
  // And checkpointing's first step leaves nothing behind it either.
  const Report cp = load_report(d.file("sweep-checkpoint=6.json"));
  EXPECT_NEAR(alloc_at(cp, Phase::kCleanup, 0), alloc_at(cp, Phase::kOptimizerReady), 0.01);
}

TEST(CudaDiagnostics, OutOfMemoryIsExplainedWithTheAllocatorsStateAtTheFailure) {
  REQUIRE_CUDA();
  TempDir d;
  struct Case {
    std::vector<std::string> args;
    std::string phase;
    std::string cause;
  };
  // beta medium: 256 MiB of weights and 256 of gradients fit 900 MiB; the
  // first step()'s AdamW moments do not. alpha large: its forward does not
  // fit 2 GiB. beta medium in 200 MiB: its weights do not fit.
  const std::vector<Case> cases = {
      {{"--case", "beta", "--preset", "medium", "--memory-limit-mib", "900"}, "step", "optimizer_state"},
      {{"--case", "alpha", "--preset", "large", "--memory-limit-mib", "2048"}, "forward", "activations"},
      {{"--case", "beta", "--preset", "medium", "--memory-limit-mib", "200"}, "model_ready", "parameters"},
      // beta medium in 450 MiB: forward fits; the gradients do not.
      {{"--case", "beta", "--preset", "medium", "--memory-limit-mib", "450"}, "backward", "parameters"},
      {{"--case", "gamma", "--preset", "large", "--steps", "30", "--memory-limit-mib", "6000"}, "", "retained_graph"},
  };
  int k = 0;
  for (const Case& c : cases) {
    const std::string name = "oom" + std::to_string(k++);
    const Report r = run_cuda(d, name, c.args, to_int(ExitCode::kOom));
    ASSERT_EQ(r.status, RunStatus::kOom) << name;
    const Event& e = r.events.back();
    ASSERT_TRUE(e.oom) << name;
    EXPECT_TRUE(e.oom->request_mib && *e.oom->request_mib > 0) << name;
    EXPECT_TRUE(e.oom->reserved_mib) << name << ": the observer fired";
    EXPECT_GE(e.oom->num_ooms.value_or(0), 1) << name;
    if (!c.phase.empty()) {
      EXPECT_EQ(to_string(*e.phase), c.phase) << name;
    }
    const Proc cmp = run({MEMDIAG_COMPARE_EXE, d.file(name + ".json"), "--format", "json"});
    ASSERT_EQ(cmp.exit_code, to_int(ExitCode::kOk)) << cmp.err;
    EXPECT_EQ(nlohmann::json::parse(cmp.out)["groups"][0]["dominant_cause"], c.cause) << name << "\n" << cmp.out;
  }
}

namespace {

// What tests/gpu/check_snapshot.py (PyTorch's pickle.load and memory_viz)
// reads from a snapshot; skips the test when the host's Python has no torch.
nlohmann::json read_with_pytorch(const TempDir& d, const std::string& pickle) {
  // Through env: the runner starts programs by path, without a PATH search.
  const Proc py = run({"/usr/bin/env", "python3", std::string(MEMDIAG_SOURCE_DIR) + "/tests/gpu/check_snapshot.py", pickle,
                       d.file("plot.html")});
  if (py.exit_code == 127) return {{"python_unavailable", "no python3 on PATH"}};
  if (py.exit_code != 0) {
    ADD_FAILURE() << "check_snapshot.py: " << py.err;
    return nullptr;
  }
  return nlohmann::json::parse(py.out);
}

}  // namespace

TEST(CudaSnapshots, TheRunsHistoryOpensInMemoryVizWithEveryPhaseMarked) {
  REQUIRE_CUDA();
  TempDir d;
  const std::string pickle = d.file("run.pickle");
  const Report r = run_cuda(d, "snap", {"--case", "beta", "--steps", "2", "--memory-snapshot", pickle});
  ASSERT_TRUE(std::filesystem::exists(pickle));
  bool named = false;
  for (const Event& e : r.events) named = named || e.message.find(pickle) != std::string::npos;
  EXPECT_TRUE(named) << "the report names its snapshot";
  const nlohmann::json s = read_with_pytorch(d, pickle);
  if (s.contains("python_unavailable")) GTEST_SKIP() << "no torch in python3: " << s["python_unavailable"];
  ASSERT_FALSE(s.is_null());
  for (const char* key : {"segments", "device_traces", "external_annotations", "allocator_settings"}) {
    EXPECT_NE(std::find(s["keys"].begin(), s["keys"].end(), key), s["keys"].end()) << key;
  }
  // Every phase of step 0 allocated something, under its own label; AdamW's
  // moments are allocated in step 0's step phase.
  for (const char* phase : {"phase=forward step=0", "phase=backward step=0", "phase=step step=0",
                            "phase=model_ready", "phase=setup"}) {
    EXPECT_GT(s["allocs_by_phase"].value(phase, 0), 0) << phase << "\n" << s["allocs_by_phase"];
  }
  std::vector<std::string> annotations = s["annotations"];
  EXPECT_NE(std::find(annotations.begin(), annotations.end(), "forward 1"), annotations.end()) << s["annotations"];
  EXPECT_EQ(s["stats_rc"], 0) << s["stats"];
  EXPECT_EQ(s["trace_plot_rc"], 0) << s["trace_plot_err"];
  EXPECT_GT(std::filesystem::file_size(d.file("plot.html")), 1000u);
}

TEST(CudaSnapshots, TheSnapshotAtTheOutOfMemoryEndsWithTheRefusal) {
  REQUIRE_CUDA();
  TempDir d;
  const std::string pickle = d.file("oom.pickle");
  const Report r = run_cuda(d, "oom", {"--case", "beta", "--preset", "medium", "--memory-limit-mib", "900",
                                       "--oom-snapshot", pickle},
                            to_int(ExitCode::kOom));
  ASSERT_TRUE(std::filesystem::exists(pickle));
  const nlohmann::json s = read_with_pytorch(d, pickle);
  if (s.contains("python_unavailable")) GTEST_SKIP() << "no torch in python3: " << s["python_unavailable"];
  ASSERT_FALSE(s.is_null());
  EXPECT_EQ(s["last_action"], "oom") << s["actions"];
  EXPECT_GT(s["allocs_by_phase"].value("phase=step step=0", 0), 0) << s["allocs_by_phase"];
  EXPECT_EQ(s["stats_rc"], 0) << s["stats"];
}

TEST(CudaSnapshots, NoOutOfMemoryLeavesNoOomSnapshot) {
  REQUIRE_CUDA();
  TempDir d;
  run_cuda(d, "fine", {"--case", "alpha", "--steps", "1", "--oom-snapshot", d.file("oom.pickle")});
  EXPECT_FALSE(std::filesystem::exists(d.file("oom.pickle")));
}

TEST(CudaCapacity, TheSearchIsConfirmedAndThePredictionIsWithinTwoPercent) {
  REQUIRE_CUDA();
  TempDir d;
  for (const char* preset : {"small", "medium"}) {
    const std::string name = std::string("max-") + preset;
    const Proc s = run({kCudaExe, "--device", "cuda", "--case", "alpha", "--preset", preset, "--find-max-batch",
                        "--memory-limit-mib", "4096", "-o", d.file(name + ".json")});
    ASSERT_EQ(s.exit_code, 0) << s.err;
    const auto c = nlohmann::json::parse(read_text(d.file(name + ".json")))["capacity"];
    const auto found = c["max_batch"].get<std::int64_t>();
    ASSERT_GT(found, 10) << preset;
    EXPECT_EQ(c["confirmed"], true) << preset << ": fresh processes disagreed\n" << s.err;
    // The comparer's prediction from a plain run at a quarter of the answer.
    const Proc one = run({kCudaExe, "--device", "cuda", "-q", "--case", "alpha", "--preset", preset,
                          "--batch-size-per-device", std::to_string(found / 4), "-o", d.file(name + "-q.json")});
    ASSERT_EQ(one.exit_code, 0) << one.err;
    const Proc cmp = run({MEMDIAG_COMPARE_EXE, d.file(name + "-q.json"), "--format", "json", "--budget-mib", "4096"});
    ASSERT_EQ(cmp.exit_code, 0) << cmp.err;
    const auto predicted =
        nlohmann::json::parse(cmp.out)["groups"][0]["capacity"][0]["max_batch"].get<std::int64_t>();
    EXPECT_LE(std::llabs(predicted - found), found / 50) << preset << ": predicted " << predicted << ", found " << found;
  }
}

// The search guided by the capacity model (search_guide.hpp) on the H200:
// every answer confirmed in fresh processes, in fewer tries than doubling
// and bisection would take to a gap of one sample (2 log2 B, less the
// doubling's last), and its first tries where the answer is, not at its
// powers of two.
TEST(CudaCapacity, TheGuidedSearchIsConfirmedInFewerTriesThanBisection) {
  REQUIRE_CUDA();
  TempDir d;
  struct Spec {
    const char* case_name;
    const char* preset;
    const char* steps;
    const char* budget;
  };
  for (const Spec& s : {Spec{"beta", "medium", "2", "2200"}, Spec{"gamma", "medium", "3", "2500"},
                        Spec{"epsilon", "small", "6", "400"}, Spec{"alpha", "medium", "3", "5000"}}) {
    SCOPED_TRACE(std::string(s.case_name) + " at " + s.budget + " MiB");
    const std::string out = d.file(std::string(s.case_name) + ".json");
    const Proc p = run({kCudaExe, "--device", "cuda", "-q", "--case", s.case_name, "--preset", s.preset, "--steps",
                        s.steps, "--find-max-batch", "--memory-limit-mib", s.budget, "-o", out});
    ASSERT_EQ(p.exit_code, 0) << p.err;
    const auto c = nlohmann::json::parse(read_text(out))["capacity"];
    EXPECT_EQ(c["confirmed"], true) << p.err;
    const auto found = c["max_batch"].get<std::int64_t>();
    ASSERT_GT(found, 100);
    const double bisection = 2 * std::log2(static_cast<double>(found));
    EXPECT_LT(static_cast<double>(c["tries"].size()), 0.8 * bisection)
        << c["tries"].size() << " tries against bisection's about " << bisection;
    // The replay of its traced try named the answer, and fresh processes
    // agreed at once: one sample's try and the traced one.
    EXPECT_EQ(c["replayed_max_batch"], found) << p.err;
    EXPECT_EQ(c["tries"].size(), 2u) << p.err;
  }
}

// Every prediction from one traced run (--trace-allocations at about a
// quarter of the answer), at two budgets per case, holds in fresh
// processes: the batch it names completes under the budget, and the next
// one and 1.02 times it run out. Where workspaces of the kernels' own
// choosing leave a range, the batch above its top runs out too.
TEST(CudaCapacity, EveryTracedPredictionHoldsInFreshProcesses) {
  REQUIRE_CUDA();
  TempDir d;
  struct Spec {
    std::string case_arg, preset, steps, batch;
    std::vector<int> budgets;
  };
  const std::vector<Spec> specs = {{"beta", "medium", "2", "2528", {2200, 3000}},
                                   {"gamma", "medium", "3", "2816", {2500, 4000}},
                                   {"epsilon", "small", "6", "1706", {400, 600}},
                                   {"alpha", "medium", "3", "9216", {5000, 8000}},
                                   {std::string(MEMDIAG_SOURCE_DIR) + "/tests/cases/own.json", "small", "3", "1877", {300, 1500}}};
  for (const Spec& s : specs) {
    const std::string name = std::filesystem::path(s.case_arg).stem().string();
    const std::vector<std::string> base = {kCudaExe, "--device", "cuda", "-q", "--case", s.case_arg, "--preset", s.preset,
                                           "--steps", s.steps};
    std::vector<std::string> traced = base;
    traced.insert(traced.end(), {"--batch-size-per-device", s.batch, "--trace-allocations", "-o", d.file(name + ".json")});
    const Proc t = run(traced);
    ASSERT_EQ(t.exit_code, 0) << t.err;
    for (int b : s.budgets) {
      SCOPED_TRACE(name + " at " + std::to_string(b) + " MiB");
      const Proc cmp = run({MEMDIAG_COMPARE_EXE, d.file(name + ".json"), "--format", "json", "--budget-mib", std::to_string(b)});
      ASSERT_EQ(cmp.exit_code, 0) << cmp.err;
      const auto c = nlohmann::json::parse(cmp.out)["groups"][0]["capacity"][0];
      ASSERT_TRUE(c["replay"].is_object()) << c["text"] << "\n" << c["replay_unusable"];
      const std::int64_t p = c["max_batch"];
      const std::int64_t held = c["replay"]["max_batch_if_workspaces_held"];
      auto fresh = [&](std::int64_t batch) {
        std::vector<std::string> argv = base;
        argv.insert(argv.end(), {"--batch-size-per-device", std::to_string(batch), "--memory-limit-mib", std::to_string(b),
                                 "-o", d.file("fresh.json"), "--overwrite"});
        return run(argv).exit_code;
      };
      EXPECT_EQ(fresh(p), 0) << "the predicted batch " << p << " did not complete\n" << c["text"];
      EXPECT_EQ(fresh(held + 1), 3) << "batch " << held + 1 << ", above the prediction's range, did not run out\n" << c["text"];
      // 2% above the prediction runs out too, unless the range the
      // prediction names reaches that far (then held + 1 above was it).
      const auto above = static_cast<std::int64_t>(std::ceil(static_cast<double>(p) * 1.02));
      if (above > held + 1) {
        EXPECT_EQ(fresh(above), 3) << "batch " << above << ", 2% above the prediction, did not run out\n" << c["text"];
      }
    }
  }
}

// Along a transformer's length: one traced run (passes at three lengths)
// predicts the longest sequence each budget holds, and fresh processes
// agree: that length completes, one token more runs out. The math kernel's
// scores and the fused kernel's per-token memory, and the tests' own
// transformer.
TEST(CudaCapacity, EveryTracedSequencePredictionHoldsInFreshProcesses) {
  REQUIRE_CUDA();
  TempDir d;
  struct Spec {
    std::string name, case_arg, preset, batch, length, remedy;
    std::vector<int> budgets;
  };
  const std::vector<Spec> specs = {
      {"delta-math", "delta", "medium", "8", "1024", "none", {12000, 24000}},
      {"delta-fused", "delta", "medium", "8", "2048", "efficient-attention", {24000}},
      {"own-math", std::string(MEMDIAG_SOURCE_DIR) + "/tests/cases/own-transformer.json", "h200", "4", "768", "none", {12000}}};
  for (const Spec& s : specs) {
    const std::vector<std::string> base = {kCudaExe, "--device", "cuda", "-q", "--case", s.case_arg, "--preset", s.preset,
                                           "--steps", "2", "--batch-size-per-device", s.batch, "--remedy", s.remedy};
    std::vector<std::string> traced = base;
    traced.insert(traced.end(), {"--sequence-length", s.length, "--trace-allocations", "-o", d.file(s.name + ".json")});
    const Proc t = run(traced);
    ASSERT_EQ(t.exit_code, 0) << t.err;
    for (int b : s.budgets) {
      SCOPED_TRACE(s.name + " at " + std::to_string(b) + " MiB");
      const Proc cmp = run({MEMDIAG_COMPARE_EXE, d.file(s.name + ".json"), "--format", "json", "--budget-mib", std::to_string(b)});
      ASSERT_EQ(cmp.exit_code, 0) << cmp.err;
      const auto c = nlohmann::json::parse(cmp.out)["groups"][0]["sequence_capacity"][0];
      ASSERT_TRUE(c["replay"].is_object()) << c["text"];
      const std::int64_t l = c["max_sequence_length"];
      const std::int64_t held = c["replay"]["max_sequence_length_if_workspaces_held"];
      auto fresh = [&](std::int64_t length) {
        std::vector<std::string> argv = base;
        argv.insert(argv.end(), {"--sequence-length", std::to_string(length), "--memory-limit-mib", std::to_string(b),
                                 "-o", d.file("fresh.json"), "--overwrite"});
        return run(argv).exit_code;
      };
      EXPECT_EQ(fresh(l), 0) << "the predicted length " << l << " did not complete\n" << c["text"];
      EXPECT_EQ(fresh(held + 1), 3) << "length " << held + 1 << ", above the prediction's range, did not run out\n" << c["text"];
      const auto above = static_cast<std::int64_t>(std::ceil(static_cast<double>(l) * 1.02));
      if (above > held + 1) {
        EXPECT_EQ(fresh(above), 3) << "length " << above << ", 2% above the prediction, did not run out\n" << c["text"];
      }
    }
  }
}

// On CUDA the prediction from one plain run at the case's own batch, and the
// search's own over its tries, are within 2% of what the search finds, or
// the answer says why not and by how much, and the answer lies in what it
// says: one run's range, the allocator's reserve varying by enough to hold
// the answer, or memory trapped at an out-of-memory (fragmentation).
TEST(CudaCapacity, EveryCaseIsWithinTwoPercentOrSaysWhyNot) {
  REQUIRE_CUDA();
  TempDir d;
  struct Spec {
    std::string case_arg, preset;
    std::vector<int> budgets;
  };
  const std::vector<Spec> specs = {{"alpha", "medium", {4096, 8192}},
                                   {"beta", "medium", {1500, 3000}},
                                   {"gamma", "medium", {2000, 4000}},
                                   {"epsilon", "small", {400, 600}},
                                   {std::string(MEMDIAG_SOURCE_DIR) + "/tests/cases/own.json", "small", {150, 300}}};
  for (const Spec& s : specs) {
    const std::string name = std::filesystem::path(s.case_arg).stem().string();
    ASSERT_EQ(run({kCudaExe, "--device", "cuda", "-q", "--case", s.case_arg, "--preset", s.preset, "-o",
                   d.file(name + ".json")}).exit_code, 0);
    for (int b : s.budgets) {
      SCOPED_TRACE(name + " at " + std::to_string(b) + " MiB");
      const std::string search = d.file(name + "-max-" + std::to_string(b) + ".json");
      const Proc found_run = run({kCudaExe, "--device", "cuda", "-q", "--case", s.case_arg, "--preset", s.preset,
                                  "--find-max-batch", "--memory-limit-mib", std::to_string(b), "-o", search});
      ASSERT_EQ(found_run.exit_code, 0) << found_run.err;
      const std::int64_t found = nlohmann::json::parse(read_text(search))["capacity"]["max_batch"];
      for (const std::string& report : {d.file(name + ".json"), search}) {
        const Proc cmp = run({MEMDIAG_COMPARE_EXE, report, "--format", "json", "--budget-mib", std::to_string(b)});
        ASSERT_EQ(cmp.exit_code, 0) << cmp.err;
        const auto c = nlohmann::json::parse(cmp.out)["groups"][0]["capacity"][0];
        const std::int64_t p = c["max_batch"];
        if (report == search) {
          // The search's own answer from its traced try (the allocator
          // replayed at the budget) is within 2% of what fresh processes
          // then found, and the text says it beside the lines' figure. The
          // replay does not model blocks stranded under the budget: where a
          // try ran out with memory reserved but unusable (the tests' own
          // case at 150 MiB on the H100: replay 2275, found 1685) the text
          // names that fragmentation and how far the replay was.
          ASSERT_TRUE(c["searched"].is_object()) << c["text"];
          const auto& replayed = c["searched"]["replayed_max_batch"];
          ASSERT_TRUE(replayed.is_number()) << "the search settled without its traced try's replay\n" << c["text"];
          const std::int64_t r = replayed.get<std::int64_t>();
          const std::string text = c["text"].get<std::string>();
          EXPECT_NE(text.find("had answered " + std::to_string(r)), std::string::npos) << text;
          if (std::llabs(r - found) > found / 50) {
            EXPECT_TRUE(c["caveats"]["trapped_at_oom_mib"].is_number())
                << "the replay was " << r << " against " << found << " with no stranded memory named\n" << text;
            EXPECT_NE(text.find("fragmentation"), std::string::npos) << text;
            EXPECT_NE(text.find("had answered " + std::to_string(r) + " ("), std::string::npos) << text;
            EXPECT_EQ(text.find("had answered " + std::to_string(r) + " (the answer itself)"), std::string::npos) << text;
          }
        }
        if (std::llabs(p - found) <= found / 50) continue;
        const auto& cv = c["caveats"];
        const bool range_holds = !cv["batch_at_max_reserve"].is_null() && cv["batch_at_max_reserve"] <= found &&
                                 found <= cv["batch_at_min_reserve"];
        // One run says the range its composition allows ("extrapolated
        // x3.12 from one run, which puts it between 12481 (...) and 22558
        // (...), 2% either side"), and the answer lies in it; where its
        // steps varied in size or kept more step by step only the high end
        // is known, and it says why ("at or below ...; how far below cannot
        // be told from a run with room to spare ..."): gamma medium from
        // batch 2048 predicts 4785 where 3413 is found under 2000 MiB.
        const bool open_below = cv["low_end_unknown"].is_string();
        const bool one_run_range_holds =
            cv["one_run"] == true && cv["batch_if_activations_grow"].is_number() &&
            found <= cv["batch_if_activations_grow"].get<std::int64_t>() &&
            (open_below ? c["text"].get<std::string>().find("how far below cannot be told") != std::string::npos
                        : cv["batch_if_all_grows"].get<std::int64_t>() <= found);
        // Memory stranded where a run ran out (the fresh check above the
        // answer among them) says how far below the lines the answer may
        // be: the answer must lie between that and the lines' figure.
        const bool trapped_holds = !cv["batch_if_trapped"].is_null() &&
                                   cv["batch_if_trapped"].get<double>() * 0.98 <= static_cast<double>(found) &&
                                   static_cast<double>(found) <= static_cast<double>(p) * 1.02;
        // The search's own fit where its tries ran out with memory stranded
        // (epsilon small, +36% at 400 MiB): the lines do not model it, the
        // caveat names fragmentation, and the answer beside it is the
        // search's confirmed one with how far the lines were from it. No
        // bound is held here beyond that: the stranded memory's own figure
        // (batch_if_trapped, 8592 at 400 MiB) does not reach 6826.
        const std::string found_words = "found " + std::to_string(found) + " (";
        const bool search_says_how_far = cv["one_run"] == false && cv["trapped_at_oom_mib"].is_number() &&
                                         found <= p && c["text"].get<std::string>().find(found_words) != std::string::npos;
        const bool says_why = one_run_range_holds ||
                              (cv["one_run"] == false && (range_holds || trapped_holds || search_says_how_far));
        EXPECT_TRUE(says_why) << report << ": predicted " << p << ", found " << found << ", and no caveat says why\n"
                              << c["text"];
        EXPECT_NE(c["text"].get<std::string>().find("it may be off: "), std::string::npos) << c["text"];
      }
    }
  }
}
