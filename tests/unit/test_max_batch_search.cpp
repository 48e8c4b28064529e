// --find-max-batch's search (memdiag/max_batch.hpp) run directly against a
// fake executor and fake fresh processes (tests/support/fake_executor.hpp):
// each try, each check in fresh processes and the answer, with nothing
// started. The guide's own choices are tests/unit/test_search_guide.cpp's.
#include "fake_executor.hpp"
#include "process.hpp"
#include "test_paths.hpp"

#include "memdiag/errors.hpp"
#include "memdiag/exit_code.hpp"
#include "memdiag/isolate.hpp"
#include "memdiag/max_batch.hpp"
#include "memdiag/run_plan.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

using namespace memdiag;
using namespace memdiag::testkit;

namespace {

struct Searched {
  int exit_code = -1;
  SearchLog log;
};

// alpha's one configuration, its batch searched under the executor's limit.
HarnessOptions search_options(const TempDir& d, double limit_mib) {
  HarnessOptions opts;
  opts.runs = {RunRequest{"", "alpha", std::nullopt, std::nullopt, 1, {}, std::nullopt}};
  opts.device = "cpu";
  opts.find_max_batch = true;
  opts.memory_limit_mib = limit_mib;
  opts.output = d.file("max.json");
  opts.case_dirs = {MEMDIAG_CASES_DIR};
  return opts;
}

Searched search(FakeExecutor& ex, FakeFresh& fresh, const TempDir& d) {
  HarnessOptions opts = search_options(d, ex.limit_mib);
  if (ex.cuda) opts.device = "cuda";
  Searched s;
  opts.observer = &s.log;
  const ResolvedPlan plan = resolve_plan(opts, ex);
  s.exit_code = run_max_batch_search(plan, opts, ex, fresh, s.log);
  return s;
}

std::vector<std::int64_t> batches(const std::vector<std::pair<std::int64_t, bool>>& runs) {
  std::vector<std::int64_t> out;
  for (const auto& r : runs) out.push_back(r.first);
  return out;
}

}  // namespace

// Reports the capacity model cannot read (no phases): one sample, doubling
// to the first that runs out, bisection to a gap of one; then the answer
// and the batch above it side by side in fresh processes, which agree.
TEST(MaxBatchSearch, DoublesThenBisectsWhereTheModelCannotRead) {
  TempDir d;
  FakeExecutor ex;
  ex.job.phases = false;
  FakeFresh fresh;
  fresh.job = ex.job;
  const Searched s = search(ex, fresh, d);
  EXPECT_EQ(s.exit_code, to_int(ExitCode::kOk));
  // W 100 MiB + 0.5 MiB a sample within 1000 MiB: 1800.
  EXPECT_EQ(s.log.tried, (std::vector<std::int64_t>{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 1536, 1792,
                                                    1920, 1856, 1824, 1808, 1800, 1804, 1802, 1801}));
  EXPECT_EQ(batches(ex.runs), s.log.tried);
  EXPECT_EQ(ex.resets, static_cast<int>(s.log.tried.size()) - 1);  // each try but the first from a fresh state
  EXPECT_EQ(ex.sharing, (std::vector<bool>{true, false}));
  EXPECT_EQ(fresh.asked, (std::vector<std::vector<std::int64_t>>{{1800, 1801}}));
  ASSERT_TRUE(s.log.found);
  EXPECT_EQ(s.log.found->max_batch, 1800);
  EXPECT_EQ(s.log.found->first_failing_batch, 1801);
  EXPECT_EQ(s.log.found->confirmed, true);
  EXPECT_FALSE(s.log.found->replayed_max_batch);
  EXPECT_EQ(s.log.output, d.file("max.json"));
  EXPECT_TRUE(exists(d.file("max.json")));
}

// Not even one sample fits: the search ends at its first try, exit 3,
// and only the batch that ran out is checked afresh.
TEST(MaxBatchSearch, OneSampleThatRunsOutEndsTheSearch) {
  TempDir d;
  FakeExecutor ex;
  ex.job.weights_mib = 2000;
  FakeFresh fresh;
  fresh.job = ex.job;
  const Searched s = search(ex, fresh, d);
  EXPECT_EQ(s.exit_code, to_int(ExitCode::kOom));
  EXPECT_EQ(s.log.tried, (std::vector<std::int64_t>{1}));
  EXPECT_EQ(fresh.asked, (std::vector<std::vector<std::int64_t>>{{1}}));
  ASSERT_TRUE(s.log.found);
  EXPECT_EQ(s.log.found->max_batch, 0);
  EXPECT_EQ(s.log.found->first_failing_batch, 1);
  EXPECT_EQ(s.log.found->confirmed, true);
  EXPECT_TRUE(exists(d.file("max.json")));
}

// The answer runs out when started afresh (what holds in one process
// need not in another): written unconfirmed, and said so.
TEST(MaxBatchSearch, AConfirmationThatFailsLeavesTheAnswerUnconfirmed) {
  TempDir d;
  FakeExecutor ex;
  ex.job.phases = false;
  FakeFresh fresh;
  fresh.job = ex.job;
  fresh.job.extra_mib = 1;  // two samples' worth more in a fresh process
  const Searched s = search(ex, fresh, d);
  EXPECT_EQ(s.exit_code, to_int(ExitCode::kOk));
  ASSERT_TRUE(s.log.found);
  EXPECT_EQ(s.log.found->max_batch, 1800);
  EXPECT_EQ(s.log.found->confirmed, false);
  EXPECT_EQ(s.log.confirming,
            (std::vector<std::pair<std::int64_t, std::optional<RunStatus>>>{{1800, RunStatus::kOom},
                                                                            {1801, RunStatus::kOom}}));
}

// A model that reads the tries: the first try's line puts the answer
// near 1800; a traced try (on the CPU at most 16 samples) replays the
// allocator at the limit, fresh processes run that answer and the one
// above side by side, agree, and the search ends there: two tries.
TEST(MaxBatchSearch, TheTracedTrysReplayIsConfirmedAfresh) {
  TempDir d;
  FakeExecutor ex;
  FakeFresh fresh;
  fresh.job = ex.job;
  const Searched s = search(ex, fresh, d);
  EXPECT_EQ(s.exit_code, to_int(ExitCode::kOk));
  EXPECT_EQ(ex.runs, (std::vector<std::pair<std::int64_t, bool>>{{1, false}, {16, true}}));
  EXPECT_EQ(fresh.asked, (std::vector<std::vector<std::int64_t>>{{1800, 1801}}));
  ASSERT_TRUE(s.log.found);
  EXPECT_EQ(s.log.found->replayed_max_batch, 1800);
  EXPECT_EQ(s.log.found->max_batch, 1800);
  EXPECT_EQ(s.log.found->first_failing_batch, 1801);
  EXPECT_EQ(s.log.found->confirmed, true);
  EXPECT_EQ(s.log.found->predicted_max_batch, 1800);
}

// The job holds 3 MiB the trace does not show: the replay says 1800,
// fresh processes say 1800 runs out, and the bracket moves below it; the
// model guides the tries to 1794, which fresh processes then confirm. The
// tries after the first check wait for its processes to end (settle).
TEST(MaxBatchSearch, FreshProcessesThatDisagreeWithTheReplayMoveTheBracket) {
  TempDir d;
  FakeExecutor ex;
  ex.job.extra_mib = 3;
  FakeFresh fresh;
  fresh.job = ex.job;
  ex.fresh_ending = &fresh.ending;
  const Searched s = search(ex, fresh, d);
  EXPECT_EQ(ex.runs_beside_ending, 0) << "a try ran while the check's fresh processes were still ending";
  EXPECT_GE(fresh.settles, 1);
  EXPECT_EQ(s.exit_code, to_int(ExitCode::kOk));
  ASSERT_GE(ex.runs.size(), 3u);
  EXPECT_EQ(ex.runs[1], (std::pair<std::int64_t, bool>{16, true}));
  for (std::size_t i = 2; i < ex.runs.size(); ++i) {
    EXPECT_GT(ex.runs[i].first, 16) << i;    // above the traced try, which fitted
    EXPECT_LT(ex.runs[i].first, 1800) << i;  // below what ran out afresh
    EXPECT_FALSE(ex.runs[i].second) << i;
  }
  ASSERT_EQ(fresh.asked.size(), 2u);
  EXPECT_EQ(fresh.asked[0], (std::vector<std::int64_t>{1800, 1801}));
  EXPECT_EQ(fresh.asked[1], (std::vector<std::int64_t>{1794, 1795}));
  ASSERT_TRUE(s.log.found);
  EXPECT_EQ(s.log.found->replayed_max_batch, 1800);
  EXPECT_EQ(s.log.found->max_batch, 1794);
  EXPECT_EQ(s.log.found->first_failing_batch, 1795);
  EXPECT_EQ(s.log.found->confirmed, true);
}

// On CUDA the traced try goes to a quarter of the lines' answer, and the
// checks run side by side only where the device holds two limits and three
// processes' own memory.
TEST(MaxBatchSearch, OnCudaTheTracedTryIsAQuarterOfTheAnswerAndTheChecksShareTheDevice) {
  TempDir d;
  FakeExecutor ex;
  ex.cuda = true;
  FakeFresh fresh;
  fresh.job = ex.job;
  const Searched s = search(ex, fresh, d);
  EXPECT_EQ(s.exit_code, to_int(ExitCode::kOk));
  EXPECT_EQ(ex.runs, (std::vector<std::pair<std::int64_t, bool>>{{1, false}, {450, true}}));
  EXPECT_EQ(fresh.asked, (std::vector<std::vector<std::int64_t>>{{1800, 1801}}));
  // The two checks' processes were started as the search began, at the
  // first try's batch (the configuration is what must match).
  EXPECT_EQ(fresh.prepared, (std::vector<std::pair<std::int64_t, int>>{{1, 2}}));

  // A device with room for one limit only: one after the other, and none
  // started ahead (each waiting process holds a context of its own).
  TempDir d2("MaxBatchSearch.OneAtATime");
  FakeExecutor narrow;
  narrow.cuda = true;
  narrow.device_mib = 1800;
  FakeFresh fresh2;
  fresh2.job = narrow.job;
  EXPECT_EQ(search(narrow, fresh2, d2).exit_code, to_int(ExitCode::kOk));
  EXPECT_EQ(fresh2.asked, (std::vector<std::vector<std::int64_t>>{{1800}, {1801}}));
  EXPECT_TRUE(fresh2.prepared.empty());
}

// The real fresh processes with a program that cannot start: prepare()
// starts none and says nothing (the check starts its own), run() is one
// memdiag::Error naming the program, and the folder of their reports goes
// with the object.
TEST(ChildProcesses, AProgramThatCannotStartIsOneErrorAndLeavesNothing) {
  TempDir d;
  const std::string tmp = d.file("tmp");
  ASSERT_EQ(::mkdir(tmp.c_str(), 0755), 0);
  const char* before = std::getenv("TMPDIR");
  const std::string saved = before ? before : "";
  ::setenv("TMPDIR", tmp.c_str(), 1);
  FakeExecutor ex;
  HarnessOptions opts = search_options(d, ex.limit_mib);
  opts.self_exe = d.file("no-such-runner");
  const ResolvedPlan plan = resolve_plan(opts, ex);
  {
    ChildProcesses children;
    children.prepare(plan.runs.front(), plan, opts, 2);
    PlannedRun a = plan.runs.front(), b = plan.runs.front();
    a.batch = 7;
    b.batch = 8;
    try {
      children.run({a, b}, plan, opts);
      ADD_FAILURE() << "a program that cannot start ran";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("no-such-runner"), std::string::npos) << e.what();
    }
  }
  if (before) {
    ::setenv("TMPDIR", saved.c_str(), 1);
  } else {
    ::unsetenv("TMPDIR");
  }
  std::size_t left = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(tmp)) ++left;
  EXPECT_EQ(left, 0u) << "the reports' folder was left behind";
}

// The search's parent waits for a fresh process's report, not its exit:
// wait_done returns at the end of the child's stdout while the child is
// still running, after reading (and dropping) more than a pipe holds, and
// reap_later's thread then waits for the exit.
TEST(ChildProcesses, WaitingForTheReportEndsAtStdoutsEndNotAtTheExit) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  // 256 KiB written (four times a pipe's buffer), stdout closed, then
  // 2 s more before the exit.
  const int pid = spawn_child({"/bin/sh", "-c", "head -c 262144 /dev/zero; exec 1>&-; sleep 2; exit 3"},
                              /*silent=*/true, -1, fds[1]);
  ::close(fds[1]);
  const auto t0 = std::chrono::steady_clock::now();
  wait_done(pid, fds[0], nullptr);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::close(fds[0]);
  EXPECT_LT(waited, 1.5) << "waited for the exit, not the end of stdout";
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, WNOHANG), 0) << "the child had already ended";
  std::thread ending = reap_later(pid);
  ending.join();
  // Reaped by the thread: no child of that pid is left to wait for.
  EXPECT_EQ(::waitpid(pid, &status, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}
