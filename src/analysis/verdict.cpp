// diagnose(): the steps of a verdict, in order. Each lives in its own file;
// this one only puts them together.
#include "capacity.hpp"
#include "confirm.hpp"
#include "decide.hpp"
#include "evidence.hpp"
#include "oom.hpp"
#include "parallel_modes.hpp"
#include "remedies.hpp"
#include "sequence_capacity.hpp"
#include "sharded_capacity.hpp"
#include "step_capacity.hpp"
#include "sweeps.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace memdiag {

namespace {

// A recorded job's variant whose label names a remedy (the user's
// variant="checkpointing", "sgd-momentum"): a part of it, between '+',
// that starts with the remedy's name. It was measured, whatever the
// label's ending; it is not listed as not measured (a hostile check was
// told to try the checkpointing it had just compared).
bool label_names(const std::string& given, RemedyKind k);

bool variant_names(const RemedyRow& r, RemedyKind k) {
  if (!r.remedies.empty()) return false;
  return label_names(r.remedy, k);
}

bool label_names(const std::string& given, RemedyKind k) {
  const std::string name = to_string(k);
  std::string label = given;
  std::transform(label.begin(), label.end(), label.begin(), [](unsigned char c) { return std::tolower(c); });
  // A part of the label (between '+'s) names the remedy where the name
  // starts it or one of its words: "checkpointing", and the docs' own
  // "grad-checkpointing", name checkpoint.
  std::size_t start = 0;
  while (start <= label.size()) {
    const std::size_t end = std::min(label.find('+', start), label.size());
    for (std::size_t at = label.find(name, start); at != std::string::npos && at + name.size() <= end;
         at = label.find(name, at + 1)) {
      if (at == start) return true;
      if (label[at - 1] != '-' && label[at - 1] != '_') continue;
      // Not where the word before negates it ("no-checkpoint": the run
      // without it).
      const std::size_t sep = at - 1;
      std::size_t from = sep;
      while (from > start && label[from - 1] != '-' && label[from - 1] != '_') --from;
      const std::string before = label.substr(from, sep - from);
      if (before != "no" && before != "without" && before != "non" && before != "off") return true;
    }
    start = end + 1;
  }
  return false;
}

}  // namespace

Verdict diagnose(const Group& group, const std::set<std::string>& taken, const std::vector<double>& budgets_mib,
                 const std::vector<int>& world_sizes) {
  Verdict v;
  v.case_name = group.case_name;
  v.group_key = group.key;
  v.group_label = group.label;
  if (group.runs.empty()) return v;
  // The cause is read from the runs without remedies; the others are
  // measured against them.
  const Group g = detail::baseline_runs(group);
  // Every rank set of the group, the baseline's first: a variant's ranks
  // can be out of balance where the baseline's are not
  // (ZeroRedundancyOptimizer splits its state by whole parameters: 32.02
  // and 8.20 MiB on two ranks, unseen beside DDP's even ranks).
  v.distributed = detail::distributed_views(group);
  std::stable_partition(v.distributed.begin(), v.distributed.end(),
                        [](const DistributedView& d) { return d.variant == "none"; });

  const RunFeatures& p = detail::pick_primary(g);
  v.primary_source = p.source;
  v.primary_device_kind = p.id.device_kind;
  v.primary_producer = p.id.producer;
  v.primary_mode = p.id.mode;
  v.primary_world_size = p.id.world_size;
  if (p.id.mode == ParallelMode::kZero1) {
    // An independent check's tied embedding left 31.25 MiB on rank 0 and
    // 1.58 on rank 1.
    for (const DistributedView& d : v.distributed) {
      const RankRow* most = nullptr;
      const RankRow* least = nullptr;
      for (const RankRow& r : d.ranks) {
        if (!r.first_step_excess_mib) continue;
        if (!most || *r.first_step_excess_mib > *most->first_step_excess_mib) most = &r;
        if (!least || *r.first_step_excess_mib < *least->first_step_excess_mib) least = &r;
      }
      if (most && least && most != least && *most->first_step_excess_mib >= 2 * *least->first_step_excess_mib &&
          *most->first_step_excess_mib - *least->first_step_excess_mib >= thresholds::kMinimumSignalMib) {
        v.uneven_state = Verdict::UnevenState{*most, *least};
        break;
      }
    }
  }
  v.components = components_of(p);
  v.sweeps = detail::collect_sweeps(g, p);
  v.decision = detail::decide(p, v.components);
  if (v.decision.rule == DecisionRule::kOutOfMemory) {
    // The failing phase decides; the steps that completed add their trend.
    v.dominant = detail::oom_cause(p);
    v.evidence.push_back(detail::oom_evidence(p, v.dominant));
    if (p.growth_per_step_mib) v.evidence.push_back(detail::trend(p, false));
  } else {
    const bool decided = v.decision.rule == DecisionRule::kDominant || v.decision.rule == DecisionRule::kGrowsEveryStep ||
                         v.decision.rule == DecisionRule::kDominantAtPeak;
    v.dominant = decided ? v.decision.top->cause : Cause::kInconclusive;
    v.evidence = detail::cause_evidence(v.dominant, p, v.sweeps, v.confirmed, budgets_mib);
  }
  for (Evidence& e : detail::general_evidence(v.dominant, p)) v.evidence.push_back(std::move(e));
  v.kept_tensors_not_graphs =
      v.dominant == Cause::kRetainedGraph && detail::kept_tensors_explaining_growth(p).has_value();
  // Kept tensors a step that are a whole number of copies of the
  // parameters (an independent check's list of every p.grad.clone(): 73
  // tensors of the parameters' shapes, 14.52 MiB a step, its weights'
  // size, were told to be a cache keyed by the input's shape).
  if (v.dominant == Cause::kRetainedGraph && p.held_parameter_mib >= thresholds::kMinimumSignalMib) {
    double copies_mib = 0;
    for (const KeptRecord& k : p.kept) {
      if (k.what == KeptRecord::What::kTensor && !k.held_steps && !k.grad_fn && !k.made_by && !k.grows) {
        copies_mib += k.mib_per_step;
      }
    }
    const double copies = std::round(copies_mib / p.held_parameter_mib);
    if (copies >= 1 && std::fabs(copies_mib - copies * p.held_parameter_mib) <= 0.02 * p.held_parameter_mib) {
      v.kept_parameter_copies = static_cast<std::int64_t>(copies);
      v.kept_parameter_copies_mib = copies_mib;
    }
  }
  // New parameters and their state at every cleanup, half the growth or
  // more: what the step keeps is weights, not a graph.
  if (v.dominant == Cause::kRetainedGraph && p.cleanup_parameters_grew_steps > 0) {
    const double steps = p.cleanup_parameters_grew_steps;
    const double parameters = p.cleanup_parameters_grew_mib / steps;
    const double state = p.cleanup_state_grew_with_parameters_mib / steps;
    if (parameters + state >= 0.5 * p.growth_per_step_mib.value_or(0)) {
      v.parameters_made_per_step_mib = parameters;
      v.state_made_per_step_mib = state;
      v.kept_tensors_not_graphs = false;
    }
  }
  v.warnings = detail::collect_warnings(p, g.runs, v.distributed, detail::rank_set_warnings(g));
  v.confirm = detail::confirming_runs(v.decision, v.dominant, v.confirmed, g, p, taken);
  v.math_attention = p.model_attention == "math";
  if (!p.model_autocast.empty()) {
    v.lower_precision = "autocast to " + p.model_autocast;
  } else if (p.bytes_per_parameter && std::fabs(*p.bytes_per_parameter - 2.0) < 0.01 &&
             !definition(p.config.parallel.mode).shards_parameters && p.config.parallel.mode != ParallelMode::kTensor) {
    // Two bytes a parameter: 16-bit weights. Not where a rank's bytes are
    // its shard of the whole model's parameters (a fully sharded rank's
    // fp32 shard of two reads 2.0), nor below (8- or 4-bit weights).
    v.lower_precision = "16-bit weights";
  }
  {
    const bool remedy = std::any_of(p.config.remedies.begin(), p.config.remedies.end(),
                                    [](const Remedy& r) { return r.kind == RemedyKind::kCheckpoint; });
    if (p.model_checkpointing) {
      v.checkpointing_taken = "on in the model, as the recorder saw it";
      // Half of the forward's increment still saved outside the regions:
      // more of the activations are left out than were taken in.
      // Against what the forward made: its increment, and what the loop
      // held of the step before that it freed (ForwardIncrement's made_mib).
      if (p.model_checkpoint_outside_mib && p.forward_increment_mib) {
        const double made =
            *p.forward_increment_mib + evidence::held_beyond_inputs(p.held_over_mib, p.forward_input_mib);
        if (made > 0 && *p.model_checkpoint_outside_mib >= 0.5 * made) {
          v.checkpointing_outside_mib = p.model_checkpoint_outside_mib;
        }
      }
    } else if (remedy) {
      v.checkpointing_taken = "--remedy checkpoint";
    } else if (!p.id.variant_name.empty() && label_names(p.id.variant_name, RemedyKind::kCheckpoint)) {
      v.checkpointing_taken = "its variant, \"" + p.id.variant_name + "\"";
    }
  }
  if (p.model_outside_parameters_mib && *p.model_outside_parameters_mib >= thresholds::kMinimumSignalMib) {
    v.outside_parameters_mib = p.model_outside_parameters_mib;
  }
  v.capacity = detail::predict_capacity(g, p, budgets_mib);
  detail::add_expandable_searches(v.capacity, group, p);
  if (p.config.batch_assumed) v.capacity.clear();  // a batch nobody saw bounds nothing
  if (v.decision.rule == DecisionRule::kOutOfMemory &&
      (v.dominant == Cause::kFragmentation || v.dominant == Cause::kAllocatorCache)) {
    // The memory was there: a run that ran out in pieces bounds nothing
    // about the batch.
    v.capacity.erase(std::remove_if(v.capacity.begin(), v.capacity.end(),
                                    [](const CapacityPrediction& c) { return c.needs_more_than_mib.has_value(); }),
                     v.capacity.end());
  }
  v.sequence_capacity = detail::predict_sequence_capacity(g, p, budgets_mib);
  v.step_capacity = detail::predict_step_capacity(p, budgets_mib);
  if (!v.step_capacity.empty() && p.id.producer != kProducerDiagnostics) {
    // The steps' sizes speak for themselves: a recorded loop's batch is
    // step 0's, not what the steps were given. memory_diagnostics' batch
    // is the configuration its schedule scales, and its prediction stands.
    v.capacity.erase(std::remove_if(v.capacity.begin(), v.capacity.end(),
                                    [](const CapacityPrediction& c) { return !c.searched && !c.needs_more_than_mib; }),
                     v.capacity.end());
  }
  v.sharded_capacity = detail::predict_sharded_capacity(g, p, budgets_mib, world_sizes);
  std::vector<Cause> tied;
  if (v.dominant == Cause::kInconclusive && v.decision.rule == DecisionRule::kTooClose && v.decision.top &&
      v.decision.runner_up) {
    tied = {v.decision.top->cause, v.decision.runner_up->cause};
  }
  v.remedies = detail::remedy_rows(group, v.dominant, tied);
  v.parallel_modes = detail::mode_rows(group);
  v.best_remedy = detail::best_remedy(v.remedies);
  v.lowest_peak_remedy = detail::lowest_peak_remedy(v.remedies);
  if (!v.remedies.empty()) {
    // A remedy that needs something of the model (spelt-out attention) is
    // suggested where a run's report says its model had it.
    const bool math_attention = std::any_of(group.runs.begin(), group.runs.end(),
                                            [](const RunFeatures& r) { return r.model_attention == "math"; });
    for (RemedyKind k : remedies_answering(v.dominant)) {
      if (definition(k).needs_math_attention && !math_attention) continue;
      // Taken already: the run to compare is the one without it, not with.
      if (k == RemedyKind::kCheckpoint && !v.checkpointing_taken.empty()) continue;
      if ((k == RemedyKind::kBf16 || k == RemedyKind::kAutocastBf16) && !v.lower_precision.empty()) continue;
      const bool measured = std::any_of(v.remedies.begin(), v.remedies.end(), [k](const RemedyRow& r) {
        return find_remedy(r.remedies, k).has_value() || variant_names(r, k) ||
               std::find(r.observed.begin(), r.observed.end(), k) != r.observed.end();
      });
      if (!measured) v.remedies_not_measured.push_back(k);
    }
    for (ParallelMode m : modes_answering(v.dominant)) {
      // memory_diagnostics splits an MLP's layers only: its transformer runs
      // are not told to (another producer's job is, as the change to make).
      if (definition(m).splits_layers && p.id.producer == kProducerDiagnostics && !p.model_attention.empty()) continue;
      const bool measured =
          std::any_of(v.remedies.begin(), v.remedies.end(), [m](const RemedyRow& r) { return r.mode == m; });
      if (!measured) v.modes_not_measured.push_back(m);
    }
  }
  return v;
}

}  // namespace memdiag
