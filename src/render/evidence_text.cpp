// The sentences for evidence, warnings and decisions: one function per record
// type, chosen by std::visit with no catch-all, so a new record without words
// does not build.
#include "memdiag/format.hpp"
#include "memdiag/overload.hpp"
#include "memdiag/render.hpp"

#include <cmath>

namespace memdiag {
namespace {

std::string mib(double v) { return format_mib(v) + " MiB"; }
std::string signed_mib(double v) { return format_signed_mib(v) + " MiB"; }
std::string steps_word(int n) { return std::to_string(n) + " step" + (n == 1 ? "" : "s"); }
std::string at(const RunPoint& p) { return " at " + describe_point(p); }

struct SweepWords {
  const char* x;
  const char* y;
  const char* unit;
};
SweepWords words_for(SweepKind k) {
  switch (k) {
    case SweepKind::kBatch: return {"batch", "forward increment", "MiB per sample"};
    case SweepKind::kParameters: return {"parameter MiB", "persistent increase", "MiB per parameter MiB"};
    case SweepKind::kSteps: return {"steps", "growth since optimizer_ready", "MiB per step"};
    case SweepKind::kSequence: return {"length", "forward increment", "MiB per token"};
  }
  return {"x", "y", ""};
}

std::string sweep_line(const Sweep& s) {
  SweepWords w = words_for(s.kind);
  if (s.per_micro_batch) w.x = "micro-batch";
  std::string xs, ys;
  for (const SweepPoint& p : s.points) {
    xs += (xs.empty() ? "" : " -> ") + format_fixed(p.x, p.x == std::floor(p.x) ? 0 : 1);
    ys += (ys.empty() ? "" : " -> ") + mib(p.y);
  }
  const SweepPoint& lo = s.points.front();
  const SweepPoint& hi = s.points.back();
  std::string ratio;
  if (lo.x > 0 && lo.y > 0) {
    ratio = " (" + format_times(hi.y / lo.y) + " for " + format_times(hi.x / lo.x) + " " + w.x + ")";
  }
  const std::string departure = format_percent(s.max_deviation, 1);
  if (s.kind == SweepKind::kSequence && s.exponent) {
    // Not a line through the origin: the growth's exponent and its parts.
    std::string t = std::string(w.x) + " " + xs + ": " + w.y + " " + ys + ", growing as length^" +
                    format_fixed(*s.exponent, 2);
    if (s.linear_mib && s.quadratic_mib && s.quadratic_share) {
      const double share = *s.quadratic_share;
      t += " (" + format_fixed(*s.linear_mib, 4) + " MiB per token + " + format_fixed(*s.quadratic_mib * 1e6, 3) +
           " MiB per million tokens squared; the quadratic part is " + format_percent(share, 0) + " at length " +
           format_fixed(s.points.back().x, 0) + ")";
      t += share >= 0.5 ? ": quadratic in the length, as attention scores kept for backward grow"
                        : share >= 0.1 ? ": partly quadratic (attention scores) on top of what grows with the tokens"
                                       : ": linear in the length, the activations of each token";
    }
    return t;
  }
  // A steps sweep whose line passes through the origin (nothing left by
  // the start beyond what the steps keep) reads as a proportional one.
  if (s.intercept_mib && std::fabs(*s.intercept_mib) >= std::max(thresholds::kMinimumSignalMib, 0.02 * lo.y)) {
    // "2.0000 MiB per step on top of 26.94 MiB the first step left (the
    // optimizer's state), within 0.0% of that line".
    return std::string(w.x) + " " + xs + ": " + w.y + " " + ys + "; " + format_fixed(s.slope, 4) + " " + w.unit +
           " on top of " + mib(*s.intercept_mib) + " that does not grow with the steps (what the start left for good: the "
           "optimizer's state, a cache filled once), " +
           (s.linear ? "within " + departure + " of that line"
                     : std::string(s.increasing ? "off that line" : "not increasing") + " (largest departure " +
                           departure + " of the growth)");
  }
  return std::string(w.x) + " " + xs + ": " + w.y + " " + ys + ratio + "; " + format_fixed(s.slope, 4) + " " + w.unit +
         ", " +
         (s.linear ? "within " + departure + " of proportional"
                   : std::string(s.increasing ? "not proportional" : "not increasing") + " (largest departure " +
                         departure + ")");
}

// "the step needs about 2580.3 MiB at its peak (extrapolated from 5 completed
// steps along their size)".
std::string step_need_words(const evidence::OutOfMemory& x) {
  return "the step needs about " + mib(*x.step_need_mib) + " at its peak against " + mib(*x.budget_mib) + " (" +
         (x.step_need_measured ? "reached by a completed step at least as large"
                               : "extrapolated from " + std::to_string(x.step_need_from_steps) +
                                     " completed step" + (x.step_need_from_steps == 1 ? "" : "s") + " along their size") +
         ")";
}

// ", allocated at train.py:57": the user's line on the allocation's stack
// (CUDA), where it says more than the call's line.
std::string allocated_at(const KeptRecord& k) {
  if (!k.allocated_at || (k.where && *k.where == *k.allocated_at)) return {};
  return ", allocated at " + *k.allocated_at;
}

// "alive at every cleanup walked (steps 0 to 6) beside the model's weights,
// gradients and optimizer state: 1024 x 4 x 84 x 84 float32 (110.2 MiB);
// 110.2 MiB, 45% of the run's 244.6 MiB peak ...".
std::string resident_line(const evidence::ResidentTensors& x) {
  std::string s = x.tensors.empty()
                      ? std::string("held at every step beside the model's weights, gradients and optimizer state: ")
                      : "alive at every cleanup the recorder walked (steps " + std::to_string(x.first_step) + " to " +
                            std::to_string(x.last_step) + ") from the first that found them, beside the model's "
                            "weights, gradients and optimizer state: ";
  if (x.buffer_mib > 0) {
    std::string named;
    for (const auto& [name, size] : x.buffers) {
      if (size >= 0.01) named += (named.empty() ? "" : ", ") + name + " " + mib(size);
    }
    s += "the model's own buffers, " + mib(x.buffer_mib) + (named.empty() ? std::string() : " (" + named + ")") +
         " (register_buffer: state its modules keep that is no parameter)" + (x.tensors.empty() ? "" : ", ");
  }
  for (std::size_t i = 0; i < x.tensors.size(); ++i) {
    const KeptRecord& k = x.tensors[i];
    std::string shape;
    for (std::int64_t d : k.shape) shape += (shape.empty() ? "" : " x ") + std::to_string(d);
    shape = (shape.empty() ? std::string("a scalar") : shape) + " " + k.dtype;
    // Many tensors of one record: another model's weights (an EMA copy).
    s += (i ? ", " : "") +
         (k.made_by ? *k.made_by + " (" + std::to_string(k.per_step) + " tensors, the largest " + shape + ": " +
                          mib(k.mib_per_step) + " in all"
                    : shape + " (" + mib(k.mib_per_step)) +
         (k.from_step && *k.from_step > x.first_step ? ", from step " + std::to_string(*k.from_step) : std::string()) +
         (k.grad_fn ? ", made by " + *k.grad_fn : std::string()) +
         (k.allocated_at ? ", allocated at " + *k.allocated_at : std::string()) + ")";
  }
  return s + (x.tensors.size() + (x.buffer_mib > 0 ? 1 : 0) > 1 ? "; " + mib(x.mib) + " in all" : std::string()) + ", " +
         format_fixed(100.0 * x.share_of_peak(), 0) + "% of the run's " + mib(x.peak_mib) +
         " peak" +
         (x.tensors.empty() ? std::string()
                            : std::string(": tensors the loop made and holds (a buffer it fills, data or a cache it keeps") +
                                  (x.cuda ? " on the device" : "") + ", another model's weights)") +
         ", under every step's peak whatever the batch";
}

// "kept from step to step: the logits of BertForMaskedLM (16 x 128 x 30522
// float32, 238.5 MiB each step, made at job.py:42)".
std::string kept_line(const evidence::KeptAcrossSteps& x) {
  std::string s = "kept from step to step (the recorder's walk of the live tensors at consecutive cleanups): ";
  // A module's output that no line of the loop keeps: a forward hook's, a
  // module's own cache, or, where backward retains its graphs, saved by them.
  bool retained = false;
  for (const KeptRecord& k : x.kept) retained = retained || k.what == KeptRecord::What::kRetainGraph;
  const std::string no_line = retained ? ", kept where no line of the loop's is: saved by a graph that outlives its "
                                         "backward (retain_graph), a forward hook, or a module's own code"
                                       : ", kept where no line of the loop's is: a forward hook, or a module's own code";
  for (std::size_t i = 0; i < x.kept.size(); ++i) {
    const KeptRecord& k = x.kept[i];
    s += i ? "; " : "";
    switch (k.what) {
      case KeptRecord::What::kTensor: {
        std::string shape;
        for (std::int64_t d : k.shape) shape += (shape.empty() ? "" : " x ") + std::to_string(d);
        if (k.grows) {
          // "the buffer hist of Net, grown every step (1792 x 1024 float32
          // by the last walk, +1.00 MiB each step, outside any graph)".
          s += (k.made_by ? "the " + *k.made_by + ", grown every step"
                          : std::string("a tensor the loop replaces every step with a larger copy of itself (torch.cat "
                                        "onto a tensor it keeps)")) +
               " (" + shape + " " + k.dtype + " by the last walk, +" + mib(k.mib_per_step) + " each step" +
               (k.grad_fn ? ", made by " + *k.grad_fn : std::string(", outside any graph")) +
               (k.where ? ", from the call at " + *k.where : std::string()) + allocated_at(k) + ")";
          break;
        }
        // "(..., 3.91 MiB every 2 steps, 1.95 MiB a step on average": kept
        // in some steps only, an evaluation's.
        const std::string rate =
            k.every_steps ? mib(k.mib_per_step * static_cast<double>(*k.every_steps)) + " every " +
                                std::to_string(*k.every_steps) + " steps, " + mib(k.mib_per_step) + " a step on average"
                          : mib(k.mib_per_step) + " each step";
        // The outputs of several modules ("the outputs of 53 modules (...)",
        // a retained graph's): of one kind, their shapes differ by module.
        const bool several = k.made_by && k.made_by->rfind("outputs of ", 0) == 0;
        s += (k.made_by ? "the " + *k.made_by : std::to_string(k.per_step) + " tensor" + (k.per_step == 1 ? "" : "s")) +
             " (" +
             (several ? k.dtype + " tensors of the modules' own shapes, " +
                            (shape.empty() ? std::string("a scalar") : shape) + " among them"
                      : (k.shapes ? "of " + std::to_string(*k.shapes) + " shapes, the largest " : std::string()) +
                            (shape.empty() ? std::string("a scalar") : shape) + " " + k.dtype +
                            (k.shape_varies ? " at the last walk, its shape varying with the steps" : "")) +
             ", " + rate +
             (k.held_steps ? ", held " + std::to_string(*k.held_steps) + " steps and then let go: bounded at about " +
                                 mib(k.mib_per_step * static_cast<double>(*k.held_steps)) + ", no leak"
                           : std::string()) +
             (k.grad_fn ? ", made by " + *k.grad_fn : std::string(", outside any graph")) +
             (k.where ? ", from the call at " + *k.where
                      : k.made_by && !k.allocated_at ? no_line
                                                     : std::string()) +
             allocated_at(k) + ")";
        break;
      }
      case KeptRecord::What::kGraph:
        s += "an autograd graph that outlives its step (a live tensor's graph grew from " +
             std::to_string(k.graph_nodes_before.value_or(0)) + " to " + std::to_string(k.graph_nodes.value_or(0)) +
             " nodes between cleanups: a running sum of graph-connected tensors never detached, a loss or a metric computed "
             "from the outputs, keeps every step's graph)";
        break;
      case KeptRecord::What::kHeld:  // never among the kept: read into the features
      case KeptRecord::What::kResident: break;
      case KeptRecord::What::kHeldGraph:
        s += "a graph no backward ran through, held from step to step: a forward of " +
             k.made_by.value_or(std::string("the model")) + " with autograd on outside the training step (in eval() mode" +
             (k.where ? ", at " + *k.where : std::string()) + ") saved " + mib(k.mib_per_step) +
             " for a backward that never ran, still held at each cleanup while the loop keeps its output or a "
             "tensor computed from it";
        break;
      case KeptRecord::What::kRetainGraph:
        s += "backward(retain_graph=True)" + (k.where ? " at " + *k.where : std::string()) +
             ": each step's saved tensors outlive its backward";
        break;
    }
  }
  return s;
}

// "step 1's forward by module (22 modules hooked, 9984.9 MiB): by type,
// Linear 3200.0 MiB (32%), ...; under transformer, h.0 (GPT2Block) ...".
std::string modules_line(const evidence::ForwardByModule& x) {
  auto share = [](const evidence::ModuleShare& m) { return mib(m.mib) + " (" + format_fixed(100 * m.share, 0) + "%)"; };
  std::string s = "step " + std::to_string(x.step) + "'s forward by module (allocated after each module's forward "
                  "less before it, from forward hooks): " + mib(x.total_mib) + " in modules";
  if (x.forward_increment_mib && *x.forward_increment_mib > x.total_mib + 0.05) {
    s += " of the forward's " + mib(*x.forward_increment_mib) +
         " (the rest made outside the model's modules: the loss, the loop's own ops, a wrapper such as DDP, another model called with gradients on)";
  } else if (x.forward_increment_mib && *x.forward_increment_mib < x.total_mib - 0.05) {
    s += " (the forward phase added " + mib(*x.forward_increment_mib) +
         ": part of what the modules made was freed again within it, by the model's own code after its modules "
         "(a loss that consumed a copy of the logits) or as the last step's outputs the loop held were replaced)";
  }
  if (!x.types.empty()) {
    s += x.freed_in_parents_mib > 0
             ? "; by type, what each module's own code made (" + mib(x.freed_in_parents_mib) +
                   " of it freed again in its parent's code, as the next module consumed it; shares of what was made): "
             : "; by type, each module's own part: ";
    for (std::size_t i = 0; i < x.types.size(); ++i) {
      const bool model = x.types[i].type == x.model_type;
      s += (i ? ", " : "") + x.types[i].type + (model ? "'s own ops" : "") + " " + share(x.types[i]);
    }
  }
  if (!x.modules.empty()) {
    s += "; the largest " + (x.under.empty() ? std::string("of the model's modules") : "under " + x.under) + ": ";
    for (std::size_t i = 0; i < x.modules.size(); ++i) {
      s += (i ? ", " : "") + x.modules[i].name + " (" + x.modules[i].type + ") " + share(x.modules[i]);
    }
  }
  if (!x.outside.empty()) {
    s += "; called by the loop outside the model: ";
    for (std::size_t i = 0; i < x.outside.size(); ++i) s += (i ? ", " : "") + x.outside[i].type + " " + share(x.outside[i]);
  }
  return s;
}

std::string oom_line(const evidence::OutOfMemory& x) {
  std::string where = "an unknown phase";
  if (x.phase) {
    switch (*x.phase) {
      case Phase::kSetup: where = "the warm-up"; break;
      case Phase::kModelReady: where = "moving the model to the device"; break;
      case Phase::kOptimizerReady: where = "building the optimizer"; break;
      case Phase::kStep:
        where = x.step == 0 ? std::string("the first step()") : "step() of step " + std::to_string(x.step.value_or(0));
        break;
      case Phase::kForward:
      case Phase::kBackward:
      case Phase::kCleanup: where = std::string(to_string(*x.phase)) + " of step " + std::to_string(x.step.value_or(0)); break;
    }
  }
  std::string s = where + " ran out of memory";
  if (x.request_mib) s += " asking for " + mib(*x.request_mib);
  if (x.in_use_mib) s += " with " + format_mib(*x.in_use_mib) + (x.budget_mib ? " of " + mib(*x.budget_mib) : " MiB") + " in use";
  if (x.tensors) {
    s += ": parameters " + mib(x.tensors->parameters_mib) + ", gradients " + mib(x.tensors->gradients_mib) +
         ", optimizer state " + mib(x.tensors->optimizer_state_mib);
    if (x.other_mib) s += ", activations, batch and temporaries " + mib(*x.other_mib);
  }
  switch (x.cause) {
    case Cause::kParameters:
      if (x.phase == Phase::kModelReady) {
        // Built on the host and moved: a model that did not fit the host
        // budget failed before its size was known.
        s += x.parameter_mib > 0 ? "; the weights are " + mib(x.parameter_mib) : "; the weights were still being made";
      } else {
        s += "; backward was making " + mib(x.parameter_mib) + " of gradients, one per weight";
      }
      break;
    case Cause::kOptimizerState:
      s += "; no optimizer state existed before it: the step was making the per-parameter state";
      break;
    case Cause::kRetainedGraph:
      s += "; each of the " + std::to_string(x.completed_steps) + " steps before it kept " +
           signed_mib(x.growth_per_step_mib.value_or(0)) + " after cleanup";
      break;
    case Cause::kAllocatorCache:
      s += "; " + mib(x.cached_free_mib.value_or(0)) + " was cached but free" +
           (x.largest_free_block_mib ? " (largest free block " + mib(*x.largest_free_block_mib) + ")" : std::string()) +
           ", more than the request, yet no cached block held it";
      break;
    case Cause::kFragmentation: {
      // The issue's own sentence: the request against what was stranded.
      // The request against each place free memory lay: the cached pieces
      // and the budget never reserved, neither holding it alone.
      const double cached = x.cached_free_mib.value_or(0), unreserved = x.unreserved_mib.value_or(0);
      s += "; the request of " + mib(x.request_mib.value_or(0)) + " failed with " + mib(cached + unreserved) +
           " free under the budget: " + mib(cached) + " reserved but unallocated, " +
           mib(x.inactive_split_mib.value_or(0)) + " of it stranded in split segments";
      if (x.inactive_split_blocks) {
        s += " in " + std::to_string(*x.inactive_split_blocks) + " block" + (*x.inactive_split_blocks == 1 ? "" : "s");
      }
      if (x.largest_free_block_mib) s += ", the largest " + mib(*x.largest_free_block_mib);
      if (x.unreserved_mib) s += ", and " + mib(unreserved) + " of the budget never reserved";
      if (x.step_need_mib && x.budget_mib) s += "; " + step_need_words(x) + ", within the budget";
      if (x.num_alloc_retries) {
        s += "; the allocator had freed its cache and retried " + std::to_string(*x.num_alloc_retries) + " time" +
             (*x.num_alloc_retries == 1 ? "" : "s");
      }
      s += ": the memory existed, in pieces no request fitted";
      break;
    }
    case Cause::kActivations:
      s += x.phase == Phase::kBackward ? "; backward was making gradients while forward's activations were held"
                                       : "; forward was saving activations for backward";
      // Free memory that would have held this request, named beside the
      // consumer: the step as a whole did not fit.
      if (x.step_need_mib && x.budget_mib && x.request_mib && x.cached_free_mib && x.unreserved_mib &&
          *x.cached_free_mib + *x.unreserved_mib >= *x.request_mib &&
          *x.step_need_mib + (x.step_need_measured ? 0.0 : thresholds::kGranuleMarginMib) > *x.budget_mib) {
        const double slack = *x.budget_mib - *x.step_need_mib;
        s += "; " + mib(*x.cached_free_mib + *x.unreserved_mib) + " was free under the budget (" +
             mib(*x.cached_free_mib) + " cached in pieces, " + mib(*x.unreserved_mib) +
             " never reserved), enough for this request, but " + step_need_words(x) +
             (slack < 0 ? ", more than the budget: no allocator setting makes it fit"
                        : ", " + mib(slack) + " under it, less than the " +
                              mib(thresholds::kGranuleMarginMib) +
                              " an allocator leaves partly used: no allocator setting can be counted on to make it fit");
      }
      break;
    case Cause::kInconclusive: break;
  }
  return s;
}

std::string trend_line(const evidence::PostCleanupTrend& t) {
  if (!t.growth_per_step_mib) return "post-cleanup trend unknown (one step)";
  if (t.unseen_frees) {
    return "post-cleanup allocation " +
           (t.rise ? std::string(t.rise->rises > 1 ? "rose " : "rose once, ") + signed_mib(t.rise->mib) + " between the cleanups of steps " +
                                    std::to_string(t.rise->after_step) + " and " + std::to_string(t.rise->next_step) +
                                    ","
                              : "moved " + signed_mib(*t.growth_per_step_mib) + " per step") +
           " over " + std::to_string(t.steps) + " steps, which this rank's readings cannot tell from a leak (the "
           "warning below)";
  }
  if (t.rise) {
    // One step up and flat around it: a slope over the steps (42.65 MiB
    // at one step read "stable (+8.53 MiB per step)") says what did not
    // happen.
    std::string s =
        t.rise->rises > 1
            ? "post-cleanup allocation rose " + signed_mib(t.rise->mib) + " between the cleanups of steps " +
                  std::to_string(t.rise->after_step) + " and " + std::to_string(t.rise->next_step) + " (" +
                  std::to_string(t.rise->rises) + " rises: something filled and stopped, a cache or a warm-up) and is "
                  "flat since, over " + std::to_string(t.steps) + " steps"
            : "post-cleanup allocation rose once, " + signed_mib(t.rise->mib) + " between the cleanups of steps " +
                  std::to_string(t.rise->after_step) + " and " + std::to_string(t.rise->next_step) +
                  ", and is otherwise stable over " + std::to_string(t.steps) + " steps";
    if (t.made_once) s += ": made once, then kept";
    if (t.too_few_steps) {
      s += ": too few cleanups to tell memory kept every step from a one-off (a longer run, among the confirming "
           "runs, tells)";
    }
    return s;
  }
  std::string s = "post-cleanup allocation " + std::string(t.growing ? "grows" : "is stable") + " (" +
                  signed_mib(*t.growth_per_step_mib) + " per step over " + std::to_string(t.steps) + " steps)";
  // What was taken out before the trend was read, said: the cleanups
  // themselves rose by it (LBFGS's 16 MiB a step read "stable (0.00 MiB
  // per step)" beside its own cleanups).
  std::string besides;
  if (t.state_grew_mib >= 0.005) {
    besides = "the optimizer's state grown since the first cleanup (" + format_mib(t.state_grew_mib) +
              " MiB by the last: the optimizer's, not the loop's)";
  }
  if (t.held_graph_mib >= 0.005) {
    besides += (besides.empty() ? "" : " and ") + std::string("the graph held from a later step on (") +
               format_mib(t.held_graph_mib) + " MiB, named below)";
  }
  int taken = (t.state_grew_mib >= 0.005 ? 1 : 0) + (t.held_graph_mib >= 0.005 ? 1 : 0);
  if (t.gradients_held_cleanups > 0) {
    besides += (besides.empty() ? "" : " and ") + std::string("the gradients held at ") +
               (t.gradients_held_cleanups == 1 ? std::string("one cleanup")
                                               : std::to_string(t.gradients_held_cleanups) + " of the " +
                                                     std::to_string(t.steps) + " cleanups") +
               " (" + format_mib(t.gradients_held_mib) + " MiB: no zero_grad() before the cleanup there, or set_to_none=False)";
    if (t.gradients_unknown_cleanups > 0) {
      besides += ", with " +
                 (t.gradients_unknown_cleanups == 1 ? std::string("one cleanup")
                                                    : std::to_string(t.gradients_unknown_cleanups) + " cleanups") +
                 " without a census left out (their gradients unknown)";
    }
    ++taken;
  }
  if (!besides.empty()) s += " once " + besides + (taken > 1 || t.gradients_held_cleanups > 0 ? " are" : " is") + " taken out";
  // Growing, but not read as a leak: why (a curriculum's cleanups rising
  // +1.98 MiB a step read as growth with no word of its lengths).
  if (t.growing && t.walk_held_mib) {
    s += ": within what the loop held at its cleanups (" + mib(*t.walk_held_mib) +
         ", its last step's tensors, larger for a larger step), and the recorder's walk found nothing kept from step "
         "to step: not a leak";
  } else if (t.growing && t.follows_size) {
    s += ": it follows the steps' size (what the loop holds at each cleanup is its last step's tensors, larger for a "
         "larger step), not step on step: no leak where a smaller step holds less";
  }
  if (t.made_once) s += ": made once, then kept";
  if (t.too_few_steps) {
    s += ": too few cleanups to tell memory kept every step from a one-off (a longer run, among the confirming "
         "runs, tells)";
  }
  return s;
}

}  // namespace

std::string describe_point(const RunPoint& p) {
  return "batch " + std::to_string(p.batch) + ", preset " + p.preset + ", " + steps_word(p.steps);
}

std::string describe_rank_run(const RunPoint& p) {
  return "preset " + p.preset + ", batch " + std::to_string(p.batch) + ", " + std::to_string(p.steps) + " steps";
}

std::string describe(const ConfirmingRun& c) {
  switch (c.confirms) {
    case SweepKind::kBatch:
      if (!c.run.remedies.empty()) {
        return c.runnable ? "the same run with the allocator's " + remedies_label(c.run.remedies) +
                                " (it reuses memory stranded between blocks)"
                          : "the same job with PYTORCH_ALLOC_CONF=" + allocator_settings_of(c.run.remedies);
      }
      if (c.run.find_max_batch) {
        return c.runnable ? "the largest batch that fits the same memory, searched (doubling, then bisecting, confirmed "
                            "in fresh processes)"
                          : "the largest batch that fits the same memory (halve the batch until a run completes)";
      }
      if (c.step_size) {
        return "with every step at " + std::to_string(*c.step_size) +
               (c.step_size_in_tokens && c.step_sequences
                    ? " tokens in " + std::to_string(*c.step_sequences) + " sequences (the steps' own " +
                          std::to_string(*c.step_sequences) + " samples: what follows the samples is fitted at them)"
                : c.step_size_in_tokens ? " tokens (a token budget of that, as many sequences as it holds)"
                                        : " samples (a fixed batch of that)");
      }
      if (c.micro_batches > 1) {
        const int b = c.run.batch_size_per_device.value_or(0);
        return "with batch " + std::to_string(b) + " per device in " + std::to_string(c.micro_batches) +
               " micro-batches of " + std::to_string(b / c.micro_batches) + " (as many as the report's steps ran)";
      }
      return "with batch " + std::to_string(c.run.batch_size_per_device.value_or(0)) + " per device";
    case SweepKind::kSteps: return "with " + steps_word(c.run.steps.value_or(0));
    case SweepKind::kSequence: return "with a sequence length of " + std::to_string(c.run.sequence_length.value_or(0));
    case SweepKind::kParameters: return "with a model of another size (batch 1 keeps it quick)";
  }
  return {};
}

namespace {

std::string seconds_text(double s) {
  if (s < 0.01) return "under 0.01 s";
  return format_fixed(s, s < 1 ? 2 : s < 100 ? 1 : 0) + " s";
}

}  // namespace

std::string describe_cost(const ConfirmingRun& c) {
  std::vector<std::string> parts;
  if (c.expected_peak_mib) parts.push_back("peak about " + mib(*c.expected_peak_mib) + " allocated");
  if (c.expected_seconds) {
    const int steps = c.run.steps.value_or(0);
    parts.push_back((steps > 0 ? "its " + steps_word(steps) : std::string("its steps")) +
                    (c.seconds_at_most ? " at most " : " about ") + seconds_text(*c.expected_seconds));
  }
  if (parts.empty()) {
    return c.confirms == SweepKind::kParameters ? "expected: not known from this report (another model's size)"
                                                : std::string();
  }
  std::string s = "expected: " + parts.front();
  for (std::size_t i = 1; i < parts.size(); ++i) s += ", " + parts[i];
  return s + (c.expected_seconds ? ", plus the process's start" : "");
}

std::string describe(const RunStop& s) {
  switch (s.kind) {
    case EventKind::kOom:
      return "out of memory in " + std::string(s.phase ? to_string(*s.phase) : "an unknown phase") +
             (s.step ? " of step " + std::to_string(*s.step) : "");
    case EventKind::kInterrupted: return "interrupted";
    case EventKind::kError: return "failed: " + s.message;
    case EventKind::kWarmup:
    case EventKind::kNote:
    case EventKind::kKept:
    case EventKind::kModules:
    case EventKind::kRecording: break;
  }
  return s.message;
}

std::string describe(const Evidence& e) {
  return std::visit(
      Overload{
          [](const evidence::ForwardIncrement& x) {
            // Where the forward freed what the loop held of the step
            // before, its phase ends lower than what it made: the figure
            // is what it made (step 0's, with nothing held).
            const std::string adds = x.held_beyond_inputs_mib() > 0 ? "forward makes " + mib(x.made_mib())
                                                                    : "forward adds " + mib(x.forward_mib);
            std::string s =
                x.batch_assumed
                    ? adds + " per step (its batch unseen: nothing per sample), preset " +
                          x.at.preset + ", " + steps_word(x.at.steps) + ", against " + mib(x.parameter_mib) +
                          " of parameters; peak " + mib(x.peak_mib)
                : x.per_token_mib && x.tokens
                    ? adds + " per step (the median step; the steps were given " +
                          (x.samples ? std::to_string(x.samples->least) + " to " + std::to_string(x.samples->most) +
                                           " samples and "
                                     : "batch " + std::to_string(x.at.batch) + " and ") +
                          (x.tokens->varied() ? std::to_string(x.tokens->least) + " to " + std::to_string(x.tokens->most) +
                                                    " tokens), "
                                              : "the same " + std::to_string(x.tokens->most) + " tokens each), ") +
                          format_fixed(*x.per_token_mib, 4) + " MiB per token (" +
                          (x.tokens->varied() && !x.samples ? std::string("memory follows the tokens: the batch held")
                           : x.tokens->varied() ? std::string("memory follows the tokens, not the samples: its rate per "
                                                              "token varied less over the steps")
                                              : std::string("memory does not follow the samples: it held with the tokens")) +
                          "), preset " + x.at.preset + ", " + steps_word(x.at.steps) + ", against " +
                          mib(x.parameter_mib) + " of parameters; peak " + mib(x.peak_mib)
                : x.samples ? adds + " per step (the median step; the steps were given " +
                                std::to_string(x.samples->least) + " to " + std::to_string(x.samples->most) +
                                " samples), " + mib(x.per_sample_mib.value_or(0)) +
                                " per sample (the median of each step's own), preset " + x.at.preset + ", " +
                                steps_word(x.at.steps) + ", against " + mib(x.parameter_mib) + " of parameters; peak " +
                                mib(x.peak_mib)
                : x.micro_batches > 1 && x.micro_batch_samples
                    ? adds + " per micro-batch of " +
                          std::to_string(*x.micro_batch_samples) + " samples (" + std::to_string(x.micro_batches) +
                          " a step" + at(x.at) + ", " + mib(x.per_sample_mib.value_or(0)) +
                          " per sample), against " + mib(x.parameter_mib) + " of parameters; peak " + mib(x.peak_mib)
                          : adds + " per step" + at(x.at) + " (" +
                                mib(x.per_sample_mib.value_or(0)) + " per sample), against " + mib(x.parameter_mib) +
                                " of parameters; peak " + mib(x.peak_mib);
            if (x.range) {
              // Steps of one batch whose forwards differ: the figure is the
              // median step's (an independent check's ConvNeXt on image
              // sizes that vary read one figure, another by module and a
              // third in its capacity, none said to be a step's).
              s += "; the steps' forwards ranged from " + mib(x.range->least_mib) + " (step " +
                   std::to_string(x.range->least_step) + ") to " + mib(x.range->most_mib) + " (step " +
                   std::to_string(x.range->most_step) + ")" +
                   (x.samples                         ? " as their samples did"
                    : x.tokens_varied                 ? " as their tokens did"
                    : x.samples_seen && x.tokens_seen ? " at the same batch and tokens"
                    : x.samples_seen ? " at the same batch: the inputs' shapes varied (image sizes, or lengths not "
                                       "read as tokens)"
                                     : " (the report does not say each step's size: a batch or shapes that varied)") +
                   ": the figure is their median, and the largest, under the run's peak, is what the verdict sets "
                   "against the other consumers";
            }
            if (x.calls > 1 && x.calls_released) {
              s += "; the model was called " + std::to_string(x.calls) +
                   " times before one backward, each call's graph released before the next (torch.autograd.grad "
                   "frees what it used, as an attack's or a penalty's passes do): the figure is about one call's";
            } else if (x.calls > 1) {
              // Chunks run forward before one backward (an independent
              // check's accumulation that summed a list of losses).
              s += "; the model was called " + std::to_string(x.calls) +
                   " times before one backward, so every call's activations are held at once (" +
                   (x.calls_chunked ? "chunks of one batch: the samples are theirs added up)"
                                    : "the samples are the first call's)");
            }
            if (x.gradients_freed_mib > 0) {
              s += "; the loop's zero_grad() runs inside the forward (after the model's call) and frees the last "
                   "step's " + mib(x.gradients_freed_mib) + " of gradients there, added back into this figure";
            }
            if (x.gathered_parameters_mib > 0) {
              s += "; besides, the sharded model's forward gathers " + mib(x.gathered_parameters_mib) +
                   " of its weights and holds them to backward (counted as parameters, not in this figure)";
            }
            if (x.logits_mib) {
              s += "; the logits (batch x length x vocabulary, fp32) are " + mib(*x.logits_mib) + ", " +
                   format_percent(*x.logits_mib / x.made_mib(), 0) + " of it";
            }
            if (x.input_mib && *x.input_mib >= thresholds::kInputsShareOfForward * x.made_mib()) {
              s += "; the inputs it was given hold " + mib(*x.input_mib) + " more on the device (made before the "
                   "forward, not in this figure" + (*x.input_mib > x.made_mib() ? ": more than the forward makes)" : ")");
            }
            if (x.held_over_mib > 0) {
              s += (x.held_beyond_inputs_mib() > 0 ? "; its phase ends only " + mib(x.forward_mib) + " up, for each"
                                                   : std::string("; each")) +
                   " forward also frees what the loop held of the step before: " + mib(x.held_over_mib) +
                   " of a step's tensors stay past its cleanup until the next forward's result replaces them (step "
                   "0's forward, with nothing held, added " + mib(x.forward_mib + x.held_over_mib) + ")";
            }
            return s;
          },
          [](const evidence::PostCleanupTrend& x) { return trend_line(x); },
          [](const evidence::OptimizerStateMade& x) {
            std::string setup;
            if (x.optimizer_setup_mib) setup = "building the optimizer added " + signed_mib(*x.optimizer_setup_mib) + "; ";
            const std::string of_left =
                x.left_mib > x.persistent_mib + std::max(0.05, 0.005 * x.left_mib)
                    ? " as the optimizer's (of the " + mib(x.left_mib) + " the first step left; the rest is not its state" +
                          (x.gradients_kept_mib ? ": " + mib(*x.gradients_kept_mib) +
                                                      " of it gradients still held at the cleanup "
                                                      "(zero_grad(set_to_none=False) keeps them, and a zero_grad() "
                                                      "only after the next forward holds them through it)"
                                                : std::string()) +
                          ")"
                    : "";
            const std::string grew =
                !x.grown_to_mib ? ""
                : x.grew_once_at_step
                    ? ", and the optimizer's state grew to " + mib(*x.grown_to_mib) + " at step " +
                          std::to_string(*x.grew_once_at_step) +
                          "'s step() and stayed there (its census: a buffer made at a later step, as a wrapper's "
                          "slow weights or an average of the weights are, not a history that keeps growing)"
                    : ", and the optimizer's state grew to " + mib(*x.grown_to_mib) +
                          " by the last step (its census: it keeps more as the steps go, as LBFGS's history "
                          "does up to history_size)";
            const std::string transient =
                x.step_transient_mib
                    ? "; step() itself peaks " + mib(*x.step_transient_mib) + " above what it starts and ends with" +
                          (x.step_peak_is_runs ? ", the run's peak" : "") +
                          (x.one_parameter_at_a_time
                               ? std::string(" (the update's temporaries: on the CPU torch updates a parameter at a "
                                             "time, so they are the largest parameter's, made for each in turn)")
                               : std::string(" (the update's temporaries: a multi-tensor (foreach) update makes them "
                                             "for every parameter at once)"))
                    : "";
            return setup + "after the first step() " + mib(x.persistent_mib) + " stays allocated after cleanup" + of_left +
                   grew + ", " + format_fixed(x.ratio_to_parameters, 2) + "x the " + mib(x.parameter_mib) + " of parameters" +
                   transient;
          },
          [](const evidence::StepIncrements& x) {
            return "step() of step 0 added " + signed_mib(x.step0_mib) +
                   (x.step1_mib ? ", of step 1 " + signed_mib(*x.step1_mib) : std::string());
          },
          [](const evidence::DataParallelBuckets& x) {
            return "data parallel over " + std::to_string(x.world_size) +
                   " ranks: the persistent increase includes the gradient buckets made in the first backward "
                   "(about 1x the parameters) besides the optimizer's state";
          },
          [](const evidence::RetainedGrowth& x) {
            std::string s = "post-cleanup allocation grows " + mib(x.per_step_mib) + " every step (" +
                            format_fixed(100 * x.positive_share, 0) + "% of steps up), " + mib(x.total_mib) + " over " +
                            std::to_string(x.at.steps) + " steps" + at(x.at);
            if (x.acceleration_mib) {
              // The mean understates a growth that speeds up: said, and
              // projected on rises that keep growing.
              s += ", and faster every step: it rose " + mib(x.first_rise_mib) + " at the first step and " +
                   mib(x.last_rise_mib) + " at the last, " + mib(*x.acceleration_mib) +
                   " more each step (what keeps it multiplies: a hook, a list or a callback added every step)";
            }
            if (x.fills_at_step && x.budget_mib) {
              s += std::string(x.acceleration_mib ? "; if the rises keep growing so," : "; at this rate") +
                   " the run's peak passes " + mib(*x.budget_mib) + " by step " + std::to_string(*x.fills_at_step);
            }
            return s;
          },
          [](const evidence::RetainedShareOfForward& x) {
            const std::string share = "each step keeps " + format_fixed(100 * x.per_step_mib / x.forward_mib, 0) +
                                      "% of its forward increment (" + mib(x.forward_mib) + ")";
            if (x.parameters_per_step_mib) {
              // The census's parameters grew at the cleanups: the step
              // keeps new weights and their state, no graph.
              return share + ": the loop makes " + mib(*x.parameters_per_step_mib) +
                     " of new parameters a step (the census's parameters at the cleanups)" +
                     (x.state_per_step_mib >= 0.005 ? " and the optimizer " + mib(x.state_per_step_mib) +
                                                          " of state for them"
                                                    : std::string()) +
                     ", not a graph: a parameter, module or param group made inside the loop";
            }
            if (x.kept_tensors_mib) {
              // backward freed what the graph saved: the bytes are the kept tensors' own.
              const std::string walked =
                  x.walked_first_step && x.walked_last_step && x.walked_growth_mib
                      ? " a step over the walked steps " + std::to_string(*x.walked_first_step) + " to " +
                            std::to_string(*x.walked_last_step) + ", whose cleanups rose " +
                            mib(*x.walked_growth_mib) + " a step; named below"
                      : std::string(" a step, named below");
              if (x.kept_graph_mib > 0) {
                return share + ": tensors the loop keeps (" + mib(*x.kept_tensors_mib) + walked +
                       ") outlive the step, and with them what the graph one of them carries saved (" +
                       mib(x.kept_graph_mib) + " a step more)";
              }
              return share + ": tensors the loop keeps (" + mib(*x.kept_tensors_mib) + walked +
                     ") outlive the step, not its graph";
            }
            return share + ": the step's graph outlives the step";
          },
          [](const evidence::WeightsDominate& x) {
            std::string s = "the weights take " + mib(x.parameter_mib) + " of a " + mib(x.peak_mib) + " peak" + at(x.at) +
                            "; forward adds " + mib(x.forward_mib) + ", the first step leaves " +
                            mib(x.first_step_excess_mib);
            if (x.gradients_not_reached) {
              s += "; their gradients are " + mib(*x.gradient_mib) + " at most, though " + mib(*x.trainable_mib) +
                   " of them require gradients: backward never reached them (torch.utils.checkpoint with "
                   "use_reentrant=True given inputs that need no grad, or a detach() or torch.no_grad() inside the "
                   "forward), so the job trains almost none of its weights";
            } else if (x.mostly_frozen) {
              s += "; their gradients are " + mib(*x.gradient_mib) + " at most: nearly all of them are frozen";
            }
            if (x.gathered_mib > 0) {
              s += "; besides this rank's shard, the forward gathers " + mib(x.gathered_mib) +
                   " of the weights and holds them to backward";
            }
            return s;
          },
          [](const evidence::CacheExcess& x) {
            return "reserved peaked at " + mib(x.peak_reserved_mib) + " against " + mib(x.peak_allocated_mib) +
                   " allocated at peak: " + mib(x.excess_mib) + " cached but free";
          },
          [](const evidence::SweepFit& x) { return sweep_line(x.sweep); },
          [](const evidence::ReservedGap& x) {
            return "reserved - allocated reached " + mib(x.max_gap_mib) +
                   " (blocks cached for reuse, not a leak by itself)";
          },
          [](const evidence::StrandedSplits& x) {
            return "free memory stranded in split segments reached " + mib(x.max_inactive_split_mib) + " (" +
                   mib(x.first_step_split_mib) + " in the first step, " + mib(x.last_step_split_mib) +
                   " in the last of " + steps_word(x.steps) + "), and the allocator freed its cache and retried " +
                   std::to_string(x.alloc_retries) + " time" + (x.alloc_retries == 1 ? "" : "s") +
                   " to place requests no block fitted; reserved peaked at " + mib(x.peak_reserved_mib) + " for " +
                   mib(x.peak_allocated_mib) + " allocated";
          },
          [](const evidence::EvaluationPeak& x) {
            return "forwards that train nothing (an evaluation between steps, " + std::to_string(x.forwards) +
                   (x.forwards == 1 ? " call" : " calls") +
                   (x.samples ? ", up to " + std::to_string(*x.samples) + " samples each" : std::string()) +
                   ") peaked at " + mib(x.peak_mib) + (x.step ? " (the highest by step " + std::to_string(*x.step) + ")" : std::string()) +
                   ", above the training phases' " + mib(x.training_peak_mib) +
                   ": the run's peak is the evaluation's, at its own batch whatever the training batch";
          },
          [](const evidence::HeldBeforeTraining& x) {
            std::string s = "when recording began " + mib(x.mib) + " was allocated beyond the model's " +
                            mib(x.parameter_mib) + " of weights and what the warm-up made: ";
            if (x.buffer_mib >= thresholds::kMinimumSignalMib) {
              std::string named;
              for (const auto& [name, size] : x.buffers) {
                if (size < 0.01) continue;
                named += (named.empty() ? "" : ", ") + name + " " + mib(size);
              }
              s += (x.buffer_mib >= 0.9 * x.mib ? "the model's own buffers" : mib(x.buffer_mib) + " of it the model's own buffers") +
                   (named.empty() ? std::string() : " (" + named + ")") +
                   ", state its modules keep that is no parameter";
              if (x.buffer_mib >= 0.9 * x.mib) return s;
              s += "; the rest ";
            }
            return s + "another model's weights (an EMA copy, a frozen teacher), " +
                   std::string(x.cuda ? "data kept on the device, or library workspaces made before recording began "
                                        "(cuBLAS's: 32 MiB a thread that ran a matmul)"
                                      : "or data kept in memory");
          },
          [](const evidence::OutsideAllocator& x) {
            return "device used - reserved: " + mib(x.device_minus_reserved_mib) +
                   " (CUDA context, library workspaces outside the allocator, other processes)";
          },
          [](const evidence::OutOfMemory& x) { return oom_line(x); },
          [](const evidence::KeptAcrossSteps& x) { return kept_line(x); },
          [](const evidence::ResidentTensors& x) { return resident_line(x); },
          [](const evidence::ForwardByModule& x) { return modules_line(x); },
      },
      e);
}

namespace {
// "rank 2", "ranks 2 and 3", "ranks 2, 3 and 4"; with more than listed,
// "ranks 2, 3, ... (7 of world 9)".
std::string rank_list(const std::vector<int>& ranks, std::int64_t count, int world_size) {
  std::string s = ranks.size() == 1 && count == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const bool last = i + 1 == ranks.size() && static_cast<std::int64_t>(ranks.size()) == count;
    s += (i == 0 ? "" : last ? " and " : ", ") + std::to_string(ranks[i]);
  }
  if (static_cast<std::int64_t>(ranks.size()) < count) {
    s += ", ... (" + std::to_string(count) + " of world " + std::to_string(world_size) + ")";
  }
  return s;
}
}  // namespace

std::string describe(const Warning& w) {
  return std::visit(Overload{
                        [](const warning::RunStopped& x) { return x.source + ": " + describe(x.stop); },
                        [](const warning::RankImbalance& x) {
                          return describe_rank_run(x.run) + (x.variant != "none" ? ", " + x.variant : std::string()) +
                                 ": ranks imbalanced, peak differs by " +
                                 format_fixed(100 * x.imbalance, 0) + "%; rank " + std::to_string(x.max_rank) +
                                 " is the capacity constraint at " + mib(x.max_peak_mib) +
                                 (x.most_samples > x.fewest_samples
                                      ? "; rank " + std::to_string(x.most_samples_rank) + " runs " +
                                            std::to_string(x.most_samples) + " samples a step to the fewest's " +
                                            std::to_string(x.fewest_samples) + " (x" +
                                            format_fixed(static_cast<double>(x.most_samples) /
                                                             static_cast<double>(x.fewest_samples), 2) +
                                            ")"
                                      : std::string()) +
                                 (x.most_state_mib && x.least_state_mib
                                      ? "; rank " + std::to_string(x.most_state_rank) + " holds " +
                                            mib(*x.most_state_mib) + " of optimizer state to the least's " +
                                            mib(*x.least_state_mib)
                                      : std::string()) +
                                 (x.kept_per_step_mib
                                      ? "; rank " + std::to_string(x.max_rank) + "'s loop keeps " +
                                            mib(*x.kept_per_step_mib) + " more every step (named in the evidence), " +
                                            mib(x.kept_mib) + " over its recorded steps: the leak is that rank's"
                                      : std::string()) +
                                 (x.cpu_readings_overstate
                                      ? " (recorded on the CPU, where PyTorch's profiler misses the frees made in the "
                                        "collectives' own threads: a difference this size may be that; a CUDA run of "
                                        "the ranks tells)"
                                      : "");
                        },
                        [](const warning::RankSetIncomplete& x) {
                          std::string s = describe_rank_run(x.run) + ": the reports do not make the run's world of " +
                                          std::to_string(x.gaps.world_size) + " ranks:";
                          if (x.gaps.missing_count > 0) {
                            s += " " + rank_list(x.gaps.missing, x.gaps.missing_count, x.gaps.world_size) +
                                 " not given";
                          }
                          if (!x.gaps.repeated.empty()) {
                            s += std::string(x.gaps.missing_count > 0 ? ";" : "") + " " +
                                 rank_list(x.gaps.repeated, static_cast<std::int64_t>(x.gaps.repeated.size()),
                                           x.gaps.world_size) +
                                 " given more than once (";
                            for (std::size_t i = 0; i < x.repeated_sources.size(); ++i) {
                              s += (i ? ", " : "") + x.repeated_sources[i];
                            }
                            s += ")";
                          }
                          return s + "; per-rank figures and the capacity constraint are the given reports' only";
                        },
                        [](const warning::RecordingProblems& x) {
                          std::string s = x.source + ": recorded without what it needs: ";
                          for (std::size_t i = 0; i < x.problems.size(); ++i) s += (i ? "; " : "") + x.problems[i];
                          return s;
                        },
                        [](const warning::StepNotes& x) {
                          std::string s = x.source + ": ";
                          for (std::size_t i = 0; i < x.notes.size(); ++i) s += (i ? "; " : "") + x.notes[i];
                          if (x.count > x.notes.size()) {
                            s += "; and " + std::to_string(x.count - x.notes.size()) + " more such notes";
                          }
                          return s + " (those steps' figures are of a step without its update)";
                        },
                        [](const warning::BatchGiven& x) {
                          return x.source + ": batch_size " + std::to_string(x.given) +
                                 " was given to the recorder, and step 0's inputs showed " + std::to_string(x.seen) +
                                 " (their first dimension): every figure per sample, the largest batch and the "
                                 "confirming batches count the given " + std::to_string(x.given) +
                                 " a step; the steps' own samples and tokens are left out";
                        },
                        [](const warning::BatchAssumed& x) {
                          return x.source + ": its writer could not see the batch (no tensor with a batch dimension "
                                 "among the model's inputs) and wrote 1: nothing per sample, no largest batch; record "
                                 "with batch_size= given";
                        },
                        [](const warning::GrowthUnseenFrees& x) {
                          if (x.buckets_before_recording_mib && x.growth_per_step_mib == 0) {
                            return x.source + ": DDP's gradient buckets (" + mib(*x.buckets_before_recording_mib) +
                                   "), made before recording began, were rebuilt at the second step's forward; a "
                                   "CPU rank's allocated is read off PyTorch's profiler, which saw the new ones made "
                                   "but not the first ones' free, so the readings before the rebuild are taken " +
                                   mib(*x.buckets_before_recording_mib) +
                                   " higher, as the process held them (the rise is the buckets, not the forward's "
                                   "and no leak); a CUDA run reads them directly";
                          }
                          return x.source + ": its post-cleanup allocation " +
                                 (x.rise
                                      ? std::string(x.rise->rises > 1 ? "rose " : "rose once, ") + signed_mib(x.rise->mib) + " after step " +
                                            std::to_string(x.rise->after_step) + ","
                                      : "moved " + signed_mib(x.growth_per_step_mib) + " a step,") +
                                 " not taken for a leak: a CPU rank's allocated is read off PyTorch's profiler, "
                                 "which misses frees made in the collectives' threads (Gloo) and frees of what was "
                                 "made before recording began (DDP's first gradient buckets, rebuilt after its first "
                                 "step), and the recorder's walk of the live tensors named nothing kept; a CUDA run "
                                 "tells";
                        },
                        [](const warning::InputsVaried& x) {
                          std::string s = x.source + ": what the steps were given varied:";
                          const auto range = [](const SizeRange& r, const char* unit) {
                            return " " + std::to_string(r.least) + " to " + std::to_string(r.most) + " " + unit +
                                   " a step (x" + format_fixed(static_cast<double>(r.most) / static_cast<double>(r.least), 2) +
                                   " over " + std::to_string(r.steps) + " steps)";
                          };
                          if (x.samples) s += range(*x.samples, "samples");
                          if (x.tokens) s += std::string(x.samples ? ";" : "") + range(*x.tokens, "tokens");
                          s += "; figures per sample are each step's own";
                          if (x.samples) s += ", and the configured batch (" + std::to_string(x.configured_batch) +
                                              ") is not every step's";
                          return s;
                        },
                    },
                    w);
}

namespace {
std::string rule_words(const Decision& d, const std::string& primary_source) {
  switch (d.rule) {
    case DecisionRule::kNoCompletedStep:
      return "no completed step was recorded in " + primary_source + " (status " + to_string(d.status) +
             "): no step reached its cleanup, so what a step leaves behind (optimizer state, a retained graph) was "
             "never measured and no cause is claimed";
    case DecisionRule::kBelowSignal:
      return "nothing measured reaches " + mib(d.threshold) + "; largest is " +
             (d.top ? to_string(d.top->cause) + std::string(" at ") + mib(d.top->mib) : std::string("nothing"));
    case DecisionRule::kOneStepAmbiguous:
      return "the first step left " + mib(d.first_step_persistent_mib.value_or(0)) +
             " behind after cleanup, but with one step optimizer state made once cannot be told from a graph "
             "retained every step";
    case DecisionRule::kTooClose: {
      auto part = [](const Component& c) {
        // Activations with what the loop holds of a step: both figures,
        // the first being the runs table's forward column.
        const std::string basis = c.held_over_mib > 0 && c.mib > c.held_over_mib
                                      ? ": " + mib(c.mib - c.held_over_mib) + " " +
                                                            cause_basis(c.cause) + " and " + mib(c.held_over_mib) +
                                                            " of a step the loop holds into the next"
                                                      : ", " + std::string(cause_basis(c.cause));
        return std::string(to_string(c.cause)) + " (" + mib(c.mib) + basis + ")";
      };
      return part(*d.top) + " and " + part(*d.runner_up) + " are within " +
             format_fixed(100 * (d.threshold - 1), 0) + "% of each other";
    }
    case DecisionRule::kGrowsEveryStep:
      return "memory kept on every step is unbounded: " + std::string(to_string(d.top->cause)) + " (" +
             mib(d.top->mib) + " so far) is named" +
             (d.runner_up ? " beside " + std::string(to_string(d.runner_up->cause)) + " (" + mib(d.runner_up->mib) +
                                (d.runner_up->mib > d.top->mib ? "), larger now" : "), within the margin")
                          : std::string()) +
             ", since it grows until the run runs out" +
             (d.growth_steps > 0 && d.growth_steps < thresholds::kMinConfirmSteps
                  ? " as far as " + steps_word(d.growth_steps) + " show (a cache the loop bounds after more steps "
                    "reads the same over so few: the longer run below tells)"
                  : std::string());
    case DecisionRule::kDominantAtPeak: {
      const Decision::PeakSplit& x = *d.peak_split;
      return "activations (" + mib(d.top->mib) + ") and parameters (" + mib(d.runner_up->mib) + ") are within " +
             format_fixed(100 * (d.threshold - 1), 0) + "% of each other by their own figures; at the run's peak (" +
             to_string(x.phase) + ", " + mib(x.peak_mib) + ") " + mib(x.with_batch_mib) +
             " grows with the batch against " + mib(x.model_state_mib) +
             " of the model's state (weights, gradients, optimizer state): activations";
    }
    case DecisionRule::kDominant:
    case DecisionRule::kOutOfMemory: return {};
  }
  return {};
}
}  // namespace

std::string describe(const Decision& d, const std::string& primary_source) {
  const std::string rule = rule_words(d, primary_source);
  if (d.set_aside.empty()) return rule;
  std::string s = (rule.empty() ? "" : rule + "; ") + "set aside from the decision, since the steps' sizes varied (the reserve follows the largest step, "
                  "and blocks cut for one shape strand memory for the next): ";
  for (std::size_t i = 0; i < d.set_aside.size(); ++i) {
    s += (i ? ", " : "") + std::string(to_string(d.set_aside[i].cause)) + " " + mib(d.set_aside[i].mib);
  }
  return s + "; how much an allocator setting reclaims is measured by a run with it (--remedy expandable-segments "
             "or max-split=N; PYTORCH_ALLOC_CONF for a job of one's own)";
}

}  // namespace memdiag
