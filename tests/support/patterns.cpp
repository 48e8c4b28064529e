#include "patterns.hpp"

#include "memdiag/analysis.hpp"
#include "memdiag/sweep_plan.hpp"
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

// Every sample of b equals a's: same phases in the same order, allocated,
// peak and reserved within 0.01 MiB, the same census and parameter bytes.
void expect_same_measurements(const Report& a, const Report& b, const std::string& what) {
  ASSERT_EQ(a.samples.size(), b.samples.size()) << what;
  EXPECT_EQ(a.model.parameter_bytes, b.model.parameter_bytes) << what;
  EXPECT_EQ(a.status, b.status) << what;
  for (std::size_t i = 0; i < a.samples.size(); ++i) {
    const Sample& x = a.samples[i];
    const Sample& y = b.samples[i];
    ASSERT_EQ(x.phase, y.phase) << what << " sample " << i;
    ASSERT_EQ(x.step, y.step) << what << " sample " << i;
    EXPECT_NEAR(x.allocated_mib, y.allocated_mib, 0.01) << what << " " << to_string(x.phase);
    EXPECT_NEAR(x.peak_allocated_mib, y.peak_allocated_mib, 0.01) << what << " " << to_string(x.phase);
    EXPECT_EQ(x.reserved_mib.has_value(), y.reserved_mib.has_value());
    if (x.reserved_mib && y.reserved_mib) {
      EXPECT_NEAR(*x.reserved_mib, *y.reserved_mib, 0.01) << what;
    }
    ASSERT_EQ(x.tensors.has_value(), y.tensors.has_value());
    if (x.tensors) {
      EXPECT_NEAR(x.tensors->optimizer_state_mib, y.tensors->optimizer_state_mib, 1e-9) << what;
      EXPECT_NEAR(x.tensors->gradients_mib, y.tensors->gradients_mib, 1e-9) << what;
    }
  }
}

std::vector<std::pair<std::string, std::vector<std::string>>> plan_as_flags(const std::string& plan_path) {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (const RunRequest& r : read_plan_file(plan_path)) {
    std::vector<std::string> flags{"--case", r.case_arg};
    if (r.preset) flags.insert(flags.end(), {"--preset", *r.preset});
    if (r.batch_size_per_device) flags.insert(flags.end(), {"--batch-size-per-device", std::to_string(*r.batch_size_per_device)});
    if (r.steps) flags.insert(flags.end(), {"--steps", std::to_string(*r.steps)});
    if (!r.remedies.empty()) flags.insert(flags.end(), {"--remedy", remedies_label(r.remedies)});
    out.emplace_back(r.name, flags);
  }
  return out;
}

}  // namespace memdiag::testkit
