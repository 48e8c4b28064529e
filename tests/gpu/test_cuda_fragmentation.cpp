// Fragmentation on CUDA: epsilon's growing batch runs out of memory with free
// memory stranded in split segments under a limit where expandable segments
// complete it; allocator settings in a one-process sweep equal separate
// processes; what the environment set is recorded. The limit is searched
// here, not assumed, so a change of allocator or device moves the limit,
// not the test's verdict. Like test_cuda_cli.cpp, this process never
// touches CUDA itself.
#include "memdiag/exit_code.hpp"
#include "patterns.hpp"
#include "process.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <optional>

using namespace memdiag;
using namespace memdiag::testkit;

// Named, not anonymous: the unity build joins this file with the other
// CUDA suites, whose anonymous helpers share these names.
namespace fragmentation_test {

const std::string kExe = MEMDIAG_DIAGNOSTICS_EXE;

const std::string& no_cuda() {
  static const std::string reason = device_unavailable(kExe, "cuda");
  return reason;
}

#define REQUIRE_CUDA_HERE() \
  do {                      \
    if (!no_cuda().empty()) GTEST_SKIP() << "no CUDA here: " << no_cuda(); \
  } while (0)

int run_epsilon(const std::string& out, int limit, const std::string& remedy, Proc* proc = nullptr) {
  const Proc r = run({kExe, "--device", "cuda", "-q", "--case", "epsilon", "--preset", "medium", "--memory-limit-mib",
                      std::to_string(limit), "--remedy", remedy, "-o", out});
  if (proc) *proc = r;
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == to_int(ExitCode::kOom)) << r.err;
  return r.exit_code;
}

const Event* oom_event(const Report& r) {
  for (const Event& e : r.events) {
    if (e.kind == EventKind::kOom) return &e;
  }
  return nullptr;
}

}  // namespace fragmentation_test

using namespace fragmentation_test;

TEST(CudaFragmentation, TheRampRunsOutWithMemoryStrandedWhereExpandableSegmentsComplete) {
  REQUIRE_CUDA_HERE();
  TempDir d;
  // The lowest limit of a scan where the defaults run out and expandable
  // segments complete (2600 MiB on the H200 with torch 2.11).
  std::optional<int> limit;
  for (int l = 2480; l <= 2900 && !limit; l += 20) {
    const int defaults = run_epsilon(d.file("d.json"), l, "none");
    if (defaults != to_int(ExitCode::kOom)) continue;
    if (run_epsilon(d.file("e.json"), l, "expandable-segments") == 0) limit = l;
  }
  ASSERT_TRUE(limit) << "no limit in 2480..2900 MiB where the defaults run out and expandable segments complete";
  SCOPED_TRACE("limit " + std::to_string(*limit) + " MiB");
  const Report defaults = load_report(d.file("d.json"));
  const Report expandable = load_report(d.file("e.json"));
  ASSERT_EQ(defaults.status, RunStatus::kOom);
  const Event* oom = oom_event(defaults);
  ASSERT_TRUE(oom && oom->oom);
  const OomDetails& o = *oom->oom;
  ASSERT_TRUE(o.request_mib && o.reserved_mib && o.allocated_mib && o.inactive_split_mib);
  // Total free memory would have sufficed; no single block did.
  EXPECT_GE(*o.reserved_mib - *o.allocated_mib, *o.request_mib);
  EXPECT_GE(*o.inactive_split_mib, *o.request_mib);
  ASSERT_TRUE(o.largest_free_block_mib);
  EXPECT_LT(*o.largest_free_block_mib, *o.request_mib) << "the largest cached free block held the request";
  EXPECT_GT(o.num_alloc_retries.value_or(0), 0);
  EXPECT_NE(oom->message.find("reserved by PyTorch but unallocated"), std::string::npos) << oom->message;
  EXPECT_TRUE(defaults.config.allocator_settings.empty());
  EXPECT_EQ(expandable.config.allocator_settings, "expandable_segments:True");
  // The setting changes where memory goes, not what the model learns.
  std::vector<double> a, b;
  for (const Sample& s : defaults.samples) if (s.loss) a.push_back(*s.loss);
  for (const Sample& s : expandable.samples) if (s.loss) b.push_back(*s.loss);
  ASSERT_FALSE(a.empty());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b.at(i)) << "step " << i;

  const Proc cmp = run({MEMDIAG_COMPARE_EXE, d.file("d.json"), "--format", "json"});
  ASSERT_EQ(cmp.exit_code, 0) << cmp.err;
  EXPECT_EQ(nlohmann::json::parse(cmp.out)["groups"][0]["dominant_cause"], "fragmentation") << cmp.out;
  const Proc both = run({MEMDIAG_COMPARE_EXE, d.file("d.json"), d.file("e.json")});
  EXPECT_NE(both.out.find("expandable_segments:True completes where the baseline ran out of memory"), std::string::npos)
      << both.out;
}

TEST(CudaFragmentation, AllocatorSettingsInOneSweepEqualSeparateProcesses) {
  REQUIRE_CUDA_HERE();
  TempDir d;
  const std::vector<std::string> remedies = {"none", "expandable-segments", "max-split=32", "roundup-pow2=4"};
  std::string list;
  for (const std::string& r : remedies) list += (list.empty() ? "" : ",") + r;
  const Proc sweep = run({kExe, "--device", "cuda", "-q", "--case", "epsilon", "--preset", "medium",
                          "--memory-limit-mib", "3000", "--remedy", list, "--output", d.file("sweep-{remedy}.json")});
  ASSERT_EQ(sweep.exit_code, 0) << sweep.err;
  for (const std::string& r : remedies) {
    const std::string alone = d.file("alone.json");
    ASSERT_EQ(run_epsilon(alone, 3000, r), 0);
    const Report a = load_report(alone);
    const Report in_sweep = load_report(d.file("sweep-" + r + ".json"));
    expect_same_measurements(a, in_sweep, r);
    EXPECT_EQ(a.config.allocator_settings, in_sweep.config.allocator_settings) << r;
    // Stranded memory is the allocator's own record: equal too.
    for (std::size_t i = 0; i < a.samples.size() && i < in_sweep.samples.size(); ++i) {
      EXPECT_EQ(a.samples[i].inactive_split_mib, in_sweep.samples[i].inactive_split_mib) << r << " sample " << i;
    }
  }
}

TEST(CudaFragmentation, WhatTheEnvironmentSetIsRecorded) {
  REQUIRE_CUDA_HERE();
  TempDir d;
  const std::string out = d.file("env.json");
  const pid_t pid = spawn({kExe, "--device", "cuda", "-q", "--case", "alpha", "--steps", "1", "-o", out}, "/dev/null",
                          d.file("out.txt"), d.file("err.txt"), {"PYTORCH_ALLOC_CONF=max_split_size_mb:64"});
  ASSERT_EQ(wait_exit_code(pid), 0) << read_text(d.file("err.txt"));
  const Report r = load_report(out);
  EXPECT_EQ(r.config.allocator_settings, "max_split_size_mb:64");
  EXPECT_TRUE(r.config.remedies.empty());
  // A remedy laid on the environment's settings: both recorded.
  const std::string both = d.file("both.json");
  const pid_t p2 = spawn({kExe, "--device", "cuda", "-q", "--case", "alpha", "--steps", "1", "--remedy",
                          "expandable-segments", "-o", both},
                         "/dev/null", d.file("out2.txt"), d.file("err2.txt"), {"PYTORCH_ALLOC_CONF=max_split_size_mb:64"});
  ASSERT_EQ(wait_exit_code(p2), 0) << read_text(d.file("err2.txt"));
  EXPECT_EQ(load_report(both).config.allocator_settings, "expandable_segments:True,max_split_size_mb:64");
}
