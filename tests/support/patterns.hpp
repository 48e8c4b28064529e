// The patterns each case must show, asserted from report files alone. Shared
// by the CPU integration tests and the GPU tests.
#pragma once

#include "memdiag/report.hpp"

#include <string>
#include <utility>
#include <vector>

namespace memdiag::testkit {

// Forward increment at batch 4 is 4x that at batch 1, within 15%.
void expect_activation_scaling(const Report& batch1, const Report& batch4);
// The steady-state forward increment (MiB) the analysis reads off a report.
double forward_increment(const Report& r);
// The post-cleanup allocation rises after step 0 by 2x the parameter bytes
// (within 3%) and not after later steps.
void expect_optimizer_state_pattern(const Report& r);
// Post-cleanup allocation grows by a near-constant amount every step, and
// the longer run grows more.
void expect_retained_graph_pattern(const Report& shorter, const Report& longer);

// A plan file's runs as the flags that run each alone: (name, flags).
std::vector<std::pair<std::string, std::vector<std::string>>> plan_as_flags(const std::string& plan_path);

// Every sample of b equals a's: the same phases in the same order,
// allocated, peak and reserved within 0.01 MiB, the same census, parameter
// bytes and status. What a sweep's report must be against a separate run's.
void expect_same_measurements(const Report& a, const Report& b, const std::string& what);

}  // namespace memdiag::testkit
