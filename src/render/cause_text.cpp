// The causes memdiag names, in words: a label, the measurement each figure
// comes from, the response each calls for and the remedies that would not
// help. Knowledge keyed on the verdict, never on a case's name.
#include "memdiag/format.hpp"
#include "memdiag/parallelism.hpp"
#include "memdiag/render.hpp"

#include <algorithm>
#include <cctype>
#include <set>
#include <string>

namespace memdiag {
namespace {

// A "would not help", whether it rests on a stable post-cleanup allocation
// (then said only where the evidence shows one), and the remedies it is
// about (where one of them was measured, what it did is said with it).
struct NotHelpful {
  NotHelpful(const char* t, bool stable = false) : text(t), needs_stable(stable) {}  // NOLINT: lists of strings
  NotHelpful(const char* t, std::vector<RemedyKind> k) : text(t), needs_stable(false), about(std::move(k)) {}
  const char* text;
  bool needs_stable;
  std::vector<RemedyKind> about;
};

struct CauseText {
  const char* label;
  const char* basis;
  const char* response;
  std::vector<NotHelpful> not_helpful;
};

// The response to activations up to its last choices (precision and
// kernels): one text for the response and for a job whose activations are
// 16-bit already. A macro, so that each whole response stays a literal.
#define MEMDIAG_ACTIVATIONS_HEAD                                                                              \
  "Reduce the per-device micro-batch (keep the global batch with gradient accumulation), use activation "   \
  "checkpointing to recompute intermediates in backward, offload what layers save for backward to host "    \
  "memory (torch.autograd.graph.save_on_cpu), or use "

const CauseText& text_of(Cause c) {
  static const CauseText activations{
      "forward activations", "forward increment (steady state)",
      MEMDIAG_ACTIVATIONS_HEAD "lower-precision (bf16) activations or a memory-efficient kernel.",
      {{"empty_cache(): activations are live tensors until backward frees them; the cache holds none of them.",
        {RemedyKind::kEmptyCache}},
       {"Splitting the batch into chunks run forward before one backward: every chunk's activations stay saved "
        "until that backward; only a backward per chunk (gradient accumulation) divides them.",
        {RemedyKind::kSplit}},
       {"Optimizer-state sharding or a lighter optimizer: the optimizer's state is not what grows with the batch.",
        {RemedyKind::kSgd, RemedyKind::kStateBf16, RemedyKind::kState8bit, RemedyKind::kAdafactor,
         RemedyKind::kOffloadState}},
       {"Fixing graph lifetime: the post-cleanup allocation is stable, nothing is being retained across steps.",
        true}}};
  static const CauseText optimizer_state{
      "optimizer state (persistent per-parameter buffers)", "persistent increase made once, at the first step",
      "Shard optimizer state across data-parallel ranks (ZeRO-1 / FSDP), use a lower-memory optimizer (SGD with "
      "momentum, Adafactor), keep the moments in lower precision where that is acceptable (bf16, or 8-bit "
      "blocks as in 8-bit Adam), or keep them with an fp32 copy of the weights on the host (CPU offload).",
      {{"Activation checkpointing: it recomputes forward intermediates; the optimizer's state (moments, momentum, "
        "an update history) persists between steps regardless.",
        {RemedyKind::kCheckpoint}},
       "A smaller batch: the state is per parameter, not per sample.",
       {"empty_cache(): the optimizer's state is live tensors it holds.", {RemedyKind::kEmptyCache}}}};
  static const CauseText retained_graph{
      "retained autograd graphs (a lifetime bug)", "post-cleanup growth over all steps",
      "Stop retaining graphs: call backward() without retain_graph, and log losses as detached CPU scalars "
      "(loss.detach().cpu().item(), or a running sum) instead of keeping graph-connected tensors.",
      {"Sharding (FSDP/ZeRO): it divides model state, and merely spreads the leak across processes.",
       {"empty_cache(): the retained graphs are live tensors; nothing cached is freed.", {RemedyKind::kEmptyCache}},
       "Activation checkpointing or a smaller batch: they shrink each retained graph, but the loop still keeps one "
       "every step, and they add up.",
       "loss.detach() kept on the GPU: it cuts the graph but keeps the loss tensor's own storage alive."}};
  static const CauseText parameters{
      "model parameters (weights and their gradients)", "parameter bytes",
      "Shard parameters (FSDP), train in bf16 with fp32 master weights only where needed, or use a smaller "
      "model or parameter-efficient fine-tuning.",
      {{"A smaller batch or activation checkpointing: weights do not depend on the batch.", {RemedyKind::kCheckpoint}},
       {"empty_cache(): the weights are live tensors.", {RemedyKind::kEmptyCache}}}};
  static const CauseText allocator_cache{
      "caching-allocator reserve (cached but free blocks)", "peak reserved minus peak allocated",
      "Cached blocks are reused by later allocations; where other processes need the memory, a memory fraction "
      "with garbage_collection_threshold (--remedy gc-threshold=P) or expandable_segments:True hands it back "
      "sooner than empty_cache() after each step.",
      {"Treating the reserved - allocated gap as a leak: cached blocks are reused by later allocations.",
       "Reducing tensors the model holds: allocated memory is not what is large here."}};
  static const CauseText fragmentation{
      "free memory stranded in split segments",
      "free memory stranded in split segments that still hold a live block",
      "Let the allocator reuse the stranded memory: run with PYTORCH_ALLOC_CONF=expandable_segments:True "
      "(memdiag: --remedy expandable-segments), which unmaps freed pages between live blocks; or keep large "
      "cached blocks whole with max_split_size_mb (--remedy max-split=N), or round varying shapes to fewer sizes "
      "(roundup_power2_divisions, --remedy roundup-pow2=N); give shapes that vary a fixed set of sizes (pad or "
      "bucket them).",
      {"A smaller model or batch alone: the memory was there, in pieces no request fitted; the same shape "
       "schedule strands memory at any size.",
       "empty_cache(): it releases only segments with no live block, which the allocator already did before it "
       "gave up; the stranded pieces sit beside live blocks.",
       "Treating the gap as a leak: allocated memory is what the tensors need; the reserve is what the "
       "allocator could not reuse."}};
  static const CauseText inconclusive{
      "no single dominant cause", "",
      "Run the confirming commands below; compare reports of the same case that differ in one setting.", {}};
  switch (c) {
    case Cause::kActivations: return activations;
    case Cause::kOptimizerState: return optimizer_state;
    case Cause::kRetainedGraph: return retained_graph;
    case Cause::kParameters: return parameters;
    case Cause::kAllocatorCache: return allocator_cache;
    case Cause::kFragmentation: return fragmentation;
    case Cause::kInconclusive: return inconclusive;
  }
  return inconclusive;
}

}  // namespace

const char* cause_label(Cause c) { return text_of(c).label; }
const char* cause_basis(Cause c) { return text_of(c).basis; }
const char* cause_response(Cause c) { return text_of(c).response; }

std::string cause_label_for(const Verdict& v) {
  if (v.parameters_made_per_step_mib) return "parameters made every step (a lifetime bug)";
  if (v.kept_tensors_not_graphs) return "tensors kept across steps (a lifetime bug)";
  return cause_label(v.dominant);
}


namespace {

// The verdict's evidence of one kind, where it has one.
template <typename T>
const T* first_of(const Verdict& v) {
  for (const Evidence& e : v.evidence) {
    if (const auto* x = std::get_if<T>(&e)) return x;
  }
  return nullptr;
}

// The forward's inputs, where they outweigh what the forward makes.
const evidence::ForwardIncrement* inputs_outweigh(const Verdict& v) {
  if (v.dominant != Cause::kActivations) return nullptr;
  for (const Evidence& e : v.evidence) {
    const auto* f = std::get_if<evidence::ForwardIncrement>(&e);
    if (f && f->input_mib && *f->input_mib > f->made_mib()) return f;
  }
  return nullptr;
}

// The forward, where the model was called more than once before one
// backward (the report's forwards).
const evidence::ForwardIncrement* called_before_backward(const Verdict& v) {
  for (const Evidence& e : v.evidence) {
    const auto* f = std::get_if<evidence::ForwardIncrement>(&e);
    if (f && f->calls > 1 && !f->calls_released) return f;
  }
  return nullptr;
}

// The forward whose phase freed a tenth or more of what it made of what
// the loop held of the step before, beyond its inputs: one step's tensors
// (outputs, or a graph a model run with gradients on left behind its
// detached result) kept until the next forward replaces them. An
// independent check's teacher with gradients on and its logits detached
// held 138 MiB of graph so, while the would-not-help said nothing was
// retained across steps.
const evidence::ForwardIncrement* held_into_next_step(const Verdict& v) {
  for (const Evidence& e : v.evidence) {
    const auto* f = std::get_if<evidence::ForwardIncrement>(&e);
    if (f && f->held_beyond_inputs_mib() > 0 &&
        f->held_beyond_inputs_mib() >= thresholds::kRemedyReduction * f->made_mib()) {
      return f;
    }
  }
  return nullptr;
}

// The response to activations, for what the job takes already:
// checkpointing on is not offered again, and a job under autocast (or with
// 16-bit weights) makes 16-bit activations already, so lower precision is
// no step left to take. Also a tie's, where activations are one of two.
std::string activations_response(const Verdict& v) {
  if (v.checkpointing_outside_mib) {
    return "Reduce the per-device micro-batch (keep the global batch with gradient accumulation), extend activation "
           "checkpointing to the layers it leaves out (it is on in part of the model, as the recorder saw it: " +
           format_mib(*v.checkpointing_outside_mib) +
           " MiB of what the forward saves for backward lies outside its checkpointed regions), offload what layers "
           "save for backward to host memory (torch.autograd.graph.save_on_cpu), or use " +
           std::string(v.lower_precision.empty() ? "lower-precision (bf16) activations or a memory-efficient kernel."
                                                 : "a memory-efficient kernel; lower precision is taken already (" +
                                                       v.lower_precision + ").");
  }
  if (!v.checkpointing_taken.empty()) {
    return "Reduce the per-device micro-batch (keep the global batch with gradient accumulation), offload what "
           "layers save for backward to host memory (torch.autograd.graph.save_on_cpu), or use " +
           std::string(v.lower_precision.empty() ? "lower-precision (bf16) activations or a memory-efficient kernel"
                                                 : "a memory-efficient kernel; lower precision is taken already (" +
                                                       v.lower_precision + ")") +
           "; activation checkpointing is taken already (" + v.checkpointing_taken + ").";
  }
  if (!v.lower_precision.empty()) {
    return MEMDIAG_ACTIVATIONS_HEAD "a memory-efficient kernel; lower precision is taken already (" +
           v.lower_precision + ").";
  }
  return cause_response(Cause::kActivations);
}

// Two consumers within the margin: the one run that tells them apart and
// what it will show (the confirming runs below are that run).
std::string tie_response(const Verdict& v) {
  const TiedPairTest test = tied_pair_test(v.decision);
  if (test == TiedPairTest::kNone) return {};
  const Component& a = *v.decision.top;
  const Component& b = *v.decision.runner_up;
  const std::string pair = std::string(to_string(a.cause)) + " (" + format_mib(a.mib) + " MiB) and " +
                           to_string(b.cause) + " (" + format_mib(b.mib) + " MiB) are too close to name one";
  // The one of the two that the run leaves as it is.
  const auto other = [&](std::initializer_list<Cause> moving) {
    const bool a_moves = std::find(moving.begin(), moving.end(), a.cause) != moving.end();
    return std::string(to_string(a_moves ? b.cause : a.cause));
  };
  switch (test) {
    case TiedPairTest::kExpandableSegments:
      return pair + "; the run below under expandable segments tells them apart (PYTORCH_ALLOC_CONF="
                    "expandable_segments:True in a job of one's own): the allocator's cached and stranded memory "
                    "shrinks under it, " + other({Cause::kAllocatorCache, Cause::kFragmentation}) +
             " does not. Compare its report with this one.";
    case TiedPairTest::kLongerRun:
      return pair + "; the longer run below tells them apart: a retained graph adds to the post-cleanup "
                    "allocation at every step, " + other({Cause::kRetainedGraph}) +
             " does not. Compare its report with this one.";
    case TiedPairTest::kSmallerBatch: {
      const bool batch_sweep_given = std::any_of(v.sweeps.begin(), v.sweeps.end(), [](const Sweep& w) {
        return w.kind == SweepKind::kBatch && w.increasing;
      });
      if (v.confirm.empty() && batch_sweep_given) {
        // The smaller batches were given beside this run: they show which
        // is which, and at this batch both are as large.
        return pair + " at this batch; the reports at other batches beside it tell them apart (activations shrink "
                      "with the batch, " + other({Cause::kActivations}) +
               " does not), so both must shrink for this batch to fit in less: " +
               activations_response(v) + " And for " + other({Cause::kActivations}) + ": " +
               cause_response(a.cause == Cause::kActivations ? b.cause : a.cause);
      }
      // "other", not "smaller": at batch 1 the runs are at larger ones.
      return pair + "; the runs below at other batches tell them apart: activations follow the batch, " +
             other({Cause::kActivations}) + " does not. Compare their reports with this one.";
    }
    case TiedPairTest::kModelState:
      return pair + ", and both are per parameter: no run at another batch or length tells them apart, and none "
                    "needs to. What divides both divides the model's state: shard it across data-parallel ranks "
                    "(FSDP or ZeRO-3 shards the weights, gradients and state; ZeRO-1 the state alone), keep less a "
                    "parameter (an optimizer with fewer buffers: SGD without momentum keeps none; bf16 weights and "
                    "state), or use a smaller model.";
    case TiedPairTest::kNone: break;
  }
  return {};
}

// The cause's response, for what the job already does: nearly frozen
// weights (LoRA, adapters) are parameter-efficient already, state sharded
// already (ZeroRedundancyOptimizer, FSDP) is not told to shard, 16-bit
// activations or weights are not told to lower their precision, and a
// batch that is mostly its inputs is told what divides them.
std::string base_response(const Verdict& v) {
  if (v.dominant == Cause::kInconclusive) {
    // A recording that could not read the loop: no run settles what it
    // missed; recording it as its warning says does.
    for (const Warning& w : v.warnings) {
      if (std::holds_alternative<warning::RecordingProblems>(w)) {
        return "Record the loop again as the warning above says: this recording missed what decides a cause, and "
               "no run beside it can supply that.";
      }
    }
    if (std::string r = tie_response(v); !r.empty()) return r;
  }
  if (const evidence::ForwardIncrement* f = inputs_outweigh(v)) {
    // A job whose batch is mostly its inputs: what the forward saves for
    // backward is the smaller part.
    return "Reduce the per-device micro-batch (keep the global batch with gradient accumulation): the inputs the "
           "forward is given hold " + format_mib(*f->input_mib) + " MiB on the device, more than the " +
           format_mib(f->made_mib()) + " MiB it makes, and a smaller batch divides both. Hold one batch of inputs on the "
           "device at a time (a loader that prefetches to the device holds the next beside it).";
  }
  if (v.dominant == Cause::kActivations) {
    if (const evidence::ForwardIncrement* f = called_before_backward(v)) {
      // Chunks of a batch whose losses are summed before one backward
      // hold every chunk's activations: a backward per chunk is the fix.
      // Chunks of one batch the recorder saw as such (one storage, each
      // following the last): the fix is open whatever the loss.
      if (f->calls_chunked) {
        return "Call backward after each of the model's " + std::to_string(f->calls) +
               " calls, on its chunk's share of the loss (they are chunks of one batch: the gradients accumulate "
               "between them, and each chunk's activations are freed by its own backward) instead of summing the "
               "losses first. " + activations_response(v);
      }
      return "Call backward after each of the model's " + std::to_string(f->calls) +
             " calls where their losses add up (chunks of one batch: the gradients accumulate between them, and "
             "each chunk's activations are freed by its own backward) instead of summing the losses first; "
             "where one loss needs every call's output (two views of a contrastive pair), that is not open, and "
             "the rest applies. " + activations_response(v);
    }
    return activations_response(v);
  }
  const bool weights_16_bit = v.lower_precision == "16-bit weights";
  for (const Evidence& e : v.evidence) {
    const auto* w = std::get_if<evidence::WeightsDominate>(&e);
    if (w && v.dominant == Cause::kParameters && definition(v.primary_mode).shards_parameters &&
        w->gathered_mib >= thresholds::kGatheredShareOfModel * w->parameter_mib * v.primary_world_size) {
      // Sharded already, but its units hold most of the model gathered
      // from the forward to backward (an independent check's Llama with
      // fully_shard on the root alone: 140.5 MiB gathered beside a 70.26
      // MiB shard, and told "Shard parameters (FSDP)").
      return "The model is sharded already (" + std::string(to_string(v.primary_mode)) + " over " +
             std::to_string(v.primary_world_size) + " ranks), but its forward gathers " + format_mib(w->gathered_mib) +
             " MiB of the weights at once and holds them to backward: call fully_shard on each block (each "
             "transformer layer) before the root, and let each reshard after its forward (reshard_after_forward=True, "
             "the default), so that one block's weights are gathered at a time; more ranks then divide the rest.";
    }
    if (w && v.dominant == Cause::kParameters && w->gradients_not_reached) {
      // No memory fix first: the job is not training what it means to.
      return "First make backward reach the weights: " + format_mib(*w->trainable_mib) +
             " MiB of them require gradients and at most " + format_mib(*w->gradient_mib) +
             " MiB of gradients were made. With torch.utils.checkpoint pass use_reentrant=False (with "
             "use_reentrant=True a checkpointed block whose inputs need no grad gives its weights none, as PyTorch's "
             "warning \"None of the inputs have requires_grad=True\" says), and look for a detach() or a "
             "torch.no_grad() inside the forward. Record the job again then: its activations and gradients, not "
             "its weights, are likely to be what fills memory.";
    }
    if (w && v.dominant == Cause::kParameters && w->mostly_frozen) {
      return weights_16_bit
                 ? "Keep the frozen weights in fewer bits (4/8-bit as QLoRA does: they are 16-bit already and never "
                   "update), shard them across devices (FSDP), or use a smaller base model; the trainable part is "
                   "small already."
                 : "Keep the frozen weights in lower precision (bf16, or 4/8-bit as QLoRA does: they need no fp32 "
                   "master copy, since they never update), shard them across devices (FSDP), or use a smaller base "
                   "model; the trainable part is small already.";
    }
    const auto* m = std::get_if<evidence::OptimizerStateMade>(&e);
    if (m && v.dominant == Cause::kOptimizerState && m->grown_to_mib && !m->grew_once_at_step) {
      return "Bound what the optimizer keeps from step to step: its state grew after the first step, as a history "
             "of updates does (LBFGS keeps history_size of them, each two vectors the size of the parameters): a "
             "shorter history, or an optimizer that keeps none.";
    }
    // One rank: under DDP the first step also leaves its gradient buckets,
    // a parameter's worth (Adam read 3.00x on two ranks).
    if (m && v.dominant == Cause::kOptimizerState && v.primary_world_size <= 1 && m->state_counted &&
        !m->grown_to_mib && m->ratio_to_parameters >= 2.75 && m->ratio_to_parameters <= 3.25) {
      // Three buffers a parameter, measured: which settings make the third
      // (an independent check's centered RMSprop with momentum, 3.00x,
      // was offered only another optimizer).
      return std::string(cause_response(Cause::kOptimizerState)) + " At " + format_fixed(m->ratio_to_parameters, 2) +
             "x the weights it keeps three buffers a parameter, as RMSprop with centered=True and momentum does (its "
             "square average, gradient average and momentum buffer: each setting left off drops one) and Adam with "
             "amsgrad=True (its running maximum beside the two moments).";
    }
  }
  if (const auto* h = first_of<evidence::HeldBeforeTraining>(v);
      h != nullptr && v.dominant == Cause::kParameters &&
      h->mib - h->buffer_mib >= thresholds::kHeldCopyShare * h->parameter_mib) {
    // As much again as the weights held before the loop began: a second
    // copy of a model (an EMA, a teacher) is the cheapest part to move
    // (an independent check's EMA copy, 64 MiB beside 64 MiB of weights,
    // was told only to shard or shrink the model).
    return std::string(weights_16_bit ? "Shard parameters (FSDP), or use a smaller model or parameter-efficient "
                                        "fine-tuning; the weights are 16-bit already."
                                      : cause_response(Cause::kParameters)) +
           " And the " + format_mib(h->mib - h->buffer_mib) + " MiB held before training began" +
           (h->buffer_mib > 0 ? " beyond the model's buffers" : "") + ", beside the model's " +
           format_mib(h->parameter_mib) +
           " MiB: where it is a copy of the model that is not trained (an EMA; a frozen teacher that runs every step "
           "can at least be bf16), " +
           (v.primary_device_kind == "cpu"
                ? std::string("keep it in bf16, or drop it where the run can do without; it needs no gradients or "
                              "optimizer state.")
                : std::string("keep it on the host (torch.optim.swa_utils.AveragedModel(model, device=\"cpu\")) or "
                              "in bf16, or update it every few steps from a host copy; it needs no gradients or "
                              "optimizer state."));
  }
  if (weights_16_bit && v.dominant == Cause::kParameters) {
    return "Shard parameters (FSDP), or use a smaller model or parameter-efficient fine-tuning; the weights are "
           "16-bit already.";
  }
  if (v.dominant == Cause::kOptimizerState && definition(v.primary_mode).shards_optimizer_state) {
    if (const auto& u = v.uneven_state) {
      // Sharded by whole parameters and found uneven (the analysis's
      // Verdict::uneven_state).
      return "The state is sharded already (zero1 over " + std::to_string(v.primary_world_size) +
             " ranks), but by whole parameters and unevenly: rank " + std::to_string(u->most.rank) + " keeps " +
             format_mib(*u->most.first_step_excess_mib) + " MiB after its first step and rank " +
             std::to_string(u->least.rank) + " " + format_mib(*u->least.first_step_excess_mib) +
             " MiB, so more ranks will not split the largest parameter's state. Shard within parameters "
             "(FSDP's fully_shard, ZeRO-2/3's flat shards), or use a lower-memory optimizer (SGD with momentum, "
             "Adafactor) or lower-precision moments (bf16, 8-bit blocks).";
    }
    return "The state is sharded already (" + std::string(to_string(v.primary_mode)) + " over " +
           std::to_string(v.primary_world_size) +
           " ranks): more ranks divide it further; otherwise use a lower-memory optimizer (SGD with momentum, "
           "Adafactor), keep the moments in lower precision where that is acceptable (bf16, or 8-bit blocks as in "
           "8-bit Adam), or keep them with an fp32 copy of the weights on the host (CPU offload).";
  }
  if (const auto* m = first_of<evidence::OptimizerStateMade>(v);
      m != nullptr && v.dominant == Cause::kOptimizerState && m->step_transient_mib && m->step_peak_is_runs) {
    // The run's peak is the update's temporaries. Measured on the CPU
    // (Adam, a 500k x 64 embedding and a head, torch 2.11): step()'s
    // peak above its end 122.1 MiB with foreach=True, 244.1 with
    // foreach=False (a parameter at a time, but two temporaries the size
    // of the largest), 0.0 with fused=True. torch's default is foreach
    // on CUDA and a parameter at a time on the CPU
    // (_default_to_fused_or_foreach).
    return std::string(cause_response(v.dominant)) + " The run's peak is in step(), " +
           format_mib(*m->step_transient_mib) +
           " MiB above what it leaves: the update's temporaries; fused=True (Adam, AdamW, SGD) updates in place "
           "without them" +
           (m->one_parameter_at_a_time
                ? std::string(" (on the CPU the update already runs a parameter at a time: these are the "
                              "largest parameter's temporaries).")
                : std::string(" (foreach=False makes them a parameter at a time, which helps only where no one "
                              "parameter is most of the model)."));
  }
  return cause_response(v.dominant);
}

}  // namespace

namespace {
std::string kept_or_base_response(const Verdict& v);
}  // namespace

// Weights outside the recorded model that backward made gradients for (a
// teacher run with gradients on: an independent check's distillation
// blamed 425 of 533 MiB on "the loss, the loop's own ops" and never said
// no_grad): said first where the forward's activations dominate (its graph
// is theirs), beside the rest otherwise.
std::string response_for(const Verdict& v) {
  std::string r = kept_or_base_response(v);
  // A growth that speeds up: what keeps the tensors is itself added every
  // step (an independent check's forward hook registered in the loop, each
  // keeping a block's output): the fix for the kept tensors alone leaves
  // the keepers piling up.
  if (const auto* g = first_of<evidence::RetainedGrowth>(v); g && g->acceleration_mib && v.dominant == Cause::kRetainedGraph) {
    r = "What the loop keeps grows faster every step (" + format_mib(*g->acceleration_mib) +
        " MiB more each step): something that keeps tensors is itself added every step (a hook registered, a callback "
        "or a list made inside the loop); make it once, before the loop. " + r;
  }
  if (v.parameters_made_per_step_mib) {
    r = "Make parameters, modules and param groups once, before the loop (or free the old ones when a new one "
        "replaces them): every step makes " + format_mib(*v.parameters_made_per_step_mib) + " MiB of new parameters" +
        (v.state_made_per_step_mib >= 0.005
             ? " and the optimizer keeps " + format_mib(v.state_made_per_step_mib) + " MiB of state for them"
             : std::string()) +
        " (optimizer.add_param_group or a new nn.Parameter each step keeps every one).";
  }
  if (const evidence::ForwardIncrement* h = held_into_next_step(v);
      h != nullptr && v.dominant == Cause::kActivations && !v.outside_parameters_mib) {
    r += " Besides, " + format_mib(h->held_beyond_inputs_mib()) +
         " MiB of a step's tensors stay past its cleanup until the next forward replaces them, so two steps' worth "
         "meet at the peak: a variable of the loop still holds the last step's outputs, or a result computed with "
         "gradients on that no backward freed (its graph keeps what it saved, even where only its detached copy "
         "is used); del it after use, and compute what needs no gradients under torch.no_grad().";
  }
  if (const auto* e = first_of<evidence::EvaluationPeak>(v)) {
    r += " The run's peak is its evaluation's: the forwards that train nothing reach " + format_mib(e->peak_mib) +
         " MiB" + (e->samples ? " at " + std::to_string(*e->samples) + " samples" : std::string()) +
         ", above every training phase (" + format_mib(e->training_peak_mib) +
         " MiB), whatever the training batch: evaluate in smaller batches.";
  }
  if (const auto* h = first_of<evidence::ResidentTensors>(v)) {
    // Fixed memory every step stands on: no smaller batch or checkpointing
    // reaches it, only holding it elsewhere or smaller. Said first where
    // it is more than the dominant consumer (a dataset of 64 MiB beside
    // 2 MiB of optimizer state).
    const bool first = !v.components.empty() && h->mib > v.components.front().mib;
    // All of it another model's weights (an EMA copy): their own fix.
    const bool weights_only = !h->tensors.empty() && h->buffer_mib <= 0 &&
                              std::all_of(h->tensors.begin(), h->tensors.end(),
                                          [](const KeptRecord& k) { return k.made_by.has_value(); });
    const std::string share = format_fixed(100.0 * h->share_of_peak(), 0) + "% of the peak";
    const std::string said =
        weights_only
            ? format_mib(h->mib) + " MiB of another model's weights (" + share +
                  ", held by no recorded model or optimizer) stay alive at every step: where it is a copy of the "
                  "model that is not trained (an EMA, a frozen teacher), " +
                  (h->cuda ? std::string("keep it on the host (torch.optim.swa_utils.AveragedModel(model, "
                                         "device=\"cpu\")) or in bf16, or update it every few steps from a host copy")
                           : std::string("keep it in bf16, or drop it where the run can do without")) +
                  "; it needs no gradients or optimizer state."
            : format_mib(h->mib) + " MiB of " +
                  (h->tensors.empty() ? std::string("the model's own buffers")
                   : h->buffer_mib > 0 ? std::string("the loop's own tensors and the model's buffers")
                                       : std::string("the loop's own tensors")) +
                  " (" + share + ") stay alive at every step, under every step's peak whatever its batch: " +
         (h->cuda ? std::string("keep such a buffer or dataset in host memory (pinned: .pin_memory()) and move each "
                                "step's slice to the device (non_blocking=True), or store it smaller")
                  : std::string("store such a buffer or dataset smaller")) +
         " (uint8 frames, bf16), or hold fewer entries.";
    // The weights' response said it already (held before training began,
    // a copy of the model beside the model's own).
    const auto* before = first_of<evidence::HeldBeforeTraining>(v);
    const bool said_already = weights_only && before && v.dominant == Cause::kParameters &&
                              before->mib - before->buffer_mib >= thresholds::kHeldCopyShare * before->parameter_mib;
    if (!said_already) r = first ? "First, " + said + " " + r : r + " Beside that, " + said;
  }
  if (!v.outside_parameters_mib) return r;
  const std::string outside =
      "backward makes gradients for " + format_mib(*v.outside_parameters_mib) +
      " MiB of weights outside the recorded model and its optimizers (a teacher or reference model run with "
      "gradients on): run that model's forward under torch.no_grad() (or set requires_grad_(False) on it), so "
      "that its activations are not saved for a backward it does not need and its gradients are not made";
  if (v.dominant == Cause::kActivations) return "First, " + outside + ". " + r;
  return r + " Besides, " + outside + ".";
}

namespace {
// A gradient made with create_graph=True (torch.autograd.grad of a
// gradient penalty) carries a graph of the backward itself: its node is a
// backward's backward (ConvolutionBackwardBackward0), and that graph keeps
// the input and the intermediate gradients the double backward needs.
bool double_backward(const KeptRecord& k) {
  if (!k.grad_fn) return false;
  const std::string& n = *k.grad_fn;
  const std::size_t first = n.find("Backward");
  return first != std::string::npos && n.find("Backward", first + 1) != std::string::npos;
}

// A tensor outside any graph kept as many times a step as, and of the
// shape of, a double backward's gradient: the input that gradient was
// taken of, which the gradient's graph saved (its fix frees it).
bool saved_by_double_backward(const KeptRecord& k, const std::vector<KeptRecord>& records) {
  if (k.grad_fn || k.made_by || k.held_steps) return false;
  return std::any_of(records.begin(), records.end(), [&](const KeptRecord& o) {
    return o.what == KeptRecord::What::kTensor && double_backward(o) && o.per_step == k.per_step &&
           o.shape == k.shape && !o.held_steps;
  });
}

std::string kept_or_base_response(const Verdict& v) {
  const evidence::KeptAcrossSteps* kept = nullptr;
  for (const Evidence& e : v.evidence) {
    if (const auto* k = std::get_if<evidence::KeptAcrossSteps>(&e)) kept = k;
  }
  if (kept == nullptr) return base_response(v);
  // The fix for what was kept, each kind once, in the order found.
  std::string fix;
  std::set<std::string> said;
  bool graphs_only = true;  // every fix is for a running sum's graph: nodes, little memory yet
  // A graph told to stay keeps its saved tensors: those that are no
  // model output are its, and its fix comes first.
  std::vector<KeptRecord> records = kept->kept;
  const bool retained = std::any_of(records.begin(), records.end(),
                                    [](const KeptRecord& k) { return k.what == KeptRecord::What::kRetainGraph; });
  std::stable_partition(records.begin(), records.end(),
                        [](const KeptRecord& k) { return k.what == KeptRecord::What::kRetainGraph; });
  for (const KeptRecord& k : records) {
    std::string s;
    if (retained && k.what == KeptRecord::What::kTensor && !k.made_by) continue;
    if (k.held_steps && !(v.dominant == Cause::kRetainedGraph &&
                          k.mib_per_step * static_cast<double>(*k.held_steps) >= thresholds::kMinimumSignalMib)) {
      continue;  // a bounded cache beside another cause: no leak to fix
    }
    if (k.what == KeptRecord::What::kTensor && v.dominant != Cause::kRetainedGraph &&
        k.mib_per_step < thresholds::kKeptResponseFloorMib) {
      continue;  // a scalar a step ("keeps memory" for 0.00 MiB read as a claim)
    }
    switch (k.what) {
      case KeptRecord::What::kTensor:
        if (k.held_steps && !k.grad_fn &&
            std::any_of(records.begin(), records.end(), [&](const KeptRecord& o) {
              return o.what == KeptRecord::What::kTensor && o.grad_fn && o.held_steps == k.held_steps;
            })) {
          break;  // held as long as the graphs beside it: saved by them (a first layer's input), their fix frees it
        }
        if (saved_by_double_backward(k, records)) break;  // the gradient's fix below frees it
        if (!retained && !k.held_steps && !k.where && !k.grows && k.made_by &&
            k.made_by->rfind("output of module ", 0) == 0) {
          // A submodule's output kept where no line of the loop's is: a
          // forward hook (or the module's own code) keeps it, and metrics
          // advice does not reach it (an independent check's hook on a
          // GPT-2 block was told to keep .item() of the outputs).
          s = "remove the forward hook (or the module's code) that keeps the " + *k.made_by +
              " every step, or have it keep a detached, reduced value (x.detach().mean(), .item()) instead";
          break;
        }
        if (v.kept_parameter_copies && !k.held_steps && !k.grad_fn && !k.made_by && !k.grows) {
          const std::int64_t n = *v.kept_parameter_copies;
          s = "stop keeping " + (n == 1 ? std::string("a copy") : std::to_string(n) + " copies") +
              " of the parameters (or their gradients) every step: what the loop keeps, " +
              format_mib(v.kept_parameter_copies_mib) + " MiB a step, is " +
              (n == 1 ? std::string("the") : std::to_string(n) + "x the") +
              " weights' size (p.grad.clone() or p.detach().clone() into a list); accumulate into one buffer (or "
              "let .grad accumulate over backward calls), or keep one copy updated in place (an EMA's)";
          break;
        }
        if (!k.held_steps && double_backward(k)) {
          s = "keep a gradient made with create_graph=True detached (g.detach(), or the penalty's .item()) once its "
              "backward has run: its graph (" + *k.grad_fn +
              ") keeps the input it was taken of and the double backward's intermediate gradients alive with it";
          break;
        }
        if (k.held_steps) {
          // The cause itself, bounded: a cache of the last steps' tensors
          // (a deque of features kept attached, 96 MiB of a 144 MiB peak).
          const std::string bound = format_mib(k.mib_per_step * static_cast<double>(*k.held_steps));
          s = k.grad_fn ? "detach what the loop keeps for later steps (x.detach(), or make it under torch.no_grad()): "
                          "it holds the last " + std::to_string(*k.held_steps) + " steps' tensors, " + bound +
                              " MiB at its bound, and with them the graphs that saved them"
                        : "keep fewer steps' tensors, or reduced values of them (.item(), a sum over the batch)" +
                              std::string(v.primary_device_kind == "cpu" ? "" : ", or keep them on the host (.cpu())") +
                              ": the loop holds the last " + std::to_string(*k.held_steps) + " steps', " + bound +
                              " MiB at its bound";
          break;
        }
        if (!k.made_by && !k.grad_fn && !k.grows && k.shape_varies) {
          // A tensor of a new shape kept at every step, outside any graph
          // and no model output: a cache keyed by the input's shape (an
          // independent check's causal masks per sequence length was told
          // to keep ".item()" of each).
          // Or a list of per-step results (predictions of a length that
          // varies): both fixes, the walk cannot tell which it is.
          s = "stop keeping a tensor of each step's own shape across steps: a list of per-step results (predictions "
              "of varying length) is kept as values or on the host (.cpu()); a cache keyed by the input's shape (a "
              "mask or table per length) keeps the few sizes in use (an LRU of them), or the inputs are padded to a "
              "few sizes";
          break;
        }
        // On the CPU the host is where the tensor is: .cpu() returns it
        // as it is, and only a smaller value keeps less (an independent
        // check's CPU job was told to store x.detach().cpu()).
        // What the loop concatenates onto carries a graph (CatBackward0):
        // every step's pieces keep theirs (an independent check's MoCo
        // queue of keys not detached: the key encoder's outputs kept every
        // step, the fix never said).
        if (k.grows && k.grad_fn) {
          s = "concatenate detached tensors onto what the loop keeps (torch.cat([queue, k.detach()])): the kept "
              "tensor carries a graph (" + *k.grad_fn + ") that keeps every step's pieces and what made them; and "
              "bound the history it lengthens every step (keep its last N entries)";
          break;
        }
        s = v.primary_device_kind == "cpu"
                ? (k.grows ? "bound the history the loop lengthens every step (keep its last N entries or a running "
                             "statistic instead of concatenating onto it)"
                   : k.grad_fn ? "keep what the metrics need, not the outputs: the metric's value (.item()) or a "
                                 "reduced tensor (x.argmax(-1), a sum over the batch), detached; on the CPU .cpu() is "
                                 "the same tensor and keeps all of it"
                   : k.made_by ? "keep a reduced value of the outputs, not the outputs: the metric's value (.item()) "
                                 "or x.argmax(-1), a sum over the batch; they are detached already, and on the CPU "
                                 ".cpu() is the same tensor and keeps all of it"
                               : "stop collecting tensors in a list (or dict) that lives across steps: bound it "
                                 "(collections.deque(maxlen=N) keeps the last N, as a replay buffer does) or keep a "
                                 "reduced value of each (.item())")
            : k.grows ? "bound the history the loop lengthens every step (keep its last N entries or a running "
                      "statistic instead of concatenating onto it), or keep it on the host (.cpu())"
            : k.grad_fn
                ? "keep what the metrics need, not the outputs: store x.detach().cpu() or the metric's value "
                  "(.item()) instead of the tensor, which keeps its storage (and, attached, its graph) alive"
            // A model output kept detached: its graph is cut, its storage
            // is on the device still.
            : k.made_by
                ? "keep the outputs on the host, not the device: x.cpu() (they are detached already) or the "
                  "metric's value (.item()); detached, a tensor on the device still keeps its storage alive"
                : "stop collecting tensors in a list (or dict) that lives across steps: bound it "
                  "(collections.deque(maxlen=N) keeps the last N, as a replay buffer does) or move them to the host "
                  "(.cpu())";
        break;
      case KeptRecord::What::kGraph:
        s = "accumulate losses and metrics as numbers (total += loss.item()) or detached (x.detach()): a running "
            "sum of graph-connected tensors keeps every step's graph";
        break;
      case KeptRecord::What::kHeld:
      case KeptRecord::What::kResident: break;
      case KeptRecord::What::kHeldGraph:
        s = "run forwards that no backward follows (evaluation, validation) under torch.no_grad() or "
            "torch.inference_mode()" + (k.where ? " (the one at " + *k.where + ")" : std::string()) +
            ": with autograd on, a forward saves what backward would need, " + format_mib(k.mib_per_step) +
            " MiB here, held as long as the loop keeps its output or a tensor computed from it";
        break;
      case KeptRecord::What::kRetainGraph:
        s = "call backward() without retain_graph=True unless a second backward over the same graph follows";
        break;
    }
    if (!s.empty() && said.insert(s).second) {
      fix += (fix.empty() ? "" : "; ") + s;
      graphs_only = graphs_only && k.what == KeptRecord::What::kGraph;
    }
  }
  if (fix.empty()) return base_response(v);
  fix[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(fix[0])));
  if (v.dominant == Cause::kRetainedGraph) return fix + ".";
  // A running sum's graph holds its nodes, not the tensors backward freed:
  // no MiB figure to give, and "keeps memory" with a stable trend beside
  // it read as a contradiction (an independent check's T5 loop).
  return base_response(v) +
         (graphs_only ? " Besides, the loop keeps every step's autograd graph (its nodes: little memory while "
                        "backward frees what they saved, but more every step, without bound): "
                      : " Besides, the loop keeps memory across steps: ") +
         static_cast<char>(std::tolower(static_cast<unsigned char>(fix[0]))) + fix.substr(1) + ".";
}
}  // namespace

namespace {

// A measured row of a remedy a "would not help" is about, that completed
// and lowered the peak by more than thresholds::kRemedyReduction: what the
// statement leaves out (the peak can fall for a reason other than the
// cause, as the source's splitting shrinks backward's temporaries while
// every chunk's activations stay saved).
const RemedyRow* measured_lower(const Verdict& v, const std::vector<RemedyKind>& about) {
  const RemedyRow* best = nullptr;
  // Rows against the run the verdict is read from, where there are some:
  // a lighter optimizer that cut the state of a smaller batch's baseline
  // (where the state was the cause) said nothing against "would not help"
  // at the batch whose cause is the activations (an independent scan's
  // four batches compared at once).
  const bool primary_rows = std::any_of(v.remedies.begin(), v.remedies.end(),
                                        [&](const RemedyRow& r) { return r.baseline_source == v.primary_source; });
  for (const RemedyRow& r : v.remedies) {
    if (primary_rows && r.baseline_source != v.primary_source) continue;
    if (r.status != RunStatus::kComplete || r.baseline_status != RunStatus::kComplete) continue;
    if (!(r.peak_change_fraction < -thresholds::kRemedyReduction)) continue;
    // By its remedies, or by what the reports show it did (a Python job's
    // "sgd" with less optimizer state: RemedyRow::observed).
    const bool match = std::any_of(r.remedies.begin(), r.remedies.end(),
                                   [&](const Remedy& x) {
                                     return std::find(about.begin(), about.end(), x.kind) != about.end();
                                   }) ||
                       std::any_of(r.observed.begin(), r.observed.end(), [&](RemedyKind k) {
                         return std::find(about.begin(), about.end(), k) != about.end();
                       });
    if (match && (best == nullptr || r.peak_change_fraction < best->peak_change_fraction)) best = &r;
  }
  return best;
}

std::string measured_note(const RemedyRow& r, Cause cause) {
  std::string s = " Measured here, " + r.remedy + " lowers the peak by " + format_percent(-r.peak_change_fraction, 1) +
                  " (" + format_mib(r.baseline_peak_mib) + " -> " + format_mib(r.peak_mib) + " MiB)";
  if (r.cause_mib && r.baseline_cause_mib) {
    s += ", " + std::string(r.reduces_cause ? "and" : "but not") + " " + to_string(cause) + " (" +
         format_mib(*r.baseline_cause_mib) + " -> " + format_mib(*r.cause_mib) + " MiB)";
  }
  return s + (r.reduces_cause ? ": for this job the statement does not hold." : ": what it saves is elsewhere.");
}

}  // namespace

std::vector<std::string> not_helpful_for(const Verdict& v) {
  bool grew = false;
  // A stable post-cleanup allocation is claimed only where one was
  // measured: a trend over cleanups. A run that ran out before its second
  // cleanup (an out-of-memory in step 0) showed none either way.
  bool stable_seen = false;
  std::optional<RunFeatures::OneRise> rose;  // stable but for a rise: said as such
  for (const Evidence& e : v.evidence) {
    if (const auto* t = std::get_if<evidence::PostCleanupTrend>(&e)) {
      grew = grew || t->growing;
      stable_seen = stable_seen || (!t->growing && t->growth_per_step_mib.has_value());
      if (!t->growing && t->rise) rose = t->rise;
    }
    if (std::holds_alternative<evidence::RetainedGrowth>(e) || std::holds_alternative<evidence::KeptAcrossSteps>(e)) {
      grew = true;  // something is kept across steps: the stability claim does not hold
    }
  }
  std::vector<std::string> out;
  bool held_graph = false;  // an evaluation's graph held whole from step to step, not grown
  bool bounded_cache = false;  // the last few steps' tensors kept, let go after a few steps
  bool retained_growth = false;
  for (const Evidence& e : v.evidence) {
    if (const auto* k = std::get_if<evidence::KeptAcrossSteps>(&e)) {
      for (const KeptRecord& r : k->kept) {
        held_graph = held_graph || r.what == KeptRecord::What::kHeldGraph;
        bounded_cache = bounded_cache || (r.what == KeptRecord::What::kTensor && r.held_steps);
      }
    }
    retained_growth = retained_growth || std::holds_alternative<evidence::RetainedGrowth>(e);
  }
  // Each statement, with what a measured remedy row says against it.
  const auto said = [&](const std::vector<NotHelpful>& list) {
    for (const NotHelpful& n : list) {
      const RemedyRow* r = n.about.empty() ? nullptr : measured_lower(v, n.about);
      out.push_back(std::string(n.text) + (r != nullptr ? measured_note(*r, v.dominant) : std::string()));
    }
    return out;
  };
  if (v.dominant == Cause::kRetainedGraph && !held_graph && bounded_cache && !retained_growth) {
    // Kept, bounded: nothing grows per step; detaching or keeping less is
    // the fix, not a remedy that fails.
    static const std::vector<NotHelpful> cache{
        {"empty_cache(): what the loop keeps is live tensors; nothing cached is freed.", {RemedyKind::kEmptyCache}},
        "Sharding (FSDP/ZeRO): it divides model state, not what the loop keeps of its last steps."};
    return said(cache);
  }
  if (v.dominant == Cause::kRetainedGraph && held_graph && !retained_growth) {
    // Held whole, not grown: nothing grows per step, and cutting the
    // graph (detach, no_grad) is the fix, not a remedy that fails.
    static const std::vector<NotHelpful> held{
        {"empty_cache(): the held graph's saved tensors are live; nothing cached is freed.", {RemedyKind::kEmptyCache}},
        "Sharding (FSDP/ZeRO): it divides model state, not what the evaluation's forward saved."};
    return said(held);
  }
  if (v.parameters_made_per_step_mib) {
    // New weights every step: the statements about graphs do not apply.
    static const std::vector<NotHelpful> made{
        "Sharding (FSDP/ZeRO): it divides the parameters and their state, and the loop still makes more every step.",
        {"empty_cache(): the new parameters and their state are live tensors; nothing cached is freed.",
         {RemedyKind::kEmptyCache}},
        {"Activation checkpointing or a smaller batch: the parameters made every step do not depend on the batch.",
         {RemedyKind::kCheckpoint}}};
    return said(made);
  }
  if (v.kept_tensors_not_graphs) {
    // What the walk named is tensors, not graphs: the same statements, of
    // them. detach() alone is said not to help only where no kept tensor
    // carries a graph: one that does (a gradient made with
    // create_graph=True) frees what its graph saved when detached (an
    // independent check's penalty: 1.125 MiB a step kept, 0.375 detached).
    bool attached = false;
    for (const Evidence& e : v.evidence) {
      if (const auto* k = std::get_if<evidence::KeptAcrossSteps>(&e)) {
        for (const KeptRecord& r : k->kept) attached = attached || (r.what == KeptRecord::What::kTensor && r.grad_fn);
      }
    }
    static const std::vector<NotHelpful> kept_tensors{
        "Sharding (FSDP/ZeRO): it divides model state, and merely spreads the leak across processes.",
        {"empty_cache(): the kept tensors are live; nothing cached is freed.", {RemedyKind::kEmptyCache}},
        "Activation checkpointing or a smaller batch: they act on each step's activations, and what the loop keeps "
        "from each step still adds up."};
    said(kept_tensors);
    if (!attached) {
      said({"detach() alone: a detached tensor kept on the device keeps its storage; only the graph is cut."});
    }
    return out;
  }
  if (const evidence::ForwardIncrement* f = inputs_outweigh(v)) {
    const RemedyRow* r = measured_lower(v, {RemedyKind::kCheckpoint, RemedyKind::kOffloadActivations});
    out.push_back("Activation checkpointing or offloading saved activations: they act on the " +
                  format_mib(f->made_mib()) + " MiB the forward makes, not on the " + format_mib(*f->input_mib) +
                  " MiB of inputs it is given." + (r != nullptr ? measured_note(*r, v.dominant) : std::string()));
  }
  const bool chunks_before_backward = called_before_backward(v) != nullptr;
  const bool held_over = held_into_next_step(v) != nullptr;
  for (const NotHelpful& n : text_of(v.dominant).not_helpful) {
    if (n.needs_stable && (grew || !stable_seen)) continue;
    // Nothing grows, but a step's tensors outlive it: the response says
    // what letting them go saves.
    if (n.needs_stable && held_over) continue;
    if (n.needs_stable && rose) {
      // "Nothing is being retained" beside a rise that stayed (a cache
      // filled over three steps, 23.4 MiB kept) says what did not happen.
      out.push_back("Fixing graph lifetime: the post-cleanup allocation does not grow step by step; it rose " +
                    format_mib(rose->mib) + " MiB by step " + std::to_string(rose->next_step) +
                    " and is flat since, so what it keeps is bounded.");
      continue;
    }
    // What the job does (calls before one backward): the response says it.
    if (chunks_before_backward && n.about.size() == 1 && n.about.front() == RemedyKind::kSplit) continue;
    const RemedyRow* r = n.about.empty() ? nullptr : measured_lower(v, n.about);
    out.push_back(std::string(n.text) + (r != nullptr ? measured_note(*r, v.dominant) : std::string()));
  }
  return out;
}

}  // namespace memdiag

#undef MEMDIAG_ACTIVATIONS_HEAD
