// Remedies measured: each run of a group whose variant is not the baseline
// (remedies, sharding, allocator settings), set against the baseline run of
// the same configuration (projection::kVariantBaseline).
#include "remedies.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace memdiag {

std::optional<double> cause_mib(Cause cause, const RunFeatures& f) {
  switch (cause) {
    case Cause::kActivations:
      return f.forward_increment_mib ? std::optional<double>(*f.forward_increment_mib + f.held_over_mib) : std::nullopt;
    case Cause::kOptimizerState: return f.optimizer_state_made_mib;
    // A run that stopped growing has no retained growth: zero, not unknown.
    case Cause::kRetainedGraph: return f.growth_per_step_mib ? std::optional<double>(f.retained_growth_mib.value_or(0)) : std::nullopt;
    case Cause::kParameters: return f.held_parameter_mib;
    case Cause::kAllocatorCache: return f.cache_excess_mib;
    // What a remedy must lower is the stranded memory itself, whether or
    // not the allocator retried (a garbage-collection threshold frees the
    // cache before a retry and strands as much).
    case Cause::kFragmentation: return f.max_inactive_split_mib;
    case Cause::kInconclusive: return std::nullopt;
  }
  return std::nullopt;
}

namespace detail {

std::optional<double> max_loss_diff(const RunFeatures& r, const RunFeatures& base, std::size_t* at) {
  const std::size_t n = std::min(r.losses.size(), base.losses.size());
  if (n == 0) return std::nullopt;
  // Each difference against the largest loss the baseline had over the
  // steps compared, not against that step's own: a loss that fell 600-fold
  // made bf16's rounding, 0.0052 at a loss of 0.04, read 4.5% where the
  // two curves followed one path (an independent scan of a ResNet under
  // autocast), and a baseline that memorised its batch read 163722%.
  double scale = 0;
  for (std::size_t i = 0; i < n; ++i) scale = std::max(scale, std::fabs(base.losses[i]));
  scale = std::max(scale, 1e-12);
  double worst = 0;
  std::size_t where = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double b = base.losses[i];
    const double d = std::fabs(r.losses[i] - b) / scale;
    if (d > worst) {
      worst = d;
      where = i;
    }
  }
  if (at != nullptr) *at = where;
  return worst;
}

namespace {

// What a baseline that ran out held of the cause when it failed, where its
// census tells: the optimizer state made since the phase before (the state
// the failing step was making), or the rest of what was allocated beside
// the model state (activations, the batch, temporaries). A lower bound of
// the figure a completed run would show, so a remedy below it reduces it.
std::optional<double> cause_at_failure(Cause cause, const OomAt& oom) {
  if (!oom.details.tensors) return std::nullopt;
  switch (cause) {
    case Cause::kOptimizerState:
      return std::max(0.0, oom.details.tensors->optimizer_state_mib - oom.state_before_mib.value_or(0));
    case Cause::kActivations: return oom.other_mib;
    default: return std::nullopt;
  }
}

// The phase of a run's highest peak (the earliest of equal ones).
std::optional<Phase> peak_phase(const RunFeatures& f) {
  std::optional<Phase> at;
  double most = 0;
  for (const auto& [phase, mib] : f.peak_by_phase) {
    if (!at || mib > most) {
      at = phase;
      most = mib;
    }
  }
  return at;
}

// What the reports show a variant did beside its baseline, whatever its
// label (memdiag/analysis.hpp's RemedyRow::observed). An independent
// check's checkpointing labelled "remat" and accumulation labelled
// "microbatch" were told to try checkpoint and accumulate.
// Only for a variant that names no remedy of memory_diagnostics' and runs
// in its baseline's mode: a sharded rank holds less state for the same
// gradients and is no lighter optimizer.
std::vector<RemedyKind> observed_remedies(const RunFeatures& r, const RunFeatures& base) {
  std::vector<RemedyKind> out;
  if (!r.id.remedies.empty() || r.id.mode != base.id.mode || r.id.world_size != base.id.world_size) return out;
  if (r.model_checkpointing && !base.model_checkpointing) out.push_back(RemedyKind::kCheckpoint);
  if (r.micro_batches > 1 && base.micro_batches <= 1) out.push_back(RemedyKind::kAccumulate);
  if (r.model_autocast == "bfloat16" && base.model_autocast.empty()) out.push_back(RemedyKind::kAutocastBf16);
  // Less state for the same gradients (the same weights trained): a
  // lighter optimizer. Fewer gradients is frozen weights, not that.
  const auto gradients = [](const RunFeatures& x) -> std::optional<double> {
    if (!x.step_model_state_mib || !x.step_parameters_mib || !x.step_optimizer_state_mib) return std::nullopt;
    return *x.step_model_state_mib - *x.step_parameters_mib - *x.step_optimizer_state_mib;
  };
  const std::optional<double> g = gradients(r), g0 = gradients(base);
  if (g && g0 && *g0 > 0 && std::fabs(*g - *g0) <= thresholds::kRemedyReduction * *g0 && *base.step_optimizer_state_mib > 0 &&
      *r.step_optimizer_state_mib < (1 - thresholds::kRemedyReduction) * *base.step_optimizer_state_mib) {
    out.push_back(RemedyKind::kSgd);
  }
  return out;
}

RemedyRow row_for(const RunFeatures& r, const RunFeatures& base, Cause dominant, const std::vector<Cause>& tied) {
  RemedyRow row;
  row.remedy = variant_label(r.id);
  row.remedies = r.id.remedies;
  row.mode = r.id.mode;
  row.source = r.source;
  row.baseline_source = base.source;
  row.status = r.status;
  row.baseline_status = base.status;
  row.peak_mib = r.peak_allocated_mib;
  row.baseline_peak_mib = base.peak_allocated_mib;
  row.peak_change_mib = r.peak_allocated_mib - base.peak_allocated_mib;
  row.peak_change_fraction = base.peak_allocated_mib > 0 ? row.peak_change_mib / base.peak_allocated_mib : 0;
  row.forward_increment_mib = r.forward_increment_mib;
  row.first_step_persistent_mib = r.first_step_persistent_mib;
  row.growth_per_step_mib = r.growth_per_step_mib;
  row.final_reserved_mib = r.final_reserved_mib;
  // The host's figures are a process's: compared only where both runs had
  // one of their own (a one-process sweep's later runs carry what earlier
  // ones left in the C library's heap).
  if (r.host_own_process && base.host_own_process) {
    row.host_peak_mib = r.peak_host_resident_mib;
    row.baseline_host_peak_mib = base.peak_host_resident_mib;
    row.host_pinned_peak_mib = r.peak_host_pinned_mib;
  }
  row.ms_per_step = r.ms_per_step;
  row.ms_per_step_min = r.ms_per_step_min;
  row.ms_per_step_max = r.ms_per_step_max;
  if (r.ms_per_step && base.ms_per_step && *base.ms_per_step > 0) row.time_ratio = *r.ms_per_step / *base.ms_per_step;
  std::size_t at = 0;
  row.max_loss_diff = max_loss_diff(r, base, &at);
  if (row.max_loss_diff) {
    row.loss_diff_index = at;
    row.loss_at_diff = r.losses[at];
    row.baseline_loss_at_diff = base.losses[at];
  }
  row.observed = observed_remedies(r, base);
  row.peak_phase = peak_phase(r);
  row.baseline_peak_phase = peak_phase(base);
  const bool autocast_remedy = std::any_of(r.id.remedies.begin(), r.id.remedies.end(),
                                           [](const Remedy& x) { return x.kind == RemedyKind::kAutocastBf16; });
  if (base.model_autocast.empty() && !r.model_autocast.empty()) {
    row.precision = r.model_autocast;
  } else if (autocast_remedy && !std::any_of(base.id.remedies.begin(), base.id.remedies.end(), [](const Remedy& x) {
               return x.kind == RemedyKind::kAutocastBf16;
             })) {
    row.precision = "bfloat16";
  }
  row.loss_tolerance = row.precision == "bfloat16"  ? thresholds::kBf16LossTolerance
                       : row.precision == "float16" ? thresholds::kFp16LossTolerance
                                                    : thresholds::kLossTolerance;
  // Fewer gradients for the same weights, in the baseline's mode: the
  // variant trains fewer of them (frozen layers), whatever its losses
  // show so far. An independent scan's BERT with its embeddings frozen,
  // 12.56 MiB of gradients against 42.37, was within 0.0043% of the
  // baseline's losses over 3 steps and read "measured best remedy".
  // Only a variant of a job of one's own: memory_diagnostics' remedies
  // say by definition what they change.
  if (r.id.remedies.empty() && r.id.mode == base.id.mode && r.id.world_size == base.id.world_size &&
      r.max_gradient_mib && base.max_gradient_mib && *base.max_gradient_mib > 0 &&
      *r.max_gradient_mib < (1 - thresholds::kRemedyReduction) * *base.max_gradient_mib && base.parameter_mib > 0 &&
      std::fabs(r.parameter_mib - base.parameter_mib) <= thresholds::kRemedyReduction * base.parameter_mib) {
    row.gradients_mib = r.max_gradient_mib;
    row.baseline_gradients_mib = base.max_gradient_mib;
  }
  // Weights cast to 16 bits where the baseline's are fp32, in the
  // baseline's mode (a rank's shard of a sharded model reads otherwise).
  if (r.id.remedies.empty() && r.id.mode == base.id.mode && r.id.world_size == base.id.world_size &&
      r.bytes_per_parameter && base.bytes_per_parameter && std::fabs(*r.bytes_per_parameter - 2.0) < 0.01 &&
      std::fabs(*base.bytes_per_parameter - 4.0) < 0.01) {
    row.bytes_per_parameter = r.bytes_per_parameter;
    row.baseline_bytes_per_parameter = base.bytes_per_parameter;
  }
  row.changes_training = row.gradients_mib.has_value() || row.bytes_per_parameter.has_value() ||
                         (row.max_loss_diff ? *row.max_loss_diff > row.loss_tolerance
                                            : std::any_of(r.id.remedies.begin(), r.id.remedies.end(), [](const Remedy& x) {
                                                return definition(x.kind).changes_training;
                                              }));
  row.host_is_device =
      r.id.device_kind == "cpu" &&
      std::any_of(r.id.remedies.begin(), r.id.remedies.end(), [](const Remedy& x) { return definition(x.kind).moves_to_host; });
  if (is_sharded(r.id.mode) && r.step_model_state_mib && base.step_optimizer_state_mib && base.parameter_mib > 0 &&
      (!definition(r.id.mode).splits_layers || r.split_parameter_mib)) {
    row.model_state_mib = r.step_model_state_mib;
    row.formula_mib = model_state_per_rank(r.id.mode, base.parameter_mib, *base.step_optimizer_state_mib / base.parameter_mib,
                                           r.id.world_size, r.split_parameter_mib.value_or(0));
  }
  const auto reduce = [&](RemedyRow& x, Cause cause) {
    x.cause_mib = cause_mib(cause, r);
    x.baseline_cause_mib = cause_mib(cause, base);
    x.baseline_cause_at_failure = false;
    if (!x.baseline_cause_mib && base.status == RunStatus::kOom && base.oom) {
      x.baseline_cause_mib = cause_at_failure(cause, *base.oom);
      x.baseline_cause_at_failure = x.baseline_cause_mib.has_value();
    }
    if (cause == Cause::kRetainedGraph) {
      x.reduces_cause = r.growth_per_step_mib.has_value() && !r.growth_significant;
    } else if (x.cause_mib && x.baseline_cause_mib && *x.baseline_cause_mib > 0) {
      x.reduces_cause = *x.cause_mib < (1 - thresholds::kRemedyReduction) * *x.baseline_cause_mib;
    } else {
      x.reduces_cause = false;
    }
  };
  if (dominant == Cause::kInconclusive && !tied.empty()) {
    // Two consumers within the margin: a row that reduces either reduces
    // the cause, with that one's figures (an independent scan's GPT-2 at
    // batch 1, activations 53.6 against optimizer state 52.7 MiB, read "no"
    // for checkpointing's 53.55 -> 10.03 and sgd's state to nothing).
    for (Cause c : tied) {
      reduce(row, c);
      row.cause = c;
      if (row.reduces_cause) break;
    }
    if (!row.reduces_cause) {
      reduce(row, tied.front());
      row.cause = tied.front();
    }
  } else {
    reduce(row, dominant);
  }
  return row;
}

}  // namespace

std::vector<RemedyRow> remedy_rows(const Group& g, Cause dominant, const std::vector<Cause>& tied) {
  // The baseline run of each configuration, by the variant-baseline key.
  std::map<std::string, const RunFeatures*> baselines;
  for (const RunFeatures& r : g.runs) {
    if (is_baseline_variant(r.id)) baselines.emplace(key(projection::kVariantBaseline, r.id), &r);
  }
  // The variants in the order of their remedies' kinds and their modes,
  // whatever the reports' order; rank 0 stands for its run.
  std::vector<const RunFeatures*> runs;
  for (const RunFeatures& r : g.runs) {
    if (r.id.rank == 0 && !is_baseline_variant(r.id)) runs.push_back(&r);
  }
  std::stable_sort(runs.begin(), runs.end(), [](const RunFeatures* a, const RunFeatures* b) {
    return std::tie(a->id.mode, a->id.remedies, a->id.allocator_settings, a->id.variant_name) <
           std::tie(b->id.mode, b->id.remedies, b->id.allocator_settings, b->id.variant_name);
  });
  std::vector<RemedyRow> rows;
  for (const RunFeatures* r : runs) {
    const auto it = baselines.find(key(projection::kVariantBaseline, r->id));
    if (it != baselines.end()) rows.push_back(row_for(*r, *it->second, dominant, tied));
  }
  return rows;
}

std::optional<std::size_t> best_remedy(const std::vector<RemedyRow>& rows) {
  // Only rows that keep the training (RemedyRow::changes_training: the
  // losses, the gradients, or where the baseline has none the remedy's
  // definition); where every row that reduces the cause changes it, there
  // is no best, and lowest_peak_remedy names the lowest (the JSON's
  // best_remedy named a frozen backbone where the text said none keeps
  // what the model learns).
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const RemedyRow& r = rows[i];
    if (!r.reduces_cause || r.status != RunStatus::kComplete || r.host_is_device || r.changes_training) continue;
    if (!best || r.peak_change_mib < rows[*best].peak_change_mib) best = i;
  }
  return best;
}

std::optional<std::size_t> lowest_peak_remedy(const std::vector<RemedyRow>& rows) {
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const RemedyRow& r = rows[i];
    if (!r.reduces_cause || r.status != RunStatus::kComplete || r.host_is_device) continue;
    if (!best || r.peak_change_mib < rows[*best].peak_change_mib) best = i;
  }
  return best;
}

Group baseline_runs(const Group& g) {
  Group base = g;
  base.runs.clear();
  for (const RunFeatures& r : g.runs) {
    if (is_baseline_variant(r.id)) base.runs.push_back(r);
  }
  return base.runs.empty() ? g : base;
}

}  // namespace detail
}  // namespace memdiag
