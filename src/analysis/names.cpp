// Identifiers of the analysis's closed sets, as the JSON output and the
// --expect and --fail-on gates spell them. Words for people live in the
// renderers.
#include "memdiag/analysis.hpp"
#include "memdiag/enum_names.hpp"
#include "memdiag/overload.hpp"

namespace memdiag {

const char* to_string(SweepKind k) {
  switch (k) {
    case SweepKind::kBatch: return "batch";
    case SweepKind::kParameters: return "parameters";
    case SweepKind::kSteps: return "steps";
    case SweepKind::kSequence: return "sequence";
  }
  return nullptr;  // past the last value: all_values() stops here
}

const char* to_string(DecisionRule r) {
  switch (r) {
    case DecisionRule::kNoCompletedStep: return "no_completed_step";
    case DecisionRule::kBelowSignal: return "below_signal";
    case DecisionRule::kOneStepAmbiguous: return "one_step_ambiguous";
    case DecisionRule::kTooClose: return "too_close";
    case DecisionRule::kGrowsEveryStep: return "grows_every_step";
    case DecisionRule::kDominantAtPeak: return "dominant_at_peak";
    case DecisionRule::kDominant: return "dominant";
    case DecisionRule::kOutOfMemory: return "out_of_memory";
  }
  return nullptr;  // past the last value: all_values() stops here
}

const char* evidence_code(const Evidence& e) {
  // No generic case: a new kind of evidence without a code does not build.
  return std::visit(Overload{
                        [](const evidence::ForwardIncrement&) { return "forward_increment"; },
                        [](const evidence::PostCleanupTrend&) { return "post_cleanup_trend"; },
                        [](const evidence::OptimizerStateMade&) { return "optimizer_state_made"; },
                        [](const evidence::StepIncrements&) { return "step_increments"; },
                        [](const evidence::DataParallelBuckets&) { return "data_parallel_buckets"; },
                        [](const evidence::RetainedGrowth&) { return "retained_growth"; },
                        [](const evidence::RetainedShareOfForward&) { return "retained_share_of_forward"; },
                        [](const evidence::WeightsDominate&) { return "weights_dominate"; },
                        [](const evidence::CacheExcess&) { return "cache_excess"; },
                        [](const evidence::SweepFit&) { return "sweep_fit"; },
                        [](const evidence::ReservedGap&) { return "reserved_gap"; },
                        [](const evidence::StrandedSplits&) { return "stranded_splits"; },
                        [](const evidence::OutsideAllocator&) { return "outside_allocator"; },
                        [](const evidence::HeldBeforeTraining&) { return "held_before_training"; },
                        [](const evidence::EvaluationPeak&) { return "evaluation_peak"; },
                        [](const evidence::OutOfMemory&) { return "out_of_memory"; },
                        [](const evidence::KeptAcrossSteps&) { return "kept_across_steps"; },
                        [](const evidence::ResidentTensors&) { return "resident_tensors"; },
                        [](const evidence::ForwardByModule&) { return "forward_by_module"; },
                    },
                    e);
}

const char* warning_code(const Warning& w) {
  return std::visit(Overload{
                        [](const warning::RunStopped&) { return "run_stopped"; },
                        [](const warning::RankImbalance&) { return "rank_imbalance"; },
                        [](const warning::InputsVaried&) { return "inputs_varied"; },
                        [](const warning::RankSetIncomplete&) { return "rank_set_incomplete"; },
                        [](const warning::GrowthUnseenFrees&) { return "growth_unseen_frees"; },
                        [](const warning::BatchAssumed&) { return "batch_assumed"; },
                        [](const warning::BatchGiven&) { return "batch_given"; },
                        [](const warning::StepNotes&) { return "step_notes"; },
                        [](const warning::RecordingProblems&) { return "recording_problems"; },
                    },
                    w);
}

}  // namespace memdiag
