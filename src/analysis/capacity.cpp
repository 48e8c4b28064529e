// Capacity in a verdict: the largest batch of the primary run's
// configuration that fits each budget, from the capacity model over the
// group's runs of that configuration (projection::kBatchSweep), or over a
// --find-max-batch's tries for the same budget.
#include "capacity.hpp"

#include <cmath>

namespace memdiag {

const char* to_string(CapacityPrediction::Budget b) {
  switch (b) {
    case CapacityPrediction::Budget::kGiven: return "given";
    case CapacityPrediction::Budget::kMemoryLimit: return "memory_limit";
    case CapacityPrediction::Budget::kDevice: return "device";
  }
  return nullptr;  // past the last value: all_values() stops here
}

namespace detail {
namespace {

// A search in the group over the same configuration and budget (within
// half a MiB: limits are given in whole MiB, device budgets are measured).
const RunFeatures* search_for(const Group& g, const RunFeatures& p, double budget) {
  for (const RunFeatures& r : g.runs) {
    if (r.capacity_search && same(projection::kBatchSweep, r.id, p.id) &&
        std::fabs(r.capacity_search->limit_mib - budget) <= 0.5) {
      return &r;
    }
  }
  return nullptr;
}

// A search of p's configuration for this budget under expandable segments,
// where p's allocator runs without them: the same case, device, world,
// limit, preset, steps and sequence, its remedies p's and that one.
const RunFeatures* expandable_search_for(const Group& g, const RunFeatures& p, double budget) {
  if (expandable_segments_on(p.config.allocator_settings)) return nullptr;
  for (const RunFeatures& r : g.runs) {
    if (!r.capacity_search || std::fabs(r.capacity_search->limit_mib - budget) > 0.5 ||
        !expandable_segments_on(r.config.allocator_settings) || !same(projection::kVerdictPool, r.id, p.id) ||
        r.config.preset != p.config.preset || r.config.steps != p.config.steps ||
        r.config.sequence_length != p.config.sequence_length) {
      continue;
    }
    std::vector<Remedy> rest;
    for (const Remedy& x : r.config.remedies) {
      if (x.kind != RemedyKind::kExpandableSegments) rest.push_back(x);
    }
    if (rest == p.config.remedies) return &r;
  }
  return nullptr;
}

// The replay's answer in place of the lines': the largest batch it surely
// fits, and where the one above it fails.
void replay_answer(CapacityPrediction& c, const ScaledTrace& t, const RunFeatures& p, double budget) {
  std::int64_t limit = 0;
  if (t.caching) {
    if (!p.device_total_mib || !(*p.device_total_mib > 0)) {
      c.replay_unusable = "the report does not say the device's size, which a limit is a fraction of";
      return;
    }
    limit = cuda_limit_bytes(budget, *p.device_total_mib);
  } else {
    limit = static_cast<std::int64_t>(budget * kMiB);
  }
  c.replay = replay_capacity(t, budget, limit);
  c.answer.max_batch = c.replay->max_batch;
  if (!c.replay->failure.completed) {
    c.answer.binding.phase = c.replay->failure.phase;
    c.answer.binding.piece = PhaseLine::Piece::kWhole;
  }
  c.answer.capped_by_oom.reset();
  c.answer.raised_by_run.reset();
  c.answer.extrapolation = t.batch > 0 ? static_cast<double>(c.answer.max_batch) / static_cast<double>(t.batch) : 1;
}

}  // namespace

// Every run of the configuration, and the tries of any search of it (a
// search under another limit measured the same peaks).
std::vector<CapacityPoint> batch_points(const Group& g, const RunFeatures& p) {
  std::vector<CapacityPoint> out;
  for (const RunFeatures& r : g.runs) {
    if (!same(projection::kBatchSweep, r.id, p.id)) continue;
    if (r.capacity_search) {
      for (CapacityPoint& t : capacity_points(*r.capacity_search, r.source)) out.push_back(std::move(t));
    }
    out.push_back(r.capacity_point);
  }
  return out;
}

std::vector<std::pair<double, CapacityPrediction::Budget>> capacity_budgets(const RunFeatures& p,
                                                                           const std::vector<double>& budgets_mib) {
  std::vector<std::pair<double, CapacityPrediction::Budget>> budgets;
  for (double b : budgets_mib) budgets.emplace_back(b, CapacityPrediction::Budget::kGiven);
  if (budgets.empty()) {
    if (p.config.memory_limit_mib) {
      budgets.emplace_back(*p.config.memory_limit_mib, CapacityPrediction::Budget::kMemoryLimit);
    } else if (p.device_total_mib && p.device_minus_reserved_mib) {
      // What the allocator can have: the device less what sits outside it
      // (the CUDA context, libraries, other processes) as measured.
      budgets.emplace_back(*p.device_total_mib - *p.device_minus_reserved_mib, CapacityPrediction::Budget::kDevice);
    } else if (p.capacity_point.status == RunStatus::kOom && p.capacity_point.budget_mib) {
      // The limit the run ran out under, as the allocator's refusal gave it.
      budgets.emplace_back(*p.capacity_point.budget_mib, CapacityPrediction::Budget::kMemoryLimit);
    }
  }
  return budgets;
}

std::vector<CapacityPrediction> predict_capacity(const Group& g, const RunFeatures& p,
                                                 const std::vector<double>& budgets_mib) {
  const auto budgets = capacity_budgets(p, budgets_mib);
  std::vector<CapacityPrediction> out;
  const std::vector<CapacityPoint> runs = batch_points(g, p);
  const std::optional<CapacityFit> fit = fit_capacity(runs);
  for (const auto& [budget, source] : budgets) {
    CapacityPrediction c;
    c.source = source;
    c.preset = p.config.preset;
    c.steps = p.config.steps;
    c.sequence_length = p.config.sequence_length;
    c.micro_batches = p.micro_batches;
    if (p.forward_range && !p.sizes_varied()) c.largest_inputs_step = p.forward_range->most_step;
    c.primary_batch = p.local_batch;
    if (p.id.world_size > 1) c.rank = p.id.rank;
    const RunFeatures* search = search_for(g, p, budget);
    // Beside a search for this budget: the search's own prediction, from its
    // tries (and the fresh run of an answer it never tried itself: the same
    // points the search fitted), so that the two never disagree without a
    // reason.
    std::optional<CapacityFit> own;
    bool with_answer = false;
    if (search != nullptr) {
      own = fit_capacity(search_capacity_points(*search->capacity_search, search->capacity_point, search->source,
                                                &with_answer));
    }
    const std::optional<CapacityFit>& used = own ? own : fit;
    if (!used) {
      // Nothing completed: the run that ran out bounds the answer.
      const CapacityPoint& oom = p.capacity_point;
      if (oom.status == RunStatus::kOom && oom.needed_mib && oom.budget_mib && budget <= *oom.budget_mib + 0.5 &&
          p.local_batch > 0) {
        c.answer.budget_mib = budget;
        // Before the first batch (the model, the optimizer) no batch fits.
        c.answer.max_batch = oom.failed_phase && is_setup_phase(*oom.failed_phase) ? 0 : p.local_batch - 1;
        c.answer.capped_by_oom = p.local_batch;
        c.answer.extrapolation = 0;
        if (oom.failed_phase) c.answer.binding.phase = *oom.failed_phase;
        c.needs_more_than_mib = oom.needed_mib;
        c.failed_phase = oom.failed_phase;
        c.primary_needs_mib = *oom.needed_mib;
        out.push_back(std::move(c));
      }
      continue;
    }
    c.from_search = own.has_value();
    c.fitted_answer_run = c.from_search && with_answer;
    c.answer = predict_max_batch(*used, budget, !c.from_search);
    if (c.micro_batches > 1 && c.answer.max_batch >= c.micro_batches) {
      // In whole micro-batches, as the run's steps were: a step of 62 in 4
      // is micro-batches of 16 and 15, and the 16 binds (an independent
      // check's Llama: 62 said, 60 fits).
      c.answer.max_batch -= c.answer.max_batch % c.micro_batches;
    }
    c.primary_needs_mib = needed_mib(*used, p.local_batch);
    c.lines_max_batch = c.answer.max_batch;
    c.replay_unusable = p.trace_unusable;
    if (!c.from_search && p.scaled_trace) replay_answer(c, *p.scaled_trace, p, budget);
    if (c.replay) {
      // The replay's answer stands on the allocator's own rules: the range
      // of a line through one run says nothing of it.
      CapacityAnswer::Caveats& cv = c.answer.caveats;
      cv.batch_if_all_grows.reset();
      cv.batch_if_activations_grow.reset();
      cv.low_end_unknown.reset();
    }
    if (c.answer.caveats.one_run && !c.replay && c.answer.extrapolation >= 2 && p.config.device.rfind("cuda", 0) == 0 &&
        !expandable_segments_on(p.config.allocator_settings)) {
      c.answer.caveats.default_allocator_extrapolated = c.answer.extrapolation;
    }
    if (search != nullptr) {
      const CapacitySearch& s = *search->capacity_search;
      c.searched = CapacityPrediction::Searched{s.max_batch, s.first_failing_batch, s.confirmed, search->source,
                                               s.replayed_max_batch};
    }
    out.push_back(std::move(c));
  }
  return out;
}

void add_expandable_searches(std::vector<CapacityPrediction>& predictions, const Group& whole, const RunFeatures& p) {
  for (CapacityPrediction& c : predictions) {
    if (!c.searched) continue;
    if (const RunFeatures* e = expandable_search_for(whole, p, c.answer.budget_mib)) {
      const CapacitySearch& x = *e->capacity_search;
      c.searched_expandable =
          CapacityPrediction::Searched{x.max_batch, x.first_failing_batch, x.confirmed, e->source, x.replayed_max_batch};
    }
  }
}

}  // namespace detail
}  // namespace memdiag
