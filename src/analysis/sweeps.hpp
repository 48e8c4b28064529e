// Internal to memdiag::analysis: sweeps.cpp, the sweeps a group holds and its data-parallel views.
#pragma once

#include "memdiag/analysis.hpp"

#include <optional>
#include <utility>
#include <vector>

namespace memdiag::detail {

// A least-squares line through the origin over (x, y) points, sorted by x.
Sweep fit_sweep(SweepKind kind, std::vector<SweepPoint> points);
// y = a x + b x^2 by least squares over (x, y); none when the x do not
// determine both (fewer than two distinct).
std::optional<std::pair<double, double>> fit_linear_quadratic(const std::vector<std::pair<double, double>>& xy);
// The batch, parameter and steps sweeps present in the group around the
// primary run, each varying one setting with the others equal to its.
std::vector<Sweep> collect_sweeps(const Group& g, const RunFeatures& primary);
const Sweep* find_sweep(const std::vector<Sweep>& sweeps, SweepKind kind);
// One view per run configuration that has more than one rank.
std::vector<DistributedView> distributed_views(const Group& g);
// Each rank set of a data-parallel run (world above 1, one rank or more
// given) whose reports miss a rank of its world or repeat one.
std::vector<warning::RankSetIncomplete> rank_set_warnings(const Group& g);

}  // namespace memdiag::detail
