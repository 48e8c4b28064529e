// The capacity prediction in words: the largest batch, the phase that binds
// and what it is made of, the batches it was fitted on and what it assumes.
#include "memdiag/format.hpp"
#include "memdiag/limits.hpp"
#include "memdiag/render.hpp"

#include <cmath>

namespace memdiag {
namespace {

std::string mib(double v) { return format_mib(v) + " MiB"; }

std::string batches_word(const std::vector<std::int64_t>& b) {
  if (b.size() > 4) {
    return std::to_string(b.size()) + " batches from " + std::to_string(b.front()) + " to " + std::to_string(b.back());
  }
  std::string s;
  for (std::size_t i = 0; i < b.size(); ++i) {
    s += (i == 0 ? "" : i + 1 == b.size() ? " and " : ", ") + std::to_string(b[i]);
  }
  return (b.size() == 1 ? "batch " : "batches ") + s;
}

std::string budget_words(CapacityPrediction::Budget source, double budget_mib) {
  switch (source) {
    case CapacityPrediction::Budget::kGiven: return "a budget of " + mib(budget_mib);
    case CapacityPrediction::Budget::kMemoryLimit: return "the run's memory limit of " + mib(budget_mib);
    case CapacityPrediction::Budget::kDevice: return "the device's " + mib(budget_mib) + " left to the allocator";
  }
  return {};
}
std::string budget_words(const CapacityPrediction& c) { return budget_words(c.source, c.answer.budget_mib); }

std::string lengths_word(const std::vector<std::int64_t>& l) {
  std::string s;
  for (std::size_t i = 0; i < l.size(); ++i) s += (i == 0 ? "" : i + 1 == l.size() ? " and " : ", ") + std::to_string(l[i]);
  return "lengths " + s;
}

// What the answer takes for granted, and how far it reaches.
std::string caveat_words(const CapacityAnswer& a) {
  const CapacityAnswer::Caveats& c = a.caveats;
  std::vector<std::string> parts;
  if (c.one_run && a.max_batch > 0) {
    std::string one = "extrapolated " + format_times(a.extrapolation) + " from one run";
    const bool capped = c.batch_if_activations_grow && *c.batch_if_activations_grow >= limits::kMaxBatch;
    const std::string high = !c.batch_if_activations_grow ? std::string()
                             : capped ? "the largest batch memdiag runs (" + std::to_string(limits::kMaxBatch) + ")"
                                      : std::to_string(*c.batch_if_activations_grow);
    const std::string high_why =
        (c.activations_mib ? " (if only the " + mib(*c.activations_mib) + " forward held for backward grew"
                           : " (if only what the line says grows did") +
        std::string(" and the allocator gave back its reserve)");
    if (c.batch_if_all_grows && c.batch_if_activations_grow && *c.batch_if_activations_grow > *c.batch_if_all_grows &&
        *c.batch_if_all_grows < limits::kMaxBatch) {
      one += ", which puts it between " + std::to_string(*c.batch_if_all_grows) + " (if the allocator's " +
             mib(c.reserve_grows_mib.value_or(0)) + " beyond its tensors grew with the batch too) and " + high +
             (capped ? std::string() : high_why) + ", 2% either side";
    } else if (c.low_end_unknown && c.batch_if_activations_grow) {
      one += ", which puts it at or below " + high + (capped ? std::string() : high_why) +
             "; how far below cannot be told from a run with room to spare: its steps " +
             (*c.low_end_unknown == "sizes_varied" ? std::string("varied in size") : "kept more memory step by step") +
             ", and under a budget the allocator strands blocks between their tensors (a run at the budget measures it)";
    }
    parts.push_back(one);
  }
  if (c.backward_start_assumed) {
    parts.push_back("backward's start was no run's peak, so what it adds above the activations is assumed");
  }
  if (c.reserve_min_mib && c.reserve_max_mib && *c.reserve_max_mib > 2 * *c.reserve_min_mib + 1) {
    parts.push_back("the allocator reserved " + format_mib(*c.reserve_min_mib) + " to " + mib(*c.reserve_max_mib) +
                    " beyond its tensors across these runs, which alone puts the answer between " +
                    std::to_string(c.batch_at_max_reserve.value_or(0)) + " and " +
                    std::to_string(c.batch_at_min_reserve.value_or(0)) + " (the largest run's figure is kept out)");
  }
  if (c.batch_if_superlinear) {
    parts.push_back("the runs' peaks grow faster than the batch (the middle of the three largest lies over 5% below "
                    "the line through the other two), and a curve through them puts the answer at " +
                    std::to_string(*c.batch_if_superlinear) + ", which these straight lines over-predict");
  }
  if (c.default_allocator_extrapolated) {
    parts.push_back("the blocks that follow the batch are " + format_times(*c.default_allocator_extrapolated).substr(1) +
                    " times the run's there, and how much the default allocator strands between them one run cannot show "
                    "(expandable segments, PYTORCH_ALLOC_CONF=expandable_segments:True, leave far less stranded)");
  }
  if (c.trapped_at_oom_mib) {
    std::string held = "a run that ran out held " + mib(*c.trapped_at_oom_mib) +
                       " reserved but unallocated: fragmentation, which these lines do not model";
    if (c.batch_if_trapped && *c.batch_if_trapped < a.max_batch) {
      held += " (that much held unusable puts the answer at " + std::to_string(*c.batch_if_trapped) + ")";
    }
    parts.push_back(held);
  }
  if (parts.empty()) return {};
  std::string s = "; it may be off: ";
  for (std::size_t i = 0; i < parts.size(); ++i) s += (i ? "; " : "") + parts[i];
  return s + " (a run near batch " + std::to_string(a.max_batch) + " checks it)";
}

}  // namespace

std::string describe_phase_line(const PhaseLine& l) {
  if (l.piece == PhaseLine::Piece::kEvaluation) {
    return "the forwards that train nothing (an evaluation between steps" +
           (l.evaluation_samples ? ", " + std::to_string(*l.evaluation_samples) + " samples" : std::string()) +
           ", whatever the training batch)";
  }
  std::string phase;
  switch (l.phase) {
    case Phase::kSetup: phase = "the warm-up"; break;
    case Phase::kModelReady: phase = "moving the model to the device"; break;
    case Phase::kOptimizerReady: phase = "building the optimizer"; break;
    case Phase::kForward:
      phase = l.piece == PhaseLine::Piece::kNode ? "forward at its span " + std::to_string(l.node) + " of " +
                                                       std::to_string(l.nodes) + " (" + l.node_name + ")"
                                                 : std::string("forward");
      break;
    case Phase::kBackward:
      switch (l.piece) {
        case PhaseLine::Piece::kWhole: phase = "backward"; break;
        case PhaseLine::Piece::kStart: phase = "backward at its start (activations held)"; break;
        case PhaseLine::Piece::kEnd: phase = "backward at its end (every gradient made)"; break;
        case PhaseLine::Piece::kNode:
          phase = "backward at its node " + std::to_string(l.node) + " of " + std::to_string(l.nodes) + " (" +
                  l.node_name + ")";
          break;
        case PhaseLine::Piece::kEvaluation: break;  // said above
      }
      break;
    case Phase::kStep: phase = "step()"; break;
    case Phase::kCleanup: phase = "cleanup"; break;
  }
  return phase;
}

std::string describe_fixed_part(const PhaseLine& l) {
  std::string parts;
  if (l.tensors) {
    parts = "weights " + format_mib(l.tensors->parameters_mib);
    if (l.tensors->gradients_mib > 0) parts += ", gradients " + format_mib(l.tensors->gradients_mib);
    if (l.gradients_mib >= 0.005) parts += ", gradients made by then " + format_mib(l.gradients_mib);
    // A temporary of the node's own taken as fixed (its kernel's workspace,
    // far larger than the gradients it works on).
    if (l.temporary_mib >= 0.005) parts += ", its own workspace " + format_mib(l.temporary_mib);
    if (l.tensors->optimizer_state_mib > 0) parts += ", optimizer state " + format_mib(l.tensors->optimizer_state_mib);
    if (l.held_mib >= 0.005) parts += ", held by the loop at every step " + format_mib(l.held_mib);
    if (l.other_mib >= 0.005) {
      parts += std::string(", ") + (l.phase == Phase::kStep ? "its temporaries " : "the rest ") + format_mib(l.other_mib);
    }
  }
  return mib(l.fixed_mib) + (parts.empty() ? std::string() : " (" + parts + ")");
}

// "sequence length 256, ": the configuration's, where it has one.
std::string length_words(const CapacityPrediction& c) {
  return c.sequence_length ? "sequence length " + std::to_string(*c.sequence_length) + ", " : std::string();
}

// A rank's own batch, where the prediction is of a rank of several (a
// launch whose rank 0 carries more samples: 13884 read as every rank's).
std::string rank_words(const CapacityPrediction& c) {
  return c.rank ? " rank " + std::to_string(*c.rank) + " (its own batch)" : std::string();
}

// The replay's answer: what it stood on, where the batch above it fails,
// and how far the lines alone would have put it.
std::string describe_replay(const CapacityPrediction& c) {
  const ReplayCapacity& r = *c.replay;
  const CapacityAnswer& a = c.answer;
  std::string s = "within " + budget_words(c) + " the largest batch predicted to fit" + rank_words(c) + " is ";
  if (r.max_batch == 0) {
    s = "within " + budget_words(c) + " not even one sample fits";
  } else if (r.max_batch >= limits::kMaxBatch) {
    s += "at least " + std::to_string(r.max_batch) + " (the largest batch memdiag runs)";
  } else {
    s += std::to_string(r.max_batch);
    if (r.max_batch_if_held > r.max_batch) s += ", and up to " + std::to_string(r.max_batch_if_held);
  }
  s += " at preset " + c.preset + ", " + length_words(c) + std::to_string(c.steps) + (c.steps == 1 ? " step" : " steps") +
       ", replaying the allocator over the run's requests (traced at batches " + std::to_string(r.traced_batch) + " and " +
       std::to_string(r.other_batch);
  if (r.staging_buffers > 0 && r.staging_cap) {
    s += "; " + std::to_string(r.staging_buffers) + " reductions' staging buffers growing up to " + mib(to_mib(*r.staging_cap)) +
         " as measured on this device";
  }
  s += ")";
  if (r.max_batch_if_held > r.max_batch) {
    s += "; the gap is " + std::to_string(r.workspaces) + " workspaces of the kernels' own choosing (the largest " +
         mib(to_mib(r.workspace_bytes)) + " at batch " + std::to_string(r.traced_batch) +
         "): grown with the batch they allow the first, held at their traced size the second (a run at batch " +
         std::to_string(r.max_batch_if_held) + " or --find-max-batch settles it)";
  }
  if (!r.failure.completed && r.max_batch < limits::kMaxBatch) {
    const ReplayState& f = r.failure.at_failure;
    s += "; batch " + std::to_string(r.max_batch + 1) + " runs out in " + to_string(r.failure.phase) +
         (r.failure.step ? " of step " + std::to_string(*r.failure.step) : std::string()) + ", asking for " +
         mib(to_mib(r.failure.request)) + " with " + mib(to_mib(f.allocated)) + " allocated and " + mib(to_mib(f.reserved)) +
         " reserved";
    if (r.stranded_bytes > 0) {
      s += ", " + mib(to_mib(r.stranded_bytes)) + " of it free in " + std::to_string(f.free_blocks) +
           " pieces, the largest " + mib(to_mib(f.largest_free_block)) + ", inside segments still in use";
    }
  }
  if (c.lines_max_batch != a.max_batch && c.lines_max_batch > 0) {
    s += "; lines through the run's phases would have said " + std::to_string(c.lines_max_batch);
  }
  return s;
}

std::string describe(const CapacityPrediction& c) {
  if (c.replay) return describe_replay(c);
  const CapacityAnswer& a = c.answer;
  const PhaseLine& b = a.binding;
  std::string fit = "fitted on " + batches_word(a.fitted_batches) +
                    (c.fitted_answer_run ? " (the search's tries and the fresh run of its answer, its own prediction)"
                     : c.from_search     ? " (the search's tries, its own prediction)"
                                         : std::string());
  if (a.reserve_overhead_mib > 0) fit += ", less " + mib(a.reserve_overhead_mib) + " the allocator reserved beyond its tensors";
  fit += caveat_words(a);
  if (!c.replay_unusable.empty()) fit += "; the run's allocation trace was not replayed: " + c.replay_unusable;
  std::string bounds;
  if (a.capped_by_oom) bounds = "; batch " + std::to_string(*a.capped_by_oom) + " ran out of memory within it, so no more";
  if (a.raised_by_run) bounds = "; batch " + std::to_string(*a.raised_by_run) + " completed within it, so at least that";
  std::string primary;
  if (c.primary_batch > a.max_batch) {
    primary = "; batch " + std::to_string(c.primary_batch) + " as run needs " + mib(c.primary_needs_mib);
  }
  std::string searched;
  if (c.searched) {
    const auto& s = *c.searched;
    searched = "; the search in " + s.source + " found " + std::to_string(s.max_batch) +
               (s.first_failing_batch ? " (" + std::to_string(*s.first_failing_batch) + " runs out" : " (no limit reached") +
               (s.confirmed ? (*s.confirmed ? ", confirmed in fresh processes)" : ", NOT confirmed in fresh processes)")
                            : ")");
    // How far the prediction is from what a search found.
    const auto against = [&](std::int64_t found) {
      const double off = 100.0 * static_cast<double>(a.max_batch - found) / static_cast<double>(found);
      return ": the prediction is " + format_fixed(std::fabs(off), 1) + "% " + (off >= 0 ? "above" : "below") + " it";
    };
    if (s.max_batch > 0) searched += against(s.max_batch);
    // The search's own answer from one traced try, which fresh processes
    // then checked: where the lines through its tries miss (memory the
    // allocator strands under the limit), the replay models it.
    if (s.replayed && s.max_batch > 0) {
      const double off = 100.0 * static_cast<double>(*s.replayed - s.max_batch) / static_cast<double>(s.max_batch);
      searched += "; its traced try, replaying the allocator at the budget, had answered " + std::to_string(*s.replayed) +
                  (*s.replayed == s.max_batch ? " (the answer itself)"
                                              : " (" + format_fixed(std::fabs(off), 1) + "% " +
                                                    (off >= 0 ? "above" : "below") + " it)");
    }
    if (c.searched_expandable && c.searched_expandable->max_batch > 0) {
      // The referee: where the default allocator stranded memory, the
      // search under expandable segments finds what the lines describe.
      const auto& e = *c.searched_expandable;
      searched += "; under expandable segments the search in " + e.source + " found " + std::to_string(e.max_batch) +
                  (e.confirmed && *e.confirmed ? " (confirmed in fresh processes)" : "") + against(e.max_batch);
      if (s.max_batch > 0 && e.max_batch > s.max_batch) {
        searched += ", and the " + std::to_string(e.max_batch - s.max_batch) + " samples between the two searches (" +
                    format_fixed(100.0 * static_cast<double>(e.max_batch - s.max_batch) / static_cast<double>(e.max_batch), 1) +
                    "% of it) are what the default allocator's stranded memory costs at this budget";
      }
    }
  }
  if (c.needs_more_than_mib) {
    // Bounds only: no run completed to fit.
    const std::string failed = c.failed_phase ? std::string(to_string(*c.failed_phase)) : std::string("a phase");
    if (a.max_batch == 0) {
      return "within " + budget_words(c) + " not even one sample fits: " + failed + " ran out before any batch, " +
             "needing more than " + mib(*c.needs_more_than_mib) + " (in use at the failure and the request refused)";
    }
    return "within " + budget_words(c) + " the largest batch is below " + std::to_string(c.primary_batch) +
           ", which ran out there; batch " + std::to_string(c.primary_batch) + " needs more than " +
           mib(*c.needs_more_than_mib) + " (in use at the failure and the request refused; what " + failed +
           " had left to make and the phases after it never ran); no run completed to fit a line to";
  }
  if (a.max_batch == 0) {
    return "within " + budget_words(c) + " not even one sample fits: " + describe_phase_line(b) + " needs " +
           describe_fixed_part(b) + " however small the batch (" + fit + ")" + primary + searched;
  }
  return "within " + budget_words(c) + " the largest batch predicted to fit" + rank_words(c) + " is " +
         (a.max_batch >= limits::kMaxBatch ? "at least " + std::to_string(a.max_batch) + " (the largest batch memdiag runs)"
                                           : std::to_string(a.max_batch)) +
         (c.micro_batches > 1 ? " (in " + std::to_string(c.micro_batches) + " micro-batches of " +
                                    std::to_string(a.max_batch / c.micro_batches) + ", as the run's steps had)"
                              : std::string()) +
         " at preset " + c.preset + ", " + length_words(c) + std::to_string(c.steps) + (c.steps == 1 ? " step" : " steps") +
         (c.largest_inputs_step ? " at the inputs of step " + std::to_string(*c.largest_inputs_step) +
                                      ", the largest forward of the run's (its steps' inputs varied in shape at the same "
                                      "batch: smaller inputs fit more)"
                                : std::string()) +
         ": " + describe_phase_line(b) + " binds, " + describe_fixed_part(b) + " + " + format_mib(b.per_sample_mib) +
         " MiB per sample" +
         (c.micro_batches > 1 ? " of the batch (its " + std::to_string(c.micro_batches) +
                                    " micro-batches hold their activations one at a time)"
                              : std::string()) +
         " (" + fit + ")" + bounds + primary + searched;
}

// The replay's answer along the length.
std::string describe_length_replay(const SequenceCapacity& c) {
  const ReplayCapacity& r = *c.replay;
  std::string s = "within " + budget_words(c.source, c.budget_mib);
  if (r.max_batch == 0) {
    s += " not even one token fits";
  } else {
    s += " the longest sequence predicted to fit is " + std::to_string(r.max_batch) + " tokens";
    if (r.max_batch_if_held > r.max_batch) s += ", and up to " + std::to_string(r.max_batch_if_held);
  }
  s += " at batch " + std::to_string(c.batch) + ", preset " + c.preset + ", " + std::to_string(c.steps) +
       (c.steps == 1 ? " step" : " steps") + ", replaying the allocator over the run's requests (traced at lengths " +
       std::to_string(r.traced_batch);
  for (std::size_t i = 1; i < c.fitted_lengths.size() && c.fitted_lengths.size() <= 3; ++i) {
    s += (i + 1 == c.fitted_lengths.size() ? " and " : ", ") + std::to_string(c.fitted_lengths[i]);
  }
  if (r.staging_buffers > 0 && r.staging_cap) {
    s += "; " + std::to_string(r.staging_buffers) + " reductions' staging buffers growing up to " + mib(to_mib(*r.staging_cap));
  }
  s += ")";
  if (r.max_batch_if_held > r.max_batch) {
    s += "; the gap is " + std::to_string(r.workspaces) + " workspaces of the kernels' own choosing (the largest " +
         mib(to_mib(r.workspace_bytes)) + "): grown as the scores grow they allow the first, held the second";
  }
  if (!r.failure.completed && r.max_batch < limits::kMaxSequenceLength) {
    const ReplayState& f = r.failure.at_failure;
    s += "; " + std::to_string(r.max_batch + 1) + " tokens run out in " + to_string(r.failure.phase) +
         (r.failure.step ? " of step " + std::to_string(*r.failure.step) : std::string()) + ", asking for " +
         mib(to_mib(r.failure.request)) + " with " + mib(to_mib(f.allocated)) + " allocated and " + mib(to_mib(f.reserved)) +
         " reserved";
  }
  if (c.lines_max_sequence_length > 0 && c.lines_max_sequence_length != r.max_batch) {
    s += "; lines through the sequence sweep would have said " + std::to_string(c.lines_max_sequence_length);
  }
  return s + " (a run at --sequence-length " + std::to_string(r.max_batch) + " checks it)";
}

std::string describe(const SequenceCapacity& c) {
  if (c.replay) return describe_length_replay(c);
  const std::string phase = c.binding_phase == Phase::kBackward ? "backward"
                            : c.binding_phase == Phase::kForward ? "forward"
                                                                 : std::string(to_string(c.binding_phase));
  std::string parts = mib(c.fixed_mib) + " that does not grow with the length + the activations forward holds, " +
                      format_fixed(c.held_linear_mib, 3) + " MiB per token";
  if (c.held_quadratic_mib > 0) parts += " + " + format_fixed(c.held_quadratic_mib * 1e3, 4) + " MiB per thousand tokens squared";
  if (c.exponent_at_answer > 0) parts += " (growing as L^" + format_fixed(c.exponent_at_answer, 2) + " there)";
  if (c.transient_mib > 0) {
    parts += " + " + mib(c.transient_mib) + " " + phase + " adds above them";
    if (c.transient_quadratic_assumed) {
      parts += " (one layer's length x length gradients, assumed as twice its scores: no run's backward grew faster "
               "than its length)";
    }
  }
  std::string fit = "fitted on " + lengths_word(c.fitted_lengths) + " at batch " + std::to_string(c.batch) + ", preset " +
                    c.preset + ", " + std::to_string(c.steps) + (c.steps == 1 ? " step" : " steps");
  if (c.reserve_share > 0) fit += ", plus " + format_fixed(100 * c.reserve_share, 1) + "% the allocator reserved beyond its tensors";
  if (c.extrapolation > 1.5) fit += "; extrapolated " + format_times(c.extrapolation) + " from the longest";
  if (c.max_sequence_length == 0) {
    return "within " + budget_words(c.source, c.budget_mib) + " not even one token fits: " + phase + " needs " +
           mib(c.needs_mib) + " (" + fit + ")";
  }
  return "within " + budget_words(c.source, c.budget_mib) + " the longest sequence predicted to fit is " +
         std::to_string(c.max_sequence_length) + " tokens: " + phase + " binds, " + parts + " (" + fit +
         "; a run at --sequence-length " + std::to_string(c.max_sequence_length) + " checks it)";
}

std::string describe_weights_beyond_budget(const ShardedCapacity& sharded, const std::vector<ShardedCapacity>& all) {
  std::string cannot;
  for (const ShardedCapacity& c : all) {
    if (c.budget_mib == sharded.budget_mib && c.world_size == sharded.world_size && !definition(c.mode).shards_parameters) {
      cannot += std::string(cannot.empty() ? "" : ", ") + to_string(c.mode);
    }
  }
  return "the whole weights (" + format_mib(sharded.parameter_mib) + " MiB) exceed the budget of " +
         format_mib(sharded.budget_mib) + " MiB: a mode that keeps them whole on every rank (" + cannot +
         ") cannot hold this model; " + to_string(sharded.mode) + " over " + std::to_string(sharded.world_size) +
         " ranks holds " + format_mib(sharded.parameter_mib / sharded.world_size) + " MiB of them per rank and " +
         (sharded.answer.max_batch > 0 ? "fits batch " + std::to_string(sharded.answer.max_batch) + " per rank"
                                       : "still fits no batch") +
         " (the model is built in host memory and goes to each device a unit at a time)";
}

// "the steps' size varied: memory follows their tokens (0.131 MiB a
// token over 5 steps, within 3%; by samples 80%); within ... the largest
// step predicted to fit holds 14,600 tokens (14,100 at the steepest step's
// rate); the job's largest step, 2048 tokens, peaked at 496.6 MiB".
std::string describe(const StepSizeCapacity& c) {
  const char* unit = c.unit == StepSizeCapacity::Unit::kTokens ? "tokens" : "samples";
  const char* one = c.unit == StepSizeCapacity::Unit::kTokens ? "token" : "sample";
  const char* other = c.unit == StepSizeCapacity::Unit::kTokens ? "samples" : "tokens";
  auto pct = [](double x) { return format_fixed(100 * x, 0) + "%"; };
  const std::string range = c.least == c.most
                                ? std::string("the steps' ") + other + " varied" +
                                      (c.other_least ? " (" + std::to_string(*c.other_least) + " to " +
                                                           std::to_string(*c.other_most) + ")"
                                                     : std::string()) +
                                      " while their " + unit + " held at " + std::to_string(c.most)
                                : "the steps' size varied (" + std::to_string(c.least) + " to " + std::to_string(c.most) +
                                      " " + unit + ")";
  // Tokens fitted where every step had the same samples: what follows
  // the samples is in the part that does not follow the tokens, and the
  // answer holds for steps of that many samples (an independent check's
  // Whisper, its encoder's fixed-length inputs 72 MiB at 4 samples, was
  // told a step of 248 tokens fits in 108.6 MiB; 15 samples of them took
  // 319.3).
  const bool samples_held = c.unit == StepSizeCapacity::Unit::kTokens && c.least != c.most && c.other_least &&
                            c.other_most && *c.other_least == *c.other_most;
  const std::string fixed =
      c.per_step_mib >= 0.005
          ? "weights, optimizer state, and " + mib(c.per_step_mib) + " a step needs whatever its " +
                (samples_held ? "tokens (what follows its " + std::to_string(*c.other_most) +
                                    " samples, the same in every step: inputs that are no tokens, an encoder's; "
                                    "gradients, workspaces)"
                              : std::string("size (gradients, workspaces)"))
          : std::string("weights, optimizer state");
  // A unit that held at one size is what is left once the other is ruled
  // out (its rate varied): how memory grows along it is not measured.
  const bool held = c.least == c.most;
  std::string s =
      held ? range + ": memory does not follow their " + other +
                 (c.other_spread ? std::string(" (by ") + other + " it varies " + pct(*c.other_spread) + ")" : "") +
                 " and is read per " + one + ", the unit that held: " + mib(c.per_unit_mib) + " a " + one +
                 " above the " + mib(c.base_mib) + " that does not follow it (" + fixed + "; " +
                 std::to_string(c.steps) + " steps, each step's own rate within " + pct(c.spread) +
                 ", all at one size: a step of another size checks the rate)"
           : range + ": memory follows their " + unit +
                 (c.per_token_per_length_mib
                      ? " and their length, " + mib(c.per_unit_mib) + " a token and " +
                            format_fixed(*c.per_token_per_length_mib, 6) +
                            " MiB more a token per token of sequence length (what attention saves, length x length)"
                      : ", " + mib(c.per_unit_mib) + " a " + one) +
                 " above the " + mib(c.base_mib) + " that does not follow it (" + fixed + "; fitted on " +
                 std::to_string(c.steps) +
                 " steps" + ", each step's own rate within " + pct(c.spread) +
                 (c.other_spread ? std::string("; by ") + other + " it varies " + pct(*c.other_spread) : "") + ")";
  s += "; within " + budget_words(c.source, c.budget_mib) + " the largest step" +
       (samples_held ? " of " + std::to_string(*c.other_most) + " samples" : std::string()) +
       " predicted to fit holds " + std::to_string(c.max_size_steepest) + " " + unit +
       (c.per_token_per_length_mib && c.length_samples && *c.length_samples > 0
            ? " (" + std::to_string(*c.length_samples) + " sequences of " +
                  std::to_string(c.max_size_steepest / *c.length_samples) + ")"
            : std::string()) +
       " at the steepest step's rate";
  if (c.max_size_steepest < c.max_size) {
    s += " (" + std::to_string(c.max_size) + " at the fitted rate, for a step like the average)";
  }
  if (samples_held) s += "; a step of more samples needs more of what does not follow the tokens";
  const double reach = c.most > 0 ? static_cast<double>(c.max_size_steepest) / static_cast<double>(c.most) : 0;
  if (c.max_size_if_all_grows_with_length && c.length_samples && c.shortest_length && c.longest_length) {
    // Lengths too close together to measure attention's part: where the
    // step grows by longer sequences the answer is a range.
    const std::int64_t n = *c.length_samples;
    s += "; extrapolated x" + format_fixed(reach, 2) + " from the largest step seen, and " +
         (samples_held ? std::string("at ") + std::to_string(n) + " samples more tokens means longer sequences"
                       : std::string("where the step grows by longer sequences, not more of them")) +
         ": the steps' lengths (" + format_fixed(*c.shortest_length, 0) + " to " +
         format_fixed(*c.longest_length, 0) + " tokens a sequence) were too close together to tell what grows with "
         "the length (attention's length x length scores), so the limit lies between " +
         std::to_string(*c.max_size_if_all_grows_with_length) + " tokens (" + std::to_string(n) + " sequences of " +
         std::to_string(*c.max_size_if_all_grows_with_length / n) + ", if all of a token's memory grew with the "
         "length) and " + std::to_string(c.max_size_steepest) + " (if none did); a step near it checks, and steps "
         "of more varied lengths measure it";
  } else if (reach > 1.2) {
    s += ", extrapolated x" + format_fixed(reach, reach < 2 ? 2 : 1) + " from the largest step seen (a step near it checks)";
  }
  if (c.failed_step) {
    // The step that ran out is the job's largest need, whatever its size:
    // "it fits" of the largest that completed read as the job fitting.
    s += "; the largest step that completed, " + std::to_string(c.most) + " " + unit + ", peaked at " +
         mib(c.largest_step_need_mib) + ", and step " + std::to_string(*c.failed_step) + " ran out of memory" +
         (c.failed_phase ? std::string(" in ") + to_string(*c.failed_phase) : std::string()) +
         " (not in the fit: it did not finish)";
  } else {
    s += "; the job's largest step, " + std::to_string(c.most) + " " + unit + ", peaked at " +
         mib(c.largest_step_need_mib) + (c.largest_step_need_mib <= c.budget_mib ? " (it fits)" : " (more than the budget)");
  }
  if (c.growth_per_step_mib) {
    s += "; this holds for the " + std::to_string(c.recorded_steps) + " steps recorded only: the loop keeps " +
         mib(*c.growth_per_step_mib) + " more every step (the growth above), so a later step of that size needs that "
         "much more for each step since (fix what it keeps first)";
  }
  return s + ". Allocated memory: where sizes vary the allocator's reserve can need more (expandable segments reclaim it)";
}

}  // namespace memdiag
