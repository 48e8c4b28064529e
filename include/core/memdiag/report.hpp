// The report model: what one run of a workload measured, as plain data.
//
// This is the seam between the measuring half (probes, recorder, workloads;
// needs LibTorch) and the reading half (analysis, renderers; does not). Every
// field here has one JSON spelling, fixed by schema/report.schema.json; the
// spelling lives in report_json.cpp and report_reader.cpp, not here.
#pragma once

#include "memdiag/parallelism.hpp"
#include "memdiag/remedy.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memdiag {

// Bumped on any change a reader of an older version could misread. Version 2
// added remedies, a step's loss and micro-batch samples (a 0.1 reader would
// take a second forward sample of a step for the step's only one). Version 3
// put the data-parallel fields in one parallelism object with a mode
// (none, ddp, zero1), added the allocator settings and the producer.
inline constexpr int kSchemaVersion = 3;
// The oldest version this reader still reads: versions 1 and 2 are read
// through an upgrade (their flat rank, world_size, backend and
// shard_optimizer_state fields become the parallelism object; the producer
// is memory_diagnostics, the only writer then).
inline constexpr int kOldestReadableSchemaVersion = 1;

inline constexpr double kMiB = 1024.0 * 1024.0;
inline double to_mib(std::int64_t bytes) { return static_cast<double>(bytes) / kMiB; }

// Phases in the order a run records them. kSetup is the time before the
// first sample (library warm-up); samples start at kModelReady, and each step
// records forward, backward, step and cleanup.
enum class Phase { kSetup, kModelReady, kOptimizerReady, kForward, kBackward, kStep, kCleanup };
const char* to_string(Phase p);
// Setup phases belong to no step.
bool is_setup_phase(Phase p);

// Bytes held by live tensors by role, counted from the tensors themselves
// rather than the allocator, so allocator-level deltas can be cross-checked.
struct TensorCensus {
  double parameters_mib = 0;
  double gradients_mib = 0;
  double optimizer_state_mib = 0;
};

struct Sample {
  Phase phase = Phase::kModelReady;
  std::optional<int> step;             // absent for setup phases
  double allocated_mib = 0;            // live tensor bytes at the end of the phase
  std::optional<double> reserved_mib;  // caching-allocator segments (CUDA only)
  std::optional<double> device_used_mib;     // whole device, every process (cudaMemGetInfo)
  double peak_allocated_mib = 0;             // highest allocated within this phase
  std::optional<double> inactive_split_mib;  // free bytes stranded inside split blocks
  // Times the caching allocator has freed its cache and retried a request
  // since the run began (CUDA): each one a request that no cached block fit.
  std::optional<std::int64_t> alloc_retries;
  std::optional<double> process_device_mib;  // this process, from NVML
  // The host at the end of the phase: this process's resident set (RAM it
  // holds: heap, pinned buffers, libraries) and, with CUDA, the page-locked
  // bytes the host allocator holds. What offloading moves off the device
  // lands here; an out-of-memory of the host is a different failure.
  std::optional<double> host_resident_mib;
  std::optional<double> host_pinned_mib;
  double elapsed_ms = 0;
  std::optional<TensorCensus> tensors;
  // Gradient accumulation records a forward and a backward sample per
  // micro-batch, numbered from 0; absent otherwise.
  std::optional<int> micro_batch;
  // On a forward sample: what that forward was given, read off its inputs.
  // samples: the batch dimension (a step's micro-batches add up to its
  // batch); tokens: for sequence inputs, samples x sequence length. Per
  // step, so a job whose shapes vary says by how much (a schedule of batch
  // sizes, variable-length buckets); absent where the writer could not tell.
  std::optional<std::int64_t> samples;
  std::optional<std::int64_t> tokens;
  // On a forward sample of the first two steps (the Python recorder's):
  // what the tensors the forward was given hold on the device, made
  // before it ran and so outside its increment.
  std::optional<double> input_mib;
  // On a forward sample (the Python recorder's): the model's calls before
  // the backward that ended this forward, where more than one (chunks of a
  // batch summed into one loss): every call's activations held at once.
  // samples and tokens are the first call's, unless forwards_chunked.
  std::optional<int> forwards;
  // ... and the calls were consecutive chunks of one batch (each call's
  // first tensor follows the last call's in one storage, as x.chunk(K)
  // gives them): samples and tokens are the calls' added up. Two views of
  // a pair, made apart, are not.
  bool forwards_chunked = false;
  // On a step's "step" sample: the mean loss over the step's whole batch
  // (with accumulation, the micro-batches' losses weighted by their size).
  std::optional<double> loss;
  // Forwards of the recorded model that trained nothing (under no_grad or
  // inference_mode, or in eval() mode: a validation pass) ran since the
  // sample before (the Python recorder's): how many, the most samples and
  // tokens one was given, and the highest allocated while they ran, which
  // peak_allocated_mib leaves out (it is the training phase's own). An
  // independent check's validation at 256 samples between steps of 16
  // peaked at 401.7 MiB, and read as the training forward's.
  struct Evaluation {
    int forwards = 1;
    std::optional<std::int64_t> samples;
    std::optional<std::int64_t> tokens;
    double peak_mib = 0;
    double start_mib = 0;
  };
  std::optional<Evaluation> evaluation;
};

// Things that happened besides phase boundaries.
// kKept: what the loop kept from step to step, named (the Python
// recorder's walk of the live tensors at a few cleanups).
// kModules: where one step's forward memory lives, by module (the Python
// recorder's forward hooks).
// kRecording: what the recorder was not given the means to read (the
// recorded model's forward never ran; no optimizer), one line each.
enum class EventKind { kWarmup, kOom, kInterrupted, kError, kNote, kKept, kModules, kRecording };
const char* to_string(EventKind k);

// The allocator's state at an out-of-memory failure, as far as the device
// tells it: the CUDA caching allocator's out-of-memory observer and
// statistics, or the CPU tracking allocator's simulated limit (which has no
// cache: reserved, free and fragmentation figures stay empty).
struct OomDetails {
  std::optional<double> request_mib;     // the allocation that failed (rounded by the allocator)
  std::optional<double> limit_mib;       // the budget: a memory limit, or the device's capacity
  std::optional<double> device_free_mib;
  std::optional<double> allocated_mib;   // live tensors when it failed
  std::optional<double> reserved_mib;
  std::optional<double> inactive_split_mib;
  std::optional<std::int64_t> inactive_split_blocks;  // how many free pieces that total is in
  std::optional<double> largest_free_block_mib;  // the largest cached free block
  std::optional<std::int64_t> num_alloc_retries;
  std::optional<std::int64_t> num_ooms;
  std::optional<TensorCensus> tensors;   // the run's parameters, gradients and optimizer state then
  // What the failing forward or backward's micro-batch was given (as a
  // forward sample says it): the size of a step that may be larger than any
  // completed, so the analysis can ask whether that step fits the budget.
  std::optional<std::int64_t> samples;
  std::optional<std::int64_t> tokens;
};

// One thing a loop kept across steps: tensors new at each of two
// consecutive cleanups with the same shape (outputs kept in a list), a graph
// that grew from cleanup to cleanup (a running sum never detached), or a
// backward told to retain its graph.
struct KeptRecord {
  // kHeld: what each step's tensors the loop still held at its cleanup
  // came to (new since the cleanup before, whether kept on or freed by the
  // next forward), the median over the walks: mib_per_step only.
  // kHeldGraph: a forward with autograd on that no backward followed (an
  // evaluation without torch.no_grad()) left a graph that still held its
  // saved tensors at consecutive cleanups: mib_per_step is what it held
  // (the median), where the forward's line, made_by the model.
  // kResident: one tensor alive at every walked cleanup from the first
  // that found it (from_step) to the last, not the model's state (a rollout
  // buffer, data or a cache the loop keeps on the device): shape, dtype,
  // device, grad_fn, allocated_at as a kTensor's; mib_per_step is its size.
  // With made_by, the Parameters of no recorded model or optimizer on a
  // device (another model's weights): per_step of them, their bytes.
  enum class What { kTensor, kGraph, kRetainGraph, kHeld, kHeldGraph, kResident };
  What what = What::kTensor;
  std::vector<std::int64_t> shape;  // kTensor (the last walk's, where it varied)
  bool shape_varies = false;        // kTensor: the kind's shape differed from step to step
  // kTensor: of several shapes in one step (a copy of every gradient: the
  // parameters' shapes), how many; shape is then the largest one's.
  std::optional<std::int64_t> shapes;
  std::string dtype, device;
  std::optional<std::string> grad_fn;  // the autograd node that made it
  std::optional<std::string> made_by;  // "logits of BertForMaskedLM": a model output it was
  std::optional<std::string> where;    // file:line of the loop that called the model (or backward)
  // file:line of the user's code on the allocation's Python stack (CUDA:
  // the caching allocator's record of live blocks).
  std::optional<std::string> allocated_at;
  std::int64_t per_step = 0;           // how many such tensors each step (each time, with every_steps)
  // Kept once every this many steps (an evaluation every second step);
  // mib_per_step is then the average a step.
  std::optional<std::int64_t> every_steps;
  double mib_per_step = 0;
  std::optional<std::int64_t> graph_nodes, graph_nodes_before;  // kGraph
  std::optional<std::int64_t> from_step;  // kHeldGraph: the first walked cleanup's step at which it was held
  // kTensor: the loop let the oldest of them go after about this many
  // steps (a cache of the last few steps' tensors): bounded, no leak.
  std::optional<std::int64_t> held_steps;
  // kTensor: one tensor that grows every step (a buffer grown with
  // torch.cat, or a tensor the loop replaces with a larger copy of itself):
  // a history the loop lengthens, not many tensors kept.
  bool grows = false;
};
const char* to_string(KeptRecord::What w);

// One module's forward on the step a modules event was taken on: allocated
// after its forward minus before it (its children's included), the part
// its children's forwards did not add (own), over all its calls. A module
// the loop called outside the model (a loss module) has no name.
struct ModuleRecord {
  std::optional<std::string> name;    // qualified, as named_modules() says; "" is the model itself
  std::string type;                   // its class
  std::optional<std::string> parent;  // the module whose forward called it (none: called by the loop)
  double mib = 0;
  double own_mib = 0;
  std::int64_t calls = 0;
};

struct Event {
  EventKind kind = EventKind::kNote;
  std::optional<Phase> phase;  // where it happened, when known
  std::optional<int> step;
  std::string message;
  std::optional<double> mib;
  std::optional<OomDetails> oom;  // kOom: the allocator's state at the failure
  std::vector<KeptRecord> kept;   // kKept
  std::vector<int> walked_steps;  // kKept: the steps whose cleanups the walk read
  std::vector<ModuleRecord> modules;  // kModules, largest first
};

// What the run was asked to do. memdiag/run_identity.hpp says which of
// these make two runs "the same configuration" for each question the
// analysis asks.
// An event without allocator details (only an oom event has those).
Event make_event(EventKind kind, std::optional<Phase> phase, std::optional<int> step, std::string message,
                 std::optional<double> mib = std::nullopt);

struct RunConfig {
  int batch_size_per_device = 0;
  // The writer could not see the batch and wrote 1 in its stead (a recorded
  // loop whose model took no tensor with a batch dimension): nothing per
  // sample is known.
  bool batch_assumed = false;
  // A batch given to the writer (batch_size=) where step 0's inputs showed
  // another: what they showed. Per-sample figures are in the given unit.
  std::optional<std::int64_t> batch_seen;
  std::string preset;
  int steps = 0;       // asked for; a run that stopped early completed fewer
  // Tokens per sample of a transformer (its case's, or --sequence-length);
  // absent for a model without a sequence.
  std::optional<int> sequence_length;
  std::string device;  // as resolved: "cpu", "cuda:0"
  std::uint64_t seed = 0;
  std::optional<double> memory_limit_mib;
  std::vector<Remedy> remedies;  // sorted; empty for the baseline
  // The caching allocator's settings the run asked for, in
  // PYTORCH_ALLOC_CONF's syntax; empty: PyTorch's defaults.
  std::string allocator_settings;
  // Distributed identity; a single-process run is rank 0 of 1, mode none.
  Parallelism parallel;
  // A writer's own name for a change that is none of memdiag's remedies (a
  // Python job recorded with and without it); empty for the baseline.
  std::string variant;
  // Which steps a long job's recorder sampled: each step below all_below,
  // then one in `every` (the steps divisible by it); absent: every step.
  // The steps between are run, not recorded, so a report of a long job
  // stays readable; the analysis reads the recorded steps by their numbers.
  struct StepSampling {
    int all_below = 0;
    int every = 1;
  };
  std::optional<StepSampling> step_sampling;
};

// Who wrote the report: memory_diagnostics (which can run it again from
// its configuration), a loop instrumented with memdiag::Recorder, or
// another writer of the schema, by its own name.
inline constexpr const char* kProducerDiagnostics = "memory_diagnostics";
inline constexpr const char* kProducerRecorder = "memdiag::Recorder";
inline constexpr const char* kProducerPython = "memdiag.record (Python)";  // python/memdiag/_report.py
struct Producer {
  std::string name = kProducerRecorder;
  std::string version;
};

// The case as it was run.
struct CaseInfo {
  std::string name;
  std::string description;
  std::string source;    // the case file that was read; empty when unknown
  bool builtin = false;  // asked for by name (--case alpha), not by path
  std::vector<std::string> presets;  // the presets the case offers; empty when unknown
  // Each preset's parameter count (parameter_count), for suggestions only:
  // the analysis orders other presets by it and never decides by it.
  std::map<std::string, std::int64_t> preset_parameters;
  // Everything else about the resolved case (optimizer, graph lifetime,
  // model, probe) as JSON object text. Opaque on purpose: the analysis never
  // reads it, so a verdict cannot depend on a case's declared behaviour.
  std::string detail_json = "{}";
};

// One backward, node by node (step 1's, written by memdiag.record and
// memory_diagnostics: python/memdiag/_backward_profile.py,
// src/torch/backward_profile.cpp): at each autograd node's peak, what was
// allocated above backward's start and how much of that was the
// parameters' gradients (made, or in flight to a parameter). Of backward's peak the gradients do not grow with the batch
// and the rest does: what the capacity model tells them apart by.
struct BackwardProfile {
  std::int64_t step = 0;
  std::int64_t samples = 0;  // the step's (micro-batch's) samples
  std::optional<std::int64_t> tokens;
  double start_mib = 0;  // allocated when backward began
  std::vector<std::string> names;      // the node's type (ConvolutionBackward0)
  std::vector<double> rise_mib;        // its peak above start_mib (negative once activations are freed)
  std::vector<double> gradients_mib;   // of that, gradients
  // Per node, where the writer measured them (empty otherwise): what was
  // allocated above start_mib when it was done (its peak less the
  // temporaries it freed: rise - held is that temporary), and the bytes of
  // the gradients it took and gave (the scale of a temporary that grows
  // with what it works on: a kernel's workspace far larger than that does
  // not).
  std::vector<double> held_mib;
  std::vector<double> operands_mib;
};

// Measured from the model's tensors after it was built and moved.
struct ModelInfo {
  std::int64_t parameters = 0;
  std::int64_t parameter_bytes = 0;
  // How the model computed attention as it ran ("math", "sdpa"); empty for
  // a model without attention. What remedies of attention apply to.
  std::string attention;
  // The dtype the forward's matrix products were autocast to ("bfloat16",
  // "float16"); empty where the forward ran without autocast. With 16-bit
  // weights, what says the activations are half-width already.
  std::string autocast;
  // Activation checkpointing on in the model, as the recorder saw it (a
  // Hugging Face model's gradient checkpointing, torch's checkpoint
  // wrapper): what is advised for activations leaves it out.
  bool checkpointing = false;
  // Where torch.utils.checkpoint was found in the first backward's graph:
  // what that graph saved outside the checkpointed regions (MiB, the
  // weights aside). Checkpointing on for part of the model (a classifier
  // head alone) leaves the rest's activations saved: most of them here.
  std::optional<double> checkpoint_outside_mib;
  // Parameters outside the recorded model and its optimizers that the first
  // backward made gradients for (MiB): a teacher run with gradients on.
  std::optional<double> outside_parameters_mib;
  std::optional<BackwardProfile> backward_profile;
  // One forward, span by span (step 1's, written by memdiag.record:
  // python/memdiag/_modules.py): between two module hook calls, the peak
  // and what was held at the span's end above the forward's start, and the
  // bytes of the tensors the span's module took and gave. The same shape
  // as backward's, with no gradients (gradients_mib all 0).
  std::optional<BackwardProfile> forward_profile;
  // A language model's vocabulary (the logits are batch x length x vocab);
  // absent for a model without one.
  std::optional<std::int64_t> vocab;
  // A transformer's blocks, each with attention of its own: what the
  // capacity along the sequence length divides the scores' memory by.
  std::optional<std::int64_t> layers;
  // The bytes of the largest of the model's modules that hold parameters
  // (a layer, a block): what fully sharded data parallel gathers at once
  // with a unit per module. Absent from reports before it was recorded.
  std::optional<std::int64_t> largest_module_bytes;
  // The model's registered buffers (each storage once), and the largest
  // three by name: state a module keeps that is no parameter (MoCo's queue
  // of past keys). The Python recorder writes them.
  std::optional<std::int64_t> buffer_bytes;
  // Of parameter_bytes, those of the parameters that require gradients at
  // the run's end (the Python recorder's): beside the gradients the census
  // counted, what tells frozen weights (requires_grad off) from weights
  // that backward never reached (torch.utils.checkpoint with
  // use_reentrant=True given inputs that need no grad).
  std::optional<std::int64_t> trainable_parameter_bytes;
  struct NamedBytes {
    std::string name;
    std::int64_t bytes = 0;
  };
  std::vector<NamedBytes> largest_buffers;
  // Tensor parallelism: the part of parameter_bytes in the layers split
  // among the ranks (each rank holds 1/world of it; the rest, replicated,
  // whole), summed over the split tensors as built. Absent in other modes.
  std::optional<std::int64_t> split_parameter_bytes;
  // After the last step of a complete run: the sum and the sum of squares
  // of every weight (a sharded run's over all its ranks), to compare what
  // two runs trained.
  std::optional<double> final_parameter_sum;
  std::optional<double> final_parameter_sum_of_squares;
};

struct Environment {
  std::string device_name;
  std::optional<double> device_total_mib;
  std::string torch_version;
  std::optional<std::string> cuda_runtime_version;
  std::optional<std::string> driver_version;
  std::string host;
  std::string start_time;  // ISO 8601, UTC
  std::string memdiag_version;
  // Runs this process made before this one (0: a fresh process). The host's
  // figures are the whole process's: after earlier runs they carry what the
  // C library's heap kept of theirs. Absent where the writer does not say
  // (the Python recorder: a job's own process).
  std::optional<int> earlier_runs_in_process;
};

enum class RunStatus { kComplete, kOom, kInterrupted, kFailed };
const char* to_string(RunStatus s);

// One phase of a run as the capacity model reads it (memdiag/phase_shape.hpp
// makes them): its highest peak over the run's steps, and what was
// allocated when that occurrence began and ended, with the tensor census at
// both (what does not grow with the batch).
struct PhaseShape {
  Phase phase = Phase::kForward;
  double peak_mib = 0;
  double start_mib = 0;  // the previous sample's end
  double end_mib = 0;
  std::optional<TensorCensus> start_census;  // absent where the report has no census
  std::optional<TensorCensus> end_census;
};

// --find-max-batch: the search for the largest batch that completes its
// steps within a budget, written into the report of that batch's run.
struct CapacityTry {
  std::int64_t batch = 0;
  RunStatus status = RunStatus::kComplete;
  double peak_allocated_mib = 0;  // the run's highest peak, up to where it stopped
  double seconds = 0;
  // The phases it completed, for the capacity model (empty in reports of
  // schema 2); what the allocator reserved beyond its tensors at the peak
  // (CUDA).
  std::vector<PhaseShape> phases;
  std::optional<double> reserve_overhead_mib;
  // memdiag/phase_shape.hpp's persistent_other_mib of the try (workspaces,
  // buckets: fixed, though outside the census).
  std::optional<double> persistent_other_mib;
  // A try that ran out: the phase that failed and what it held then plus
  // what it asked for (a floor of what it needed).
  std::optional<Phase> failed_phase;
  std::optional<double> needed_mib;
};

struct CapacitySearch {
  enum class LimitSource { kMemoryLimit, kDevice };
  double limit_mib = 0;
  LimitSource limit_source = LimitSource::kMemoryLimit;
  std::int64_t max_batch = 0;  // 0: not even one sample fits
  // The smallest batch that ran out; absent when the search stopped at the
  // largest batch memdiag runs.
  std::optional<std::int64_t> first_failing_batch;
  std::vector<CapacityTry> tries;  // in the order they ran
  // The fresh processes that checked the answer, each a run of its own:
  // max_batch, then max_batch + 1 (what ran out there, and what the
  // allocator held unallocated when it did, bounds the capacity model).
  std::vector<CapacityTry> checks;
  // The capacity model over the tries (memdiag/capacity_model.hpp, the fit
  // compare_memory_reports makes too): the largest batch it puts under the
  // limit, the phase that binds there and that phase's line, peak = fixed +
  // per_sample x batch.
  std::optional<double> fit_fixed_mib;
  std::optional<double> fit_per_sample_mib;
  std::optional<Phase> binding_phase;
  std::optional<std::int64_t> predicted_max_batch;
  // The replay of a traced try's allocations at the limit (memdiag's
  // replay_capacity.hpp): the answer the search checked first in fresh
  // processes. Absent where the search did not trace a try.
  std::optional<std::int64_t> replayed_max_batch;
  // Fresh processes agreed: max_batch completes and max_batch + 1 runs out.
  // Absent when not checked.
  std::optional<bool> confirmed;
};
const char* to_string(CapacitySearch::LimitSource s);

// What a run asked of the device's allocator, in order: every request and
// release, the phases between them, and (CUDA) the segments the caching
// allocator made and freed. With a second pass of the same configuration at
// another batch, the analysis tells how each request grows with the batch
// and replays the allocator at a batch or a limit nobody ran
// (memdiag/allocator_replay.hpp): the stranded memory of a fragmenting
// schedule, the rounding to blocks and segments and the kernels' workspaces
// come out of the replay instead of being assumed.
struct TraceEvent {
  enum class Kind {
    kAlloc,         // bytes: what was asked for (before the allocator rounds it)
    kFree,          // id: the allocation's ordinal among the pass's kAlloc events
    kPhase,         // a phase begins: phase, step (absent for setup phases)
    kSegmentAlloc,  // the caching allocator made a segment: bytes, address
    kSegmentFree,   // ... and gave one back: bytes, address
    kFailed,        // a request refused for want of memory: bytes, as the allocator rounded it
    kEmptyCache,    // the run handed every wholly free segment back (empty_cache)
  };
  Kind kind = Kind::kAlloc;
  std::int64_t bytes = 0;
  std::int64_t id = 0;
  std::int64_t address = 0;  // kSegment*: where the device put it (the replay's tie-breaks)
  Phase phase = Phase::kSetup;
  std::optional<int> step;
};
const char* to_string(TraceEvent::Kind k);

// One run of the configuration, traced from the allocator's first request.
struct TracePass {
  std::int64_t batch = 0;  // the configuration's samples per step on this rank
  // A transformer's tokens per sample in this pass (absent for an MLP).
  std::optional<int> sequence_length;
  // Each step's samples (a batch schedule varies them), step 0 first.
  std::vector<std::int64_t> step_samples;
  RunStatus status = RunStatus::kComplete;
  std::vector<TraceEvent> events;
};

struct AllocationTrace {
  // The probe that recorded it: "cuda-caching-allocator" (replayed as the
  // caching allocator) or "cpu-tracking-allocator" (no cache: a request
  // fails when what is live plus it exceeds the limit).
  std::string allocator;
  // The limit the allocator enforced, exactly (CUDA: the memory fraction
  // times the device's bytes); absent: none but the device.
  std::optional<std::int64_t> limit_bytes;
  // The most PyTorch's multi-block reductions stage (CUDA), measured on
  // this device after the passes: a staging buffer grows with the rows it
  // reduces until the kernel stops adding blocks (132 MiB on an H200).
  // Absent where not measured (the CPU, no reduction staged, or no room).
  std::optional<std::int64_t> staging_cap_bytes;
  // passes[0] is the run the report's samples describe; the others are the
  // same configuration at other batches, traced after it in the same
  // process and measured for nothing else.
  std::vector<TracePass> passes;
};

struct Report {
  // The version it was written at (a report read from an older one holds
  // the current model, upgraded); the writer always writes kSchemaVersion.
  int schema_version = kSchemaVersion;
  CaseInfo case_info;
  RunConfig config;
  Producer producer;
  ModelInfo model;
  Environment environment;
  std::vector<Sample> samples;
  std::vector<Event> events;
  RunStatus status = RunStatus::kComplete;
  std::optional<CapacitySearch> capacity;  // --find-max-batch's answer
  // --trace-allocations: the allocator's requests, for replaying it.
  std::optional<AllocationTrace> allocation_trace;
};

// The highest peak allocated over a report's samples (an evaluation's
// between steps included: the run's peak), and the highest
// reserved (CUDA; absent where no sample has one).
double peak_allocated_mib(const Report& r);
std::optional<double> peak_reserved_mib(const Report& r);

}  // namespace memdiag
