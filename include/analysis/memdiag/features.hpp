// Features: the figures one report yields, read off its samples and events.
// Pure functions, no I/O, no words.
#pragma once

#include "memdiag/capacity_model.hpp"
#include "memdiag/replay_capacity.hpp"
#include "memdiag/report.hpp"
#include "memdiag/run_identity.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace memdiag {

// One step's allocator figures. Increments are end-of-phase minus the end of
// the phase before it.
struct StepFigures {
  int step = 0;
  std::optional<double> forward_increment_mib;
  // The forward's peak above what the step started with (the sample
  // before it): what the forward needed at once, whatever it freed.
  std::optional<double> forward_peak_increment_mib;
  std::optional<double> backward_increment_mib;
  // What step() added: with several optimizers stepped in the step (a
  // GAN's two), each one's added up.
  std::optional<double> step_increment_mib;
  int step_samples = 0;  // the step's step() samples: one per optimizer that stepped with a backward before it
  int forwards = 0;      // the step's forward samples: its micro-batches
  bool had_loss = false;  // a step sample of this step carried the loss (RunFeatures::losses holds the last)
  // The largest forward of the step as it was read (its increment, peak
  // increment and allocated): the step's forward where several optimizers
  // stepped in it.
  struct Forward {
    std::optional<double> forward_increment_mib, forward_peak_increment_mib, forward_allocated_mib;
  } largest_forward;
  std::optional<double> cleanup_allocated_mib;
  std::optional<double> cleanup_gradients_mib;  // the census's gradients at the cleanup, where the report has one
  std::optional<double> cleanup_optimizer_state_mib;  // and its optimizer state there
  std::optional<double> cleanup_parameters_mib;       // and the parameters there
  std::optional<double> step_optimizer_state_mib;     // its optimizer state at the step's (last) step() sample
  // Gradients a zero_grad() inside the forward freed (the census before
  // it less at its end): added back into forward_increment_mib, which
  // then says what the forward made.
  double forward_freed_gradients_mib = 0;
  // Weights a fully sharded model (FSDP2) gathered in the forward and
  // still held at its end (the census's parameters at its end less at its
  // start): taken out of forward_increment_mib, which then says what the
  // forward made of activations.
  double forward_gathered_mib = 0;
  double peak_mib = 0;  // highest peak of any phase of the step
  std::optional<double> max_inactive_split_mib;  // CUDA: the most stranded in split blocks at its samples
  // What the forward whose increment is kept (the step's last) was given,
  // and the step's whole batch (its micro-batches added up), where the
  // report says: samples, and tokens for sequence inputs.
  std::optional<std::int64_t> forward_samples, forward_tokens;
  std::optional<std::int64_t> samples, tokens;
  // Allocated at the end of the step's (last) forward, and the highest
  // peak of its backward samples: what a step of its size needs at once.
  std::optional<double> forward_allocated_mib;
  std::optional<double> backward_peak_mib;
};

// The least and the most a recorded step was given, where the report says.
// The steady steps' forward increments where they varied (x1.25 or more
// between the least and the most): what the steps' figure, their median,
// stands for.
struct ForwardRange {
  double least_mib = 0, most_mib = 0;
  std::int64_t least_step = 0, most_step = 0;
};

struct SizeRange {
  std::int64_t least = 0;
  std::int64_t most = 0;
  int steps = 0;  // steps that said
  bool varied() const { return most > least; }
};

// Where and how a run ran out of memory, from its oom event.
struct OomAt {
  std::optional<Phase> phase;
  std::optional<int> step;
  OomDetails details;
  // The budget it ran out of: the allocator's limit when it said, else the
  // run's --memory-limit-mib, else the device's capacity.
  std::optional<double> budget_mib;
  // What the tensors held by role when it failed, and the rest of what was
  // allocated (activations, the batch, temporaries).
  std::optional<double> other_mib;
  // The optimizer state recorded at the end of the phase before the failing
  // one: none means any state seen now was being made by the failing phase.
  std::optional<double> state_before_mib;
};

// Why a run stopped early, from its events.
struct RunStop {
  EventKind kind = EventKind::kError;  // kOom, kInterrupted or kError
  std::optional<Phase> phase;
  std::optional<int> step;
  std::string message;
};

struct RunFeatures {
  std::string source;
  RunIdentity id;  // what the run is: every "same configuration" goes through it
  std::string case_name;
  std::string case_source;   // the case file, for commands that re-run the case
  bool case_builtin = true;  // re-run by name rather than by path
  std::vector<std::string> case_presets;  // empty when the report does not say
  std::map<std::string, std::int64_t> case_preset_parameters;  // each preset's parameters, where the report says
  RunConfig config;
  RunStatus status = RunStatus::kComplete;
  std::int64_t local_batch = 0;  // samples this rank ran per step (rank 0 may carry extra)
  // Gradient accumulation: the micro-batches of a step (a forward and a
  // backward each before one step()), as step 0 ran them; 1 without. The
  // batch is their samples added up, and a confirming run or a capacity
  // keeps their number: a batch of 1 cannot be four micro-batches.
  int micro_batches = 1;
  double parameter_mib = 0;
  // The tensor census at the last step() sample: what this rank holds of
  // the model state (weights, gradients, optimizer state), and that state
  // alone; absent without a census.
  std::optional<double> step_model_state_mib;
  std::optional<double> step_optimizer_state_mib;
  std::optional<double> step_parameters_mib;  // the weights alone, at the same sample
  std::optional<double> largest_module_mib;  // model.largest_module_bytes
  std::optional<double> split_parameter_mib;  // model.split_parameter_bytes (tensor parallelism)
  // The weights this rank holds between steps, what the parameters cause
  // weighs: parameter_mib, except under a mode that shards the parameters
  // (ZeRO-3) or splits layers (tensor parallelism), where the census's
  // count at the last step() is the rank's share (parameter_mib stays the
  // whole model's, the P of the modes' formulas).
  double held_parameter_mib = 0;
  std::string model_attention;  // the report's model.attention: "math", "sdpa", or empty
  std::string model_autocast;    // the report's model.autocast: "bfloat16", "float16", or empty
  bool model_checkpointing = false;  // the report's model.checkpointing
  std::optional<double> model_checkpoint_outside_mib;  // the report's model.checkpoint_outside_mib
  std::optional<double> model_outside_parameters_mib;  // the report's model.outside_parameters_mib
  // model.parameter_bytes / model.parameters: 2 for 16-bit weights; absent
  // without parameters.
  std::optional<double> bytes_per_parameter;
  std::optional<std::int64_t> model_layers;  // the report's model.layers (a transformer's blocks)
  // batch x sequence length x vocab x 4 bytes, from the report's figures,
  // for a language model; absent otherwise.
  std::optional<double> logits_mib;
  std::optional<double> model_ready_mib;  // allocated at model_ready
  std::optional<double> baseline_mib;     // allocated at optimizer_ready
  std::vector<StepFigures> steps;

  // Forward increment in steady state: the median over steps >= 1, or step 0
  // alone when only one step ran.
  std::optional<double> forward_increment_mib;
  // Per sample: the steady steps' increments each over its own forward's
  // samples where the report gives them (a job whose batch varies), else
  // over the configured batch.
  std::optional<double> forward_per_sample_mib;
  // What the forward's inputs held on the device (a forward sample's
  // input_mib, the latest step that gives it: the Python recorder reads
  // steps 0 and 1); made before the forward, so not in its increment.
  std::optional<double> forward_input_mib;
  // The most calls of the model before one backward over the steps (the
  // forward samples' forwards); 1 where every forward was one call.
  int forward_calls = 1;
  bool forward_calls_chunked = false;  // ... chunks of one batch: the samples are theirs added up
  // Each step's samples and tokens over the recorded steps.
  std::optional<SizeRange> step_samples, step_tokens;
  // The steps' samples or tokens varied (dynamic batching, a schedule).
  bool sizes_varied() const {
    return (step_samples && step_samples->varied()) || (step_tokens && step_tokens->varied());
  }
  // cleanup[0] - optimizer_ready: what the first step left behind.
  std::optional<double> first_step_persistent_mib;
  // Least-squares slope of the post-cleanup allocation over steps (>= 2 steps)
  // and the share of step-to-step changes that were increases.
  std::optional<double> growth_per_step_mib;
  std::optional<double> growth_positive_share;
  // Growth that speeds up: every step's rise at least the one before's
  // (over five cleanups or more), the last at least twice the first (a
  // forward hook registered every step, each keeping an output: rises of
  // 2, 3, 4, ... MiB). How much more a step rises each step (the rises'
  // slope), and the last rise. A line through the cleanups puts the step
  // that fills the budget too late (step 66 where 22 measured).
  std::optional<double> growth_acceleration_mib;
  double growth_last_rise_mib = 0;
  double growth_first_rise_mib = 0;
  // The post-cleanup allocation rose once, between two consecutive
  // cleanups, and never moved by more than the growth floor otherwise (a
  // data-parallel job rebuilding its gradient buckets after its first
  // step, a free the CPU's profiler did not see): a step, not a slope.
  // Or it rose at several cleanups in the first half of the steps only
  // and never fell (a cache filled over the first three steps, then
  // full): one rise over those steps (rises: how many), not a slope
  // ("stable (+4.91 MiB per step)" beside 23.4 MiB kept since step 2).
  struct OneRise {
    int after_step = 0;  // between this step's cleanup and the next recorded one's
    int next_step = 0;
    double mib = 0;
    int rises = 1;
  };
  std::optional<OneRise> one_rise;
  bool growth_significant = false;
  // The first step's persistent increase beyond one step's worth of growth:
  // state made once and kept (optimizer moments, DDP buckets).
  std::optional<double> first_step_excess_mib;
  // Of that excess, what the next step's forward released: a step's
  // outputs or graph that the loop's variables held past its cleanup
  // (`out`, or `loss` after backward(retain_graph=True)), freed when the
  // next forward's result replaced them. Seen as step 0's forward adding
  // more than a steady one of its size, by as much as the first cleanup
  // kept. The forward's memory, not state made once: it is counted with
  // the activations, and left out of the optimizer state.
  double held_over_mib = 0;
  // The gradients a zero_grad() inside each steady forward freed (the
  // median), added back into the forward's figure, where the census says.
  double forward_freed_gradients_mib = 0;
  // The weights each steady forward gathered and held (the median), taken
  // out of the forward's figure (FSDP2: the root's, held to backward).
  double forward_gathered_mib = 0;
  // The recorder's walk: what each step's tensors the loop still held at
  // its cleanup came to (a kept event's `held` record), where it walked.
  std::optional<double> walk_held_mib;
  // The steps whose cleanups the walk read (the kept event's); and whether
  // they are every step that reached its cleanup: nothing kept was then
  // found at every one, not only at the first few.
  std::vector<int> walked_steps;
  bool walk_covered_every_step = false;
  // What a graph no backward ran through (an evaluation's forward without
  // torch.no_grad()) still held saved at consecutive cleanups (the
  // recorder's kept record "held_graph"): memory held across steps,
  // bounded, that a fix of the graph's lifetime frees.
  std::optional<double> held_graph_mib;
  bool held_graph_from_first_step = false;  // held from the first walked cleanup on: in step 0's excess
  int held_graph_from_step = 0;  // the first cleanup it was held at
  bool held_graph_grows = false;  // more at each walk: every evaluation's graph kept, a leak
  // What the post-cleanup trend took out of the last cleanup as not kept
  // by the loop: the optimizer's state grown since the first (LBFGS's
  // history), a graph held from a later step on.
  double cleanup_state_taken_mib = 0;
  // Gradients held at some cleanups beyond the least any held (zero_grad()
  // every other step, or only at a step's start): taken out of those
  // cleanups before the trend is read; the most, and at how many.
  double cleanup_gradients_taken_mib = 0;
  int cleanup_gradients_taken_count = 0;
  // Where gradients were taken out, the cleanups without a census (a
  // writer that took one at some cleanups only) are left out of the
  // trend: theirs may have been held too.
  int cleanup_gradients_unknown_count = 0;
  // Parameters the loop made after the first cleanup (the census's at the
  // last cleanup less the first's: a new nn.Parameter or module and its
  // param group every step), and what the optimizer's state grew by
  // beside them: both the loop's, kept in the trend.
  double cleanup_parameters_grew_mib = 0;
  double cleanup_state_grew_with_parameters_mib = 0;
  int cleanup_parameters_grew_steps = 0;  // over this many steps
  // What the loop's caches of the last few steps hold at their bound (the
  // walk's kept tensors let go after held_steps: a deque of the last
  // steps' outputs or features): kept across steps, bounded; a
  // retained_graph component (or, detached, tensors kept).
  double kept_bounded_mib = 0;
  double cleanup_held_graph_taken_mib = 0;
  // The steady steps' forwards, where they varied (image sizes or lengths
  // that change from step to step at one batch): the figure is their median.
  std::optional<ForwardRange> forward_range;
  // The most the census counted of gradients at any sample, where it did.
  std::optional<double> max_gradient_mib;
  // The weights that require gradients (the report's
  // model.trainable_parameter_bytes), where it says.
  std::optional<double> trainable_parameter_mib;
  // Allocated at model_ready beyond the census's weights and the warm-up's
  // workspaces, where the report has a census there.
  std::optional<double> held_before_training_mib;
  // What the recorder was not given the means to read (the report's
  // recording events: the recorded model's forward never ran, no optimizer).
  std::vector<std::string> recording_problems;
  // The model's registered buffers as recording began (model.buffer_bytes)
  // and the largest by name: part of what was held beyond the weights.
  double buffer_mib = 0;
  std::vector<std::pair<std::string, double>> largest_buffers;
  // The optimizer's share of the excess: the excess less what was held
  // over, and no more than the census's optimizer state where the report
  // counts it and no data-parallel wrapper keeps buckets beside it (plain
  // SGD keeps none: a loop holding its last logits read optimizer_state).
  std::optional<double> optimizer_state_made_mib;
  // Where the census's optimizer state grew after the first step (LBFGS
  // keeps a history of its last updates, up to history_size), what the
  // first step made: optimizer_state_made_mib is then the last step's.
  std::optional<double> optimizer_state_first_step_mib;
  std::optional<double> excess_to_parameter_ratio;
  // Total retained by step-on-step growth at the end of the run.
  std::optional<double> retained_growth_mib;
  // A CPU rank of several recorded in Python: its growth was read off the
  // profiler, which misses the collectives' frees; set where it is not
  // taken for a leak (growth_significant cleared): the growth it had.
  std::optional<double> growth_unseen_frees_mib;
  // A CPU rank of a DDP job recorded in Python: the gradient buckets DDP
  // made before recording began and rebuilt at the second step's forward.
  // The profiler saw the new ones made and not the first ones' free, so
  // the readings rose once by them; the readings before the rebuild are
  // taken this much higher (as the process held them), and the rise is
  // no forward's and no leak (an independent check's ResNet-18 read "the
  // inputs' shapes varied" and 161 where 200 fit).
  std::optional<double> buckets_before_recording_mib;

  // What the capacity point's persistent_other_mib set aside of each
  // cleanup as the step's (memdiag/phase_shape.hpp's held_at_cleanups_mib).
  double held_at_cleanups_mib = 0;
  double peak_allocated_mib = 0;  // the run's, evaluations' included
  // Forwards that trained nothing (the samples' evaluation): the highest
  // they reached, at what batch, how many ran; the training phases' own
  // peak beside (peak_by_phase leaves them out).
  struct Evaluations {
    double peak_mib = 0;
    std::optional<std::int64_t> samples;
    std::optional<int> step;
    int forwards = 0;
  };
  std::optional<Evaluations> evaluations;
  double training_peak_mib = 0;
  std::optional<double> peak_reserved_mib;
  std::optional<double> max_reserved_gap_mib;       // max over samples of reserved - allocated
  std::optional<double> cache_excess_mib;           // peak reserved - peak allocated
  std::optional<double> max_inactive_split_mib;     // CUDA: max over samples of free bytes stranded in split blocks
  std::optional<std::int64_t> alloc_retries;        // CUDA: the allocator's retries over the run (last sample)
  // Fragmentation's figure: the most stranded, when the allocator had to
  // retry requests (stranded memory that cost nothing is not a cause).
  std::optional<double> fragmentation_mib;
  std::optional<double> device_minus_reserved_mib;  // last sample
  std::optional<double> final_reserved_mib;         // reserved at the last sample (CUDA)
  // The host, where the report says: the most this process held resident at
  // a phase's end and the most the CUDA host allocator held pinned.
  std::optional<double> peak_host_resident_mib;
  std::optional<double> peak_host_pinned_mib;
  // Whether the host figures are this run's alone: its report says it ran
  // in a fresh process, or does not say (a job's own process).
  bool host_own_process = true;
  std::optional<double> warmup_mib;                 // from the warmup event
  std::map<Phase, double> peak_by_phase;
  std::vector<RunStop> stops;  // out of memory, interrupted, failed
  // The report's notes about single steps ("step 2: step() was not called
  // before zero_grad()"): a step whose update did not run, and the like.
  std::vector<std::string> step_notes;
  std::vector<KeptRecord> kept;  // what the loop kept from step to step, where the report names it
  // The walk's resident tensors on the run's device (KeptRecord::What::
  // kResident), largest first: alive at every walked cleanup, not the
  // model's state.
  std::vector<KeptRecord> resident;
  // One step's forward by module (the report's last modules event).
  std::vector<ModuleRecord> modules;
  std::optional<int> modules_step;

  // The training itself: each completed step's loss (from its step sample)
  // and the wall time per step: the median of the steps after the first
  // (the first pays for kernels' first calls), their fastest and slowest.
  std::vector<double> losses;
  std::optional<double> ms_per_step;
  std::optional<double> ms_per_step_min, ms_per_step_max;
  int timed_steps = 0;

  std::optional<OomAt> oom;  // status oom: where it failed and what was live
  std::optional<double> device_total_mib;  // the device's capacity, from the report's environment
  std::optional<CapacitySearch> capacity_search;  // --find-max-batch's, when the report has one
  CapacityPoint capacity_point;                   // this run, as the capacity model reads it
  // --trace-allocations: the run's requests of the allocator as functions
  // of the batch (memdiag/replay_capacity.hpp), where the trace has a
  // second pass to scale by and its replay of the run itself agrees with
  // what the allocator did; otherwise why not (a report without a trace:
  // both empty).
  std::shared_ptr<const ScaledTrace> scaled_trace;
  std::string trace_unusable;
  // The same along a transformer's length, where the trace has passes at
  // two other lengths.
  std::shared_ptr<const ScaledTrace> length_trace;
};

RunFeatures compute_features(const Report& report, const std::string& source);

// The samples a rank ran per step: rank 0 of a data-parallel run may carry
// extra samples. Computed in 64 bits: batch plus extra can pass INT_MAX.
std::int64_t local_batch_of(const RunConfig& c);

}  // namespace memdiag
