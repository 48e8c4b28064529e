#include "patterns.hpp"

#include "memdiag/analysis.hpp"
#include "process.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace memdiag::testkit {

double forward_increment(const Report& r) { return *compute_features(r, "forward").forward_increment_mib; }

void expect_activation_scaling(const Report& b1, const Report& b4) {
  const RunFeatures f1 = compute_features(b1, "batch1"), f4 = compute_features(b4, "batch4");
  ASSERT_TRUE(f1.forward_increment_mib && f4.forward_increment_mib);
  ASSERT_GT(*f1.forward_increment_mib, 0);
  const double ratio = *f4.forward_increment_mib / *f1.forward_increment_mib;
  EXPECT_NEAR(ratio, 4.0, 4.0 * 0.15) << "forward increments " << *f1.forward_increment_mib << " and "
                                      << *f4.forward_increment_mib << " MiB";
  // The baseline after cleanup does not move across steps.
  EXPECT_FALSE(f4.growth_significant);
}

void expect_optimizer_state_pattern(const Report& r) {
  const double two_p = 2.0 * to_mib(r.model.parameter_bytes);
  const double rise = alloc_at(r, Phase::kCleanup, 0) - alloc_at(r, Phase::kOptimizerReady);
  EXPECT_NEAR(rise, two_p, 0.03 * two_p) << "persistent rise after step 0";
  for (int k = 1; k < r.config.steps; ++k) {
    EXPECT_NEAR(alloc_at(r, Phase::kCleanup, k), alloc_at(r, Phase::kCleanup, 0), 0.01 * two_p) << "step " << k;
  }
  // Building the optimizer adds almost nothing: the moments are lazy.
  EXPECT_LT(alloc_at(r, Phase::kOptimizerReady) - alloc_at(r, Phase::kModelReady), 0.01 * two_p);
}

void expect_retained_graph_pattern(const Report& shorter, const Report& longer) {
  for (const Report* r : {&shorter, &longer}) {
    std::vector<double> deltas;
    double prev = alloc_at(*r, Phase::kOptimizerReady);
    for (int k = 0; k < r->config.steps; ++k) {
      const double now = alloc_at(*r, Phase::kCleanup, k);
      deltas.push_back(now - prev);
      prev = now;
    }
    std::vector<double> sorted = deltas;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted[sorted.size() / 2];
    ASSERT_GT(median, 0.1) << "no growth per step";
    for (std::size_t k = 0; k < deltas.size(); ++k) {
      EXPECT_NEAR(deltas[k], median, 0.10 * median) << "step " << k << " of " << r->config.steps;
    }
  }
  const double g_short = alloc_at(shorter, Phase::kCleanup, shorter.config.steps - 1) - alloc_at(shorter, Phase::kOptimizerReady);
  const double g_long = alloc_at(longer, Phase::kCleanup, longer.config.steps - 1) - alloc_at(longer, Phase::kOptimizerReady);
  EXPECT_GT(g_long, g_short * 1.2);
}

}  // namespace memdiag::testkit
