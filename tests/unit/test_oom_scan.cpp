// The out-of-memory verdict over the H200's limit scans
// (docs/measurements/h200/oom-verdict-scan/, scripts/oom-verdict-scan.sh):
// at every limit one run with the allocator's defaults and one with
// expandable segments, the referee of fragmentation.
#include "memdiag/analysis.hpp"
#include "memdiag/report_reader.hpp"

#include "test_paths.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

using namespace memdiag;

namespace {

const std::string kScans = std::string(MEMDIAG_SOURCE_DIR) + "/docs/measurements/h200/oom-verdict-scan/";

Report scanned(const std::string& job, const std::string& name) {
  const std::string path = kScans + job + "/" + name + ".json";
  ReadResult r = read_report_file(path);
  EXPECT_TRUE(r.report) << path;
  return r.report ? *r.report : Report{};
}

Cause verdict_of(const Report& r) {
  const Analysis a = analyse({{"r.json", r}});
  EXPECT_EQ(a.verdicts.size(), 1u);
  return a.verdicts.empty() ? Cause::kInconclusive : a.verdicts.front().dominant;
}

double peak_of(const Report& r) {
  double p = 0;
  for (const Sample& s : r.samples) p = std::max(p, s.peak_allocated_mib);
  return p;
}

}  // namespace

// Epsilon medium, 2540 to 2760 MiB: fragmentation exactly where expandable
// segments complete and the defaults run out (2600-2690); where both run out
// the step does not fit whatever the allocator (2540-2590), and where the
// defaults complete the run is its activations'.
TEST(OomScan, EpsilonIsFragmentationExactlyWhereExpandableSegmentsComplete) {
  for (int limit = 2540; limit <= 2760; limit += 10) {
    const Report none = scanned("epsilon", "none-" + std::to_string(limit));
    const Report expandable = scanned("epsilon", "expandable-" + std::to_string(limit));
    const bool referee = none.status == RunStatus::kOom && expandable.status == RunStatus::kComplete;
    const Cause v = verdict_of(none);
    EXPECT_EQ(v == Cause::kFragmentation, referee) << limit << " MiB: " << to_string(v);
    if (!referee) {
      EXPECT_EQ(v, Cause::kActivations) << limit;
    }
  }
}

// The tests' own bucket schedule (tests/cases/own-buckets.json, small),
// 660 to 980 MiB: its tensors peak at 867.6 MiB (the run without a limit);
// the defaults complete from 930, expandable segments only from 980 (they
// strand 108 MiB of their own there, in pieces of at most 32). Below the
// tensors' peak nothing fits: never fragmentation. At 900-920 the defaults
// ran out with 30-50 MiB more than the tensors need and complete at 930:
// memory the allocator stranded, fragmentation, though expandable segments
// do not free it (the response's confirming run says so when it is run).
TEST(OomScan, TheTestsOwnBucketsAreNeverFragmentationBelowWhatTheirTensorsNeed) {
  const double tensors_peak = peak_of(scanned("own-buckets", "unlimited"));
  EXPECT_NEAR(tensors_peak, 867.6, 0.1);
  for (int limit = 660; limit <= 980; limit += 10) {
    const Report none = scanned("own-buckets", "none-" + std::to_string(limit));
    const Cause v = verdict_of(none);
    if (none.status == RunStatus::kComplete || limit < tensors_peak) {
      EXPECT_EQ(v, Cause::kActivations) << limit << " MiB";
    }
    if (none.status == RunStatus::kOom && limit >= 900) {
      EXPECT_EQ(v, Cause::kFragmentation) << limit << " MiB";
    }
  }
}
