// The parallel modes measured side by side, per rank: a replicated run and
// the mode runs of its configuration (projection::kVariantBaseline), each
// rank 0's census against its mode's formulas.
#include "parallel_modes.hpp"
#include "remedies.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace memdiag::detail {
namespace {

// A run that differs from the replicated one by its mode alone.
bool mode_only(const RunIdentity& id) {
  return is_sharded(id.mode) && id.remedies.empty() && id.allocator_settings.empty() && id.variant_name.empty();
}

ModeRow row_for(const Group& g, const RunFeatures& r, const RunFeatures& base) {
  ModeRow row;
  row.mode = r.id.mode;
  row.variant = variant_label(r.id);
  row.source = r.source;
  row.world_size = r.id.world_size;
  row.status = r.status;
  // The set's reports: its peak is the highest of them.
  const std::string set = key(projection::kRankSet, r.id);
  row.peak_mib = r.peak_allocated_mib;
  for (const RunFeatures& peer : g.runs) {
    if (key(projection::kRankSet, peer.id) != set) continue;
    ++row.ranks;
    row.peak_mib = std::max(row.peak_mib, peer.peak_allocated_mib);
  }
  row.parameters_mib = r.step_parameters_mib;
  row.model_state_mib = r.step_model_state_mib;
  row.split_parameter_mib = r.split_parameter_mib;
  row.forward_increment_mib = r.forward_increment_mib;
  row.max_loss_diff = max_loss_diff(r, base);
  // A mode that splits layers needs the split layers' size (S) for its
  // formula; a report without it (a rank that failed while splitting) has
  // none, rather than the replicated formula S = 0 would give.
  if (base.parameter_mib > 0 && (!definition(r.id.mode).splits_layers || r.split_parameter_mib)) {
    const double split = r.split_parameter_mib.value_or(0);
    row.parameters_formula_mib = parameters_per_rank(r.id.mode, base.parameter_mib, r.id.world_size, split);
    if (base.step_optimizer_state_mib) {
      row.model_state_formula_mib = model_state_per_rank(
          r.id.mode, base.parameter_mib, *base.step_optimizer_state_mib / base.parameter_mib, r.id.world_size, split);
    }
  }
  return row;
}

}  // namespace

std::vector<ModeRow> mode_rows(const Group& g) {
  // Rank 0 of each replicated data-parallel run, by its configuration.
  std::map<std::string, const RunFeatures*> replicated;
  for (const RunFeatures& r : g.runs) {
    if (r.id.rank == 0 && r.id.world_size > 1 && r.id.mode == ParallelMode::kDdp && is_baseline_variant(r.id)) {
      replicated.emplace(key(projection::kVariantBaseline, r.id), &r);
    }
  }
  std::map<std::string, std::vector<const RunFeatures*>> modes;
  for (const RunFeatures& r : g.runs) {
    if (r.id.rank == 0 && mode_only(r.id)) modes[key(projection::kVariantBaseline, r.id)].push_back(&r);
  }
  std::vector<ModeRow> out;
  for (const auto& [k, base] : replicated) {
    const auto it = modes.find(k);
    if (it == modes.end()) continue;
    std::vector<const RunFeatures*> runs = it->second;
    std::stable_sort(runs.begin(), runs.end(), [](const RunFeatures* a, const RunFeatures* b) {
      return std::tie(a->id.mode, a->id.unit_modules, a->id.prefetch_next) <
             std::tie(b->id.mode, b->id.unit_modules, b->id.prefetch_next);
    });
    out.push_back(row_for(g, *base, *base));
    for (const RunFeatures* r : runs) out.push_back(row_for(g, *r, *base));
  }
  return out;
}

}  // namespace memdiag::detail
