// Internal to memdiag::analysis: evidence.cpp, the evidence a verdict cites and its warnings.
#pragma once

#include "memdiag/analysis.hpp"

#include <vector>

namespace memdiag::detail {

RunPoint point_of(const RunFeatures& f);
// The one rise of the post-cleanup allocation where it is not growth: what
// the trend and the unseen-frees warning say as a step.
std::optional<RunFeatures::OneRise> rise_said(const RunFeatures& p);
// The post-cleanup trend as evidence (made_once: the cause is state made
// once, said where nothing grew), the same on every path that cites it.
evidence::PostCleanupTrend trend(const RunFeatures& p, bool made_once);
// Where the recorder's walk read some of the steps' cleanups only: the
// first and last it read and what the cleanups rose a step between them.
struct WalkedGrowth {
  int first_step = 0;
  int last_step = 0;
  double mib_per_step = 0;
};
std::optional<WalkedGrowth> walked_growth(const RunFeatures& p);
// The MiB a step of the tensors the walk named as kept, where they account
// for at least half of the post-cleanup growth (over the walked steps,
// where the walk read some only: its figure is their mean) and none of the
// records is a graph told to stay (retain_graph); else nothing.
std::optional<double> kept_tensors_explaining_growth(const RunFeatures& p);
// Memory kept across steps and bounded, with no growth: a graph held from
// step to step (an evaluation's), or a cache of the last few steps'
// tensors. A longer run shows nothing more; no growth is claimed.
bool bounded_hold(const RunFeatures& p);
// The evidence for the decided cause, and whether a sweep confirmed it.
// budgets_mib: --budget-mib, the first of which a growth is projected
// against where the run had no limit of its own (the CPU's, say).
std::vector<Evidence> cause_evidence(Cause cause, const RunFeatures& p, const std::vector<Sweep>& sweeps,
                                     bool& confirmed, const std::vector<double>& budgets_mib = {});
// Figures every verdict carries: the cache gap and memory outside the allocator.
std::vector<Evidence> general_evidence(Cause cause, const RunFeatures& p);
// How the primary run stopped, if it did, and the other ranks of its set
// (runs: the group's), and ranks out of balance.
std::vector<Warning> collect_warnings(const RunFeatures& primary, const std::vector<RunFeatures>& runs,
                                      const std::vector<DistributedView>& views,
                                      std::vector<warning::RankSetIncomplete> rank_sets);

}  // namespace memdiag::detail
