// The measuring half on the CPU, with real LibTorch tensors: the tracking
// allocator, the CPU probe, the recorder, the tensor census and a workload.
#include "memdiag/autocast_guard.hpp"
#include "memdiag/case_spec.hpp"
#include "memdiag/checkpoint.hpp"
#include "memdiag/distributed.hpp"
#include "memdiag/errors.hpp"
#include "memdiag/harness.hpp"
#include "memdiag/torch_executor.hpp"
#include "memdiag/probes.hpp"
#include "memdiag/recorder.hpp"
#include "memdiag/tensor_census.hpp"
#include "memdiag/tracking_allocator.hpp"
#include "memdiag/workload.hpp"

#include <c10/util/Exception.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adamw.h>

#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include "process.hpp"
#include "test_paths.hpp"

using namespace memdiag;

TEST(TrackingAllocator, CountsEveryByteOfACpuTensor) {
  CpuTrackingAllocator& a = CpuTrackingAllocator::install();
  const std::int64_t before = a.current_bytes();
  {
    torch::Tensor t = torch::empty({1024, 256}, torch::kFloat);  // exactly 1 MiB
    EXPECT_EQ(a.current_bytes() - before, 1 << 20);
    EXPECT_EQ(t.data_ptr(), t.storage().data_ptr().get_context());
  }
  EXPECT_EQ(a.current_bytes(), before);
}

TEST(TrackingAllocator, PeakResetsToCurrent) {
  CpuTrackingAllocator& a = CpuTrackingAllocator::install();
  a.reset_peak();
  const std::int64_t base = a.current_bytes();
  { torch::Tensor t = torch::ones({4 << 20}, torch::kByte); }
  EXPECT_GE(a.peak_bytes() - base, 4 << 20);
  a.reset_peak();
  EXPECT_EQ(a.peak_bytes(), a.current_bytes());
}

TEST(TrackingAllocator, LimitRaisesTheSameErrorAsCuda) {
  CpuTrackingAllocator& a = CpuTrackingAllocator::install();
  a.set_limit(a.current_bytes() + (1 << 20));
  EXPECT_THROW(torch::empty({2 << 20}, torch::kByte), c10::OutOfMemoryError);
  EXPECT_NO_THROW(torch::empty({1 << 19}, torch::kByte));
  a.set_limit(std::nullopt);
  EXPECT_NO_THROW(torch::empty({2 << 20}, torch::kByte));
}

// What HostStaging allocates is the host's: not counted, not refused by the
// limit, and freed without touching the count (also after the scope, and
// with the raw deleter's path); what is allocated after it counts again.
TEST(TrackingAllocator, HostStagingIsOutsideTheSimulatedDevice) {
  CpuTrackingAllocator& a = CpuTrackingAllocator::install();
  const std::int64_t before = a.current_bytes();
  a.set_limit(before + (1 << 20));
  torch::Tensor host;
  {
    HostStaging staging;
    host = torch::empty({4 << 20}, torch::kByte);  // beyond the limit, and not refused
    EXPECT_EQ(a.current_bytes(), before);
  }
  torch::Tensor device = torch::empty({1 << 19}, torch::kByte);
  EXPECT_EQ(a.current_bytes() - before, 1 << 19);
  EXPECT_THROW(torch::empty({1 << 20}, torch::kByte), c10::OutOfMemoryError);
  host = torch::Tensor();  // freed outside the scope: the count does not move
  EXPECT_EQ(a.current_bytes() - before, 1 << 19);
  device = torch::Tensor();
  EXPECT_EQ(a.current_bytes(), before);
  a.set_limit(std::nullopt);
}

TEST(CpuProbe, ReportsNullForWhatTheCpuDoesNotHave) {
  auto probe = make_cpu_probe();
  const ProbeReading r = probe->read();
  EXPECT_FALSE(r.reserved_mib);
  EXPECT_FALSE(r.device_used_mib);
  EXPECT_FALSE(r.process_device_mib);
  EXPECT_EQ(probe->name(), "cpu-tracking-allocator");
}

TEST(Recorder, PhasesCarryEndStateAndPeakWithin) {
  auto probe = make_cpu_probe();
  Recorder rec(*probe);
  torch::Tensor keep = torch::zeros({2 << 20}, torch::kByte);  // 2 MiB kept
  rec.mark(Phase::kModelReady);
  rec.begin_step(0);
  { torch::Tensor transient = torch::zeros({8 << 20}, torch::kByte); }  // 8 MiB, freed
  const Sample& s = rec.mark(Phase::kForward);
  EXPECT_EQ(s.step, 0);
  EXPECT_NEAR(s.peak_allocated_mib - s.allocated_mib, 8.0, 0.01);
  const Report r = rec.finish(RunStatus::kComplete);
  ASSERT_EQ(r.samples.size(), 2u);
  EXPECT_FALSE(r.samples[0].step);
  EXPECT_NEAR(r.samples[1].allocated_mib, r.samples[0].allocated_mib, 0.01);
}

TEST(TensorCensus, AdamWStateIsTwiceTheParametersAfterTheFirstStep) {
  torch::nn::Linear lin(256, 256);
  std::vector<torch::Tensor> params = lin->parameters();
  torch::optim::AdamW opt(params, torch::optim::AdamWOptions(1e-3));
  TensorCensus before = take_census(params, &opt);
  EXPECT_EQ(before.optimizer_state_mib, 0);
  EXPECT_EQ(before.gradients_mib, 0);
  lin->forward(torch::randn({4, 256})).sum().backward();
  opt.step();
  TensorCensus after = take_census(params, &opt);
  EXPECT_NEAR(after.gradients_mib, after.parameters_mib, 1e-9);
  EXPECT_NEAR(after.optimizer_state_mib, 2 * after.parameters_mib, 1e-9);
}

TEST(Workload, CustomCaseRunsAndRecordsEveryPhase) {
  CaseSpec c = parse_case_text(R"({"name": "tiny", "optimizer": {"type": "sgd"},
      "presets": {"small": {"model": {"input_dim": 8, "hidden_dim": 16, "depth": 2, "output_dim": 4},
                            "batch_size": 4, "steps": 2}}})",
                              "tiny.json");
  auto probe = make_cpu_probe();
  Recorder rec(*probe);
  WorkloadOptions o;
  o.spec = c;
  o.preset = "small";
  o.batch_size = 4;
  o.steps = 2;
  o.device = c10::Device(c10::DeviceType::CPU);
  o.seed = 1;
  EXPECT_EQ(run_workload(o, *probe, rec), RunStatus::kComplete);
  const Report r = rec.finish(RunStatus::kComplete);
  ASSERT_EQ(r.samples.size(), 2u + 4u * 2u);
  const std::vector<Phase> order = {Phase::kModelReady, Phase::kOptimizerReady, Phase::kForward, Phase::kBackward,
                                    Phase::kStep,       Phase::kCleanup,        Phase::kForward, Phase::kBackward,
                                    Phase::kStep,       Phase::kCleanup};
  for (std::size_t i = 0; i < order.size(); ++i) EXPECT_EQ(r.samples[i].phase, order[i]) << i;
  EXPECT_EQ(r.samples.back().step, 1);
  // Measured from the model's tensors: Linear(8,16), Linear(16,16), Linear(16,4).
  EXPECT_EQ(r.model.parameters, 8 * 16 + 16 + 16 * 16 + 16 + 16 * 4 + 4);
  EXPECT_EQ(r.model.parameter_bytes, 4 * r.model.parameters);
  ASSERT_TRUE(r.samples.front().tensors);
  EXPECT_NEAR(r.samples.front().tensors->parameters_mib, to_mib(r.model.parameter_bytes), 1e-9);
}

TEST(Distributed, LauncherVariables) {
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  EXPECT_FALSE(launch_from_environment());
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("MASTER_PORT", "1234", 1);
  setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  const auto l = launch_from_environment();
  ASSERT_TRUE(l);
  EXPECT_EQ(l->rank, 1);
  EXPECT_EQ(l->local_rank, 1);
  EXPECT_EQ(l->master_port, 1234);
  EXPECT_TRUE(l->agent_store);
  // Without LOCAL_WORLD_SIZE every rank is taken to be on this host.
  EXPECT_EQ(l->local_world_size, 2);
  setenv("LOCAL_WORLD_SIZE", "1", 1);
  EXPECT_EQ(launch_from_environment()->local_world_size, 1);
  setenv("LOCAL_WORLD_SIZE", "3", 1);
  EXPECT_THROW(launch_from_environment(), UsageError);
  setenv("LOCAL_WORLD_SIZE", "2", 1);
  setenv("RANK", "2", 1);
  EXPECT_THROW(launch_from_environment(), UsageError);
  for (const char* v : {"RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE"}) unsetenv(v);
}

namespace {

// A small MLP with dropout, so the recomputation must draw the forward's
// random numbers to give the same gradients.
torch::nn::Sequential mlp_with_dropout() {
  torch::nn::Sequential seq;
  for (int i = 0; i < 4; ++i) {
    seq->push_back(torch::nn::Linear(16, 16));
    seq->push_back(torch::nn::GELU());
    seq->push_back(torch::nn::Dropout(0.3));
  }
  seq->push_back(torch::nn::Linear(16, 4));
  return seq;
}

std::vector<torch::Tensor> gradients_of(torch::nn::Sequential& seq, int segments, std::uint64_t seed) {
  for (auto& p : seq->parameters()) p.mutable_grad() = torch::Tensor();
  torch::manual_seed(seed);
  const torch::Tensor x = torch::randn({8, 16});
  const torch::Tensor y = torch::randn({8, 4});
  const torch::Tensor out = segments > 0 ? checkpoint_sequential(seq, segments, x, false) : seq->forward(x);
  torch::mse_loss(out, y).backward();
  std::vector<torch::Tensor> grads;
  for (auto& p : seq->parameters()) grads.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
  return grads;
}

}  // namespace

TEST(Checkpoint, GradientsOfEveryParameterEqualTheUncheckpointedModel) {
  torch::manual_seed(3);
  torch::nn::Sequential seq = mlp_with_dropout();
  const std::vector<torch::Tensor> plain = gradients_of(seq, 0, 11);
  for (int segments : {2, 3, 13}) {
    const std::vector<torch::Tensor> checked = gradients_of(seq, segments, 11);
    ASSERT_EQ(checked.size(), plain.size());
    for (std::size_t i = 0; i < plain.size(); ++i) {
      // The first segment's input is data that needs no gradient: its
      // parameters still get theirs.
      ASSERT_TRUE(checked[i].defined()) << "segments " << segments << ", parameter " << i;
      EXPECT_TRUE(torch::equal(checked[i], plain[i])) << "segments " << segments << ", parameter " << i;
    }
  }
}

TEST(Checkpoint, KeepsOnlyTheSegmentInputsInForward) {
  CpuTrackingAllocator& a = CpuTrackingAllocator::install();
  torch::nn::Sequential seq;
  for (int i = 0; i < 16; ++i) {
    seq->push_back(torch::nn::Linear(256, 256));
    seq->push_back(torch::nn::ReLU());
  }
  const torch::Tensor x = torch::randn({512, 256});
  auto kept_after_forward = [&](int segments) {
    const std::int64_t before = a.current_bytes();
    torch::Tensor out = segments > 0 ? checkpoint_sequential(seq, segments, x, false) : seq->forward(x);
    return to_mib(a.current_bytes() - before);
  };
  const double plain = kept_after_forward(0);
  const double checked = kept_after_forward(4);
  // 32 modules: plain keeps each Linear's 0.5 MiB input (ReLU's output is
  // the next one's input), 8 MiB; with 4 segments only the 3 checkpointed
  // segments' inputs and the last segment's 4 blocks, plus the output.
  EXPECT_NEAR(plain, 8.0, 0.6);
  EXPECT_LT(checked, 0.6 * plain) << plain << " MiB against " << checked << " MiB";
}

TEST(Autocast, GuardCastsMatmulsAndRestoresTheState) {
  const torch::Tensor a = torch::randn({4, 4});
  EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::DeviceType::CPU));
  {
    AutocastGuard guard(c10::DeviceType::CPU, torch::kBFloat16);
    EXPECT_EQ(torch::mm(a, a).scalar_type(), torch::kBFloat16);
    {
      AutocastGuard inner(c10::DeviceType::CPU, torch::kBFloat16);
      EXPECT_EQ(torch::mm(a, a).scalar_type(), torch::kBFloat16);
    }
    EXPECT_TRUE(at::autocast::is_autocast_enabled(c10::DeviceType::CPU));
  }
  EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::DeviceType::CPU));
  EXPECT_EQ(torch::mm(a, a).scalar_type(), torch::kFloat);
}

namespace {

// Every call the harness makes, in order, by name.
class RecordingObserver final : public RunObserver {
 public:
  std::vector<std::string> calls;
  std::vector<std::string> problems;
  void session_started(const SessionInfo&) override { calls.push_back("session"); }
  void problem(const std::string& line) override {
    calls.push_back("problem");
    problems.push_back(line);
  }
  void run_started(const RunHeading&) override { calls.push_back("run_started"); }
  void sample_taken(const Sample&, const Report&) override { calls.push_back("sample"); }
  void run_finished(const Report&, const std::string& output) override {
    calls.push_back(output.empty() ? "run_finished, nothing written" : "run_finished");
  }
  void sweep_run_finished(const SweepRow&, std::size_t, std::size_t) override { calls.push_back("sweep_run"); }
  void sweep_finished(const std::vector<SweepRow>&, std::size_t) override { calls.push_back("sweep_finished"); }
};

}  // namespace

// The measuring half prints nothing: everything it has to say reaches the
// observer, and a stop request it is given ends the run between phases.
TEST(Harness, SpeaksOnlyThroughItsObserverAndStopsWhenAsked) {
  // TempDir removes without std::filesystem::remove_all, which libtorch.so
  // exports a broken copy of.
  const testkit::TempDir tmp;
  const std::string dir = tmp.path();
  HarnessOptions opts;
  opts.runs = {RunRequest{"", "gamma", std::nullopt, 4, 2, {}, std::nullopt}};
  opts.device = "cpu";
  opts.output = dir + "/g.json";
  opts.case_dirs = {MEMDIAG_CASES_DIR};
  RecordingObserver obs;
  opts.observer = &obs;
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  TorchExecutor executor;
  EXPECT_EQ(run_harness(opts, executor), 0);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  // model_ready, optimizer_ready, then four phases for each of the 2 steps.
  std::vector<std::string> want = {"session", "run_started"};
  want.insert(want.end(), 2 + 2 * 4, "sample");
  want.push_back("run_finished");
  EXPECT_EQ(obs.calls, want);

  // A sweep, stopped before it starts: the first run ends at its first
  // phase boundary, interrupted, naming the signal, and no second runs.
  StopRequest stop;
  stop.request(SIGTERM);
  opts.stop = &stop;
  opts.runs = {RunRequest{"", "gamma", std::nullopt, 4, 2, {}, std::nullopt}, RunRequest{"", "gamma", std::nullopt, 8, 2, {}, std::nullopt}};
  opts.output = dir + "/s-{batch}.json";
  RecordingObserver swept;
  opts.observer = &swept;
  TorchExecutor swept_executor;
  EXPECT_EQ(run_harness(opts, swept_executor), to_int(ExitCode::kInterrupted));
  EXPECT_EQ(swept.calls, (std::vector<std::string>{"session", "sweep_run", "sweep_finished"}));
  EXPECT_FALSE(std::filesystem::exists(dir + "/s-8.json"));

  // A usage error is one problem and nothing else.
  RecordingObserver bad;
  opts.observer = &bad;
  opts.runs = {RunRequest{"", "no-such-case", std::nullopt, std::nullopt, std::nullopt, {}, std::nullopt}};
  TorchExecutor bad_executor;
  EXPECT_EQ(run_harness(opts, bad_executor), to_int(ExitCode::kUsage));
  EXPECT_EQ(bad.calls, (std::vector<std::string>{"problem"}));
}
