// The capacity model (memdiag/capacity_model.hpp) on points written here:
// each phase's line from one run (its composition) and from several (a
// line through them), the allocator's reserve kept out of the budget, and
// the runs' own outcomes bounding the answer.
#include "memdiag/capacity_model.hpp"
#include "memdiag/phase_shape.hpp"

#include <gtest/gtest.h>

using namespace memdiag;

namespace {

// A run at `batch` of a job with `weights` MiB of parameters (in the
// census), a forward `workspace` of MiB that does not grow with the batch
// (and is not in the census), and `per_sample` MiB of activations per
// sample: forward peaks at weights + workspace + per_sample x batch and
// ends at weights + per_sample x batch, where backward starts and peaks.
CapacityPoint point(std::int64_t batch, double weights, double workspace, double per_sample, double reserve = 0) {
  const TensorCensus census{weights, 0, 0};
  const double held = weights + workspace + per_sample * static_cast<double>(batch);
  CapacityPoint p;
  p.batch = batch;
  p.reserve_overhead_mib = reserve;
  p.phases = {PhaseShape{Phase::kModelReady, weights, 0, weights, TensorCensus{}, census},
              PhaseShape{Phase::kOptimizerReady, weights, weights, weights, census, census},
              PhaseShape{Phase::kForward, held, weights, held - workspace, census, census},
              PhaseShape{Phase::kBackward, held - workspace, held - workspace, weights, census, census},
              PhaseShape{Phase::kStep, weights, weights, weights, census, census},
              PhaseShape{Phase::kCleanup, weights, weights, weights, census, census}};
  return p;
}

CapacityPoint ran_out(std::int64_t batch, double budget, std::optional<double> needed = std::nullopt) {
  CapacityPoint p;
  p.batch = batch;
  p.status = RunStatus::kOom;
  p.budget_mib = budget;
  p.failed_phase = Phase::kForward;
  p.needed_mib = needed;
  return p;
}

// A point as a search's try records it: its batch and phases.
CapacityTry tried(const CapacityPoint& p) {
  CapacityTry t;
  t.batch = p.batch;
  t.phases = p.phases;
  return t;
}

}  // namespace

TEST(CapacityModel, NothingCompletedIsNothingToFit) {
  EXPECT_FALSE(fit_capacity({}));
  EXPECT_FALSE(fit_capacity({ran_out(8, 1000, 1200)}));
}

// One run: what does not grow is the census's (100 MiB of weights), the
// rest of forward's peak is taken to grow with the batch: 0.5 MiB a
// sample, so 1800 samples in 1000 MiB, forward binding.
TEST(CapacityModel, OneRunIsReadOffItsComposition) {
  const std::optional<CapacityFit> fit = fit_capacity({point(8, 100, 0, 0.5)});
  ASSERT_TRUE(fit);
  EXPECT_EQ(fit->batches, (std::vector<std::int64_t>{8}));
  const CapacityAnswer a = predict_max_batch(*fit, 1000);
  EXPECT_EQ(a.max_batch, 1800);
  EXPECT_EQ(a.binding.phase, Phase::kForward);
  EXPECT_DOUBLE_EQ(a.binding.fixed_mib, 100);
  EXPECT_DOUBLE_EQ(a.binding.per_sample_mib, 0.5);
  EXPECT_TRUE(a.caveats.one_run);
  EXPECT_DOUBLE_EQ(a.extrapolation, 1800.0 / 8);
  EXPECT_DOUBLE_EQ(needed_mib(*fit, 1800), 1000);
}

// Three runs whose peaks grow as the square of the batch (a B x B matrix:
// 100 MiB of weights + 1e-4 MiB x B^2): the lines through the two largest
// over-predict past them, and the caveat gives the parabola's answer,
// here exact: 100 + 1e-4 B^2 <= 1000 at B = 3000. Linear runs get none.
TEST(CapacityModel, PeaksThatGrowFasterThanTheBatchAreSaidWithTheirCurve) {
  const auto quadratic = [](std::int64_t b) {
    return point(b, 100, 0, 1e-4 * static_cast<double>(b));  // per sample grows with the batch
  };
  const std::optional<CapacityFit> fit = fit_capacity({quadratic(500), quadratic(1000), quadratic(2000)});
  ASSERT_TRUE(fit);
  const CapacityAnswer a = predict_max_batch(*fit, 1000);
  EXPECT_GT(a.max_batch, 3000);  // the straight line through 1000 and 2000
  ASSERT_TRUE(a.caveats.batch_if_superlinear);
  EXPECT_NEAR(static_cast<double>(*a.caveats.batch_if_superlinear), 3000, 1);
  const std::optional<CapacityFit> linear = fit_capacity({point(500, 100, 0, 0.2), point(1000, 100, 0, 0.2),
                                                           point(2000, 100, 0, 0.2)});
  EXPECT_FALSE(predict_max_batch(*linear, 1000).caveats.batch_if_superlinear);
  // A step() that peaks at 600 MiB whatever the batch, highest at the two
  // smaller runs, forward's line at the largest: the maximum bends (600,
  // 600, 700), no phase does.
  const auto kinked = [](std::int64_t b) {
    CapacityPoint p = point(b, 100, 0, 0.3);
    for (PhaseShape& s : p.phases) {
      if (s.phase == Phase::kStep) s.peak_mib = 600;
    }
    return p;
  };
  const std::optional<CapacityFit> kink = fit_capacity({kinked(100), kinked(1000), kinked(2000)});
  EXPECT_FALSE(predict_max_batch(*kink, 5000).caveats.batch_if_superlinear);
}

// One run cannot tell a fixed workspace from activations: its answer comes
// with the range its composition allows. Low: all it held above its fixed
// part grows, the allocator's reserve too; high: only what forward held for
// backward grows and the reserve is given back. Each end widened by 2%. The
// job's true answer (the three-run fit below, 1740) is near the high end
// here; with a reserve that grows it would be near the low one.
TEST(CapacityModel, OneRunSaysTheRangeItsCompositionAllows) {
  const std::optional<CapacityFit> fit = fit_capacity({point(100, 100, 30, 0.5)});
  ASSERT_TRUE(fit);
  ASSERT_TRUE(fit->forward_held_mib);
  EXPECT_DOUBLE_EQ(*fit->forward_held_mib, 50);
  const CapacityAnswer a = predict_max_batch(*fit, 1000);
  EXPECT_EQ(a.max_batch, 1125);
  ASSERT_TRUE(a.caveats.batch_if_all_grows && a.caveats.batch_if_activations_grow);
  EXPECT_EQ(*a.caveats.batch_if_all_grows, 1102);         // (1000 - 100) / 0.8 = 1125, less 2%
  EXPECT_EQ(*a.caveats.batch_if_activations_grow, 1775);  // (1000 - 130) / 0.5 = 1740, plus 2%
  EXPECT_DOUBLE_EQ(*a.caveats.reserve_grows_mib, 0);
  EXPECT_DOUBLE_EQ(*a.caveats.activations_mib, 50);
  EXPECT_FALSE(a.caveats.low_end_unknown);

  const std::optional<CapacityFit> reserved = fit_capacity({point(100, 100, 0, 0.5, 50)});
  ASSERT_TRUE(reserved);
  const CapacityAnswer r = predict_max_batch(*reserved, 1000);
  EXPECT_EQ(r.max_batch, 1700);                           // (1000 - 50 - 100) / 0.5
  EXPECT_EQ(*r.caveats.batch_if_all_grows, 882);          // (1000 - 100) / ((150 + 50 - 100) / 100) = 900, less 2%
  EXPECT_EQ(*r.caveats.batch_if_activations_grow, 1836);  // (1000 - 100) / 0.5 = 1800 (reserve given back), plus 2%
  EXPECT_DOUBLE_EQ(*r.caveats.reserve_grows_mib, 50);

  // Steps that varied in size, or kept more step by step: under a budget
  // the allocator strands blocks the run never showed; only the high end
  // is known.
  for (const bool varied : {true, false}) {
    CapacityPoint p = point(100, 100, 0, 0.5, 50);
    (varied ? p.sizes_varied : p.live_grew) = true;
    const CapacityAnswer v = predict_max_batch(*fit_capacity({p}), 1000);
    EXPECT_EQ(v.max_batch, 1700);
    EXPECT_FALSE(v.caveats.batch_if_all_grows);
    EXPECT_EQ(v.caveats.batch_if_activations_grow, 1836);
    EXPECT_EQ(v.caveats.low_end_unknown, varied ? "sizes_varied" : "live_memory_grew");
  }

  // The runs' own outcomes under the budget bound both ends: a run that ran
  // out at 1000 caps the high end below it, and the run's own batch, which
  // fits within a budget of 181, raises the low end to it.
  const std::optional<CapacityFit> bounded = fit_capacity({point(100, 100, 30, 0.5), ran_out(1000, 1000)});
  ASSERT_TRUE(bounded);
  const CapacityAnswer o = predict_max_batch(*bounded, 1000);
  EXPECT_EQ(o.max_batch, 999);
  EXPECT_EQ(*o.caveats.batch_if_activations_grow, 999);
  const CapacityAnswer tight = predict_max_batch(*fit, 181);
  EXPECT_EQ(tight.max_batch, 101);                    // (181 - 100) / 0.8
  EXPECT_EQ(*tight.caveats.batch_if_all_grows, 100);  // 101 less 2% (98) is below the run's own 100
  // A forward that held nothing for backward: no shallower slope than the
  // line's is known, so the high end is the line's own answer, plus 2%.
  CapacityPoint nothing_held = point(100, 100, 0, 0.5);
  for (PhaseShape& ph : nothing_held.phases) {
    if (ph.phase == Phase::kForward) ph.end_mib = ph.start_mib;
  }
  const CapacityAnswer h = predict_max_batch(*fit_capacity({nothing_held}), 1000);
  EXPECT_FALSE(h.caveats.activations_mib);
  EXPECT_LE(*h.caveats.batch_if_activations_grow, h.max_batch + (h.max_batch + 49) / 50);

  // Two runs draw the line: no range from composition.
  const std::optional<CapacityFit> two = fit_capacity({point(10, 100, 30, 0.5), point(100, 100, 30, 0.5)});
  ASSERT_TRUE(two);
  EXPECT_FALSE(predict_max_batch(*two, 1000).caveats.batch_if_all_grows);
}

// A workspace that does not grow but is outside the census: one run takes
// it for activations (too steep a line, too small an answer); two runs
// draw the line through both and find it fixed.
TEST(CapacityModel, SeveralRunsDrawTheLineThroughTheTwoLargest) {
  const std::optional<CapacityFit> one = fit_capacity({point(100, 100, 30, 0.5)});
  ASSERT_TRUE(one);
  EXPECT_EQ(predict_max_batch(*one, 1000).max_batch, 1125);  // 0.8 MiB a sample from 100 above the weights
  const std::optional<CapacityFit> three =
      fit_capacity({point(10, 100, 30, 0.5), point(100, 100, 30, 0.5), point(400, 100, 30, 0.5)});
  ASSERT_TRUE(three);
  EXPECT_EQ(three->batches, (std::vector<std::int64_t>{10, 100, 400}));
  const CapacityAnswer a = predict_max_batch(*three, 1000);
  EXPECT_EQ(a.max_batch, 1740);  // (1000 - 130) / 0.5
  EXPECT_DOUBLE_EQ(a.binding.fixed_mib, 130);
  EXPECT_FALSE(a.caveats.one_run);
}

// CUDA's allocator holds more than the tensors: the largest run's reserve
// beyond them is kept out of the budget, and where the runs' reserves
// differ the answers at the largest and the smallest are the range.
TEST(CapacityModel, TheReserveIsKeptOutOfTheBudget) {
  const std::optional<CapacityFit> without = fit_capacity({point(8, 100, 0, 0.5)});
  const std::optional<CapacityFit> with = fit_capacity({point(8, 100, 0, 0.5, 50)});
  ASSERT_TRUE(without && with);
  EXPECT_EQ(predict_max_batch(*without, 1000).max_batch, 1800);
  const CapacityAnswer a = predict_max_batch(*with, 1000);
  EXPECT_EQ(a.max_batch, 1700);
  EXPECT_DOUBLE_EQ(a.reserve_overhead_mib, 50);
  EXPECT_DOUBLE_EQ(needed_mib(*with, 1700), 1000);

  const std::optional<CapacityFit> varied = fit_capacity({point(4, 100, 0, 0.5, 20), point(8, 100, 0, 0.5, 50)});
  ASSERT_TRUE(varied);
  const CapacityAnswer v = predict_max_batch(*varied, 1000);
  EXPECT_EQ(v.max_batch, 1700);  // the largest run's reserve
  EXPECT_EQ(v.caveats.reserve_min_mib, 20);
  EXPECT_EQ(v.caveats.reserve_max_mib, 50);
  EXPECT_EQ(v.caveats.batch_at_max_reserve, 1700);
  EXPECT_EQ(v.caveats.batch_at_min_reserve, 1760);
}

// The runs' outcomes at the budget correct the lines where bounds apply (a
// comparison), not for a search, which sets its prediction beside them.
TEST(CapacityModel, RunsAtTheBudgetBoundTheAnswer) {
  // (It ran out for a reason the lines do not see, fragmentation say: what
  // it needed is not known.)
  const std::optional<CapacityFit> capped = fit_capacity({point(8, 100, 0, 0.5), ran_out(1500, 1000)});
  ASSERT_TRUE(capped);
  const CapacityAnswer a = predict_max_batch(*capped, 1000);
  EXPECT_EQ(a.max_batch, 1499);
  EXPECT_EQ(a.capped_by_oom, 1500);
  EXPECT_EQ(predict_max_batch(*capped, 1000, /*apply_bounds=*/false).max_batch, 1800);
  // Run out under a larger budget: no bound on this one.
  EXPECT_EQ(predict_max_batch(*capped, 900).max_batch, 1600);

}

// A run that ran out well past the batches fitted says what its phase
// needed there: the line is raised to meet it.
TEST(CapacityModel, ARunOutFarPastTheFitRaisesItsPhasesLine) {
  const std::optional<CapacityFit> fit = fit_capacity({point(100, 100, 0, 0.5), ran_out(1000, 2000, 800)});
  ASSERT_TRUE(fit);
  // Forward at 1000 samples: 600 by the line, 800 measured.
  const CapacityAnswer a = predict_max_batch(*fit, 1000, /*apply_bounds=*/false);
  EXPECT_EQ(a.binding.phase, Phase::kForward);
  EXPECT_NEAR(a.binding.per_sample_mib, (800.0 - 150.0) / 900.0, 1e-9);
  EXPECT_LT(a.max_batch, 1800);
}

// A search its traced try's replay settled tried one sample and a quarter
// of its answer in its own process. Where the job's line bends above them
// (here 30 MiB of workspace from batch 100 on), the line through those two
// misses the answer; with the fresh run of the answer, the search's own
// points (a line through the two largest) find it. The run is taken only
// for a confirmed answer the search never tried, and only where it completed.
TEST(CapacityModel, ASearchsOwnPointsTakeTheFreshRunOfAnAnswerItNeverTried) {
  CapacitySearch s;
  s.limit_mib = 1000;
  s.max_batch = 1740;  // (1000 - 130) / 0.5
  s.confirmed = true;
  s.tries = {tried(point(1, 100, 0, 0.5)), tried(point(435, 100, 30, 0.5))};
  const CapacityPoint answer = point(1740, 100, 30, 0.5);

  bool with = false;
  const std::optional<CapacityFit> tries_only = fit_capacity(search_capacity_points(s, std::nullopt, "", &with));
  ASSERT_TRUE(tries_only);
  EXPECT_FALSE(with);
  EXPECT_LT(predict_max_batch(*tries_only, 1000).max_batch, 1700);  // the bend unseen: 30 MiB taken as activations

  const std::vector<CapacityPoint> points = search_capacity_points(s, answer, "", &with);
  EXPECT_TRUE(with);
  ASSERT_EQ(points.size(), 3u);
  const std::optional<CapacityFit> own = fit_capacity(points);
  ASSERT_TRUE(own);
  EXPECT_EQ(predict_max_batch(*own, 1000).max_batch, 1740);

  CapacitySearch unconfirmed = s;
  unconfirmed.confirmed = false;
  EXPECT_EQ(search_capacity_points(unconfirmed, answer, "", &with).size(), 2u);
  EXPECT_FALSE(with);
  CapacitySearch answer_tried = s;
  answer_tried.tries.push_back(tried(answer));
  EXPECT_EQ(search_capacity_points(answer_tried, answer, "", &with).size(), 3u);
  EXPECT_FALSE(with);
  CapacityPoint failed = answer;
  failed.status = RunStatus::kOom;
  EXPECT_EQ(search_capacity_points(s, failed, "", &with).size(), 2u);
  EXPECT_FALSE(with);
}

// The fresh process above the answer that ran out with memory reserved but
// unallocated (the allocator's rounding, blocks a fragmenting schedule
// strands: gamma on the H200 held 550 MiB so at 2000 MiB) is a point of
// the search's own: the answer's lines cannot see it, so the prediction
// says how far below them that much stranded puts the answer.
TEST(CapacityModel, AFreshCheckThatRanOutWithMemoryStrandedSaysHowFarItMayBeOff) {
  CapacitySearch s;
  s.limit_mib = 1000;
  s.max_batch = 1400;  // the lines say 1740: (1000 - 130) / 0.5
  s.first_failing_batch = 1401;
  s.confirmed = true;
  s.tries = {tried(point(1, 100, 0, 0.5)), tried(point(350, 100, 30, 0.5))};
  CapacityTry above;
  above.batch = 1401;
  above.status = RunStatus::kOom;
  above.peak_allocated_mib = 830;
  above.reserve_overhead_mib = 170;
  above.failed_phase = Phase::kBackward;
  above.needed_mib = 850;
  const CapacityPoint answer = point(1400, 100, 30, 0.5);

  const std::vector<CapacityPoint> without = search_capacity_points(s, answer, "");
  EXPECT_EQ(without.size(), 3u);
  const CapacityAnswer plain = predict_max_batch(*fit_capacity(without), 1000, false);
  EXPECT_EQ(plain.max_batch, 1740);
  EXPECT_FALSE(plain.caveats.trapped_at_oom_mib);

  s.checks = {tried(answer), above};
  s.checks[0].status = RunStatus::kComplete;
  const std::vector<CapacityPoint> with = search_capacity_points(s, answer, "");
  ASSERT_EQ(with.size(), 4u);  // the answer once, the check that ran out added
  EXPECT_EQ(with.back().batch, 1401);
  EXPECT_EQ(with.back().status, RunStatus::kOom);
  const CapacityAnswer a = predict_max_batch(*fit_capacity(with), 1000, false);
  EXPECT_EQ(a.max_batch, 1740);  // the lines' own figure, as the search's prediction is
  ASSERT_TRUE(a.caveats.trapped_at_oom_mib);
  EXPECT_DOUBLE_EQ(*a.caveats.trapped_at_oom_mib, 170);
  ASSERT_TRUE(a.caveats.batch_if_trapped);
  EXPECT_EQ(*a.caveats.batch_if_trapped, 1400);  // (1000 - 170 - 130) / 0.5
  // Bounded by the runs (a comparison's prediction, not the search's own):
  // the check at this limit caps it at the answer.
  EXPECT_EQ(predict_max_batch(*fit_capacity(with), 1000, true).max_batch, 1400);
}

// Backward's transient above its higher end, measured only where the batch
// was small (there its end was the higher: the gradients outweigh a few
// samples' activations), is what does not grow: autocast's bf16 copies of
// the weights, 4 MiB. Taken per sample it made 1 MiB a sample of a job
// whose batch 2048 held 86 MiB in all (a hostile check's sweep of batches
// 1, 4 and 2048, which then said 2048 was the most that fit in 200 MiB
// where 6000 took 205.7).
TEST(CapacityModel, ABackwardTransientSeenOnlyAtASmallBatchDoesNotGrow) {
  const TensorCensus weights{16, 0, 0}, with_grads{16, 16, 0};
  auto at = [&](std::int64_t batch, double start, double end, double peak) {
    CapacityPoint p;
    p.batch = batch;
    p.phases = {PhaseShape{Phase::kModelReady, 16, 0, 16, TensorCensus{}, weights},
                PhaseShape{Phase::kForward, start, 16, start, weights, weights},
                PhaseShape{Phase::kBackward, peak, start, end, weights, with_grads}};
    return p;
  };
  // Activations 0.026 MiB a sample; gradients 16 MiB; 4 MiB of bf16 copies
  // in backward whatever the batch; at 2048 its start is the higher end.
  const CapacityPoint small = at(4, 16 + 0.104, 32, 36), large = at(2048, 16 + 53.2, 32, 16 + 53.2 + 0.026 * 2048);
  const std::optional<CapacityFit> fit = fit_capacity({small, large});
  ASSERT_TRUE(fit);
  for (const PhaseLine& l : fit->lines) {
    if (l.phase != Phase::kBackward) continue;
    EXPECT_LT(l.per_sample_mib, 0.1) << (l.piece == PhaseLine::Piece::kEnd ? "end" : "start");
  }
  const CapacityAnswer a = predict_max_batch(*fit, 200, false);
  EXPECT_GT(a.max_batch, 3000);
  EXPECT_LT(a.max_batch, 6000);
}

// A fully sharded job (FSDP2 on the root alone): its forward gathers the
// whole model (16 MiB beside an 8 MiB shard) and holds it to backward,
// where a unit's unsharded gradients and their copy for the reduce-scatter
// (twice the gathered weights) come and go per parameter, not per sample.
// From one run at batch 4 the peak at batch 1 is read from that, not 32
// MiB of transient shared out per sample (an independent check's Llama
// was predicted 273 MiB at batch 1 and peaked at 454.2).
TEST(CapacityModel, AShardedModelsBackwardTransientIsPerParameterFromOneRun) {
  const double shard = 8, gathered = 16, a = 0.25;
  const auto sharded = [&](std::int64_t batch, bool shards_gradients) {
    const double b = static_cast<double>(batch);
    const TensorCensus weights{shard, 0, 0}, in_use{shard + gathered, 0, 0}, graded{shard, shard, 0};
    const double held = shard + gathered + a * b;
    CapacityPoint p;
    p.batch = batch;
    p.shards_gradients = shards_gradients;
    p.phases = {PhaseShape{Phase::kModelReady, shard, 0, shard, TensorCensus{}, weights},
                PhaseShape{Phase::kOptimizerReady, shard, shard, shard, weights, weights},
                PhaseShape{Phase::kForward, held, shard, held, weights, in_use},
                PhaseShape{Phase::kBackward, held + 2 * gathered + a * b, held, 2 * shard, in_use, graded},
                PhaseShape{Phase::kStep, 2 * shard, 2 * shard, 2 * shard, graded, graded},
                PhaseShape{Phase::kCleanup, 2 * shard, 2 * shard, shard, graded, weights}};
    return p;
  };
  const auto peak_at = [](const CapacityFit& fit, std::int64_t batch) {
    double most = 0;
    for (const PhaseLine& l : fit.lines) most = std::max(most, l.at(batch));
    return most;
  };
  const std::optional<CapacityFit> fit = fit_capacity({sharded(4, true)});
  ASSERT_TRUE(fit);
  EXPECT_NEAR(peak_at(*fit, 4), shard + 3 * gathered + 2 * a * 4, 1e-9);  // the run itself
  EXPECT_NEAR(peak_at(*fit, 1), shard + 3 * gathered + 2 * a * 1, 1e-9);  // 56.5, as the job needs
  // Read as replicated, the transient is shared out per sample.
  const std::optional<CapacityFit> replicated = fit_capacity({sharded(4, false)});
  EXPECT_LT(peak_at(*replicated, 1), 40);
}

// A frozen backbone: the forward makes a large temporary per sample (the
// backbone's activations, made under no gradient and freed within it) and
// holds almost nothing for backward, whose start is no run's peak. The
// first gradients are of what backward saved: backward's start is assumed
// no larger than that, and the forward binds (an independent check's Swin
// was held at backward's start, 7.03 MiB a sample, where its forward's
// peak was 3.44).
TEST(CapacityModel, AFrozenBackbonesForwardTemporaryIsNotBackwardsStart) {
  const TensorCensus census{100, 0, 0};
  CapacityPoint p;
  p.batch = 100;
  // Forward: from 100 to a peak of 100 + 3.5 x 100, ending at 101 (1 MiB
  // held: the head's input); backward from there to its end (the head's
  // gradients), its start never its peak.
  p.phases = {PhaseShape{Phase::kModelReady, 100, 0, 100, TensorCensus{}, census},
              PhaseShape{Phase::kOptimizerReady, 100, 100, 100, census, census},
              PhaseShape{Phase::kForward, 450, 100, 101, census, census},
              PhaseShape{Phase::kBackward, 102, 101, 101.5, census, census},
              PhaseShape{Phase::kStep, 100.5, 100.5, 100.5, census, census},
              PhaseShape{Phase::kCleanup, 100.5, 100.5, 100, census, census}};
  const std::optional<CapacityFit> fit = fit_capacity({p});
  ASSERT_TRUE(fit);
  const CapacityAnswer a = predict_max_batch(*fit, 1000);
  EXPECT_EQ(a.binding.phase, Phase::kForward);
  EXPECT_NEAR(a.binding.per_sample_mib, 3.5, 0.02);
  EXPECT_NEAR(static_cast<double>(a.max_batch), 900 / 3.5, 2);
}

namespace {

// A run of `point`'s job whose backward was profiled node by node: three
// nodes at `batch`, each (rise above backward's start, gradients there).
CapacityPoint profiled(std::int64_t batch, std::vector<std::pair<double, double>> nodes) {
  CapacityPoint p = point(batch, 100, 0, 0.5);
  BackwardProfile b;
  b.step = 1;
  b.samples = batch;
  b.start_mib = 100 + 0.5 * static_cast<double>(batch);
  double top = 0;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    b.names.push_back(std::string(1, static_cast<char>('A' + i)));
    b.rise_mib.push_back(nodes[i].first);
    b.gradients_mib.push_back(nodes[i].second);
    top = std::max(top, nodes[i].first);
  }
  for (PhaseShape& s : p.phases) {
    if (s.phase == Phase::kBackward) s.peak_mib = b.start_mib + top;
  }
  p.backward_profile = b;
  return p;
}

}  // namespace

// Backward profiled at batch 10 (100 MiB of weights, 0.5 MiB a sample of
// activations held at its start): node A makes a 40 MiB gradient while
// every activation is held, node B holds 2 MiB of activations' gradients
// (0.2 a sample), node C has freed them all (5 MiB) with 45 MiB of
// gradients made.
// Each node's line keeps its gradients fixed: B binds in 1000 MiB at
// (1000 - 100) / 0.7 = 1285. Without the profile backward's 40 MiB rise
// grew with the batch (4 MiB a sample): 200.
TEST(CapacityModel, AProfiledBackwardKeepsItsGradientsFixed) {
  const CapacityPoint with = profiled(10, {{40, 40}, {2, 0}, {40, 45}});
  const CapacityAnswer a = predict_max_batch(*fit_capacity({with}), 1000);
  EXPECT_EQ(a.max_batch, 1285);
  EXPECT_EQ(a.binding.piece, PhaseLine::Piece::kNode);
  EXPECT_EQ(a.binding.node, 2u);
  EXPECT_EQ(a.binding.nodes, 3u);
  EXPECT_EQ(a.binding.node_name, "B");
  EXPECT_DOUBLE_EQ(a.binding.gradients_mib, 0);
  EXPECT_NEAR(a.binding.per_sample_mib, 0.7, 1e-12);
  EXPECT_FALSE(a.caveats.backward_start_assumed);
  // A's line (140 + 0.5 a sample) binds a budget where B's fixed part is
  // all there is room for: 150 MiB fits 20 samples by A, 71 by B.
  const CapacityAnswer small = predict_max_batch(*fit_capacity({with}), 150);
  EXPECT_EQ(small.max_batch, 20);
  EXPECT_EQ(small.binding.node_name, "A");
  EXPECT_DOUBLE_EQ(small.binding.gradients_mib, 40);
  CapacityPoint without = with;
  without.backward_profile.reset();
  EXPECT_EQ(predict_max_batch(*fit_capacity({without}), 1000).max_batch, 200);
}

// A kernel's temporary of its own (9 MiB at node A, at any batch) is read
// as growing with the batch from one run, and as fixed through two.
TEST(CapacityModel, TwoProfiledRunsDrawEachNodesLineThroughBoth) {
  const CapacityPoint lo = profiled(10, {{49, 40}, {2, 0}});
  const CapacityPoint hi = profiled(20, {{49, 40}, {4, 0}});
  const CapacityAnswer one = predict_max_batch(*fit_capacity({hi}), 1000);
  EXPECT_EQ(one.binding.node_name, "A");
  EXPECT_EQ(one.max_batch, 905);  // (1000 - 140) / (0.5 + 9 / 20)
  const CapacityAnswer two = predict_max_batch(*fit_capacity({lo, hi}), 1000);
  EXPECT_EQ(two.binding.node_name, "B");
  EXPECT_EQ(two.max_batch, 1285);
  // Profiles of different graphs are not matched node by node: the larger
  // run's alone.
  CapacityPoint other = lo;
  other.backward_profile->names = {"X", "Y"};
  EXPECT_EQ(predict_max_batch(*fit_capacity({other, hi}), 1000).max_batch, 905);
}

// What a node held when it was done (its peak less what it freed) and the
// gradients it took and gave tell its temporary's kind from one run: node
// A's 9 MiB freed beside 0.5 MiB of gradients (A's and the node before's)
// is its kernel's workspace, fixed (B binds, as two runs found); beside
// 1.25 MiB of them (8 x 1.25 = 10 MiB of room) it may be a copy of what
// the node works on, growing (A binds at 905). The range's low end still lets it
// grow.
TEST(CapacityModel, ANodesOwnWorkspaceIsFixedFromOneRun) {
  CapacityPoint hi = profiled(20, {{49, 40}, {4, 0}});
  hi.backward_profile->held_mib = {40, 4};
  hi.backward_profile->operands_mib = {0.25, 0.25};
  const CapacityAnswer a = predict_max_batch(*fit_capacity({hi}), 1000);
  EXPECT_EQ(a.binding.node_name, "B");
  EXPECT_EQ(a.max_batch, 1285);
  EXPECT_DOUBLE_EQ(a.binding.temporary_mib, 0);
  ASSERT_TRUE(a.caveats.batch_if_all_grows);
  EXPECT_LE(*a.caveats.batch_if_all_grows, 905);
  // A's own line names its workspace where it binds (a budget that leaves
  // room for little more than A's fixed part: 160 MiB).
  const CapacityAnswer tight = predict_max_batch(*fit_capacity({hi}), 160);
  EXPECT_EQ(tight.binding.node_name, "A");
  EXPECT_DOUBLE_EQ(tight.binding.temporary_mib, 9);
  EXPECT_EQ(tight.max_batch, 22);  // (160 - 149) / 0.5
  hi.backward_profile->operands_mib = {1.25, 1};
  const CapacityAnswer growing = predict_max_batch(*fit_capacity({hi}), 1000);
  EXPECT_EQ(growing.binding.node_name, "A");
  EXPECT_EQ(growing.max_batch, 905);
  EXPECT_DOUBLE_EQ(growing.binding.temporary_mib, 0);
}

// The forward span by span (100 MiB of weights, the forward starting at
// them): span A frees a 9 MiB workspace beside 0.25 MiB of tensors, its
// peak 20 MiB above the start at batch 10 (11 of it growing); span B
// holds 10 MiB at its end, all growing. From one run the forward's line
// is A's, 109 + 1.1 a sample, not the whole peak's 100 + 2 a sample; a
// peak outside the spans (the loop's loss on the outputs) keeps the
// whole line too.
TEST(CapacityModel, AProfiledForwardKeepsASpansWorkspaceFixed) {
  CapacityPoint p = point(10, 100, 0, 0);
  BackwardProfile f;
  f.step = 1;
  f.samples = 10;
  f.start_mib = 100;
  f.names = {"Conv2d", "Net"};
  f.rise_mib = {20, 10};
  f.gradients_mib = {0, 0};
  f.held_mib = {11, 10};
  f.operands_mib = {0.25, 0.5};
  for (PhaseShape& s : p.phases) {
    if (s.phase == Phase::kForward) {
      s.start_mib = 100;
      s.peak_mib = 120;
      s.end_mib = 110;
    }
  }
  p.forward_profile = f;
  auto forward_lines = [](const CapacityFit& fit) {
    std::vector<PhaseLine> out;
    for (const PhaseLine& l : fit.lines) {
      if (l.phase == Phase::kForward) out.push_back(l);
    }
    return out;
  };
  const std::vector<PhaseLine> lines = forward_lines(*fit_capacity({p}));
  ASSERT_EQ(lines.size(), 1u);  // B's line (100 + 1 a sample) is under A's everywhere
  EXPECT_EQ(lines[0].piece, PhaseLine::Piece::kNode);
  EXPECT_EQ(lines[0].node_name, "Conv2d");
  EXPECT_DOUBLE_EQ(lines[0].temporary_mib, 9);
  EXPECT_NEAR(lines[0].fixed_mib, 109, 1e-9);
  EXPECT_NEAR(lines[0].per_sample_mib, 1.1, 1e-9);
  for (PhaseShape& s : p.phases) {
    if (s.phase == Phase::kForward) s.peak_mib = 125;  // 5 MiB more after the model returned
  }
  const std::vector<PhaseLine> with_tail = forward_lines(*fit_capacity({p}));
  ASSERT_EQ(with_tail.size(), 2u);
  EXPECT_EQ(with_tail[1].piece, PhaseLine::Piece::kWhole);
  EXPECT_NEAR(with_tail[1].per_sample_mib, 2.5, 1e-9);
  // A profile of another batch (micro-batches) is not read.
  Report r;
  r.model.forward_profile = f;
  EXPECT_TRUE(capacity_point(r, 10, "").forward_profile);
  EXPECT_FALSE(capacity_point(r, 40, "").forward_profile);
}

// Only the nodes that are the highest somewhere are kept: a thousand nodes
// under two make two lines.
TEST(CapacityModel, AProfilesDominatedNodesAreDropped) {
  std::vector<std::pair<double, double>> nodes;
  for (int i = 0; i < 1000; ++i) nodes.push_back({1.0 + 0.001 * i, 0.5});
  nodes.push_back({40, 40});
  nodes.push_back({5, 0});
  const std::optional<CapacityFit> fit = fit_capacity({profiled(10, nodes)});
  int node_lines = 0;
  for (const PhaseLine& l : fit->lines) node_lines += l.piece == PhaseLine::Piece::kNode;
  EXPECT_EQ(node_lines, 2);
}

// The profile is of one micro-batch: a report whose step's batch is
// another (accumulation) keeps it out of the capacity model.
TEST(CapacityModel, AProfileOfAnotherBatchIsNotUsed) {
  Report r;
  BackwardProfile b;
  b.samples = 8;
  b.names = {"A"};
  b.rise_mib = {1};
  b.gradients_mib = {0};
  r.model.backward_profile = b;
  EXPECT_TRUE(capacity_point(r, 8, "").backward_profile);
  EXPECT_FALSE(capacity_point(r, 32, "").backward_profile);
}

// What stays allocated at a cleanup beside the weights is fixed, less what
// of the step the loop still holds there (its last outputs and batch),
// which grows with the batch: the kept walk's "held" where the recorder
// walked, else the forward's inputs.
TEST(CapacityModel, WhatTheLoopHoldsAtTheCleanupIsNotFixed) {
  Report r;
  Sample forward;
  forward.phase = Phase::kForward;
  forward.step = 0;
  forward.input_mib = 0.5;
  Sample cleanup;
  cleanup.phase = Phase::kCleanup;
  cleanup.step = 0;
  cleanup.allocated_mib = 12;
  cleanup.tensors = TensorCensus{10, 0, 0};
  r.samples = {forward, cleanup};
  EXPECT_DOUBLE_EQ(persistent_other_mib(r), 1.5);  // 2 beside the weights, less 0.5 of inputs
  Event kept;
  kept.kind = EventKind::kKept;
  KeptRecord held;
  held.what = KeptRecord::What::kHeld;
  held.mib_per_step = 1.75;  // its logits and inputs
  kept.kept = {held};
  r.events = {kept};
  EXPECT_DOUBLE_EQ(persistent_other_mib(r), 0.25);
  r.samples[0].input_mib.reset();
  r.events.clear();
  EXPECT_DOUBLE_EQ(persistent_other_mib(r), 2);
}
