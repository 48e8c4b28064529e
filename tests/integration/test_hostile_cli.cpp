// The second hostile pass (issue 24), one test per instance found, each of
// which failed before its fix: files the user owns are never replaced,
// every signal is honoured, every input terminates, and the outcomes agree.
#include "memdiag/exit_code.hpp"
#include "memdiag/stop_request.hpp"
#include "process.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <filesystem>
#include <set>
#include <tuple>
#include <thread>

using namespace memdiag;
using namespace memdiag::testkit;
namespace fs = std::filesystem;

namespace {

const std::string kDiag = MEMDIAG_DIAGNOSTICS_EXE;
const std::string kCompare = MEMDIAG_COMPARE_EXE;
const std::string kOwnCase = std::string(MEMDIAG_SOURCE_DIR) + "/tests/cases/own.json";

Proc sh(const std::string& script) { return run({"/bin/sh", "-c", script}); }

std::string q(const std::string& s) { return "'" + s + "'"; }

std::size_t count_files(const std::string& dir, const std::string& containing = "") {
  std::size_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    n += e.path().filename().string().find(containing) != std::string::npos ? 1 : 0;
  }
  return n;
}

void wait_until(const std::function<bool()>& done, int max_ms = 60000) {
  for (int waited = 0; waited < max_ms && !done(); waited += 20) std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

}  // namespace

// --- 1. Files the user owns ---------------------------------------------------

TEST(HostileFiles, TheCaseFileIsNeverReplacedByTheDefaultReport) {
  TempDir d;
  const std::string own = read_text(kOwnCase);
  write_text(d.file("own.json"), own);  // the case is named "own": the default report is own.json
  const Proc r = run_in(d.path(), {kDiag, "--case", "own.json", "--steps", "1", "--device", "cpu", "--quiet"});
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage)) << r.err;
  EXPECT_NE(r.err.find("is the case file"), std::string::npos) << r.err;
  EXPECT_EQ(read_text(d.file("own.json")), own);
}

TEST(HostileFiles, ABuiltInCaseInTheWorkingDirectoryIsNeverReplaced) {
  TempDir d;
  const std::string alpha = read_text(std::string(MEMDIAG_CASES_DIR) + "/alpha.json");
  write_text(d.file("alpha.json"), alpha);
  const Proc r = run_in(d.path(), {kDiag, "--case", "alpha", "--cases-dir", ".", "--steps", "1", "--device", "cpu"});
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage)) << r.err;
  EXPECT_EQ(read_text(d.file("alpha.json")), alpha);
}

TEST(HostileFiles, APlanRunNamedLikeItsPlanNeverReplacesIt) {
  TempDir d;
  const std::string plan = R"({"runs": [{"name": "p", "case": "alpha", "steps": 1}]})";
  write_text(d.file("p.json"), plan);
  for (const std::vector<std::string>& extra : {std::vector<std::string>{"-o", "{name}.json"},
                                                std::vector<std::string>{"--output-dir", "."}}) {
    std::vector<std::string> argv = {kDiag, "--plan", "p.json", "--device", "cpu", "--quiet"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    const Proc r = run_in(d.path(), argv);
    EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage)) << r.err;
    EXPECT_NE(r.err.find("is the plan file"), std::string::npos) << r.err;
    EXPECT_EQ(read_text(d.file("p.json")), plan);
  }
}

TEST(HostileFiles, AFileThatIsNotAReportIsNeverReplaced) {
  TempDir d;
  write_text(d.file("notes.json"), "my notes\n");
  const Proc r = run({kDiag, "--steps", "1", "--device", "cpu", "-o", d.file("notes.json"), "--quiet"});
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage));
  EXPECT_NE(r.err.find("is not a memdiag report"), std::string::npos) << r.err;
  EXPECT_EQ(read_text(d.file("notes.json")), "my notes\n");
}

TEST(HostileFiles, DevStdoutRedirectedToAFileIsAppendedToNotReplaced) {
  TempDir d;
  for (const std::string& exe : {kDiag, kCompare}) {
    write_text(d.file("log"), "kept\n");
    const std::string cmd = exe == kDiag ? q(kDiag) + " --steps 1 --device cpu --quiet -o /dev/stdout"
                                         : q(kCompare) + " " + q(std::string(MEMDIAG_SOURCE_DIR) +
                                                                 "/tests/fixtures/cpu/alpha.json") + " -o /dev/stdout";
    const Proc r = sh(cmd + " >> " + q(d.file("log")));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const std::string log = read_text(d.file("log"));
    EXPECT_EQ(log.rfind("kept\n", 0), 0u) << exe;
    EXPECT_GT(log.size(), 100u) << exe;
  }
}

TEST(HostileFiles, TheFileAStreamIsRedirectedToIsNeverRenamedOver) {
  TempDir d;
  write_text(d.file("run.log"), "");
  const Proc r = sh(q(kDiag) + " --steps 1 --device cpu -o " + q(d.file("run.log")) + " 2> " + q(d.file("run.log")));
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage));
  EXPECT_NE(read_text(d.file("run.log")).find("redirected to"), std::string::npos) << read_text(d.file("run.log"));
}

TEST(HostileFiles, CompareNeverReplacesAReadOnlyFileOrAnInput) {
  TempDir d;
  const std::string fixture = std::string(MEMDIAG_SOURCE_DIR) + "/tests/fixtures/cpu/alpha.json";
  write_text(d.file("ro.txt"), "mine\n");
  ::chmod(d.file("ro.txt").c_str(), 0444);
  const Proc ro = run({kCompare, fixture, "-o", d.file("ro.txt")});
  EXPECT_NE(ro.exit_code, 0);
  EXPECT_NE(ro.err.find("read-only"), std::string::npos) << ro.err;
  EXPECT_EQ(read_text(d.file("ro.txt")), "mine\n");
  // memory_diagnostics refuses it alike.
  const Proc diag = run({kDiag, "--steps", "1", "--device", "cpu", "-o", d.file("ro.txt"), "--quiet"});
  EXPECT_EQ(diag.exit_code, to_int(ExitCode::kUsage));

  const std::string report = read_text(fixture);
  write_text(d.file("b.json"), report);
  const Proc in = run({kCompare, fixture, d.file("b.json"), "-o", d.file("b.json")});
  EXPECT_EQ(in.exit_code, to_int(ExitCode::kUsage));
  EXPECT_NE(in.err.find("this run reads"), std::string::npos) << in.err;
  EXPECT_EQ(read_text(d.file("b.json")), report);
  const Proc base = run({kCompare, fixture, "--baseline", d.path(), "-o", d.file("b.json")});
  EXPECT_EQ(base.exit_code, to_int(ExitCode::kUsage)) << base.err;
  EXPECT_EQ(read_text(d.file("b.json")), report);
}

TEST(HostileFiles, ConfirmingRunsFromStandardInputNameNoFileThatExists) {
  TempDir d;
  write_text(d.file("alpha.json"), read_text(std::string(MEMDIAG_SOURCE_DIR) + "/tests/fixtures/cpu/alpha.json"));
  // Read from a file, the first suggestion is written beside it.
  const Proc first = run_in(d.path(), {kCompare, "alpha.json"});
  const auto at = first.out.find("--output ");
  ASSERT_NE(at, std::string::npos) << first.out;
  const std::string suggested = first.out.substr(at + 9, first.out.find('\n', at) - at - 9);
  ASSERT_EQ(suggested.find('/'), std::string::npos) << suggested;
  write_text(d.file(suggested), "a report of mine\n");
  // Read from standard input, the working directory's files count too.
  const Proc r = sh("cd " + q(d.path()) + " && " + q(kCompare) + " - < alpha.json");
  EXPECT_NE(r.out.find("--output "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("--output " + suggested + "\n"), std::string::npos) << r.out;
  EXPECT_EQ(read_text(d.file(suggested)), "a report of mine\n");
}

TEST(HostileFiles, ReusingAnOutputDirectoryNeverReplacesAnotherConfigurationsReport) {
  TempDir d;
  const std::string dir = d.file("reports");
  ASSERT_EQ(run({kDiag, "--case", "gamma", "--steps", "1,2", "--batch-size-per-device", "8", "--output-dir", dir,
                 "--device", "cpu", "--quiet"})
                .exit_code,
            0);
  const std::string before = read_text(dir + "/gamma-steps2.json");
  const Proc r = run({kDiag, "--case", "gamma", "--steps", "2,3", "--output-dir", dir, "--device", "cpu", "--quiet"});
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage));
  EXPECT_NE(r.err.find("another configuration"), std::string::npos) << r.err;
  EXPECT_EQ(read_text(dir + "/gamma-steps2.json"), before);
  EXPECT_FALSE(exists(dir + "/gamma-steps3.json"));  // refused before anything ran
  // The same configuration again is a run repeated: replaced.
  EXPECT_EQ(run({kDiag, "--case", "gamma", "--steps", "1,2", "--batch-size-per-device", "8", "--output-dir", dir,
                 "--device", "cpu", "--quiet"})
                .exit_code,
            0);
  const Proc forced = run({kDiag, "--case", "gamma", "--steps", "2,3", "--output-dir", dir, "--device", "cpu",
                           "--quiet", "--overwrite"});
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_EQ(load_report(dir + "/gamma-steps2.json").config.batch_size_per_device, 512);
}

// Two runs of different configurations into one output at once: the check
// of what is there and the write are one step, so neither replaces the
// other's report unseen. Run A is held (SIGSTOP) once its checks passed,
// while run B runs and writes; A, let go, finds B's report there: it keeps
// it, puts its own beside it and says so (exit 2, one line). Then the two
// start together, free-running: whatever the timing, never both exit 0
// with one report gone.
TEST(HostileFiles, ConcurrentRunsIntoOneOutputNeverLoseAReport) {
  TempDir d;
  const std::vector<std::string> tiny = {"--case", "alpha", "--preset", "small", "--device", "cpu"};
  auto args = [&](const std::vector<std::string>& output, const std::string& batch, const std::string& steps) {
    std::vector<std::string> a{kDiag};
    a.insert(a.end(), tiny.begin(), tiny.end());
    a.insert(a.end(), {"--batch-size-per-device", batch, "--steps", steps});
    a.insert(a.end(), output.begin(), output.end());
    return a;
  };
  auto batch_of = [](const std::string& path) { return load_report(path).config.batch_size_per_device; };
  const std::vector<std::pair<std::string, std::vector<std::string>>> outputs = {
      {"an --output-dir", {"--output-dir", d.file("dir")}},
      {"a template", {"-o", d.file("template") + "/{case}.json"}},
      {"a file named", {"-o", d.file("named") + "/alpha.json"}},
  };
  for (const auto& [what, output] : outputs) {
    const std::string dir = output[0] == "--output-dir" ? output[1] : fs::path(output[1]).parent_path().string();
    const std::string target = dir + "/alpha.json";
    const std::string tag = fs::path(dir).filename().string();
    // A hundred small steps: still running when the poll below sees its header.
    const pid_t a = spawn(args(output, "8", "100"), "/dev/null", d.file(tag + "-a.out"), d.file(tag + "-a.err"));
    // Its header is printed once the plan and its outputs are checked.
    wait_until([&] { return read_text(d.file(tag + "-a.out")).find("memdiag ") != std::string::npos; });
    ASSERT_EQ(kill(a, SIGSTOP), 0);
    const Proc b = run(args(output, "16", "1"));
    EXPECT_EQ(b.exit_code, 0) << what << ": " << b.err;
    ASSERT_EQ(kill(a, SIGCONT), 0);
    const int a_code = wait_exit_code(a);
    const std::string a_err = read_text(d.file(tag + "-a.err"));
    EXPECT_EQ(a_code, to_int(ExitCode::kUsage)) << what << ": " << a_err;
    EXPECT_EQ(std::count(a_err.begin(), a_err.end(), '\n'), 1) << a_err;
    EXPECT_NE(a_err.find("another run wrote a report of another configuration there"), std::string::npos) << a_err;
    EXPECT_NE(a_err.find("this run's report is at " + dir + "/alpha-2.json"), std::string::npos) << a_err;
    EXPECT_EQ(batch_of(target), 16) << what << ": B's report stays";
    EXPECT_EQ(batch_of(dir + "/alpha-2.json"), 8) << what << ": A's report is beside it";
    EXPECT_EQ(count_files(dir, ".tmp"), 0u) << what;
  }
  // Free-running, started together, a few times.
  for (int round = 0; round < 3; ++round) {
    const std::string dir = d.file("together" + std::to_string(round));
    const std::vector<std::string> output = {"--output-dir", dir};
    const pid_t a = spawn(args(output, "8", "1"), "/dev/null", d.file("ta.out"), d.file("ta.err"));
    const pid_t b = spawn(args(output, "16", "1"), "/dev/null", d.file("tb.out"), d.file("tb.err"));
    const int a_code = wait_exit_code(a), b_code = wait_exit_code(b);
    EXPECT_FALSE(a_code == 0 && b_code == 0) << "both succeeded: " << count_files(dir, ".json") << " report(s)";
    // Each run that ran has its report: the one refused up front ran nothing.
    std::set<int> batches;
    for (const auto& e : fs::directory_iterator(dir)) batches.insert(batch_of(e.path().string()));
    for (const auto& [code, batch, err] : {std::tuple{a_code, 8, read_text(d.file("ta.err"))},
                                           std::tuple{b_code, 16, read_text(d.file("tb.err"))}}) {
      const bool refused_before = code == to_int(ExitCode::kUsage) && err.find("Use another --output-dir") != std::string::npos;
      if (!refused_before) {
        EXPECT_TRUE(batches.count(batch)) << "batch " << batch << " exit " << code << ": " << err;
      }
    }
  }
}

// --- 2. Signals ------------------------------------------------------------------

TEST(HostileSignals, ASweepOfOutOfMemoryRunsStopsAtSigterm) {
  TempDir d;
  std::string batches;
  for (int b = 1; b <= 300; ++b) batches += (b > 1 ? "," : "") + std::to_string(1000 + b);
  const pid_t pid = spawn({kDiag, "--case", "alpha", "--batch-size-per-device", batches, "--steps", "1",
                           "--memory-limit-mib", "9", "--device", "cpu", "--output-dir", d.path()},
                          "/dev/null", d.file("out"), d.file("err"));
  wait_until([&] { return read_text(d.file("err")).find("[2/300]") != std::string::npos; });
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit_code(pid), to_int(ExitCode::kInterrupted)) << read_text(d.file("err"));
  EXPECT_LT(count_files(d.path(), "alpha-batch"), 20u);
}

TEST(HostileSignals, ASignalWhileALargePlanResolvesIsHonoured) {
  TempDir d;
  std::string plan = R"({"runs": [)";
  for (int i = 0; i < 20000; ++i) {
    plan += std::string(i ? "," : "") + R"({"name": "r)" + std::to_string(i) + R"(", "case": "alpha", "steps": 100000})";
  }
  write_text(d.file("plan.json"), plan + "]}");
  const pid_t pid = spawn({kDiag, "--plan", d.file("plan.json"), "--device", "cpu", "--output-dir", d.file("out")},
                          "/dev/null", d.file("stdout"), d.file("stderr"));
  wait_until([&] { return catches_signal(pid, SIGTERM); });
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit_code(pid), to_int(ExitCode::kInterrupted)) << read_text(d.file("stderr"));
  EXPECT_LE(count_files(d.file("out")), 1u);
}

// The front holds the stop signals through its exec of the runner: one
// sent while LibTorch loads (no handler yet) waits for the runner's
// handlers and ends the run interrupted, instead of killing the process.
TEST(HostileSignals, ASignalBeforeTheRunnerHasItsHandlersEndsTheRunInterrupted) {
  for (int sig : {SIGTERM, SIGINT}) {
    // Sent before the runner's handlers are in (loading LibTorch takes half
    // a second; the front, milliseconds), as this test means to: a try in
    // which a busy machine let the handlers in first is made again.
    bool before_handlers = false;
    for (int attempt = 0; attempt < 5 && !before_handlers; ++attempt) {
      TempDir d;
      const pid_t pid = spawn({kDiag, "--case", "alpha", "--steps", "100000", "--device", "cpu", "-o", d.file("r.json")},
                              "/dev/null", d.file("stdout"), d.file("stderr"));
      wait_until([&] { return blocks_signal(pid, sig) || catches_signal(pid, sig); });
      before_handlers = !catches_signal(pid, sig);
      ::kill(pid, sig);
      EXPECT_EQ(wait_exit_code(pid), to_int(ExitCode::kInterrupted)) << read_text(d.file("stderr"));
    }
    EXPECT_TRUE(before_handlers);
  }
}

TEST(HostileSignals, FindMaxBatchInterruptedInItsFirstTryWritesThatTry) {
  TempDir d;
  const pid_t pid = spawn({kDiag, "--find-max-batch", "--memory-limit-mib", "200", "--steps", "100000", "--device",
                           "cpu", "-o", d.file("r.json")},
                          "/dev/null", d.file("stdout"), d.file("stderr"), {"TMPDIR=" + d.path()});
  wait_until([&] { return catches_signal(pid, SIGINT); });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // into the first try's steps
  ::kill(pid, SIGINT);
  EXPECT_EQ(wait_exit_code(pid), to_int(ExitCode::kInterrupted)) << read_text(d.file("stderr"));
  ASSERT_TRUE(exists(d.file("r.json"))) << read_text(d.file("stderr"));
  EXPECT_EQ(load_report(d.file("r.json")).status, RunStatus::kInterrupted);
}

TEST(HostileSignals, ASecondSignalDuringConfirmationLeavesNoFolderNoChildNoTemporary) {
  TempDir d;
  const std::string tmp = d.file("tmp");
  fs::create_directories(tmp);
  const pid_t pid = spawn({kDiag, "--find-max-batch", "--memory-limit-mib", "800", "--device", "cpu", "--steps", "3",
                           "-o", d.file("r.json")},
                          "/dev/null", d.file("stdout"), d.file("stderr"), {"TMPDIR=" + tmp});
  // The folder is made as the search starts (its prepared children wait
  // there); the confirmation follows the second try.
  wait_until([&] { return read_text(d.file("stderr")).find("try 2:") != std::string::npos; }, 120000);
  ASSERT_GT(count_files(tmp, "memdiag-max-batch"), 0u) << read_text(d.file("stderr"));
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // a confirming child is running
  ::kill(pid, SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit_code(pid), 128 + SIGTERM) << read_text(d.file("stderr"));
  EXPECT_EQ(count_files(tmp), 0u) << "the confirming runs' folder was left behind";
  EXPECT_EQ(count_files(d.path(), ".memdiag-"), 0u);
  // No child outlives it: none still names the folder.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string cmdline = read_text(e.path().string() + "/cmdline");
    EXPECT_EQ(cmdline.find(tmp), std::string::npos) << "process " << e.path().filename().string();
  }
}

TEST(HostileSignals, AClosedPipeIsAWriteErrorAndTheReportStays) {
  TempDir d;
  // The reader is gone before memory_diagnostics starts writing (it waits
  // half a second first): every write to its stdout meets a closed pipe.
  const Proc r = sh("{ sleep 0.5; " + q(kDiag) + " --steps 1 --device cpu -o " + q(d.file("r.json")) + " 2> " +
                    q(d.file("err")) + "; echo $? > " + q(d.file("code")) + "; } | true");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(read_text(d.file("code")), std::to_string(to_int(ExitCode::kFailed)) + "\n")
      << "killed by SIGPIPE is " << 128 + SIGPIPE << "; " << read_text(d.file("err"));
  EXPECT_EQ(load_report(d.file("r.json")).status, RunStatus::kComplete);
  EXPECT_NE(read_text(d.file("err")).find("cannot write the output"), std::string::npos) << read_text(d.file("err"));
}

// --- 3. Inputs that must terminate -----------------------------------------------

TEST(HostileTermination, IsolateWithAFifoOutputEnds) {
  TempDir d;
  ASSERT_EQ(::mkfifo(d.file("fifo").c_str(), 0644), 0);
  std::string got;
  std::thread reader([&] { got = read_text(d.file("fifo")); });
  const pid_t pid = spawn({kDiag, "--steps", "1", "--device", "cpu", "--isolate", "-o", d.file("fifo"), "--quiet"},
                          "/dev/null", d.file("out"), d.file("err"));
  bool ended = false;
  for (int i = 0; i < 600 && !ended; ++i) {
    int status = 0;
    ended = ::waitpid(pid, &status, WNOHANG) == pid;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!ended) ::kill(pid, SIGKILL);
  reader.join();
  EXPECT_TRUE(ended) << "still running after 60 s: " << read_text(d.file("err"));
  EXPECT_NE(got.find("\"schema_version\""), std::string::npos);
}

// --- 4. Numbers at the edge -------------------------------------------------------

TEST(HostileNumbers, EveryNumericFlagRefusesWhatIsNotAPlainNumberInRange) {
  const std::string fixture = std::string(MEMDIAG_SOURCE_DIR) + "/tests/fixtures/cpu/alpha.json";
  for (const char* bad : {"nan", "inf", "-inf", "1e300", "0x10", "", " 5", "5 ", "-1", "+3"}) {
    SCOPED_TRACE(std::string("value '") + bad + "'");
    EXPECT_EQ(run({kCompare, fixture, "--budget-mib", bad}).exit_code, to_int(ExitCode::kUsage));
    EXPECT_EQ(run({kCompare, fixture, "--baseline", fixture, "--max-increase-mib", bad}).exit_code,
              to_int(ExitCode::kUsage));
    EXPECT_EQ(run({kCompare, fixture, "--baseline", fixture, "--max-increase", bad}).exit_code, to_int(ExitCode::kUsage));
    for (const char* flag : {"--memory-limit-mib", "--dist-timeout-s", "--seed", "--snapshot-max-entries",
                             "--steps", "--batch-size-per-device"}) {
      const Proc r = run({kDiag, flag, bad, "--device", "cpu", "-o", "/dev/null"});
      EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage)) << flag << ": " << r.err;
      EXPECT_NE(r.err.find(flag), std::string::npos) << r.err;
    }
  }
  EXPECT_EQ(run({kCompare, fixture, "--budget-mib", "1073741825"}).exit_code, to_int(ExitCode::kUsage));
}

TEST(HostileNumbers, AHugeBudgetPrintsTheLargestBatchNotAnOverflow) {
  const std::string fixture = std::string(MEMDIAG_SOURCE_DIR) + "/tests/fixtures/cpu/alpha.json";
  const Proc r = run({kCompare, fixture, "--budget-mib", "1073741824", "--format", "json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("-9223372036854775808"), std::string::npos);
  const Proc t = run({kCompare, fixture, "--budget-mib", "1073741824"});
  EXPECT_NE(t.out.find("at least 1073741824"), std::string::npos) << t.out;
}

// --- 6. Outcomes agree ------------------------------------------------------------

TEST(HostileOutcomes, ABaselineThatMatchesNothingFailsInEveryFormatAndTheExitCode) {
  TempDir d;
  const std::string alpha = std::string(MEMDIAG_SOURCE_DIR) + "/tests/fixtures/cpu/alpha.json";
  const std::string beta = std::string(MEMDIAG_SOURCE_DIR) + "/tests/fixtures/cpu/beta.json";
  const Proc text = run({kCompare, alpha, "--baseline", beta});
  EXPECT_EQ(text.exit_code, to_int(ExitCode::kGateFailed));
  EXPECT_NE(text.out.find("nothing matched the baseline"), std::string::npos) << text.out;
  const Proc junit = run({kCompare, alpha, "--baseline", beta, "--format", "junit"});
  EXPECT_EQ(junit.exit_code, to_int(ExitCode::kGateFailed));
  // The nothing-matched case fails, and so does the baseline left without
  // a new report (beta's), beside alpha's skipped case.
  EXPECT_NE(junit.out.find("<testsuites name=\"compare_memory_reports\" tests=\"3\" failures=\"2\""), std::string::npos)
      << junit.out;
  const Proc json = run({kCompare, alpha, "--baseline", beta, "--format", "json"});
  EXPECT_NE(json.out.find("\"failed\": true"), std::string::npos);
  // A report with no baseline beside one that has: skipped, not failed; exit 0.
  const Proc mixed = run({kCompare, alpha, beta, "--baseline", alpha, "--format", "junit"});
  EXPECT_EQ(mixed.exit_code, 0) << mixed.out;
  EXPECT_NE(mixed.out.find("failures=\"0\" errors=\"0\" skipped=\"1\""), std::string::npos) << mixed.out;
}

TEST(HostileOutcomes, AnUnreadableInputIsInEveryFormat) {
  TempDir d;
  write_text(d.file("broken.json"), "{");
  const std::string alpha = std::string(MEMDIAG_SOURCE_DIR) + "/tests/fixtures/cpu/alpha.json";
  for (const char* format : {"text", "markdown", "html", "junit", "json"}) {
    const Proc r = run({kCompare, alpha, d.file("broken.json"), "--format", format});
    EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage)) << format;
    EXPECT_NE(r.out.find("broken.json"), std::string::npos) << format << ":\n" << r.out;
  }
  const Proc junit = run({kCompare, alpha, d.file("broken.json"), "--format", "junit"});
  EXPECT_NE(junit.out.find("errors=\"1\""), std::string::npos) << junit.out;
}

TEST(HostileOutcomes, ADuplicateKeyInAPlanOrAReportIsRefused) {
  TempDir d;
  write_text(d.file("plan.json"), R"({"runs": [{"name": "a", "case": "alpha", "steps": 1, "steps": 2}]})");
  const Proc p = run({kDiag, "--plan", d.file("plan.json"), "--device", "cpu", "--output-dir", d.file("out")});
  EXPECT_EQ(p.exit_code, to_int(ExitCode::kUsage));
  EXPECT_NE(p.err.find("$.runs[0].steps: key \"steps\" given twice"), std::string::npos) << p.err;
  std::string report = read_text(std::string(MEMDIAG_SOURCE_DIR) + "/tests/fixtures/cpu/alpha.json");
  report.replace(report.find("\"status\""), 8, "\"status\": \"oom\", \"status\"");
  write_text(d.file("r.json"), report);
  const Proc c = run({kCompare, "--check", d.file("r.json")});
  EXPECT_EQ(c.exit_code, to_int(ExitCode::kUsage));
  EXPECT_NE(c.err.find("$.status: key \"status\" given twice"), std::string::npos) << c.err;
}

TEST(HostileOutcomes, TheHostRefusingMemoryUnderASimulatedLimitIsNotTheLimitsOutOfMemory) {
  TempDir d;
  const Proc r = sh("ulimit -v 3000000 && " + q(kDiag) +
                    " --memory-limit-mib 100000 --batch-size-per-device 400000 --steps 1 --device cpu --quiet -o " +
                    q(d.file("r.json")));
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kFailed)) << r.err;
  EXPECT_EQ(load_report(d.file("r.json")).status, RunStatus::kFailed);
  EXPECT_NE(r.err.find("the host refused"), std::string::npos) << r.err;
}

// --- 5. Output that is what it claims ------------------------------------------

TEST(HostileOutput, AFullStandardOutputIsAFailureInEveryMode) {
  for (const std::string& args : {std::string("--list-cases"), std::string("--steps 1 --device cpu -o /dev/null"),
                                  std::string("--help")}) {
    const Proc r = sh(q(kDiag) + " " + args + " > /dev/full");
    EXPECT_EQ(r.exit_code, to_int(ExitCode::kFailed)) << args << ": " << r.err;
  }
  const Proc c = sh(q(kCompare) + " --help > /dev/full");
  EXPECT_EQ(c.exit_code, to_int(ExitCode::kFailed)) << c.err;
}

TEST(HostileOutput, AnArgumentWithControlBytesIsPrintedAsOneSafeLine) {
  for (const std::string& exe : {kDiag, kCompare}) {
    const Proc r = run({exe, "--no-such-flag\x1b[2J\nsecond line\xff"});
    EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage));
    EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\xff'), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

TEST(HostileSignals, SigtermDuringConfirmationEndsInterruptedAndUnconfirmed) {
  TempDir d;
  const std::string tmp = d.file("tmp");
  fs::create_directories(tmp);
  const pid_t pid = spawn({kDiag, "--find-max-batch", "--memory-limit-mib", "800", "--device", "cpu", "--steps", "3",
                           "-o", d.file("r.json")},
                          "/dev/null", d.file("stdout"), d.file("stderr"), {"TMPDIR=" + tmp});
  wait_until([&] { return count_files(tmp, "memdiag-max-batch") > 0; }, 120000);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit_code(pid), to_int(ExitCode::kInterrupted)) << read_text(d.file("stderr"));
  EXPECT_EQ(count_files(tmp), 0u);
  const Report r = load_report(d.file("r.json"));
  ASSERT_TRUE(r.capacity.has_value());
  EXPECT_FALSE(r.capacity->confirmed.has_value()) << "a confirmation stopped by a signal says nothing";
}

// A report named into directories that do not exist yet gets them, as
// --output-dir does (the --help example `-o 'reports/alpha-b{batch}.json'`
// failed in a fresh directory); a path under a file is refused before any run.
TEST(HostileFiles, AnOutputIntoMissingDirectoriesMakesThemAndOneUnderAFileIsRefused) {
  TempDir d;
  const Proc r = run_in(d.path(), {kDiag, "--case", "alpha", "--batch-size-per-device", "1,2", "--steps", "1", "--device",
                                   "cpu", "--quiet", "-o", "reports/nested/alpha-b{batch}.json"});
  ASSERT_EQ(r.exit_code, to_int(ExitCode::kOk)) << r.err;
  EXPECT_TRUE(fs::is_regular_file(d.file("reports/nested/alpha-b1.json")));
  EXPECT_TRUE(fs::is_regular_file(d.file("reports/nested/alpha-b2.json")));
  EXPECT_EQ(count_files(d.file("reports/nested"), ".tmp"), 0u);
  const Proc c = run_in(d.path(), {kCompare, "reports/nested", "--format", "html", "--output", "out/page/report.html"});
  EXPECT_EQ(c.exit_code, to_int(ExitCode::kOk)) << c.err;
  EXPECT_TRUE(fs::is_regular_file(d.file("out/page/report.html")));
  write_text(d.file("plain"), "not a directory\n");
  const Proc bad = run_in(d.path(), {kDiag, "--case", "alpha", "--steps", "1", "--device", "cpu", "--quiet", "-o",
                                     "plain/sub/alpha.json"});
  EXPECT_EQ(bad.exit_code, to_int(ExitCode::kUsage)) << bad.err;
  EXPECT_NE(bad.err.find("ot a directory"), std::string::npos) << bad.err;  // "Not a directory" (ENOTDIR)
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
  EXPECT_EQ(read_text(d.file("plain")), "not a directory\n");
}
