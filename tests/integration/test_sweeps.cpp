// Sweeps on the CPU: one memory_diagnostics process running many
// configurations writes, for each, the report a separate process writes.
#include "memdiag/exit_code.hpp"
#include "memdiag/stop_request.hpp"
#include "patterns.hpp"
#include "process.hpp"

#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

using namespace memdiag;
using namespace memdiag::testkit;
namespace fs = std::filesystem;

namespace {

const std::string kSweepExe = MEMDIAG_DIAGNOSTICS_EXE;

Proc sweep(std::vector<std::string> args) {
  args.insert(args.begin(), kSweepExe);
  args.insert(args.end(), {"--device", "cpu"});
  return run(args);
}

}  // namespace

TEST(Sweeps, ThePlanInOneProcessEqualsSeparateProcesses) {
  TempDir d;
  const Proc one = sweep({"--plan", std::string(MEMDIAG_CASES_DIR) + "/plans/reference.json", "--output-dir",
                          d.file("sweep"), "--quiet"});
  ASSERT_EQ(one.exit_code, to_int(ExitCode::kOk)) << one.err;
  fs::create_directories(d.file("separate"));
  const auto runs = plan_as_flags(std::string(MEMDIAG_CASES_DIR) + "/plans/reference.json");
  ASSERT_EQ(runs.size(), 7u);
  for (const auto& [name, args] : runs) {
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--quiet", "--output", d.file("separate/" + name + ".json")});
    ASSERT_EQ(sweep(a).exit_code, to_int(ExitCode::kOk)) << name;
    const std::string in_sweep = d.file("sweep/" + name + ".json");
    EXPECT_TRUE(schema_errors(in_sweep).empty()) << name;
    expect_same_measurements(load_report(d.file("separate/" + name + ".json")), load_report(in_sweep), name);
  }
}

TEST(Sweeps, ProgressLinesThenASummaryOrNothingWhenQuiet) {
  TempDir d;
  const Proc r = sweep({"--case", "gamma", "--steps", "1,2", "--output-dir", d.path()});
  ASSERT_EQ(r.exit_code, to_int(ExitCode::kOk)) << r.err;
  EXPECT_NE(r.err.find("[1/2] gamma steps 1: complete, peak "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[2/2] gamma steps 2: complete, peak "), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("2 of 2 runs in "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(d.file("gamma-steps2.json")), std::string::npos) << r.out;
  EXPECT_TRUE(exists(d.file("gamma-steps1.json")));
  const Proc q = sweep({"--case", "gamma", "--steps", "1,2", "--output-dir", d.file("q"), "--quiet"});
  EXPECT_EQ(q.exit_code, to_int(ExitCode::kOk));
  EXPECT_EQ(q.out, "");
  EXPECT_EQ(q.err, "");
}

TEST(Sweeps, AnOutOfMemoryRunIsRecordedAndTheSweepGoesOn) {
  TempDir d;
  // 40 MiB holds alpha's weights and a small batch, not batch 2048's activations.
  const Proc r = sweep({"--case", "alpha", "--steps", "2", "--batch-size-per-device", "1,2048,4", "--memory-limit-mib",
                        "40", "-o", d.file("a-{batch}.json")});
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kOom)) << r.err;
  EXPECT_EQ(load_report(d.file("a-1.json")).status, RunStatus::kComplete);
  EXPECT_EQ(load_report(d.file("a-2048.json")).status, RunStatus::kOom);
  const Report after = load_report(d.file("a-4.json"));
  EXPECT_EQ(after.status, RunStatus::kComplete);
  // The run after the failure starts clean: it equals a run of its own.
  const Proc alone = sweep({"--case", "alpha", "--steps", "2", "--batch-size-per-device", "4", "--memory-limit-mib",
                            "40", "--quiet", "-o", d.file("alone.json")});
  ASSERT_EQ(alone.exit_code, to_int(ExitCode::kOk));
  expect_same_measurements(load_report(d.file("alone.json")), after, "batch 4 after an OOM");
}

TEST(Sweeps, TwoRunsWritingOneFileIsAUsageErrorAndNothingRuns) {
  TempDir d;
  const Proc r = sweep({"--case", "alpha", "--batch-size-per-device", "1,4", "-o", d.file("same.json")});
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage));
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("runs 1 (alpha batch 1) and 2 (alpha batch 4) would both write"), std::string::npos) << r.err;
  EXPECT_FALSE(exists(d.file("same.json")));
  const Proc bad = sweep({"--case", "alpha", "--steps", "2,x", "-o", d.file("{steps}.json")});
  EXPECT_EQ(bad.exit_code, to_int(ExitCode::kUsage));
  EXPECT_NE(bad.err.find("--steps: 'x' is not a whole number"), std::string::npos) << bad.err;
  const Proc octal = sweep({"--case", "gamma", "--steps", "010", "-q", "-o", d.file("o.json")});
  EXPECT_EQ(octal.exit_code, to_int(ExitCode::kUsage));
  const Proc both = sweep({"--plan", "x.json", "--case", "alpha"});
  EXPECT_EQ(both.exit_code, to_int(ExitCode::kUsage));
  EXPECT_NE(both.err.find("--plan"), std::string::npos) << both.err;
}

TEST(Sweeps, IsolateRunsEachInAChildAndWritesTheSameReports) {
  TempDir d;
  const std::vector<std::string> flags = {"--case", "beta,gamma", "--steps", "2", "--quiet"};
  std::vector<std::string> in_process = flags, isolated = flags;
  in_process.insert(in_process.end(), {"--output-dir", d.file("one")});
  isolated.insert(isolated.end(), {"--output-dir", d.file("isolated"), "--isolate"});
  ASSERT_EQ(sweep(in_process).exit_code, to_int(ExitCode::kOk));
  const Proc r = sweep(isolated);
  ASSERT_EQ(r.exit_code, to_int(ExitCode::kOk)) << r.err;
  for (const char* name : {"beta.json", "gamma.json"}) {
    expect_same_measurements(load_report(d.file(std::string("isolated/") + name)),
                             load_report(d.file(std::string("one/") + name)), name);
  }
}

TEST(Sweeps, AChildProcessReplacesWhatItsParentWasToldToOverwrite) {
  TempDir d;
  // A report of another configuration where the sweep names its own.
  ASSERT_EQ(sweep({"--case", "beta", "--steps", "1", "--quiet", "--output-dir", d.file("out")}).exit_code, 0);
  const std::vector<std::string> flags = {"--case", "beta,gamma", "--steps", "2", "--quiet", "--isolate",
                                          "--output-dir", d.file("out")};
  EXPECT_EQ(sweep(flags).exit_code, to_int(ExitCode::kUsage)) << "refused without --overwrite";
  std::vector<std::string> forced = flags;
  forced.push_back("--overwrite");
  const Proc r = sweep(forced);
  ASSERT_EQ(r.exit_code, to_int(ExitCode::kOk)) << r.err;
  EXPECT_EQ(load_report(d.file("out/beta.json")).config.steps, 2);
}

TEST(Sweeps, APlanFileWithAMistakeNamesItsPath) {
  TempDir d;
  write_text(d.file("p.json"), R"({"runs": [{"name": "a", "case": "alpha", "steps": "two"}]})");
  const Proc r = sweep({"--plan", d.file("p.json"), "--output-dir", d.file("out")});
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage));
  EXPECT_NE(r.err.find(d.file("p.json") + ": $.runs[0].steps: expected an integer"), std::string::npos) << r.err;
  EXPECT_FALSE(exists(d.file("out")));
}

TEST(Sweeps, CtrlCStopsTheSweepAndKeepsTheReportsWritten) {
  TempDir d;
  const pid_t pid = spawn({kSweepExe, "--case", "gamma,alpha", "--preset", "medium", "--steps", "1,200", "--device",
                           "cpu", "--output-dir", d.path()},
                          "/dev/null", d.file("stdout"), d.file("stderr"));
  // Interrupt once the first run's line is out: the second is in progress.
  for (int i = 0; i < 600 && read_text(d.file("stderr")).find("[1/4]") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(pid, SIGINT);
  EXPECT_EQ(wait_exit_code(pid), to_int(ExitCode::kInterrupted)) << read_text(d.file("stderr"));
  EXPECT_EQ(load_report(d.file("gamma-steps1.json")).status, RunStatus::kComplete);
  EXPECT_EQ(load_report(d.file("gamma-steps200.json")).status, RunStatus::kInterrupted);
  EXPECT_FALSE(exists(d.file("alpha-steps1.json")));
}

TEST(Sweeps, TheReadmeExampleRunsAsWritten) {
  // README.md, "Sweeps": the same two commands, in a directory of their own.
  const std::string readme = read_text(std::string(MEMDIAG_SOURCE_DIR) + "/README.md");
  const std::string sweep_cmd = "memory_diagnostics --case alpha --batch-size-per-device 1,4,1024 --output-dir reports";
  const std::string compare_cmd = "compare_memory_reports reports/ --expect alpha=activations";
  ASSERT_NE(readme.find(sweep_cmd), std::string::npos);
  ASSERT_NE(readme.find(compare_cmd), std::string::npos);
  TempDir d;
  const Proc r = run_in(d.path(), {kSweepExe, "--case", "alpha", "--batch-size-per-device", "1,4,1024", "--output-dir",
                                   "reports"});
  ASSERT_EQ(r.exit_code, to_int(ExitCode::kOk)) << r.err;
  for (const char* f : {"alpha-batch1.json", "alpha-batch4.json", "alpha-batch1024.json"}) {
    EXPECT_TRUE(exists(d.file(std::string("reports/") + f))) << f;
  }
  const Proc cmp = run_in(d.path(), {MEMDIAG_COMPARE_EXE, "reports/", "--expect", "alpha=activations"});
  EXPECT_EQ(cmp.exit_code, to_int(ExitCode::kOk)) << cmp.out << cmp.err;
  EXPECT_NE(cmp.out.find("confirmed by the sweep"), std::string::npos) << cmp.out;
}

namespace {

// Processes whose command line mentions text (the children of a sweep
// writing into a test's own directory).
std::vector<pid_t> processes_mentioning(const std::string& text) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = read_text(e.path().string() + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(text) != std::string::npos) out.push_back(static_cast<pid_t>(std::stoi(name)));
  }
  return out;
}

// Whether one of pids has a handler installed for sig.
bool catches(const std::vector<pid_t>& pids, int sig) {
  return std::any_of(pids.begin(), pids.end(), [sig](pid_t pid) { return catches_signal(pid, sig); });
}

}  // namespace

// --isolate passes SIGINT, SIGTERM and SIGHUP alike to the child running a
// configuration: it writes its report as interrupted, naming the signal,
// the parent exits 130 and no child is left behind.
TEST(Sweeps, IsolateForwardsEveryStopSignalAndLeavesNoChildBehind) {
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) {
    TempDir d(std::string("isolate-signal-") + std::to_string(sig));
    const pid_t pid = spawn({kSweepExe, "--case", "alpha", "--steps", "100000,1", "--device", "cpu", "--isolate",
                             "--output-dir", d.path()},
                            "/dev/null", d.file("stdout"), d.file("stderr"));
    // Wait for the child running the first configuration to catch the
    // signal (its handlers installed), then a little into its steps: under
    // a loaded machine, loading LibTorch alone can take seconds.
    for (int i = 0; i < 600 && !catches(processes_mentioning(d.path() + "/alpha-steps100000.json"), sig); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    kill(pid, sig);
    EXPECT_EQ(wait_exit_code(pid), to_int(ExitCode::kInterrupted)) << read_text(d.file("stderr"));
    const Report r = load_report(d.file("alpha-steps100000.json"));
    EXPECT_EQ(r.status, RunStatus::kInterrupted) << "signal " << sig;
    bool named = false;
    for (const Event& e : r.events) named = named || e.message == "stopped by " + signal_name(sig);
    EXPECT_TRUE(named) << "signal " << sig;
    EXPECT_FALSE(exists(d.file("alpha-steps1.json")));
    EXPECT_TRUE(processes_mentioning(d.path()).empty()) << "a child outlived its parent";
  }
}

// Whatever ends --isolate's parent, SIGKILL included (which it cannot pass
// on), its child ends too: the runner it started is told to stop when its
// parent dies (PR_SET_PDEATHSIG), writes its report as interrupted, and is
// gone within seconds rather than running its 100,000 steps.
TEST(Sweeps, IsolateChildEndsWhenItsParentIsKilled) {
  TempDir d("isolate-parent-killed");
  const std::string first = d.path() + "/alpha-steps100000.json";
  const pid_t pid = spawn({kSweepExe, "--case", "alpha", "--steps", "100000,1", "--device", "cpu", "--isolate",
                           "--output-dir", d.path()},
                          "/dev/null", d.file("stdout"), d.file("stderr"));
  for (int i = 0; i < 600 && !catches(processes_mentioning(first), SIGTERM); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(processes_mentioning(first).empty()) << "no child started: " << read_text(d.file("stderr"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(pid, SIGKILL);
  EXPECT_EQ(wait_exit_code(pid), 128 + SIGKILL);
  for (int i = 0; i < 200 && !processes_mentioning(d.path()).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(processes_mentioning(d.path()).empty()) << "the child outlived its SIGKILLed parent by 10 s";
  EXPECT_EQ(load_report(first).status, RunStatus::kInterrupted);
  EXPECT_FALSE(exists(d.path() + "/alpha-steps1.json"));
}
