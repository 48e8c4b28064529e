// memory_diagnostics as a user runs it, on the CPU: real process, real files.
#include "patterns.hpp"
#include "memdiag/exit_code.hpp"
#include "process.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include <csignal>
#include <chrono>
#include <fstream>
#include <filesystem>
#include <iostream>
#include <thread>

#include <dlfcn.h>
#include <signal.h>
#include <sys/stat.h>

using namespace memdiag;
using namespace memdiag::testkit;

namespace {

const std::string kDiagExe = MEMDIAG_DIAGNOSTICS_EXE;

Proc diag(std::vector<std::string> args) {
  args.insert(args.begin(), kDiagExe);
  return run(args);
}

Report run_case(const TempDir& d, const std::string& name, std::vector<std::string> extra) {
  const std::string out = d.file(name + ".json");
  std::vector<std::string> args{"--device", "cpu", "--quiet", "--output", out};
  args.insert(args.end(), extra.begin(), extra.end());
  const Proc r = diag(args);
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kOk)) << r.err;
  EXPECT_TRUE(schema_errors(out).empty()) << schema_errors(out).front();
  return load_report(out);
}

}  // namespace

TEST(DiagnosticsCpu, AlphaForwardIncrementScalesWithBatch) {
  TempDir d;
  const Report b1 = run_case(d, "b1", {"--case", "alpha", "--batch-size-per-device", "1"});
  const Report b4 = run_case(d, "b4", {"--case", "alpha", "--batch-size-per-device", "4"});
  expect_activation_scaling(b1, b4);
  EXPECT_EQ(b1.config.batch_size_per_device, 1);
  EXPECT_EQ(b1.status, RunStatus::kComplete);
  EXPECT_FALSE(b1.samples.front().reserved_mib);  // CPU: null, never invented
}

TEST(DiagnosticsCpu, BetaOptimizerStateAppearsAtFirstStepAndStays) {
  TempDir d;
  const Report r = run_case(d, "beta", {"--case", "beta"});
  expect_optimizer_state_pattern(r);
  // The census agrees with the allocator: the state is AdamW's moments.
  const Sample& cleanup0 = sample_at(r, Phase::kCleanup, 0);
  ASSERT_TRUE(cleanup0.tensors);
  EXPECT_NEAR(cleanup0.tensors->optimizer_state_mib, 2 * cleanup0.tensors->parameters_mib, 1e-6);
  EXPECT_EQ(cleanup0.tensors->gradients_mib, 0);
}

TEST(DiagnosticsCpu, GammaGrowsEveryStepAndMoreStepsGrowMore) {
  TempDir d;
  const Report s4 = run_case(d, "g4", {"--case", "gamma", "--steps", "4"});
  const Report s8 = run_case(d, "g8", {"--case", "gamma", "--steps", "8"});
  expect_retained_graph_pattern(s4, s8);
}

TEST(DiagnosticsCpu, ReportCarriesTheResolvedCaseAndEnvironment) {
  TempDir d;
  const Report r = run_case(d, "a", {"--case", "gamma", "--steps", "2", "--seed", "7"});
  EXPECT_EQ(r.case_info.name, "gamma");
  EXPECT_TRUE(r.case_info.builtin);
  EXPECT_EQ(r.case_info.presets, (std::vector<std::string>{"large", "medium", "small"}));
  EXPECT_EQ(nlohmann::json::parse(r.case_info.detail_json)["graph"]["retain_graph"], true);
  EXPECT_EQ(r.config.seed, 7u);
  EXPECT_EQ(r.config.device, "cpu");
  EXPECT_EQ(r.config.steps, 2);
  EXPECT_FALSE(r.environment.torch_version.empty());
  EXPECT_EQ(r.samples.size(), 2u + 4u * 2u);
  EXPECT_GT(r.model.parameters, 0);
}

TEST(DiagnosticsCpu, SeedReferenceCommandsRunAsWritten) {
  TempDir d;
  // The seed's commands, with python memory_diagnostics.py replaced.
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--case", "alpha", "--output", d.file("alpha.json")},
           {"--case", "beta", "--output", d.file("beta.json")},
           {"--case", "gamma", "--output", d.file("gamma.json")},
           {"--case", "alpha", "--batch-size-per-device", "1", "--output", d.file("alpha-batch1.json")},
           {"--case", "alpha", "--batch-size-per-device", "4", "--output", d.file("alpha-batch4.json")},
           {"--case", "gamma", "--steps", "10", "--output", d.file("gamma-steps10.json")}}) {
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--device", "cpu", "--quiet"});
    const Proc r = diag(a);
    EXPECT_EQ(r.exit_code, to_int(ExitCode::kOk)) << r.err;
  }
  const Proc cmp = run({MEMDIAG_COMPARE_EXE, d.file("alpha.json"), d.file("beta.json"), d.file("gamma.json"),
                       d.file("alpha-batch1.json"), d.file("alpha-batch4.json"), d.file("gamma-steps10.json"),
                       "--expect", "alpha=activations", "--expect", "beta=optimizer_state", "--expect",
                       "gamma=retained_graph"});
  EXPECT_EQ(cmp.exit_code, to_int(ExitCode::kOk)) << cmp.out << cmp.err;
}

TEST(DiagnosticsCpu, ProgressTableUnlessQuiet) {
  TempDir d;
  const Proc loud = diag({"--case", "gamma", "--steps", "1", "--device", "cpu", "-o", d.file("a.json")});
  EXPECT_EQ(loud.exit_code, to_int(ExitCode::kOk));
  EXPECT_NE(loud.out.find("optimizer_ready"), std::string::npos);
  EXPECT_NE(loud.out.find("wrote " + d.file("a.json")), std::string::npos);
  const Proc quiet = diag({"--case", "gamma", "--steps", "1", "--device", "cpu", "-q", "-o", d.file("b.json")});
  EXPECT_EQ(quiet.out, "");
}

TEST(DiagnosticsCpu, AMissingCaseFileOrAMisspeltFlagIsNamedPlainly) {
  TempDir d;
  const Proc missing = run_in(d.path(), {MEMDIAG_DIAGNOSTICS_EXE, "--case", "my-model.json"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("my-model.json: no such case file"), std::string::npos) << missing.err;
  EXPECT_EQ(missing.err.find("$:"), std::string::npos) << missing.err;
  const Proc flag = run_in(d.path(), {MEMDIAG_DIAGNOSTICS_EXE, "--case", "alpha", "--stpes", "3"});
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_NE(flag.err.find("unknown flag --stpes (did you mean --steps?)"), std::string::npos) << flag.err;
  EXPECT_TRUE(std::filesystem::is_empty(d.path()));
}

TEST(DiagnosticsCpu, BadValuesGiveOneLineExit2AndWriteNothing) {
  TempDir d;
  const std::string out = d.file("never.json");
  struct Case {
    std::vector<std::string> args;
    std::string names;
  };
  const std::vector<Case> cases = {
      {{"--case", "zeta"}, "--case"},
      {{"--case", "alpha", "--batch-size-per-device", "0"}, "--batch-size-per-device"},
      {{"--case", "alpha", "--steps", "-3"}, "--steps"},
      {{"--case", "alpha", "--preset", "huge"}, "--preset"},
      {{"--case", "alpha", "--device", "tpu"}, "--device"},
      {{"--case", "alpha", "--device", "cpu", "--memory-limit-mib", "0"}, "--memory-limit-mib"},
      // Class 5: values the report could not hold, refused rather than written.
      {{"--case", "alpha", "--device", "cpu", "--memory-limit-mib", "inf"}, "--memory-limit-mib"},
      {{"--case", "alpha", "--device", "cpu", "--memory-limit-mib", "1e18"}, "--memory-limit-mib"},
      {{"--case", "alpha", "--steps", "10000001"}, "--steps"},
      {{"--case", "alpha", "--batch-size-per-device", "1073741825"}, "--batch-size-per-device"},
      {{"--case", "alpha", "--batch-size-per-device", "many"}, "--batch-size-per-device"},
      // Numbers are decimal: no hex, exponent, empty value, nan or inf reaches arithmetic.
      {{"--case", "alpha", "--device", "cpu", "--memory-limit-mib", "0x10"}, "--memory-limit-mib"},
      {{"--case", "alpha", "--device", "cpu", "--memory-limit-mib", ""}, "--memory-limit-mib"},
      {{"--case", "alpha", "--device", "cpu", "--memory-limit-mib", "nan"}, "--memory-limit-mib"},
      {{"--case", "alpha", "--device", "cpu", "--dist-timeout-s", "inf"}, "--dist-timeout-s"},
      {{"--case", "alpha", "--device", "cpu", "--dist-timeout-s", "1e300"}, "--dist-timeout-s"},
      {{"--case", "alpha", "--device", "cpu", "--rank-zero-extra-samples", ""}, "--rank-zero-extra-samples"},
      {{"--case", "alpha", "--device", "cpu", "--snapshot-max-entries", "0"}, "--snapshot-max-entries"},
      // What only a data-parallel job can do is refused in one process, not recorded as done.
      {{"--case", "beta", "--device", "cpu", "--shard-optimizer-state"}, "--shard-optimizer-state: shards across"},
      {{"--case", "beta", "--device", "cpu", "--rank-zero-extra-samples", "4"}, "--rank-zero-extra-samples"},
      {{"--plan", "p.json", "--steps", "2"}, "--plan: not with --steps"},
      {{"--case", "alpha", "--output-dir", "d"}, "--output-dir: not with --output"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> a = c.args;
    a.insert(a.end(), {"--output", out});
    const Proc r = diag(a);
    EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage)) << c.names;
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(c.names), std::string::npos) << r.err;
    EXPECT_FALSE(exists(out)) << c.names;
  }
  write_text(d.file("plain"), "a file\n");
  const Proc unwritable = diag({"--case", "alpha", "--output", d.file("plain/such/dir/r.json")});
  EXPECT_EQ(unwritable.exit_code, to_int(ExitCode::kUsage));
  EXPECT_NE(unwritable.err.find("--output"), std::string::npos);
  const Proc is_dir = diag({"--case", "alpha", "--output", d.path()});
  EXPECT_EQ(is_dir.exit_code, to_int(ExitCode::kUsage));
}

TEST(DiagnosticsCpu, CudaAskedForWithoutCudaIsAUsageError) {
  TempDir d;
  const Proc r = diag({"--case", "alpha", "--device", "cuda", "--steps", "1", "-q", "--output", d.file("r.json")});
  if (r.exit_code == to_int(ExitCode::kOk)) GTEST_SKIP() << "CUDA is available here; the gpu tests cover it";
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage));
  EXPECT_NE(r.err.find("--device"), std::string::npos) << r.err;
  EXPECT_EQ(count_lines(r.err), 1);
  EXPECT_FALSE(exists(d.file("r.json")));
}

TEST(DiagnosticsCpu, OutOfMemoryUnderASimulatedLimitIsRecorded) {
  TempDir d;
  const std::string out = d.file("oom.json");
  const Proc r = diag({"--case", "alpha", "--device", "cpu", "--memory-limit-mib", "40", "-o", out});
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kOom)) << r.err;
  const Report rep = load_report(out);
  EXPECT_EQ(rep.status, RunStatus::kOom);
  ASSERT_FALSE(rep.events.empty());
  const Event& oom = rep.events.back();
  EXPECT_EQ(oom.kind, EventKind::kOom);
  EXPECT_EQ(oom.phase, Phase::kForward);
  EXPECT_EQ(oom.step, 0);
  EXPECT_NE(oom.message.find("out of memory"), std::string::npos);
  EXPECT_TRUE(schema_errors(out).empty());
  EXPECT_DOUBLE_EQ(*rep.config.memory_limit_mib, 40);
}

TEST(DiagnosticsCpu, UserCaseFileRunsWithoutRecompiling) {
  TempDir d;
  const std::string file = d.file("mine.json");
  write_text(file, R"({"name": "mine", "description": "two wide layers with Adam",
    "optimizer": {"type": "adam", "lr": 0.001},
    "presets": {"small": {"model": {"input_dim": 512, "hidden_dim": 512, "depth": 2, "output_dim": 8},
                          "batch_size": 4, "steps": 3}}})");
  const Report r = run_case(d, "mine-report", {"--case", file});
  EXPECT_EQ(r.case_info.name, "mine");
  EXPECT_FALSE(r.case_info.builtin);
  EXPECT_EQ(r.case_info.source, file);
  // The parameter bytes are read from the model's tensors: Linear(512, 512)
  // twice and Linear(512, 8), float32.
  EXPECT_EQ(r.model.parameters, 2 * (512 * 512 + 512) + 512 * 8 + 8);
  EXPECT_EQ(r.model.parameter_bytes, 4 * r.model.parameters);
  expect_optimizer_state_pattern(r);  // Adam keeps two moments too

  write_text(file, R"({"name": "mine", "optimizer": {"type": "adam"}, "presets": {"small": {"model":
    {"input_dim": 512, "hidden_dim": 512, "depth": "two", "output_dim": 8}, "batch_size": 4, "steps": 3}}})");
  const Proc bad = diag({"--case", file, "--device", "cpu", "-o", d.file("x.json")});
  EXPECT_EQ(bad.exit_code, to_int(ExitCode::kUsage));
  EXPECT_NE(bad.err.find(file + ": $.presets.small.model.depth"), std::string::npos) << bad.err;
  EXPECT_FALSE(exists(d.file("x.json")));
}

TEST(DiagnosticsCpu, InterruptWritesAnInterruptedReport) {
  TempDir d;
  const std::string out = d.file("int.json");
  const pid_t pid = spawn({kDiagExe, "--case", "alpha", "--preset", "medium", "--steps", "50", "--device", "cpu",
                          "-o", out},
                         "/dev/null", d.file("stdout"), d.file("stderr"));
  // Interrupt once the optimizer_ready row is printed: the handler is in place
  // by then, however slowly the process started.
  for (int i = 0; i < 600 && read_text(d.file("stdout")).find("optimizer_ready") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(pid, SIGINT);
  EXPECT_EQ(wait_exit_code(pid), to_int(ExitCode::kInterrupted)) << read_text(d.file("stderr"));
  const Report r = load_report(out);
  EXPECT_EQ(r.status, RunStatus::kInterrupted);
  EXPECT_LT(r.samples.size(), 2u + 4u * 50u);
}

TEST(DiagnosticsCpu, HelpVersionAndListCases) {
  const Proc help = diag({"--help"});
  EXPECT_EQ(help.exit_code, to_int(ExitCode::kOk));
  EXPECT_NE(help.out.find("optimizer_ready"), std::string::npos);
  EXPECT_NE(help.out.find("--memory-limit-mib"), std::string::npos);
  const Proc ver = diag({"--version"});
  EXPECT_EQ(ver.exit_code, to_int(ExitCode::kOk));
  EXPECT_NE(ver.out.find(MEMDIAG_VERSION), std::string::npos);
  const Proc list = diag({"--list-cases"});
  EXPECT_EQ(list.exit_code, to_int(ExitCode::kOk));
  for (const char* c : {"alpha", "beta", "gamma"}) EXPECT_NE(list.out.find(c), std::string::npos);
}

TEST(DiagnosticsCpu, Bfloat16HalvesWeightsAndActivations) {
  // The seed's quiz, measured: 2 bytes a value instead of 4.
  TempDir d;
  auto spec = nlohmann::json::parse(read_text(std::string(MEMDIAG_CASES_DIR) + "/alpha.json"));
  spec["name"] = "alpha-bf16";
  for (auto& p : spec["presets"]) p["model"]["dtype"] = "bfloat16";
  write_text(d.file("alpha-bf16.json"), spec.dump());
  const Report f32 = run_case(d, "f32", {"--case", "alpha", "--steps", "2", "--batch-size-per-device", "256"});
  const Report bf16 = run_case(d, "bf16", {"--case", d.file("alpha-bf16.json"), "--steps", "2", "--batch-size-per-device", "256"});
  EXPECT_EQ(bf16.model.parameter_bytes * 2, f32.model.parameter_bytes);
  const double fwd32 = alloc_at(f32, Phase::kForward, 1) - alloc_at(f32, Phase::kCleanup, 0);
  const double fwd16 = alloc_at(bf16, Phase::kForward, 1) - alloc_at(bf16, Phase::kCleanup, 0);
  EXPECT_NEAR(fwd16 / fwd32, 0.5, 0.03);
}

TEST(DiagnosticsCpu, TermAndHangupStopTheRunLikeCtrlC) {
  // What timeout(1), CI cancellation and schedulers send: a report, status
  // interrupted, naming the signal, and exit 130.
  for (int sig : {SIGTERM, SIGHUP}) {
    TempDir d;
    const std::string out = d.file("r.json");
    const pid_t pid = spawn({kDiagExe, "--case", "alpha", "--preset", "medium", "--steps", "50", "--device", "cpu",
                             "-o", out},
                            "/dev/null", d.file("stdout"), d.file("stderr"));
    for (int i = 0; i < 600 && read_text(d.file("stdout")).find("optimizer_ready") == std::string::npos; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    kill(pid, sig);
    EXPECT_EQ(wait_exit_code(pid), to_int(ExitCode::kInterrupted)) << read_text(d.file("stderr"));
    const Report r = load_report(out);
    EXPECT_EQ(r.status, RunStatus::kInterrupted);
    ASSERT_FALSE(r.events.empty());
    EXPECT_EQ(r.events.back().message, std::string("stopped by ") + (sig == SIGTERM ? "SIGTERM" : "SIGHUP"));
    for (const auto& e : std::filesystem::directory_iterator(d.path())) {
      EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << "left behind: " << e.path();
    }
  }
}

TEST(DiagnosticsCpu, ValuesAReportCouldNotHoldAreRefusedUpFront) {
  TempDir d;
  const std::string out = d.file("r.json");
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {"--seed", "-1"}, {"--seed", "9007199254740993"}, {"--seed", "010"}, {"--steps", ""}, {"-o", ""}}) {
    std::vector<std::string> a{"--case", "gamma", "--steps", "1", "--device", "cpu", "-q", "-o", out};
    a.insert(a.end(), bad.begin(), bad.end());
    const Proc r = diag(a);
    EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage)) << bad[0] << " '" << bad[1] << "'";
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(bad[0]), std::string::npos) << r.err;
    EXPECT_FALSE(exists(out));
    EXPECT_FALSE(exists(d.file("gamma.json")));
  }
  // The largest seed a JSON reader holds exactly is written and read back.
  const Proc ok = diag({"--case", "gamma", "--steps", "1", "--device", "cpu", "-q", "-o", out, "--seed",
                        "9007199254740992"});
  ASSERT_EQ(ok.exit_code, to_int(ExitCode::kOk)) << ok.err;
  EXPECT_EQ(load_report(out).config.seed, 9007199254740992ull);
}

namespace {

Proc quick_run(const std::string& output, std::vector<std::string> more = {}) {
  std::vector<std::string> argv{MEMDIAG_DIAGNOSTICS_EXE, "--device", "cpu", "-q", "--case", "alpha", "--steps", "1",
                                "--batch-size-per-device", "2", "-o", output};
  argv.insert(argv.end(), more.begin(), more.end());
  return run(argv);
}

bool is_kind(const std::string& path, mode_t kind) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && (st.st_mode & S_IFMT) == kind;
}

}  // namespace

// Hostile input, class 6: what --output names is written as what it is.
TEST(OutputPaths, SpecialFilesAreWrittenIntoNotReplacedAndLinksAreWrittenThrough) {
  TempDir d;
  // A character device: /dev/null stays /dev/null (a regular file used to
  // replace it when run as root).
  ASSERT_EQ(quick_run("/dev/null").exit_code, 0);
  EXPECT_TRUE(is_kind("/dev/null", S_IFCHR));
  // A FIFO, read by a shell on the other end.
  const std::string fifo = d.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const Proc piped = run({"/bin/sh", "-c",
                          "cat '" + fifo + "' > '" + d.file("from-pipe.json") + "' & " + MEMDIAG_DIAGNOSTICS_EXE +
                              " --device cpu -q --case alpha --steps 1 --batch-size-per-device 2 -o '" + fifo + "'; wait"});
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_TRUE(is_kind(fifo, S_IFIFO));
  EXPECT_TRUE(load_report(d.file("from-pipe.json")).samples.size() > 0);
  // A symbolic link: the link stays, the file it names gets the report.
  const std::string target = d.file("target.json"), link = d.file("latest.json");
  // (It holds an earlier report: memory_diagnostics replaces only its own.)
  ASSERT_EQ(quick_run(target).exit_code, 0);
  std::filesystem::create_symlink(target, link);
  ASSERT_EQ(quick_run(link).exit_code, 0);
  EXPECT_TRUE(is_kind(link, S_IFLNK));
  EXPECT_GT(load_report(target).samples.size(), 0u);
}

TEST(OutputPaths, NamesThatCannotBeWrittenAreRefusedBeforeRunningAndLongLegalOnesWork) {
  TempDir d;
  // 250 bytes is a legal name; its temporary used to exceed the limit.
  const std::string long_name = d.file(std::string(245, 'x') + ".json");
  ASSERT_EQ(quick_run(long_name).exit_code, 0);
  EXPECT_TRUE(std::filesystem::exists(long_name));
  for (const std::string& bad : {d.file(std::string(300, 'y') + ".json"), std::string("/proc/memdiag.json"),
                                 std::string("/proc/no-such-dir/r.json")}) {
    const Proc r = quick_run(bad);
    EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage)) << bad << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find("--output:"), std::string::npos) << r.err;
  }
  for (const auto& e : std::filesystem::directory_iterator(d.path())) {
    EXPECT_EQ(e.path().filename().string().find(".memdiag-"), std::string::npos) << "left behind: " << e.path();
  }
}

TEST(OutputPaths, RankOutsideALauncherIsZeroAndCaseNamesStayInTheirDirectory) {
  TempDir d;
  ASSERT_EQ(quick_run(d.file("r-{rank}.json")).exit_code, 0);
  EXPECT_TRUE(std::filesystem::exists(d.file("r-0.json")));
  // A case file whose name climbs out of the output directory.
  auto c = nlohmann::json::parse(read_text(std::string(MEMDIAG_CASES_DIR) + "/alpha.json"));
  c["name"] = "../escaped";
  std::ofstream(d.file("evil-case.json")) << c.dump();
  std::filesystem::create_directories(d.file("out"));
  const Proc r = run({MEMDIAG_DIAGNOSTICS_EXE, "--device", "cpu", "-q", "--case", d.file("evil-case.json"), "--steps",
                      "1", "--batch-size-per-device", "2,3", "--output-dir", d.file("out")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(std::filesystem::exists(d.file("escaped-batch2.json")));
  EXPECT_TRUE(std::filesystem::exists(d.file("out/_.._escaped-batch2.json")));
}

// --help reads as a manual: the flags in groups, every remedy explained by
// its definition, no parser internals.
TEST(DiagnosticsCpu, HelpGroupsTheFlagsAndExplainsEveryRemedy) {
  const Proc h = diag({"--help"});
  EXPECT_EQ(h.exit_code, 0);
  for (const char* group : {"What to run:", "Where and how:", "Reports and output:", "Out of memory:",
                            "Data and tensor parallel (under torchrun or its variables):", "Remedies (--remedy; joined with '+'):"}) {
    EXPECT_NE(h.out.find(group), std::string::npos) << group;
  }
  for (const char* remedy : {"checkpoint[=N]", "accumulate=K", "bf16", "autocast-bf16", "empty-cache", "fix-graph", "sgd"}) {
    EXPECT_NE(h.out.find("\n  " + std::string(remedy) + " "), std::string::npos) << remedy;
  }
  for (const char* internal : {"Excludes", "TEXT", "FLOAT", "UINT", "At Most", "->"}) {
    EXPECT_EQ(h.out.find(internal), std::string::npos) << internal;
  }
}

TEST(DiagnosticsCpu, ABatchScheduleTrainsEachStepOnItsShareOfTheBatch) {
  TempDir d;
  // epsilon's schedule grows 0.5 -> 1.0 of the batch: forward of the last
  // step saves twice what the first saves, measured by the tracking allocator.
  const Report r = run_case(d, "eps", {"--case", "epsilon"});
  std::vector<double> forward;
  const Sample* prev = nullptr;
  for (const Sample& s : r.samples) {
    if (s.phase == Phase::kForward && prev) forward.push_back(s.allocated_mib - prev->allocated_mib);
    prev = &s;
  }
  ASSERT_EQ(forward.size(), 6u);
  EXPECT_NEAR(forward.back() / forward.front(), 2.0, 0.05);
  for (std::size_t i = 1; i < forward.size(); ++i) EXPECT_GT(forward[i], forward[i - 1]) << "step " << i;
  const std::string detail = nlohmann::json::parse(r.case_info.detail_json).dump();
  EXPECT_NE(detail.find("batch_schedule"), std::string::npos);
}

TEST(DiagnosticsCpu, AllocatorSettingsOnTheCpuAreRecordedAsNotApplicable) {
  TempDir d;
  const Report r = run_case(d, "cpu", {"--case", "alpha", "--steps", "1", "--allocator-settings",
                                       "expandable_segments:True,max_split_size_mb:64"});
  ASSERT_EQ(r.config.remedies.size(), 2u);
  EXPECT_TRUE(r.config.allocator_settings.empty()) << "nothing on the CPU ran under them";
  bool noted = false;
  for (const Event& e : r.events) {
    noted = noted || (e.kind == EventKind::kNote && e.message.find("not applicable on the CPU") != std::string::npos &&
                      e.message.find("expandable_segments:True,max_split_size_mb:64") != std::string::npos);
  }
  EXPECT_TRUE(noted);
  // Given twice, or a key memdiag does not measure: one line, exit 2, nothing written.
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--allocator-settings", "expandable_segments:True", "--remedy", "expandable-segments"},
        std::vector<std::string>{"--allocator-settings", "backend:cudaMallocAsync"},
        std::vector<std::string>{"--allocator-settings", ""}}) {
    std::vector<std::string> args{"--device", "cpu", "-o", d.file("bad.json")};
    args.insert(args.end(), bad.begin(), bad.end());
    const Proc p = diag(args);
    EXPECT_EQ(p.exit_code, to_int(ExitCode::kUsage)) << p.err;
    EXPECT_EQ(p.err.rfind("memory_diagnostics: --", 0), 0u) << p.err;
    EXPECT_EQ(std::count(p.err.begin(), p.err.end(), '\n'), 1) << p.err;
    EXPECT_FALSE(exists(d.file("bad.json")));
  }
}

TEST(DiagnosticsCpu, ATransformerTrainsAndTheFusedKernelDropsTheQuadraticScores) {
  TempDir d;
  // Shapes of the tests' own, untied, three heads: nothing like delta's.
  auto case_file = [&](int length) {
    const std::string f = d.file("tf" + std::to_string(length) + ".json");
    write_text(f, R"({"name": "tf", "optimizer": {"type": "adamw", "lr": 0.001},
      "presets": {"small": {"model": {"type": "transformer", "vocab": 300, "sequence_length": )" +
                      std::to_string(length) + R"(, "width": 96, "heads": 3, "layers": 3, "ffn_width": 200,
      "tied_embeddings": false}, "batch_size": 2, "steps": 3}}})");
    return f;
  };
  auto forward_of = [](const Report& r) {
    const Sample* prev = nullptr;
    double last = 0;
    for (const Sample& s : r.samples) {
      if (s.phase == Phase::kForward && prev) last = s.allocated_mib - prev->allocated_mib;
      prev = &s;
    }
    return last;
  };
  std::map<std::string, double> fwd;
  for (int length : {96, 192}) {
    const std::string f = case_file(length);
    const Report math = run_case(d, "math" + std::to_string(length), {"--case", f});
    const Report fused = run_case(d, "fused" + std::to_string(length), {"--case", f, "--remedy", "efficient-attention"});
    // Embeddings, 3 blocks (two norms, qkv, proj, the feed-forward), the
    // final norm and an untied head, read from the model's tensors.
    const std::int64_t w = 96, ff = 200, block = 4 * w + (3 * w * w + 3 * w) + (w * w + w) + (w * ff + ff) + (ff * w + w);
    EXPECT_EQ(math.model.parameters, 300 * w + length * w + 3 * block + 2 * w + 300 * w);
    // The kernels' arithmetic differs in rounding only.
    std::vector<double> a, b;
    for (const Sample& s : math.samples) if (s.loss) a.push_back(*s.loss);
    for (const Sample& s : fused.samples) if (s.loss) b.push_back(*s.loss);
    ASSERT_EQ(a.size(), 3u);
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b.at(i), 1e-4 * std::fabs(a[i])) << "step " << i;
    fwd["math" + std::to_string(length)] = forward_of(math);
    fwd["fused" + std::to_string(length)] = forward_of(fused);
    EXPECT_LT(fwd["fused" + std::to_string(length)], fwd["math" + std::to_string(length)]);
  }
  // What the fused kernel saves is the scores: batch x heads x length^2,
  // four times as much at twice the length.
  const double saved96 = fwd["math96"] - fwd["fused96"], saved192 = fwd["math192"] - fwd["fused192"];
  EXPECT_NEAR(saved192 / saved96, 4.0, 0.6) << saved96 << " -> " << saved192;
  // The rest grows with the tokens: about twice.
  EXPECT_NEAR(fwd["fused192"] / fwd["fused96"], 2.0, 0.35);
  // Checkpointing by block keeps less of the forward.
  const Report ck = run_case(d, "ck", {"--case", case_file(192), "--remedy", "checkpoint"});
  EXPECT_LT(forward_of(ck), 0.7 * fwd["math192"]);
  // The comparer names the fused kernel first for the spelt-out model, and
  // reads that from the report (model.attention), not from the case.
  const Proc cmp = run({MEMDIAG_COMPARE_EXE, d.file("math192.json")});
  EXPECT_NE(cmp.out.find("response: The attention is spelt out"), std::string::npos) << cmp.out;
  EXPECT_EQ(load_report(d.file("fused192.json")).model.attention, "sdpa");
  const Proc fused_cmp = run({MEMDIAG_COMPARE_EXE, d.file("fused192.json")});
  EXPECT_EQ(fused_cmp.out.find("The attention is spelt out"), std::string::npos) << fused_cmp.out;
  // An MLP has no attention to replace: one line, exit 2.
  const Proc p = diag({"--device", "cpu", "--case", "alpha", "--remedy", "efficient-attention", "-o", d.file("x.json")});
  EXPECT_EQ(p.exit_code, to_int(ExitCode::kUsage));
  EXPECT_NE(p.err.find("efficient-attention replaces a transformer's spelt-out (math) attention; alpha has none"),
            std::string::npos) << p.err;
}

TEST(DiagnosticsCpu, TheSequenceLengthIsASweepAxisOfTransformerCases) {
  TempDir d;
  // A list sweeps it in one process; default names say the length.
  const Proc sweep = diag({"--device", "cpu", "-q", "--case", "delta", "--sequence-length", "64,128", "--steps", "2",
                           "--output-dir", d.file("out")});
  ASSERT_EQ(sweep.exit_code, to_int(ExitCode::kOk)) << sweep.err;
  for (int length : {64, 128}) {
    const Report r = load_report(d.file("out/delta-seq" + std::to_string(length) + ".json"));
    EXPECT_EQ(r.config.sequence_length, length);
    // The positions table has as many rows as the length.
    EXPECT_EQ(r.model.parameters, 495104 - (256 - length) * 128);
  }
  EXPECT_TRUE(schema_errors(d.file("out/delta-seq64.json")).empty());
  // {seq} in a template; a plan's sequence_length.
  ASSERT_EQ(diag({"--device", "cpu", "-q", "--case", "delta", "--sequence-length", "32", "--steps", "1", "-o",
                  d.file("t-{seq}.json")}).exit_code, 0);
  EXPECT_TRUE(exists(d.file("t-32.json")));
  write_text(d.file("plan.json"), R"({"runs": [{"name": "short", "case": "delta", "steps": 1, "sequence_length": 48}]})");
  ASSERT_EQ(diag({"--device", "cpu", "-q", "--plan", d.file("plan.json"), "--output-dir", d.file("plan")}).exit_code, 0);
  EXPECT_EQ(load_report(d.file("plan/short.json")).config.sequence_length, 48);
  // The comparer reads the sweep's shape.
  const Proc cmp = run({MEMDIAG_COMPARE_EXE, d.file("out"), "--format", "json"});
  ASSERT_EQ(cmp.exit_code, 0) << cmp.err;
  bool found = false;
  const nlohmann::json comparison = nlohmann::json::parse(cmp.out);  // kept: the loop reads into it
  for (const auto& e : comparison["groups"][0]["evidence_data"]) {
    if (e["code"] == "sweep_fit" && e["sweep"]["kind"] == "sequence") {
      found = true;
      EXPECT_GT(e["sweep"]["exponent"].get<double>(), 1.0);
    }
  }
  EXPECT_TRUE(found) << cmp.out;
  // An MLP has no sequence; {seq} says so too: one line, exit 2, nothing written.
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--case", "alpha", "--sequence-length", "64", "-o", d.file("bad.json")},
        std::vector<std::string>{"--case", "alpha", "-o", d.file("bad-{seq}.json")},
        std::vector<std::string>{"--case", "delta", "--sequence-length", "0", "-o", d.file("bad.json")}}) {
    std::vector<std::string> args{"--device", "cpu"};
    args.insert(args.end(), bad.begin(), bad.end());
    const Proc p = diag(args);
    EXPECT_EQ(p.exit_code, to_int(ExitCode::kUsage)) << p.err;
    EXPECT_EQ(count_lines(p.err), 1) << p.err;
  }
  EXPECT_FALSE(exists(d.file("bad.json")));
}

// Where the same loop in Python reads otherwise (README: Where memdiag's
// workloads differ from Python), each report says so: Adam's first step,
// bf16 with Adam, autocast's weight copies; and only those runs.
TEST(DiagnosticsCpu, ReportsSayWhereAPythonJobWouldReadOtherwise) {
  TempDir d;
  auto notes = [](const Report& r) {
    std::string all;
    for (const Event& e : r.events) {
      if (e.kind == EventKind::kNote) all += e.message + "\n";
    }
    return all;
  };
  const std::string sgd = notes(run_case(d, "sgd", {"--case", "alpha", "--steps", "1"}));
  EXPECT_EQ(sgd.find("Python"), std::string::npos) << sgd;
  const std::string adam = notes(run_case(d, "adam", {"--case", "beta", "--steps", "1", "--batch-size-per-device", "2"}));
  EXPECT_NE(adam.find("Adam/AdamW: LibTorch makes each parameter's state inside its update loop"), std::string::npos)
      << adam;
  EXPECT_EQ(adam.find("bf16"), std::string::npos) << adam;
  const std::string bf16 = notes(run_case(d, "bf16", {"--case", "beta", "--steps", "1", "--batch-size-per-device", "2",
                                                      "--remedy", "bf16"}));
  EXPECT_NE(bf16.find("bf16 with Adam/AdamW"), std::string::npos) << bf16;
  // SGD instead of AdamW: neither Adam note.
  const std::string to_sgd = notes(run_case(d, "to-sgd", {"--case", "beta", "--steps", "1", "--batch-size-per-device", "2",
                                                          "--remedy", "bf16+sgd"}));
  EXPECT_EQ(to_sgd.find("Adam"), std::string::npos) << to_sgd;
  const std::string cast = notes(run_case(d, "cast", {"--case", "alpha", "--steps", "1", "--remedy", "autocast-bf16"}));
  EXPECT_NE(cast.find("autocast-bf16: LibTorch's Linear multiplies by a transposed view"), std::string::npos) << cast;
  // The transformer's layers go through ATen's linear, as Python's: no such note.
  const std::string tcast = notes(run_case(d, "tcast", {"--case", "delta", "--steps", "1", "--batch-size-per-device", "1",
                                                        "--sequence-length", "16", "--remedy", "autocast-bf16"}));
  EXPECT_EQ(tcast.find("transposed view"), std::string::npos) << tcast;
}

// The front answers what needs no LibTorch by itself and execs the runner
// only for a run: a copy of it with no runner beside it still gives --help,
// --list-cases and usage errors, and names the runner it could not start.
TEST(Front, AnswersHelpListsAndUsageErrorsWithoutLibTorchAndNamesAMissingRunner) {
  const Proc ldd = run({"/usr/bin/ldd", kDiagExe});
  ASSERT_EQ(ldd.exit_code, 0) << ldd.err;
  EXPECT_EQ(ldd.out.find("libtorch"), std::string::npos) << ldd.out;
  EXPECT_EQ(ldd.out.find("libc10"), std::string::npos) << ldd.out;

  TempDir d;
  std::filesystem::create_directories(d.file("bin"));
  const std::string front = d.file("bin/memory_diagnostics");
  std::filesystem::copy_file(kDiagExe, front);
  std::filesystem::permissions(front, std::filesystem::perms::owner_exec, std::filesystem::perm_options::add);

  const Proc help = run({front, "--help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_NE(help.out.find("Remedies"), std::string::npos);
  const Proc list = run({front, "--list-cases"});
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("alpha"), std::string::npos) << list.out;
  const Proc usage = run({front, "--steps", "0", "-o", d.file("r.json")});
  EXPECT_EQ(usage.exit_code, to_int(ExitCode::kUsage));
  EXPECT_EQ(count_lines(usage.err), 1) << usage.err;
  EXPECT_NE(usage.err.find("--steps"), std::string::npos) << usage.err;

  const Proc a_run = run({front, "--case", "alpha", "--steps", "1", "--device", "cpu", "-o", d.file("r.json")});
  EXPECT_EQ(a_run.exit_code, to_int(ExitCode::kFailed));
  EXPECT_EQ(count_lines(a_run.err), 1) << a_run.err;
  EXPECT_NE(a_run.err.find(d.file("libexec/memdiag/memory_diagnostics-run")), std::string::npos) << a_run.err;
  EXPECT_FALSE(exists(d.file("r.json")));
}

// Every usage error the plan shows, not only the flags' own, is the
// front's to answer: a copy of the front with no runner beside it says
// each (a runner started would have failed with "cannot start its runner",
// exit 1), in milliseconds rather than the half second LibTorch takes to
// load. Unknown cases and presets, values out of range, combinations
// refused, outputs that clash or cannot be written, a report of another
// configuration where a made name points, a malformed launcher.
TEST(Front, AnswersEveryUsageErrorOfThePlanWithoutStartingARunner) {
  TempDir d;
  std::filesystem::create_directories(d.file("bin"));
  const std::string front = d.file("bin/memory_diagnostics");
  std::filesystem::copy_file(kDiagExe, front);
  std::filesystem::permissions(front, std::filesystem::perms::owner_exec, std::filesystem::perm_options::add);
  write_text(d.file("plain"), "not a report\n");
  const std::string own = std::string(MEMDIAG_SOURCE_DIR) + "/tests/cases/own.json";
  std::filesystem::copy_file(own, d.file("own.json"));
  std::filesystem::create_directories(d.file("reports"));
  std::filesystem::copy_file(std::string(MEMDIAG_SOURCE_DIR) + "/tests/fixtures/cpu/alpha.json",
                             d.file("reports/alpha.json"));
  struct Case {
    std::vector<std::string> args;
    std::string says;
    std::vector<std::string> env;
  };
  const std::string out = d.file("r.json");
  std::vector<Case> cases = {
      {{"--case", "alfa", "-o", out}, "--case: unknown case 'alfa'", {}},
      {{"--case", "alpha", "--preset", "huge", "-o", out}, "--preset", {}},
      {{"--case", "alpha", "--device", "tpu", "-o", out}, "--device: 'tpu' is not auto, cpu, cuda or cuda:K", {}},
      {{"--case", "alpha", "--sequence-length", "64", "-o", out}, "--sequence-length: alpha is an MLP", {}},
      {{"--case", "beta", "--rank-zero-extra-samples", "4", "-o", out}, "--rank-zero-extra-samples", {}},
      {{"--case", "beta", "--shard", "gradients", "-o", out}, "--shard=gradients: shards across the ranks", {}},
      {{"--case", "beta", "--parallel", "tensor", "-o", out}, "--parallel=tensor: splits each layer pair", {}},
      {{"--case", "delta", "--parallel", "tensor", "-o", out}, "--parallel=tensor: delta is a transformer",
       {"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29999"}},
      {{"--case", "alpha", "--batch-size-per-device", "1,2", "-o", out}, "would both write", {}},
      {{"--case", "alpha", "-o", "/proc/memdiag.json"}, "--output: /proc/memdiag.json", {}},
      {{"--case", "alpha", "-o", d.file("plain")}, "is not a memdiag report", {}},
      {{"--case", d.file("own.json"), "-o", d.file("own.json")}, "is the case file", {}},
      {{"--case", "alpha", "--steps", "7", "--output-dir", d.file("reports")}, "holds a report of another configuration", {}},
      {{"--case", "alpha", "--find-max-batch", "--batch-size-per-device", "4", "-o", out}, "--find-max-batch: searches the batch", {}},
      {{"--case", "alpha", "--find-max-batch", "--device", "cpu", "-o", out}, "--find-max-batch: on the CPU needs", {}},
      {{"--case", "alpha", "--device", "cpu", "--memory-snapshot", d.file("s.pickle"), "-o", out},
       "--memory-snapshot: needs a CUDA device", {}},
      {{"--case", "alpha", "-o", out}, "launcher environment: RANK='1' is set and WORLD_SIZE is not", {"RANK=1"}},
      {{"--case", "alpha", "--isolate", "-o", out}, "--isolate: not under a launcher",
       {"RANK=0", "WORLD_SIZE=1", "MASTER_PORT=29999"}},
  };
  // Without a CUDA driver the front knows no CUDA device is there.
  if (dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) == nullptr) {
    cases.push_back({{"--case", "alpha", "--device", "cuda", "-o", out}, "--device", {}});
    cases.push_back({{"--case", "alpha", "--find-max-batch", "-o", out}, "--find-max-batch: on the CPU needs", {}});
  }
  double slowest = 0;
  for (const Case& c : cases) {
    std::vector<std::string> argv{front};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    const auto t0 = std::chrono::steady_clock::now();
    const pid_t pid = spawn(argv, "/dev/null", d.file("stdout"), d.file("stderr"), c.env);
    const int code = wait_exit_code(pid);
    slowest = std::max(slowest, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    const std::string err = read_text(d.file("stderr"));
    EXPECT_EQ(code, to_int(ExitCode::kUsage)) << c.says << ": " << err;
    EXPECT_EQ(count_lines(err), 1) << err;
    EXPECT_NE(err.find(c.says), std::string::npos) << err;
    EXPECT_EQ(err.find("runner"), std::string::npos) << err;
    EXPECT_FALSE(exists(out)) << c.says;
  }
  EXPECT_EQ(read_text(d.file("plain")), "not a report\n");
  RecordProperty("slowest_seconds", std::to_string(slowest));
  std::cout << "slowest usage error: " << slowest << " s\n";
  // And a run that is right goes on to the runner (missing here).
  const Proc ok = run({front, "--case", "alpha", "--steps", "1", "--device", "cpu", "-o", out});
  EXPECT_EQ(ok.exit_code, to_int(ExitCode::kFailed)) << ok.err;
  EXPECT_NE(ok.err.find("cannot start its runner"), std::string::npos) << ok.err;
}

namespace {

std::string runner_path(const char* name) {
  return (std::filesystem::path(kDiagExe).parent_path().parent_path() / "libexec" / "memdiag" / name).string();
}

bool cuda_driver_loadable() { return dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) != nullptr; }

}  // namespace

// A run that cannot use CUDA goes to the runner without LibTorch's CUDA
// half (0.2 s less to start): --device cpu always, auto where no CUDA
// driver can be loaded; the process running is that runner, and
// libtorch_cuda is not in it.
TEST(Front, ARunThatCannotUseCudaRunsWithoutLibTorchsCudaHalf) {
  if (!exists(runner_path("memory_diagnostics-run-cpu"))) GTEST_SKIP() << "LibTorch without CUDA: one runner only";
  for (const std::string device : {"cpu", "auto"}) {
    TempDir d;
    const pid_t pid = spawn({kDiagExe, "--case", "alpha", "--steps", "100000", "--device", device, "-o", d.file("r.json")},
                            "/dev/null", d.file("stdout"), d.file("stderr"));
    // Its handlers are in once LibTorch is loaded.
    for (int waited = 0; waited < 60000 && !catches_signal(pid, SIGTERM); waited += 20) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const std::string exe = std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe").string();
    const std::string maps = read_text("/proc/" + std::to_string(pid) + "/maps");
    ::kill(pid, SIGTERM);
    EXPECT_EQ(wait_exit_code(pid), to_int(ExitCode::kInterrupted)) << read_text(d.file("stderr"));
    EXPECT_NE(maps.find("libtorch_cpu.so"), std::string::npos) << device;
    if (device == "auto" && cuda_driver_loadable()) {
      EXPECT_EQ(exe, std::filesystem::canonical(runner_path("memory_diagnostics-run")).string()) << device;
    } else {
      EXPECT_EQ(exe, std::filesystem::canonical(runner_path("memory_diagnostics-run-cpu")).string()) << device;
      EXPECT_EQ(maps.find("libtorch_cuda.so"), std::string::npos) << device;
    }
  }
}

// The two runners are one code base compiled twice: on the CPU they write
// the same report (every figure and loss of every phase) for the built-in
// cases and a case file of the tests' own.
TEST(Front, BothRunnersWriteTheSameReportOfACpuRun) {
  if (!exists(runner_path("memory_diagnostics-run-cpu"))) GTEST_SKIP() << "LibTorch without CUDA: one runner only";
  TempDir d;
  const std::string own = std::string(MEMDIAG_SOURCE_DIR) + "/tests/cases/own.json";
  for (const std::string& c : {std::string("alpha"), std::string("beta"), std::string("gamma"), std::string("delta"), own}) {
    std::vector<Report> reports;
    for (const char* runner : {"memory_diagnostics-run", "memory_diagnostics-run-cpu"}) {
      const std::string out = d.file(std::string(runner) + ".json");
      const Proc r = run({runner_path(runner), "--case", c, "--preset", "small", "--steps", "2", "--device", "cpu",
                          "--quiet", "--overwrite", "-o", out});
      ASSERT_EQ(r.exit_code, 0) << runner << " " << c << ": " << r.err;
      reports.push_back(load_report(out));
    }
    ASSERT_EQ(reports[0].samples.size(), reports[1].samples.size()) << c;
    for (std::size_t i = 0; i < reports[0].samples.size(); ++i) {
      const Sample& a = reports[0].samples[i];
      const Sample& b = reports[1].samples[i];
      EXPECT_EQ(a.phase, b.phase) << c << " sample " << i;
      EXPECT_EQ(a.allocated_mib, b.allocated_mib) << c << " sample " << i;
      EXPECT_EQ(a.peak_allocated_mib, b.peak_allocated_mib) << c << " sample " << i;
      EXPECT_EQ(a.loss, b.loss) << c << " sample " << i;
    }
  }
}
