// Analysis: pure functions from reports to verdicts. No LibTorch, no I/O and
// no words: a verdict is data (the decided cause, the components with their
// MiB, the sweeps, the rule and threshold that decided, evidence and
// warnings as typed records with their figures, confirming runs as RunSpecs).
// The renderers (memdiag::render) turn it into text, markdown or JSON.
//
// A verdict is read off the measured numbers only. The case's name groups
// reports and labels output, and the case's file names the command that
// re-runs it; neither ever decides. The case's declared optimizer and graph
// flags (CaseInfo::detail_json) are never read here.
#pragma once

#include "memdiag/capacity_model.hpp"
#include "memdiag/cause.hpp"
#include "memdiag/features.hpp"
#include "memdiag/report.hpp"
#include "memdiag/run_spec.hpp"

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace memdiag {


// A candidate cause and how many MiB it accounts for in one run. Which
// measurement gives the figure is fixed per cause (see components_of).
struct Component {
  Cause cause = Cause::kInconclusive;
  double mib = 0;
  // Activations: the part of mib that is what the loop holds of a step
  // into the next (its outputs, its batch), beside the forward's increment
  // (the runs table's forward column has the increment alone).
  double held_over_mib = 0;
};
std::vector<Component> components_of(const RunFeatures& f);  // largest first

// The runs a verdict reads together (projection::kVerdictPool): one case on
// one kind of device, world and memory limit, by one producer. Preset,
// batch, steps and rank vary inside; remedies and sharding are variants,
// measured against the group's baseline runs.
struct Group {
  std::string key;    // the projection's key: equal for the same pool
  std::string label;  // the same in words: "alpha, cuda, limit 40 MiB"
  std::string case_name;
  std::string device_kind;  // "cpu", "cuda"
  int world_size = 1;
  std::vector<RunFeatures> runs;  // ordered by parameters, batch, steps, rank
};
std::vector<Group> group_runs(std::vector<RunFeatures> runs);

// Where a run sits: the settings a sentence about it cites.
struct RunPoint {
  std::int64_t batch = 0;  // local batch
  std::string preset;
  int steps = 0;
};

enum class SweepKind { kBatch, kParameters, kSteps, kSequence };
const char* to_string(SweepKind k);

struct SweepPoint {
  double x = 0;  // batch, parameter MiB or steps
  double y = 0;  // forward increment, first-step excess or growth since optimizer_ready
  std::string source;
};

struct Sweep {
  SweepKind kind = SweepKind::kBatch;
  std::vector<SweepPoint> points;  // sorted by x
  // y per unit of x: through the origin, except for steps, where the
  // first step leaves what later ones do not add (the optimizer's state)
  // and the line has an intercept.
  double slope = 0;
  // Largest relative departure of y/x from the slope (of y from the line,
  // for steps).
  double max_deviation = 0;
  std::optional<double> intercept_mib;  // steps: the line's y at 0 steps
  // batch: x is a forward's samples, a micro-batch's under gradient
  // accumulation (the forward increment is one micro-batch's).
  bool per_micro_batch = false;
  bool increasing = false;
  bool linear = false;  // increasing and within thresholds::kLinearTolerance
  // A sequence sweep: y = linear x L + quadratic x L^2 fitted by least
  // squares (the rest of the activations grow with the tokens, spelt-out
  // attention's scores with their square), the exponent of the growth
  // between the shortest and the longest length, and the quadratic part's
  // share of y at the longest.
  std::optional<double> linear_mib;     // MiB per token of length
  std::optional<double> quadratic_mib;  // MiB per token of length, squared
  std::optional<double> exponent;
  std::optional<double> quadratic_share;
};

struct RankRow {
  int rank = 0;
  std::string source;
  double peak_allocated_mib = 0;
  std::optional<double> forward_increment_mib;
  std::optional<double> first_step_excess_mib;
  // The row of the highest peak: one row of a set, even where its rank
  // was given twice.
  bool capacity_constraint = false;
  std::int64_t batch = 0;                      // the samples it ran a step
  std::optional<double> optimizer_state_mib;  // its census's state at its last step()
  // Its post-cleanup allocation grew every step and the recorder's walk
  // named what its loop kept: the growth a step, and over its steps.
  std::optional<double> kept_growth_per_step_mib;
  double kept_growth_mib = 0;
};

// What a rank set lacks or repeats against its world size: ranks of the
// world no report was given for (the first kMaxListedRanks of them, and how
// many), and ranks given by more than one report.
struct RankGaps {
  static constexpr std::size_t kMaxListedRanks = 16;
  int world_size = 1;
  std::vector<int> missing;  // the first kMaxListedRanks
  std::int64_t missing_count = 0;
  std::vector<int> repeated;
  bool any() const { return missing_count > 0 || !repeated.empty(); }
};

struct DistributedView {
  RunPoint run;
  std::string variant;         // variant_label of the ranks' runs
  std::vector<RankRow> ranks;  // by rank
  int max_rank = 0;            // the capacity constraint
  RankGaps gaps;
  double max_peak_mib = 0;
  double imbalance = 0;  // (max - min) / max of peak
  bool imbalanced = false;
  // The launch the ranks share (config.parallelism.launch), where the
  // reports say: tells two sets of one configuration apart in a table.
  std::string launch;
};

// How the verdict was decided: the rule that applied and the figures and
// threshold it compared.
enum class DecisionRule {
  kNoCompletedStep,   // nothing to read
  kBelowSignal,       // the largest component is under kMinimumSignalMib
  kOneStepAmbiguous,  // one step cannot tell state made once from a graph kept every step
  kTooClose,          // top and runner-up within kDominanceRatio
  kDominant,          // top exceeds the runner-up by kDominanceRatio or more
  kGrowsEveryStep,    // post-cleanup memory grows step on step: unbounded, whatever is larger now
  // Activations and the weights within kDominanceRatio by their own figures,
  // told apart at the run's peak: what grows with the batch there (the
  // peak less the model's state and what persists beside it) against the
  // model's state (weights, gradients, optimizer state).
  kDominantAtPeak,
  kOutOfMemory,       // the run ran out of memory: the cause is what made the failing phase exceed the budget
};
const char* to_string(DecisionRule r);

struct Decision {
  DecisionRule rule = DecisionRule::kNoCompletedStep;
  std::optional<Component> top;
  std::optional<Component> runner_up;
  std::optional<double> margin;  // top / runner-up
  double threshold = 0;          // the figure the rule compared against
  RunStatus status = RunStatus::kComplete;     // kNoCompletedStep: how the run ended
  std::optional<double> first_step_persistent_mib;  // kOneStepAmbiguous
  // kDominantAtPeak: the phase whose peak decided, the peak, and its split.
  struct PeakSplit {
    Phase phase = Phase::kForward;
    double peak_mib = 0, with_batch_mib = 0, model_state_mib = 0;
  };
  std::optional<PeakSplit> peak_split;
  // A complete run whose steps' sizes varied: the allocator's cache and
  // stranded memory are what the varying shapes left reserved, not a
  // consumer of memory; they are set aside from the decision (and named
  // beside the consumer), with the MiB each held.
  std::vector<Component> set_aside;
  // The retained graph's component is memory held and bounded (a graph
  // held from step to step, a cache of the last steps' tensors), no
  // growth: a longer run shows nothing more of it.
  bool retained_bounded = false;
  // kGrowsEveryStep: the steps its growth was read over. Below
  // thresholds::kMinConfirmSteps a cache bounded a few steps later reads
  // the same (a deque(maxlen=4) over 3 steps was called unbounded); the
  // text says so, and the confirming run is a longer one.
  int growth_steps = 0;
};

// Where two consumers are within the margin (kTooClose), the one run that
// tells them apart: under expandable segments (the allocator's cache or
// stranded memory against what tensors hold), longer (a retained graph
// grows with the steps), at smaller batches (activations follow the
// batch, the model's state does not); kModelState where the two are the
// weights and the optimizer's state, both per parameter: no run tells
// them apart and none needs to, what divides both is the answer; kNone
// where no single run does.
enum class TiedPairTest { kNone, kExpandableSegments, kLongerRun, kSmallerBatch, kModelState };
TiedPairTest tied_pair_test(const Decision& d);

// Evidence: what the numbers show, one typed record per kind of sentence.
namespace evidence {
// What a forward freed of the step before (held over) beyond the inputs it
// was given: ForwardIncrement's, and the verdict's where it has none.
inline double held_beyond_inputs(double held_over_mib, std::optional<double> input_mib) {
  return held_over_mib > input_mib.value_or(0) + 0.005 ? held_over_mib - input_mib.value_or(0) : 0.0;
}
struct ForwardIncrement {
  double forward_mib = 0;
  std::optional<double> per_sample_mib;
  double parameter_mib = 0;
  double peak_mib = 0;
  RunPoint at;
  // A language model: its logits, batch x length x vocab in fp32 (what the
  // loss reads), when they are a large share of the forward increment.
  std::optional<double> logits_mib;
  // Of a step's tensors, what the loop held past its cleanup until the
  // next forward replaced them (counted in the activations' figure).
  double held_over_mib = 0;
  // What the forward makes: its phase's increment, and what it freed of
  // the step before (held over) besides, less the inputs: a loop holds
  // its last batch past the cleanup until the next replaces it, and the
  // inputs are said on their own (input_mib). A loop that keeps the last
  // step's graph (backward(retain_graph=True), the outputs until they are
  // replaced) ends the phase near 0 while making as much as step 0 did.
  double held_beyond_inputs_mib() const { return held_beyond_inputs(held_over_mib, input_mib); }
  double made_mib() const { return forward_mib + held_beyond_inputs_mib(); }
  // The gradients a zero_grad() inside the forward freed, added back into
  // forward_mib (which says what the forward made).
  double gradients_freed_mib = 0;
  // Where the steps' samples varied: the figure is the median step's and
  // the per-sample one the median of each step's own, not the batch of
  // `at` (step 0's).
  std::optional<SizeRange> samples;
  bool batch_assumed = false;  // the report's batch is a 1 written where none was seen
  // Gradient accumulation: the figure is one micro-batch's forward, of
  // micro_batch_samples, the step's batch being micro_batches of them.
  int micro_batches = 1;
  std::optional<std::int64_t> micro_batch_samples;
  // What the forward's inputs hold on the device beside it (made before
  // it: not in forward_mib), where the report gives it.
  std::optional<double> input_mib;
  // Where memory follows the steps' tokens rather than their samples (the
  // steadier rate over the steps: a token budget's buckets), the fitted
  // rate per token and the tokens' range, said in the figure's place.
  std::optional<double> per_token_mib;
  std::optional<SizeRange> tokens;
  // A fully sharded model's weights gathered in the forward and held at
  // its end (FSDP2's root keeps its own to backward): not in forward_mib.
  double gathered_parameters_mib = 0;
  // The steady steps' forwards where they varied and the samples did not
  // (RunFeatures::forward_range): the figure is their median; tokens_varied
  // says whether the steps' tokens did (else their inputs' shapes did).
  std::optional<ForwardRange> range;
  bool tokens_varied = false;
  bool samples_seen = false;  // the steps' samples were recorded (and did not vary)
  bool tokens_seen = false;   // the steps' tokens were recorded
  // The model was called this many times before one backward (the
  // report's forwards: chunks of a batch summed into one loss): every
  // call's activations held at once, the samples the first call's ...
  int calls = 1;
  // ... unless they were chunks of one batch (the report's
  // forwards_chunked): the samples are theirs added up.
  bool calls_chunked = false;
  // ... and unless each call's graph was released before the next (an
  // attack's passes through torch.autograd.grad, which frees what it
  // used): the forward rose by about one call's worth of what the model's
  // modules made over all the calls (the modules event), not by all of it.
  // An independent check's PGD, 4 calls, 484.2 MiB made and 121.0 held,
  // was told every call's activations are held at once.
  bool calls_released = false;
};
struct PostCleanupTrend {
  std::optional<double> growth_per_step_mib;  // absent: one step, no trend
  bool growing = false;
  int steps = 0;
  bool made_once = false;  // stable after a first-step increase: state made once, then kept
  bool unseen_frees = false;  // a CPU rank's profiler readings, whose growth is not read (GrowthUnseenFrees)
  // Grown over fewer than thresholds::kMinGrowthSteps cleanups: not yet
  // told from a one-off, and a longer run is among the confirming ones.
  bool too_few_steps = false;
  // Not growing, but it rose once (RunFeatures::one_rise): said as a
  // step, not as a slope.
  std::optional<RunFeatures::OneRise> rise;
  // Taken out of the cleanups before the trend was read, by the last one:
  // the optimizer's state grown since the first (its census), a graph no
  // backward ran through held from a later step on (the recorder's walk).
  double state_grew_mib = 0;
  double held_graph_mib = 0;
  // Gradients held at `gradients_held_cleanups` of the cleanups (the most,
  // beyond the least any held): taken out of those, as the state is.
  double gradients_held_mib = 0;
  int gradients_held_cleanups = 0;
  // Growing, but with the steps' size (a curriculum's lengths, a ramp's
  // batches: what the loop holds at each cleanup is its last step's), or
  // within what the loop held at its cleanups where the recorder's walk
  // found nothing kept: said, since it is not read as a leak.
  bool follows_size = false;
  std::optional<double> walk_held_mib;  // where the walk found nothing kept
  // Cleanups without a census left out of the trend beside those (their
  // gradients unknown).
  int gradients_unknown_cleanups = 0;
};
struct OptimizerStateMade {
  std::optional<double> optimizer_setup_mib;  // optimizer_ready - model_ready
  double persistent_mib = 0;                  // of the first-step excess, the optimizer's
  double left_mib = 0;                        // the first-step excess, all of it
  double ratio_to_parameters = 0;
  double parameter_mib = 0;
  // The state grew after the first step (its census): to this, by the
  // last step; ratio_to_parameters is then this one's.
  std::optional<double> grown_to_mib;
  // Of the rest the first step left, the gradients the census counted at
  // its cleanup: kept from step to step (zero_grad(set_to_none=False)).
  std::optional<double> gradients_kept_mib;
  // What step() itself peaks above what it starts and ends with (the
  // update's temporaries: a multi-tensor (foreach) implementation makes
  // them for every parameter at once), where a quarter of the state or
  // more; and whether that peak is the run's.
  std::optional<double> step_transient_mib;
  bool step_peak_is_runs = false;
  // The census counted the optimizer's state at the first cleanup: the
  // persistent figure is its state, not all the first step left.
  bool state_counted = false;
  // The state grew once, at this step's step(), and stayed as it was for
  // two recorded steps or more after: a buffer made at a later step
  // (Lookahead's slow weights at its k-th step, an average of the
  // weights), not a history that keeps growing. Absent otherwise.
  std::optional<int> grew_once_at_step;
  // The run was on the CPU, where torch's optimizers update a parameter
  // at a time by default (foreach needs CUDA): step()'s temporaries are
  // the largest parameter's, not every parameter's at once (an independent
  // check's CPU ranks were told of a foreach update and foreach=False).
  bool one_parameter_at_a_time = false;
};
struct StepIncrements {
  double step0_mib = 0;
  std::optional<double> step1_mib;
};
struct DataParallelBuckets {
  int world_size = 0;
};
struct RetainedGrowth {
  double per_step_mib = 0;
  double positive_share = 0;
  double total_mib = 0;
  RunPoint at;
  // At this rate: the step at which the run's peak would pass the budget
  // (its memory limit, else the device), and that budget; absent where the
  // report gives neither.
  std::optional<std::int64_t> fills_at_step;
  std::optional<double> budget_mib;
  // Growth that speeds up (RunFeatures::growth_acceleration_mib): how much
  // more a step keeps each step, and the first and last rises; the step
  // that fills the budget is then projected on rises that keep speeding up.
  std::optional<double> acceleration_mib;
  double first_rise_mib = 0, last_rise_mib = 0;
};
struct RetainedShareOfForward {
  double per_step_mib = 0;
  double forward_mib = 0;
  // The tensors the recorder's walk named as kept, MiB a step, where they
  // account for the growth and no graph was told to stay: the step keeps
  // them, not its graph (backward freed what the graph saved).
  std::optional<double> kept_tensors_mib;
  // Parameters the loop made every step (the census's at the cleanups),
  // MiB a step, and the optimizer's state made for them: they, not a
  // graph, are what the step keeps (a new nn.Parameter and param group).
  std::optional<double> parameters_per_step_mib;
  double state_per_step_mib = 0;
  // Beside kept_tensors_mib, where one of those tensors carries a graph
  // (a gradient made with create_graph=True): the rest of the growth, what
  // that graph saved (0 where none is left, or none carries one).
  double kept_graph_mib = 0;
  // Where the walk read some of the steps' cleanups only: the first and
  // last it read and what the cleanups rose a step between them, the
  // growth kept_tensors_mib is told against (an independent check's kept
  // logits of lengths that varied: 7.54 MiB a step over the walked steps,
  // 10.83 over the run, the rest read as a graph's).
  std::optional<int> walked_first_step;
  std::optional<int> walked_last_step;
  std::optional<double> walked_growth_mib;
};
struct WeightsDominate {
  double parameter_mib = 0;
  double peak_mib = 0;
  double forward_mib = 0;
  double first_step_excess_mib = 0;
  RunPoint at;
  // The most the census counted of gradients at a phase's end, where the
  // report has a census: far below the weights, most of them are frozen
  // (a LoRA job), and the response is about the frozen weights.
  std::optional<double> gradient_mib;
  bool mostly_frozen = false;  // gradient_mib under thresholds::kFrozenShare of the weights
  // Where the report says which weights require gradients: those that do.
  // Gradients far below them (mostly_frozen) though most require them:
  // backward never reached them (torch.utils.checkpoint with
  // use_reentrant=True given inputs that need no grad, a detach() or a
  // no_grad block inside the forward), a bug, not frozen weights (an
  // independent check's 50 of 52 such parameters read "nearly all of them
  // are frozen" and were told to quantize them).
  std::optional<double> trainable_mib;
  bool gradients_not_reached = false;
  // A fully sharded model's weights its forward gathered and still held
  // at its end (FSDP2: the root's own, or every unit's where none
  // reshards after its forward): weights too, beside this rank's shard.
  double gathered_mib = 0;
};
struct CacheExcess {
  double peak_reserved_mib = 0;
  double peak_allocated_mib = 0;
  double excess_mib = 0;
};
struct SweepFit {
  Sweep sweep;
};
// A run that ran out of memory: where, what it asked for, what was live.
struct OutOfMemory {
  Cause cause = Cause::kInconclusive;  // what this record says the failure was
  std::optional<Phase> phase;
  std::optional<int> step;
  std::optional<double> request_mib;
  std::optional<double> budget_mib;
  std::optional<double> in_use_mib;
  std::optional<TensorCensus> tensors;
  std::optional<double> other_mib;  // activations, the batch, temporaries
  double parameter_mib = 0;
  std::optional<double> cached_free_mib;  // reserved - allocated at the failure
  // The budget never reserved at the failure (limit - reserved, at most the
  // device's free memory): with cached_free_mib, all that was free under it.
  std::optional<double> unreserved_mib;
  // What the failing step needs at its peak (forward's end plus backward's
  // transient): measured where a completed step was at least as large,
  // else extrapolated along the completed steps' sizes. Fragmentation is
  // named only where it fits the budget.
  std::optional<double> step_need_mib;
  bool step_need_measured = false;
  int step_need_from_steps = 0;  // completed steps it was read from
  std::optional<double> largest_free_block_mib;
  // The part of cached_free_mib stranded in segments that still hold a
  // live block, in how many pieces, and the allocator's retries so far.
  std::optional<double> inactive_split_mib;
  std::optional<std::int64_t> inactive_split_blocks;
  std::optional<std::int64_t> num_alloc_retries;
  std::optional<double> growth_per_step_mib;  // over the completed steps, when it grew
  int completed_steps = 0;
};
struct ReservedGap {
  double max_gap_mib = 0;
};
// A complete run whose allocator kept free memory stranded in split
// segments and had to free its cache and retry requests no block fit.
struct StrandedSplits {
  double max_inactive_split_mib = 0;  // the most stranded at any sample
  double first_step_split_mib = 0;    // the most in the first step
  double last_step_split_mib = 0;     // the most in the last step
  std::int64_t alloc_retries = 0;     // over the run
  double peak_reserved_mib = 0;
  double peak_allocated_mib = 0;
  int steps = 0;
};
struct OutsideAllocator {
  double device_minus_reserved_mib = 0;
};
// Allocated when recording began beyond the model's weights (the census's)
// and the warm-up's workspaces: another model's weights (an EMA copy, a
// frozen teacher) or data kept on the device. Said where it is a tenth of
// the weights or more (an EMA copy was 64 MiB of a 193 MiB peak, unsaid).
struct HeldBeforeTraining {
  double mib = 0;
  double parameter_mib = 0;
  bool cuda = true;  // on the CPU no cuBLAS workspace is among what it can be
  // Of mib, what the model's own buffers hold (MoCo's queue of past keys:
  // no other model's weights), and the largest of them by name.
  double buffer_mib = 0;
  std::vector<std::pair<std::string, double>> buffers;
};
// Forwards that trained nothing (a validation under no_grad between
// steps) reached higher than any training phase: the run's peak is
// theirs, at their own batch, whatever the training batch.
struct EvaluationPeak {
  double peak_mib = 0;           // the highest they reached
  double training_peak_mib = 0;  // the training phases' highest
  int forwards = 0;              // how many ran, over the run
  std::optional<std::int64_t> samples;  // the most one was given
  std::optional<int> step;       // the step of the sample it came before
};
// Tensors alive at every cleanup the Python recorder walked, beside the
// model's weights, gradients and optimizer state (the kept event's resident
// records): a buffer the loop fills, data or a cache it keeps on the
// device. Every step's peak stands on them (a PPO loop's 110 MiB rollout
// buffer, 45% of its peak, was named nowhere). Said where they are a tenth
// of the run's peak or more.
struct ResidentTensors {
  std::vector<KeptRecord> tensors;  // the largest few, largest first
  // The model's registered buffers (the report's model.buffer_bytes, the
  // largest by name): held at every step as much as a tensor of the loop's
  // (a memory bank registered with register_buffer, 144 MiB of a 209 MiB
  // peak, was said only as "held before training" beside a verdict of
  // optimizer state). Said where they are a tenth of the peak with the rest.
  double buffer_mib = 0;
  std::vector<std::pair<std::string, double>> buffers;
  double mib = 0;                   // theirs and the buffers' added up
  double peak_mib = 0;              // the run's
  double share_of_peak() const { return peak_mib > 0 ? mib / peak_mib : 0.0; }
  int first_step = 0, last_step = 0;  // the cleanups walked
  bool cuda = true;
};
// What the loop kept from step to step, named by the Python recorder's
// walk of the live tensors (the report's kept event).
struct KeptAcrossSteps {
  std::vector<KeptRecord> kept;
};
// Where one step's forward memory lives (the report's modules event): the
// module types that hold most of it (each module's own part, added up by
// class), and the largest modules where the model fans out (the children
// of the first module, from the model down, that no single child
// dominates), each with its share of the forward the hooks saw.
struct ModuleShare {
  std::string name;  // qualified; empty for a type
  std::string type;
  double mib = 0;
  double share = 0;  // of total_mib
};
struct ForwardByModule {
  int step = 0;
  std::string model_type;
  double total_mib = 0;  // the model's forward, plus modules the loop called outside it
  std::optional<double> forward_increment_mib;  // that step's forward phase (the loss outside any module too)
  std::vector<ModuleShare> types;   // the largest five, by their own MiB
  // What modules' own code freed of their children's outputs (a
  // Sequential's loop dropping each layer's output as the next consumed
  // it): the types' parts add up to the total only with it, so their
  // shares are of what they made, not of the total, where it is not 0.
  double freed_in_parents_mib = 0;
  std::string under;                // the module whose children are listed ("" : the model)
  std::vector<ModuleShare> modules;  // the largest five children of `under`
  std::vector<ModuleShare> outside;  // modules the loop called outside the model (a loss module)
};
}  // namespace evidence

using Evidence =
    std::variant<evidence::ForwardIncrement, evidence::PostCleanupTrend, evidence::OptimizerStateMade,
                 evidence::StepIncrements, evidence::DataParallelBuckets, evidence::RetainedGrowth,
                 evidence::RetainedShareOfForward, evidence::WeightsDominate, evidence::CacheExcess,
                 evidence::SweepFit, evidence::ReservedGap, evidence::StrandedSplits, evidence::OutsideAllocator,
                 evidence::OutOfMemory, evidence::KeptAcrossSteps, evidence::ForwardByModule,
                 evidence::HeldBeforeTraining, evidence::EvaluationPeak, evidence::ResidentTensors>;
// A stable identifier per kind, for JSON: "forward_increment".
const char* evidence_code(const Evidence& e);

// Warnings: what a reader must not miss, whatever the cause.
namespace warning {
struct RunStopped {
  std::string source;
  RunStop stop;
};
struct RankImbalance {
  RunPoint run;
  double imbalance = 0;
  int max_rank = 0;
  double max_peak_mib = 0;
  std::string variant = "none";  // the ranks' variant_label: "zero1", "checkpoint=6"
  // Recorded ranks on the CPU: PyTorch's profiler misses frees made in the
  // collectives' own threads (Gloo), so a difference may be that. Set
  // only where nothing below explains it.
  bool cpu_readings_overstate = false;
  // What the reports say makes the ranks differ, where they do: the
  // samples a step (the most a rank ran, and its rank, against the
  // fewest), and the optimizer state each holds (ZeRO-1's whole
  // parameters to ranks).
  std::int64_t most_samples = 0, fewest_samples = 0;
  int most_samples_rank = 0;
  std::optional<double> most_state_mib, least_state_mib;
  int most_state_rank = 0;
  // The rank that binds keeps more every step, what its recorder's walk
  // named (a leak on that rank only): a step's growth and its steps'.
  std::optional<double> kept_per_step_mib;
  double kept_mib = 0;
};
// The size of what the steps were given changed from step to step (a
// schedule of batch sizes, variable-length buckets): figures per sample are
// each step's own, and the configured batch is not every step's.
struct InputsVaried {
  std::string source;
  std::optional<SizeRange> samples;  // set where the samples varied
  std::optional<SizeRange> tokens;   // set where the tokens varied
  std::int64_t configured_batch = 0;
};
// The reports of a data-parallel run do not make its world: a rank missing
// (world 3, ranks 0 and 1) or given twice. Per-rank figures and the
// capacity constraint are the given ranks' only.
// A CPU report of one of several ranks from the Python recorder: its
// allocated comes from PyTorch's profiler, which does not see frees made in
// the collectives' own threads (Gloo), so its post-cleanup growth is not
// taken for a leak unless the recorder's walk named what was kept (FSDP2
// over 2 ranks read retained_graph at 4 steps, a flat job).
struct GrowthUnseenFrees {
  std::string source;
  double growth_per_step_mib = 0;
  // Where it rose once (RunFeatures::one_rise).
  std::optional<RunFeatures::OneRise> rise;
  // DDP's gradient buckets made before recording began, rebuilt at the
  // second step's forward (RunFeatures::buckets_before_recording_mib): the
  // readings before are taken this much higher; growth and rise are then
  // the corrected readings' (none).
  std::optional<double> buckets_before_recording_mib;
};
// The report's batch was not seen by its writer (a model that took no
// tensor with a batch dimension) and is a 1 written in its stead: figures
// per sample, capacity in batches and confirming batches are left out.
struct BatchAssumed {
  std::string source;
};
// A batch given to the recorder (batch_size=) that step 0's inputs did not
// show: per-sample figures and capacities count the given one.
struct BatchGiven {
  std::string source;
  std::int64_t given = 0, seen = 0;
};
// The report's notes about single steps, as its writer made them (the
// Python recorder: a step() the loop skipped, or a gradient scaler did):
// that step's figures are of a step without its update.
// The recorder was not given the means to read the loop (the report's
// recording events): what it says to pass instead.
struct RecordingProblems {
  std::string source;
  std::vector<std::string> problems;
};
struct StepNotes {
  std::string source;
  std::vector<std::string> notes;  // the first few
  std::size_t count = 0;           // all of them
};
struct RankSetIncomplete {
  RunPoint run;
  RankGaps gaps;
  std::vector<std::string> repeated_sources;  // the reports of the repeated ranks, by rank
};
}  // namespace warning
using Warning =
    std::variant<warning::RunStopped, warning::RankImbalance, warning::InputsVaried, warning::RankSetIncomplete,
                 warning::GrowthUnseenFrees, warning::BatchAssumed, warning::BatchGiven, warning::StepNotes,
                 warning::RecordingProblems>;
const char* warning_code(const Warning& w);

// A variant measured against the baseline: a run of the group that differs
// from a baseline run only in its variant (projection::kVariantBaseline):
// remedies, a sharded mode, allocator settings.
struct RemedyRow {
  std::string remedy;  // variant_label: "checkpoint=6", "accumulate=4+bf16", "zero1"
  std::vector<Remedy> remedies;            // the variant's remedies ...
  ParallelMode mode = ParallelMode::kNone;  // ... and mode, for matching by kind
  std::string source;
  std::string baseline_source;
  RunStatus status = RunStatus::kComplete;
  RunStatus baseline_status = RunStatus::kComplete;  // a baseline that ran out peaked where it stopped
  double peak_mib = 0;
  double baseline_peak_mib = 0;
  double peak_change_mib = 0;       // remedy - baseline
  double peak_change_fraction = 0;  // of the baseline's peak
  std::optional<double> forward_increment_mib;
  std::optional<double> first_step_persistent_mib;
  std::optional<double> growth_per_step_mib;
  std::optional<double> final_reserved_mib;  // what the allocator holds at the end (CUDA)
  // The host's cost: the most this run and its baseline held resident at a
  // phase's end (what offloading adds), and the most held pinned (CUDA).
  std::optional<double> host_peak_mib;
  std::optional<double> baseline_host_peak_mib;
  std::optional<double> host_pinned_peak_mib;
  std::optional<double> ms_per_step;     // the median step after the first
  std::optional<double> ms_per_step_min, ms_per_step_max;  // the spread of those steps
  std::optional<double> time_ratio;      // ms per step against the baseline's
  std::optional<double> max_loss_diff;   // largest difference of a step's loss, of the baseline's largest loss
  // Where it is: the step's index among the compared losses and both
  // losses there (a baseline that memorised its batch, at 0.0024, makes
  // any relative difference huge: the values say what it is).
  std::optional<std::size_t> loss_diff_index;
  std::optional<double> loss_at_diff, baseline_loss_at_diff;
  // The variant computes in a lower precision than its baseline with its
  // weights kept in theirs (autocast): "bfloat16" or "float16", else
  // empty. Its losses are then held to that precision's rounding
  // (loss_tolerance), not to the exact tolerance: what it changes is the
  // arithmetic, not what the model learns.
  std::string precision;
  double loss_tolerance = 0;  // thresholds::kLossTolerance, or the precision's
  // A variant of one's own job that made fewer gradients than its
  // baseline for the same weights (the most the census counted at a
  // phase's end, each run's): it trains fewer of them (frozen layers).
  // Set only then; it changes what the model learns whatever the losses.
  std::optional<double> gradients_mib, baseline_gradients_mib;
  // A variant of one's own job whose weights are 16-bit where the
  // baseline's are 32-bit (bytes a parameter, each run's): the update is
  // rounded to the weights' precision, and updates below it are lost (an
  // independent check's pure bf16 model left 6.8% of its weights unchanged
  // after 6 steps whose losses were within 0.0074% of the fp32 baseline's,
  // and read "measured best remedy"). Set only then.
  std::optional<double> bytes_per_parameter, baseline_bytes_per_parameter;
  // It changes what the model learns: its losses differ beyond
  // loss_tolerance (each step's difference against the baseline's largest
  // loss over the steps compared), it trains fewer weights
  // (gradients_mib), or, where the baseline has no losses (it ran out
  // first), one of its remedies does by design.
  bool changes_training = false;
  // What the reports show the variant did, whatever its label says
  // (a Python job's variant is a name of the user's): checkpointing on in
  // its model and not the baseline's, its batch in micro-batches where the
  // baseline's was one, autocast where the baseline had none, less
  // optimizer state than the baseline's made (a lighter optimizer: sgd).
  std::vector<RemedyKind> observed;
  // The phase of each run's highest peak: where a remedy moved it out of
  // the phases that hold the activations (to step(): the optimizer's
  // temporaries), less of them would not lower it further (an
  // independent check's BERT under accumulation peaked in step() at
  // 229.1 MiB, its activations down from 132.3 to 33.07).
  std::optional<Phase> peak_phase, baseline_peak_phase;
  // The dominant cause's component in this run and in the baseline, and
  // whether the remedy reduces the cause: lower by more than
  // thresholds::kRemedyReduction, or for a retained graph, no longer growing
  // (a smaller graph kept every step still runs out, only later).
  std::optional<double> cause_mib;
  std::optional<double> baseline_cause_mib;
  // Where the verdict is inconclusive (two consumers within the margin):
  // the one these figures are of, the first of the two the row reduces,
  // else the larger. Unset otherwise (the dominant cause's).
  std::optional<Cause> cause;
  // The baseline ran out before its figure existed: baseline_cause_mib is
  // what it held of the cause when it failed (the optimizer state it was
  // making, the activations and temporaries beside the model state), a
  // lower bound of what it needed.
  bool baseline_cause_at_failure = false;
  bool reduces_cause = false;
  // A CPU run of a remedy that moves memory to the host: the host is the
  // device there, so its saving is out of the tracked allocator, not out of
  // memory; measured and shown, never the best remedy.
  bool host_is_device = false;
  // A sharded mode's row: what the rank holds of the model state at the end
  // of step() (its census) and what the mode's formula says it should
  // (model_state_per_rank, with the baseline's state per parameter byte).
  std::optional<double> model_state_mib;
  std::optional<double> formula_mib;
};

// The parallel modes measured side by side, per rank: a replicated run
// (ddp) and every mode run of the same configuration without remedies
// (zero1, zero2, zero3, tensor), rank 0 standing for its set. What the rank
// holds at the end of the last step() (its tensor census) of the weights
// and of the whole model state, each beside its mode's formula
// (parameters_per_rank, model_state_per_rank, with the replicated run's
// optimizer state per parameter byte and, under tensor parallelism, the
// run's split bytes), what its forward adds (the activations a rank keeps
// for backward), its peak and how far its losses are from the replicated
// run's.
struct ModeRow {
  ParallelMode mode = ParallelMode::kDdp;
  std::string variant;  // variant_label: "none" for the replicated run, "zero3", "tensor"
  std::string source;   // rank 0's report
  int world_size = 1;
  int ranks = 0;  // the set's reports in the group
  RunStatus status = RunStatus::kComplete;
  std::optional<double> parameters_mib;
  std::optional<double> parameters_formula_mib;
  std::optional<double> model_state_mib;
  std::optional<double> model_state_formula_mib;
  std::optional<double> split_parameter_mib;  // tensor parallelism: the split layers' whole size (S)
  std::optional<double> forward_increment_mib;
  double peak_mib = 0;  // the highest of the set's ranks
  std::optional<double> max_loss_diff;  // against the replicated run's (0 for it)
};

// The largest batch predicted to fit a budget (memdiag/capacity_model.hpp):
// the verdict's configuration's runs (or a search's tries) fitted phase by
// phase, the phase that binds, and what the answer assumes.
struct CapacityPrediction {
  enum class Budget { kGiven, kMemoryLimit, kDevice };
  Budget source = Budget::kGiven;
  std::string preset;
  int steps = 0;
  // The configuration's tokens per sample, where it has one: a batch that
  // fits at one length says nothing of another.
  std::optional<int> sequence_length;
  // Gradient accumulation: the batch is this many micro-batches, as the
  // run's steps were (its memory follows the micro-batch, batch / this).
  int micro_batches = 1;
  // The steps' inputs varied in shape at the same batch and tokens (image
  // sizes that varied): the answer is for the largest step's, this step's
  // forward (an independent check's multi-scale EfficientNet: the batch at
  // 224 px, where 96 px holds about five times more).
  std::optional<std::int64_t> largest_inputs_step;
  CapacityAnswer answer;
  // The points were a --find-max-batch's tries: the search's own prediction
  // (its outcomes left out, to set beside what it found).
  bool from_search = false;
  // With them, the search's answer as its fresh process ran it (a search
  // its traced try's replay settled tried only 1 and a quarter of it).
  bool fitted_answer_run = false;
  // What the primary run's batch needs by the same lines (when it is not
  // among the fitted, or it ran out).
  std::int64_t primary_batch = 0;
  double primary_needs_mib = 0;
  // A rank of several: the batch is that rank's own (rank 0 may carry
  // more than the others), not every rank's.
  std::optional<int> rank;
  // A --find-max-batch search for the same budget in the group, beside the
  // prediction: what was found by running.
  struct Searched {
    std::int64_t max_batch = 0;
    std::optional<std::int64_t> first_failing_batch;
    std::optional<bool> confirmed;
    std::string source;  // the report it is from
    // The answer its traced try's replay of the allocator gave before fresh
    // processes checked it (--find-max-batch under a limit): the search's
    // own prediction from one try, beside the lines through all of them.
    std::optional<std::int64_t> replayed;
  };
  std::optional<Searched> searched;
  // Beside a search under the allocator's defaults, a search of the same
  // configuration and budget under expandable segments: the referee of the
  // memory the default allocator stranded, which the lines do not model
  // (what it found above `searched` is what stranding cost at this budget).
  std::optional<Searched> searched_expandable;
  // No run completed to fit: what the run that ran out under this budget
  // (or a smaller one) bounds. The largest batch is below its batch
  // (answer.max_batch, capped_by_oom), and its batch needs more than it had
  // in use at the failure plus the request refused (phases after the
  // failing one never ran).
  std::optional<double> needs_more_than_mib;
  std::optional<Phase> failed_phase;
  // The run was traced (--trace-allocations): the answer is the replay's
  // (answer.max_batch is its sure one, answer.binding.phase where the
  // batch above it fails), the lines' own answer kept beside it.
  std::optional<ReplayCapacity> replay;
  std::int64_t lines_max_batch = 0;
  // A trace that could not be replayed: why (the lines answered).
  std::string replay_unusable;
};
const char* to_string(CapacityPrediction::Budget b);

// Capacity where the steps' size varied (dynamic batching, variable
// lengths): the step's memory above what it started with is fitted as a
// rate per unit of its size, in samples and in tokens, through zero (what
// a step holds for its inputs grows with them); the unit whose rate holds
// steadiest across the steps is the one memory follows. The largest step
// that fits the budget is given in that unit, at the fitted rate and at the
// steepest step's, and the job's own largest step is set against it.
struct StepSizeCapacity {
  enum class Unit { kSamples, kTokens };
  Unit unit = Unit::kSamples;
  int steps = 0;                 // steps fitted (step 0 left out where enough others said)
  double base_mib = 0;           // the most a fitted step started with (weights, state), and per_step_mib
  double per_step_mib = 0;       // of it, what a step needed whatever its size (a line's intercept)
  double per_unit_mib = 0;       // the fitted rate
  double steepest_per_unit_mib = 0;
  double spread = 0;             // the rate's relative deviation over the steps in this unit
  std::optional<double> other_spread;  // in the other unit, where the report gave it
  std::int64_t least = 0, most = 0;    // the steps' sizes in this unit
  std::optional<std::int64_t> other_least, other_most;  // and in the other, where the report gave it
  double largest_step_need_mib = 0;    // measured: the largest step's peak above nothing
  // The run ran out of memory in this step, which the fit has not (its
  // size is not in the report where the forward did not end): the largest
  // step read is the largest that completed, not the job's.
  std::optional<int> failed_step;
  std::optional<Phase> failed_phase;
  double budget_mib = 0;
  CapacityPrediction::Budget source = CapacityPrediction::Budget::kGiven;
  std::int64_t max_size = 0;           // at the fitted rate
  std::int64_t max_size_steepest = 0;  // at the steepest step's rate
  // Tokens whose rate grows with the steps' sequence length (attention's
  // length x length scores, saved per layer): per_unit_mib is the rate at
  // no length and this the MiB a token adds per token of length (a
  // GPT-2's steps of 48 to 192 tokens a sequence: 0.255 to 0.281 MiB a
  // token). The answer is then for steps of length_samples samples, its
  // tokens that many sequences of one length.
  std::optional<double> per_token_per_length_mib;
  std::optional<std::int64_t> length_samples;
  // Tokens fitted without a length term (the steps' lengths too close to
  // tell one: a dynamically padded job's 243 to 251 tokens a sequence),
  // where the answer lies beyond the largest step: the steps' shortest and
  // longest sequence, and the answer if all of a token's memory grew with
  // the length as attention's scores do, for steps of the largest step's
  // samples (length_samples) made longer. The job's limit lies between
  // (an independent check's 8 x 361 tokens said to fit 400 MiB peaked at
  // 456.7; 8 x 320 fit at 390.7).
  std::optional<double> shortest_length, longest_length;
  std::optional<std::int64_t> max_size_if_all_grows_with_length;
  // The loop keeps this much more every step (its post-cleanup growth,
  // where significant): the answer holds for the steps recorded only, each
  // later one needing that much more (a list of every step's logits: 484
  // tokens said to fit 300 MiB, which the run passed at its tenth step).
  std::optional<double> growth_per_step_mib;
  int recorded_steps = 0;
};
const char* to_string(StepSizeCapacity::Unit u);

// The longest sequence predicted to fit a budget at the verdict's batch,
// from a sequence sweep of its configuration (at least two lengths). Each
// run's forward and backward are split into what does not grow with the
// length (weights, state, workspaces: a line in L), the activations held
// at the end of forward (linear L + quadratic L^2, least squares: the
// quadratic part is spelt-out attention's scores), and what backward adds
// above them (a per-token part measured, and where attention is spelt out
// the length x length gradients of one layer, measured when a run's
// backward grew faster than its length, else assumed as two of the layer's
// held score tensors); the allocator's reserve beyond its tensors is kept
// as the largest share of the peak any of the runs had.
struct SequenceCapacity {
  CapacityPrediction::Budget source = CapacityPrediction::Budget::kGiven;
  double budget_mib = 0;
  std::int64_t batch = 0;
  std::string preset;
  int steps = 0;
  std::vector<std::int64_t> fitted_lengths;
  std::int64_t max_sequence_length = 0;  // 0: not even one token fits
  Phase binding_phase = Phase::kBackward;
  // The parts at the answer (MiB): fixed + held + transient, times the reserve.
  double fixed_mib = 0;
  double held_linear_mib = 0;     // per token
  double held_quadratic_mib = 0;  // per token squared
  double transient_mib = 0;       // what the binding phase adds above what it holds, at the answer
  bool transient_quadratic_assumed = false;
  double reserve_share = 0;
  double needs_mib = 0;  // with the reserve, at the answer
  // d ln(held) / d ln(L) at the answer: 1 for linear growth, 2 for quadratic.
  double exponent_at_answer = 0;
  double extrapolation = 0;  // answer / longest fitted length
  // A traced transformer run (--trace-allocations, passes at three
  // lengths): the longest length by replaying the allocator
  // (max_batch/max_batch_if_held read as lengths), which is then
  // max_sequence_length; what the lines said beside it (0: no sweep to fit).
  std::optional<ReplayCapacity> replay;
  std::int64_t lines_max_sequence_length = 0;
};

// The largest batch per rank under each parallel mode at a world size (a
// what-if, --world-size), from a single-rank run's capacity lines: the
// weights, gradients and optimizer state of each phase's fixed part divided
// among the ranks where the mode shards them; DDP and ZeRO-1 add their
// gradient buckets (one P) from the first backward on; ZeRO-2 reduce-scatters
// one unit's gradients at a time and ZeRO-3 also gathers one unit's weights,
// each taken as the largest module (model.largest_module_bytes) in forward
// and backward. What grows with the batch stays per rank.
struct ShardedCapacity {
  ParallelMode mode = ParallelMode::kDdp;
  int world_size = 2;
  CapacityPrediction::Budget source = CapacityPrediction::Budget::kGiven;
  double budget_mib = 0;
  CapacityAnswer answer;         // max_batch is per rank
  double model_state_mib = 0;    // model_state_per_rank for the mode
  std::optional<double> unit_mib;  // the largest module, as in flight (absent: not recorded)
  double parameter_mib = 0;        // the whole model's weights
  // Whether the whole weights fit the budget: where they do not, only a
  // mode that shards the weights (ZeRO-3) can hold the model at all.
  bool weights_fit_budget = true;
};

// A run that would settle what the reports given cannot: a batch, preset or
// steps sweep point. Its output never names a report that was given.
// Only memory_diagnostics can run its own reports' configurations again:
// for a report another producer wrote (a loop with memdiag::Recorder, a
// Python job), run holds the change to make (the batch, the steps, another
// model size) and runnable is false.
struct ConfirmingRun {
  SweepKind confirms = SweepKind::kBatch;
  RunSpec run;
  bool runnable = true;
  std::string producer;  // who wrote the report it confirms
  // What it is expected to cost, from the report it confirms: its peak
  // allocated (the capacity model at another batch; the growth per step over more
  // steps) and its steps' time at the report's time per step (scaled by
  // the batch; at most the report's own for a smaller batch). Absent where
  // the report cannot say (a model of another size). The process's start
  // (loading LibTorch, starting the device) comes on top.
  std::optional<double> expected_peak_mib;
  std::optional<double> expected_seconds;
  bool seconds_at_most = false;
  // A job of gradient accumulation: the batch in as many micro-batches as
  // the report's step ran (a batch of 1 cannot be four); 1 without.
  int micro_batches = 1;
  // A job whose steps varied in size (dynamic batching, a token budget):
  // every step at this size, in the unit its memory follows, rather than
  // a batch (step 0's is not the job's); run.batch_size_per_device unset.
  std::optional<std::int64_t> step_size;
  bool step_size_in_tokens = false;
  // Tokens, where every step of the job had this many samples: the run
  // keeps them (what follows the samples is in the fit's fixed part).
  std::optional<std::int64_t> step_sequences;
};

struct Verdict {
  std::string case_name;
  std::string group_key;
  std::string group_label;
  Cause dominant = Cause::kInconclusive;
  Decision decision;
  std::string primary_source;  // the run the verdict is read from
  std::string primary_producer;  // who wrote it: only memory_diagnostics' runs can be run again by flags
  std::string primary_device_kind;  // "cpu", "cuda": on the CPU, "move it to the host" moves nothing
  // The primary run's data-parallel mode and world: a run whose optimizer
  // state is sharded already is not told to shard it.
  ParallelMode primary_mode = ParallelMode::kNone;
  int primary_world_size = 1;
  // ZeRO-1's state found uneven across the ranks (ZeroRedundancyOptimizer
  // gives each parameter's whole state to one rank): the rank keeping the
  // most after its first step and the one keeping the least, where the
  // most is twice the least (and apart by the signal); more ranks will not
  // split the largest parameter's state.
  struct UnevenState {
    RankRow most, least;
  };
  std::optional<UnevenState> uneven_state;
  std::vector<Component> components;
  std::vector<Evidence> evidence;
  std::vector<Warning> warnings;
  std::vector<ConfirmingRun> confirm;
  bool confirmed = false;  // a sweep in the group confirmed the scaling
  std::vector<Sweep> sweeps;
  std::vector<DistributedView> distributed;
  // The largest batch predicted for each budget (--budget-mib, the run's
  // memory limit, or the device less the memory outside the allocator).
  std::vector<CapacityPrediction> capacity;
  std::vector<SequenceCapacity> sequence_capacity;  // from a sequence sweep of the primary run's configuration
  // Where the primary run's steps varied in size: capacity in the unit its
  // memory follows (it replaces the per-batch prediction, whose batch is
  // not every step's).
  std::vector<StepSizeCapacity> step_capacity;
  std::vector<ShardedCapacity> sharded_capacity;    // per budget, world size and mode, from a single-rank run
  // Remedies measured in the group, against their baseline runs (rank 0).
  std::vector<RemedyRow> remedies;
  // Where a replicated run and at least one mode run of the same
  // configuration were given: each, per rank, the replicated one first.
  std::vector<ModeRow> parallel_modes;
  // The row that lowers the peak most among those that reduce the dominant
  // cause, complete and keep the training (RemedyRow::changes_training
  // false); none where each such row changes it. Index into remedies.
  std::optional<std::size_t> best_remedy;
  // The row with the lowest peak among those that reduce the cause and
  // complete, whatever their losses: named beside best_remedy when it is
  // another row (one that changes what the model learns), and alone,
  // said so, where there is no best.
  std::optional<std::size_t> lowest_peak_remedy;
  // Where variants were measured: the remedies and sharded modes meant for
  // the dominant cause (their definitions' answers) that no row measured.
  std::vector<RemedyKind> remedies_not_measured;
  std::vector<ParallelMode> modes_not_measured;
  // The primary run's model spelt its attention out (its report's
  // model.attention is "math"): the remedies that replace it come first in
  // the response to activations.
  bool math_attention = false;
  // The primary run's activations are 16-bit already: its forward ran under
  // autocast ("autocast to bfloat16") or its weights are 16-bit ("16-bit
  // weights"); empty otherwise. The response to activations then does not
  // offer lower precision, and the parameters' does not offer bf16 weights.
  std::string lower_precision;
  // Activation checkpointing the primary run took already, in words ("on
  // in the model, as the recorder saw it", "its variant, \"gc\"", "--remedy
  // checkpoint"), empty where it took none: the response to activations
  // leaves it out (an independent check's Qwen2 with gradient
  // checkpointing on was told to use it).
  std::string checkpointing_taken;
  // Checkpointing on for part of the model only: what the first backward's
  // graph saved outside its checkpointed regions (MiB), where that is at
  // least half the forward's increment (a classifier head checkpointed
  // alone). The response then asks to extend it, not "taken already".
  std::optional<double> checkpointing_outside_mib;
  // Weights outside the recorded model and its optimizers that backward
  // made gradients for (the report's model.outside_parameters_mib), where
  // at least the signal floor: a teacher or reference model run with
  // gradients on. The response asks to run it under torch.no_grad().
  std::optional<double> outside_parameters_mib;
  // A growth named retained_graph that the walk's kept tensors account for,
  // none of them graph-retaining (no retain_graph): the label says tensors
  // kept across steps, not graphs.
  bool kept_tensors_not_graphs = false;
  // A growth named retained_graph that parameters the loop made every step
  // (and the optimizer's state for them) account for: MiB a step of each.
  // The label, response and would-not-help are about those, not graphs.
  std::optional<double> parameters_made_per_step_mib;
  double state_made_per_step_mib = 0;
  // Tensors kept every step outside any graph and no model output whose
  // bytes a step are a whole number of copies of the parameters (within
  // 2%): a copy of every gradient or weight kept each step (p.grad.clone()
  // into a list). How many copies, and their MiB a step.
  std::optional<std::int64_t> kept_parameter_copies;
  double kept_parameter_copies_mib = 0;
};

// The MiB a cause accounts for in one run (the component components_of
// gives it), or nothing when the run has no such figure.
std::optional<double> cause_mib(Cause cause, const RunFeatures& f);

// taken: every report path already given, so confirming runs never suggest
// writing over one.
// world_sizes: the data-parallel worlds a single-rank run's capacity is
// predicted for under each mode (--world-size); none by default.
Verdict diagnose(const Group& group, const std::set<std::string>& taken = {},
                 const std::vector<double>& budgets_mib = {}, const std::vector<int>& world_sizes = {});

struct Analysis {
  std::vector<Group> groups;
  std::vector<Verdict> verdicts;  // one per group, same order
  // Inputs that could not be read ("FILE: $.path: why"), in every format
  // beside the verdicts: an unreadable report is part of the outcome.
  std::vector<std::string> unreadable;
};

// The whole pipeline for a set of reports already read: (source, report).
// taken: paths confirming runs must not write to besides the reports given
// (the CLI adds the reports already on disk beside them).
Analysis analyse(const std::vector<std::pair<std::string, Report>>& reports,
                 const std::set<std::string>& taken = {}, const std::vector<double>& budgets_mib = {},
                 const std::vector<int>& world_sizes = {});

// Thresholds, named so tests, docs and the JSON output can cite them.
namespace thresholds {
// The dominant cause must exceed the runner-up by this factor.
inline constexpr double kDominanceRatio = 1.25;
// Below this the run is too small to say anything (MiB).
inline constexpr double kMinimumSignalMib = 0.25;
// Tensors kept across steps below this a step (MiB; a loss kept after
// its backward, a scalar) are named in the evidence but get no fix in the
// response beside another cause: 10 MiB over a thousand steps.
inline constexpr double kKeptResponseFloorMib = 0.01;
// Memory held before training began (HeldBeforeTraining) of at least
// this share of the weights gets a fix of its own beside the parameters'
// response: a second copy of a model, most likely.
inline constexpr double kHeldCopyShare = 0.5;
// Tensors the loop keeps alive at every cleanup (ResidentTensors) are said
// from this share of the run's peak: below it they change no decision.
inline constexpr double kResidentShareOfPeak = 0.1;
// Growth per step counts as real when above this (MiB) ...
inline constexpr double kGrowthFloorMib = 0.05;
// ... and above this fraction of the baseline ...
inline constexpr double kGrowthBaselineFraction = 0.001;
// ... and at least this share of step-to-step changes are increases.
inline constexpr double kGrowthPositiveShare = 0.75;
// A sweep is linear when every point's y/x is within this of the fitted slope.
inline constexpr double kLinearTolerance = 0.15;
// Ranks whose peaks differ by more than this fraction are imbalanced.
inline constexpr double kRankImbalance = 0.10;
// Gradients below this share of the weights: nearly all of them frozen
// (a LoRA job's 0.375 MiB against 74.4 MiB), the response is about the
// frozen weights, not parameter-efficient fine-tuning it already does.
inline constexpr double kFrozenShare = 0.1;
// A sharded model whose forward holds this share of its unsharded weights
// gathered at its end keeps most of the model in one place from the
// forward to backward (FSDP2 on the root alone holds all of it; a block
// per unit that reshards after its forward, none): its units are the fix.
inline constexpr double kGatheredShareOfModel = 0.5;
// Steps a retained-graph confirming run asks for: twice the run's, at least this.
inline constexpr int kMinConfirmSteps = 5;
// Cleanups a growth must span to decide (two cleanups are one difference:
// a leak cannot be told from a one-off there, and a longer run is asked).
inline constexpr int kMinGrowthSteps = 3;
// A remedy reduces the dominant cause when it lowers that cause's MiB by more
// than this fraction of the baseline's.
inline constexpr double kRemedyReduction = 0.10;
// A remedy keeps the training when no step's loss differs from the
// baseline's by more than this (relative): accumulation's reordered sums
// stay far below it, bf16 does not.
inline constexpr double kLossTolerance = 1e-4;
// ... and where the variant computes in a lower precision with its weights
// kept (autocast), that precision's machine epsilon: bf16 keeps 8
// significant bits (2^-7), fp16 11 (2^-10). A ViT's losses under bf16
// autocast differed by 0.02% from fp32's over six steps, on one path.
inline constexpr double kBf16LossTolerance = 1.0 / 128;
inline constexpr double kFp16LossTolerance = 1.0 / 1024;
// An out-of-memory error with free memory reserved is fragmentation when the
// pieces stranded in split segments are at least this share of that free
// memory (and at least the request); a cache merely large otherwise.
inline constexpr double kStrandedShareOfFree = 0.5;
// ... and the failing phase had completed before within the same budget (so
// what it needs fits, and the pieces are what stopped it), or the reserved
// free memory is at least this share of what was in use (enough to matter
// whatever the phase still needed). A phase failing on its first occurrence
// with a few MiB stranded ran out because of what the phase was making.
inline constexpr double kReservedFreeShareOfUse = 0.1;
// A failing step larger than any completed one is stranded memory's only
// when its extrapolated need leaves at least this much of the budget: half
// of the 20 MiB granule in which expandable segments map the large pool,
// what an allocator that packs perfectly still leaves, on average, partly
// used at a segment's end.
inline constexpr double kGranuleMarginMib = 10.0;
// A language model's logits are named beside the forward increment when
// they are at least this share of it.
inline constexpr double kLargeLogitsShare = 0.05;
// The forward's inputs on the device are named beside its increment when
// they hold at least this share of it; above the whole of it, the response
// to activations leads with the batch, which divides them, and says that
// checkpointing and offloading saved activations leave them.
inline constexpr double kInputsShareOfForward = 0.25;
// A backward node's temporary (what it freed before it was done) grows with
// the batch when it is of the size of the gradients it and the node before
// it took and gave (a copy, an elementwise kernel's output, the adds that
// accumulate the node before's gradients: each at most the size of one of
// them, and a node takes and gives several); one this many times larger is
// a workspace of the kernel's own, sized by its weights or channels (a
// depthwise convolution's on the CPU: 36.9 MiB beside 0.05 MiB of
// gradients, at batch 4 and 8 alike) and is taken as fixed, from one run.
inline constexpr double kTemporaryScale = 8.0;
}  // namespace thresholds

}  // namespace memdiag
