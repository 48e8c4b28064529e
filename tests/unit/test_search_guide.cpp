// --find-max-batch's guide (memdiag/search_guide.hpp) against fake
// executors: jobs whose outcome at every batch is known, so the search's
// answer, its number of tries and its worst case are checked without
// running anything. One kind of job is a line with an allocator's reserve
// that jumps about; the other replays the H200's own searches
// (docs/measurements/h200/capacity/), each try's phases interpolated
// between the batches the H200 ran.
#include "memdiag/report_reader.hpp"
#include "memdiag/search_guide.hpp"

#include "test_paths.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>

using namespace memdiag;

namespace {

constexpr std::int64_t kMax = 1 << 22;

// What a try at a batch gives: its status and what the model reads.
using Executor = std::function<CapacityTry(std::int64_t)>;

struct Outcome {
  std::int64_t max_batch = 0;
  std::size_t tries = 0;
};

// The search as src/run/max_batch.cpp runs it: one sample, then the guide.
Outcome search(const Executor& run, double limit, std::int64_t first = 1) {
  CapacitySearch s;
  s.limit_mib = limit;
  SearchBracket b;
  for (std::optional<std::int64_t> next = first; next; next = next_search_batch(s, b, kMax)) {
    s.tries.push_back(run(*next));
    const CapacityTry& t = s.tries.back();
    if (t.status == RunStatus::kComplete) b.lo = std::max(b.lo, t.batch);
    if (t.status == RunStatus::kOom) b.hi = std::min(b.hi.value_or(t.batch), t.batch);
    if (s.tries.size() > 200) break;  // a guide that never closes fails below
  }
  if (std::getenv("MEMDIAG_TRACE_GUIDE")) {  // the tries, + completed, - ran out
    for (const CapacityTry& t : s.tries) {
      std::fprintf(stderr, " %lld%s", static_cast<long long>(t.batch), t.status == RunStatus::kComplete ? "+" : "-");
    }
    std::fprintf(stderr, "\n");
  }
  return {b.lo, s.tries.size()};
}

// Doubling then bisection, the search before the guide, for its count.
std::size_t bisection_tries(const std::function<bool(std::int64_t)>& fits) {
  std::size_t n = 0;
  std::int64_t lo = 0, hi = 0;
  for (std::int64_t b = 1;; b *= 2) {
    ++n;
    if (!fits(b)) {
      hi = b;
      break;
    }
    lo = b;
  }
  while (lo > 0 && hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    ++n;
    (fits(mid) ? lo : hi) = mid;
  }
  return n;
}

// A job of weights W and activations a per sample: forward holds W + a b,
// backward peaks at W + 1.25 a b, the step at 2 W. `extra(b)` is what the
// allocator holds beyond the tensors at that batch: it counts against the
// limit and the model sees it only as the run's reserve.
struct LineJob {
  double weights = 200, per_sample = 0.05;
  std::function<double(std::int64_t)> extra = [](std::int64_t) { return 0.0; };
  double need(std::int64_t b) const { return weights + 1.25 * per_sample * static_cast<double>(b) + extra(b); }
  CapacityTry operator()(std::int64_t b, double limit) const {
    CapacityTry t;
    t.batch = b;
    const double acts = per_sample * static_cast<double>(b);
    if (need(b) > limit) {
      t.status = RunStatus::kOom;
      t.failed_phase = Phase::kBackward;
      t.needed_mib = limit + 1;
      t.peak_allocated_mib = weights + acts;
      return t;
    }
    t.phases = {PhaseShape{Phase::kModelReady, weights, 0, weights, std::nullopt, std::nullopt},
                PhaseShape{Phase::kForward, weights + acts, weights, weights + acts, std::nullopt, std::nullopt},
                PhaseShape{Phase::kBackward, weights + 1.25 * acts, weights + acts, 2 * weights, std::nullopt, std::nullopt},
                PhaseShape{Phase::kStep, 2 * weights, 2 * weights, 2 * weights, std::nullopt, std::nullopt}};
    t.peak_allocated_mib = weights + 1.25 * acts;
    t.reserve_overhead_mib = extra(b);
    return t;
  }
};

std::int64_t brute_force(const LineJob& job, double limit) {
  std::int64_t b = 0;
  while (b < kMax && job.need(b + 1) <= limit) ++b;
  return b;
}

// Exact: on a job whose need only grows, the brute-force answer; on one
// whose reserve jumps about (a batch may fit where a smaller one did not),
// an answer that fits with the next batch running out, as the fresh-process
// confirmation demands.
void expect_exact_and_fewer(const LineJob& job, double limit, std::size_t at_most, const std::string& what,
                            bool monotone = true) {
  const Outcome o = search([&](std::int64_t b) { return job(b, limit); }, limit);
  if (monotone) {
    EXPECT_EQ(o.max_batch, brute_force(job, limit)) << what;
  } else {
    EXPECT_LE(job.need(o.max_batch), limit) << what << ": " << o.max_batch;
    EXPECT_GT(job.need(o.max_batch + 1), limit) << what << ": " << o.max_batch;
  }
  const std::size_t old = bisection_tries([&](std::int64_t b) { return job.need(b) <= limit; });
  EXPECT_LE(o.tries, at_most) << what << ": " << o.tries << " tries, doubling and bisection " << old;
  EXPECT_LT(o.tries, old) << what;
}

}  // namespace

TEST(SearchGuide, AJobWhoseLineTheModelReadsTakesAFewTries) {
  LineJob job;
  for (double limit : {1000.0, 4000.0, 20000.0}) {
    expect_exact_and_fewer(job, limit, 10, "a line under " + std::to_string(limit));
  }
}

TEST(SearchGuide, AReserveThatJumpsAboutWithTheBatchStillEndsExact) {
  // The allocator holding 0 to 90 MiB more depending on how the batch's
  // blocks fall: the model, reading the last run's reserve, errs both ways.
  LineJob job;
  job.extra = [](std::int64_t b) { return 30.0 * static_cast<double>((b / 97) % 4); };
  for (double limit : {1000.0, 4000.0, 20000.0}) {
    expect_exact_and_fewer(job, limit, 24, "a jumping reserve under " + std::to_string(limit), /*monotone=*/false);
  }
}

TEST(SearchGuide, AModelThatIsWrongByFarIsBoundedByBisection) {
  // Memory quadratic in the batch, which the model's lines read as linear:
  // every guess overshoots, and the safeguard keeps the count near
  // bisection's.
  LineJob job;
  job.extra = [](std::int64_t b) { return 1e-5 * static_cast<double>(b) * static_cast<double>(b); };
  const double limit = 4000;
  const Outcome o = search([&](std::int64_t b) { return job(b, limit); }, limit);
  EXPECT_EQ(o.max_batch, brute_force(job, limit));
  const std::size_t old = bisection_tries([&](std::int64_t b) { return job.need(b) <= limit; });
  EXPECT_LE(o.tries, old + 6) << o.tries << " tries against bisection's " << old;
}

TEST(SearchGuide, NothingFitsAtOneSampleEndsAtTheFirstTry) {
  LineJob job;
  const Outcome o = search([&](std::int64_t b) { return job(b, 100); }, 100);
  EXPECT_EQ(o.max_batch, 0);
  EXPECT_EQ(o.tries, 1u);
}

TEST(SearchGuide, AJobThatDoesNotGrowDoublesAndAClosedBracketStops) {
  CapacitySearch s;
  s.limit_mib = 1000;
  CapacityTry t;
  t.batch = 8;
  // Weights of 10 MiB and nothing above them.
  t.phases = {PhaseShape{Phase::kModelReady, 10, 0, 10, std::nullopt, std::nullopt},
              PhaseShape{Phase::kForward, 10, 10, 10, std::nullopt, std::nullopt}};
  t.peak_allocated_mib = 10;
  s.tries.push_back(t);
  EXPECT_EQ(next_search_batch(s, SearchBracket{8, std::nullopt}, kMax), std::optional<std::int64_t>(16));
  EXPECT_EQ(next_search_batch(s, SearchBracket{8, 9}, kMax), std::nullopt);
  EXPECT_EQ(next_search_batch(s, SearchBracket{8, 5}, kMax), std::nullopt) << "a bracket upside down";
  EXPECT_EQ(next_search_batch(s, SearchBracket{kMax, std::nullopt}, kMax), std::nullopt);
  EXPECT_EQ(next_search_batch(CapacitySearch{}, SearchBracket{1, std::nullopt}, kMax), std::nullopt);
}

TEST(SearchGuide, OnTheCpuTheFirstTriesGrowAtMostSixteenfold) {
  LineJob job;
  CapacitySearch s;
  s.limit_mib = 20000;
  s.tries.push_back(job(1, 20000));
  EXPECT_GT(*next_search_batch(s, SearchBracket{1, std::nullopt}, kMax), 16);
  EXPECT_EQ(next_search_batch(s, SearchBracket{1, std::nullopt}, kMax, 16), std::optional<std::int64_t>(16));
}

TEST(SearchGuide, AccumulationStartsAtItsMicroBatchCount) {
  LineJob job;
  const Outcome o = search([&](std::int64_t b) { return job(b, 4000); }, 4000, /*first=*/4);
  EXPECT_EQ(o.max_batch, brute_force(job, 4000));
}

// The H200's searches replayed: each recorded try is a point of the job;
// a guess between two of them is run as their interpolation, its status the
// search's own answer (it completes up to max_batch).
TEST(SearchGuide, TheH200SearchesReplayedFindTheSameAnswerInFewerTries) {
  const std::string dir = std::string(MEMDIAG_SOURCE_DIR) + "/docs/measurements/h200/capacity/";
  std::size_t guided = 0, bisected = 0;
  for (const char* name : {"beta-medium-s2-max-2200", "beta-medium-s2-max-3000", "gamma-medium-s3-max-2500",
                           "gamma-medium-s3-max-4000", "alpha-medium-s3-max-5000", "alpha-medium-s3-max-8000",
                           "epsilon-small-s6-max-400", "epsilon-small-s6-max-600", "own-small-s3-max-300",
                           "own-small-s3-max-1500"}) {
    const ReadResult r = read_report_file(dir + name + ".json");
    ASSERT_TRUE(r.report && r.report->capacity) << name;
    const CapacitySearch& recorded = *r.report->capacity;
    std::map<std::int64_t, const CapacityTry*> done;
    for (const CapacityTry& t : recorded.tries) {
      if (t.status == RunStatus::kComplete && !t.phases.empty()) done[t.batch] = &t;
    }
    ASSERT_GE(done.size(), 2u) << name;
    const std::int64_t answer = recorded.max_batch;
    const CapacityTry* oom = nullptr;
    for (const CapacityTry& t : recorded.tries) {
      if (t.status == RunStatus::kOom && t.batch == answer + 1) oom = &t;
    }
    ASSERT_NE(oom, nullptr) << name;
    auto run = [&](std::int64_t b) {
      if (b > answer) {
        CapacityTry t = *oom;
        t.batch = b;
        return t;
      }
      auto hi = done.lower_bound(b);
      if (hi == done.end()) --hi;
      auto lo = hi == done.begin() ? hi : std::prev(hi);
      if (lo == hi) ++hi;
      const double x = static_cast<double>(b - lo->first) / static_cast<double>(hi->first - lo->first);
      CapacityTry t = *hi->second;
      t.batch = b;
      for (std::size_t i = 0; i < t.phases.size() && i < lo->second->phases.size(); ++i) {
        PhaseShape& p = t.phases[i];
        const PhaseShape& q = lo->second->phases[i];
        p.peak_mib = q.peak_mib + x * (p.peak_mib - q.peak_mib);
        p.start_mib = q.start_mib + x * (p.start_mib - q.start_mib);
        p.end_mib = q.end_mib + x * (p.end_mib - q.end_mib);
      }
      return t;
    };
    const Outcome o = search(run, recorded.limit_mib);
    EXPECT_EQ(o.max_batch, answer) << name;
    EXPECT_LE(o.tries + 6, recorded.tries.size()) << name << ": " << o.tries << " tries, the H200's search "
                                                  << recorded.tries.size();
    guided += o.tries;
    bisected += recorded.tries.size();
  }
  EXPECT_LE(10 * guided, 6 * bisected) << guided << " tries in all against the H200's " << bisected;
}
