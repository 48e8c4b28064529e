// The comparison as JSON (docs/comparison-output.md): every sentence the text
// renderer prints, and beside it the records it came from, so a dashboard can
// read figures instead of parsing English.
#include "regression_text.hpp"

#include "memdiag/overload.hpp"
#include "memdiag/render.hpp"

namespace memdiag {
using nlohmann::json;

namespace {

template <typename T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json point_json(const RunPoint& p) { return {{"batch", p.batch}, {"preset", p.preset}, {"steps", p.steps}}; }

json component_json(const Component& c) {
  return {{"cause", to_string(c.cause)}, {"mib", c.mib}, {"basis", cause_basis(c.cause)}};
}

json sweep_json(const Sweep& s) {
  json pts = json::array();
  for (const SweepPoint& p : s.points) pts.push_back({{"x", p.x}, {"y", p.y}, {"source", p.source}});
  json j = {{"kind", to_string(s.kind)}, {"points", pts},         {"slope", s.slope},
            {"max_deviation", s.max_deviation}, {"increasing", s.increasing}, {"linear", s.linear}};
  if (s.exponent) j["exponent"] = *s.exponent;
  if (s.intercept_mib) j["intercept_mib"] = *s.intercept_mib;
  if (s.per_micro_batch) j["per_micro_batch"] = true;
  if (s.linear_mib) j["linear_mib"] = *s.linear_mib;
  if (s.quadratic_mib) j["quadratic_mib"] = *s.quadratic_mib;
  if (s.quadratic_share) j["quadratic_share"] = *s.quadratic_share;
  return j;
}

json stop_json(const RunStop& s) {
  return {{"kind", to_string(s.kind)},
          {"phase", s.phase ? json(to_string(*s.phase)) : json(nullptr)},
          {"step", opt(s.step)},
          {"message", s.message}};
}

// The figures of one evidence record; the code and the sentence are added by
// the caller.
json figures(const Evidence& e) {
  return std::visit(
      Overload{
          [](const evidence::ForwardIncrement& x) -> json {
            return {{"forward_mib", x.forward_mib}, {"per_sample_mib", opt(x.per_sample_mib)},
                    {"parameter_mib", x.parameter_mib}, {"peak_mib", x.peak_mib}, {"at", point_json(x.at)},
                    {"logits_mib", opt(x.logits_mib)}, {"held_over_mib", x.held_over_mib},
                    {"gradients_freed_mib", x.gradients_freed_mib}, {"batch_assumed", x.batch_assumed},
                    {"samples", x.samples ? json{{"least", x.samples->least}, {"most", x.samples->most}} : json(nullptr)},
                    {"per_token_mib", opt(x.per_token_mib)},
                    {"tokens", x.tokens ? json{{"least", x.tokens->least}, {"most", x.tokens->most}} : json(nullptr)},
                    {"micro_batches", x.micro_batches}, {"micro_batch_samples", opt(x.micro_batch_samples)},
                    {"input_mib", opt(x.input_mib)}, {"gathered_parameters_mib", x.gathered_parameters_mib},
                    {"calls", x.calls}, {"calls_chunked", x.calls_chunked}, {"calls_released", x.calls_released},
                    {"range", x.range ? json{{"least_mib", x.range->least_mib}, {"least_step", x.range->least_step},
                                             {"most_mib", x.range->most_mib}, {"most_step", x.range->most_step},
                                             {"tokens_varied", x.tokens_varied}, {"samples_seen", x.samples_seen},
                                             {"tokens_seen", x.tokens_seen}}
                                      : json(nullptr)}};
          },
          [](const evidence::PostCleanupTrend& x) -> json {
            return {{"growth_per_step_mib", opt(x.growth_per_step_mib)}, {"growing", x.growing},
                    {"steps", x.steps}, {"made_once", x.made_once}, {"unseen_frees", x.unseen_frees},
                    {"state_grew_mib", x.state_grew_mib}, {"held_graph_mib", x.held_graph_mib},
                    {"gradients_held_mib", x.gradients_held_mib}, {"gradients_held_cleanups", x.gradients_held_cleanups},
                    {"gradients_unknown_cleanups", x.gradients_unknown_cleanups},
                    {"follows_size", x.follows_size}, {"walk_held_mib", opt(x.walk_held_mib)},
                    {"rise", x.rise ? json{{"after_step", x.rise->after_step},
                                          {"next_step", x.rise->next_step}, {"mib", x.rise->mib},
                                          {"rises", x.rise->rises}}
                                               : json(nullptr)}};
          },
          [](const evidence::OptimizerStateMade& x) -> json {
            return {{"optimizer_setup_mib", opt(x.optimizer_setup_mib)}, {"persistent_mib", x.persistent_mib}, {"left_mib", x.left_mib},
                    {"ratio_to_parameters", x.ratio_to_parameters}, {"parameter_mib", x.parameter_mib},
                    {"grown_to_mib", opt(x.grown_to_mib)}, {"gradients_kept_mib", opt(x.gradients_kept_mib)},
                    {"step_transient_mib", opt(x.step_transient_mib)}, {"step_peak_is_runs", x.step_peak_is_runs},
                    {"one_parameter_at_a_time", x.one_parameter_at_a_time},
                    {"state_counted", x.state_counted}, {"grew_once_at_step", opt(x.grew_once_at_step)}};
          },
          [](const evidence::StepIncrements& x) -> json {
            return {{"step0_mib", x.step0_mib}, {"step1_mib", opt(x.step1_mib)}};
          },
          [](const evidence::DataParallelBuckets& x) -> json { return {{"world_size", x.world_size}}; },
          [](const evidence::RetainedGrowth& x) -> json {
            return {{"per_step_mib", x.per_step_mib}, {"positive_share", x.positive_share},
                    {"total_mib", x.total_mib}, {"at", point_json(x.at)},
                    {"fills_at_step", opt(x.fills_at_step)}, {"budget_mib", opt(x.budget_mib)},
                    {"acceleration_mib", opt(x.acceleration_mib)}, {"first_rise_mib", x.first_rise_mib},
                    {"last_rise_mib", x.last_rise_mib}};
          },
          [](const evidence::RetainedShareOfForward& x) -> json {
            return {{"per_step_mib", x.per_step_mib}, {"forward_mib", x.forward_mib},
                    {"kept_tensors_mib", opt(x.kept_tensors_mib)},
                    {"parameters_per_step_mib", opt(x.parameters_per_step_mib)},
                    {"state_per_step_mib", x.state_per_step_mib},
                    {"kept_graph_mib", x.kept_graph_mib},
                    {"walked_first_step", opt(x.walked_first_step)},
                    {"walked_last_step", opt(x.walked_last_step)},
                    {"walked_growth_mib", opt(x.walked_growth_mib)}};
          },
          [](const evidence::WeightsDominate& x) -> json {
            return {{"parameter_mib", x.parameter_mib}, {"peak_mib", x.peak_mib}, {"forward_mib", x.forward_mib},
                    {"first_step_excess_mib", x.first_step_excess_mib}, {"at", point_json(x.at)},
                    {"gradient_mib", opt(x.gradient_mib)}, {"gathered_mib", x.gathered_mib},
                    {"trainable_mib", opt(x.trainable_mib)}, {"gradients_not_reached", x.gradients_not_reached}};
          },
          [](const evidence::CacheExcess& x) -> json {
            return {{"peak_reserved_mib", x.peak_reserved_mib}, {"peak_allocated_mib", x.peak_allocated_mib},
                    {"excess_mib", x.excess_mib}};
          },
          [](const evidence::SweepFit& x) -> json { return {{"sweep", sweep_json(x.sweep)}}; },
          [](const evidence::ReservedGap& x) -> json { return {{"max_gap_mib", x.max_gap_mib}}; },
          [](const evidence::StrandedSplits& x) -> json {
            return {{"max_inactive_split_mib", x.max_inactive_split_mib},
                    {"first_step_split_mib", x.first_step_split_mib},
                    {"last_step_split_mib", x.last_step_split_mib},
                    {"alloc_retries", x.alloc_retries},
                    {"peak_reserved_mib", x.peak_reserved_mib},
                    {"peak_allocated_mib", x.peak_allocated_mib},
                    {"steps", x.steps}};
          },
          [](const evidence::HeldBeforeTraining& x) -> json {
            json buffers = json::array();
            for (const auto& [name, size] : x.buffers) buffers.push_back({{"name", name}, {"mib", size}});
            return {{"mib", x.mib}, {"parameter_mib", x.parameter_mib}, {"buffer_mib", x.buffer_mib},
                    {"buffers", std::move(buffers)}};
          },
          [](const evidence::OutsideAllocator& x) -> json {
            return {{"device_minus_reserved_mib", x.device_minus_reserved_mib}};
          },
          [](const evidence::EvaluationPeak& x) -> json {
            return {{"peak_mib", x.peak_mib}, {"training_peak_mib", x.training_peak_mib}, {"forwards", x.forwards},
                    {"samples", opt(x.samples)}, {"step", opt(x.step)}};
          },
          [](const evidence::ResidentTensors& x) -> json {
            json list = json::array();
            for (const KeptRecord& k : x.tensors) {
              list.push_back({{"shape", k.shape}, {"dtype", k.dtype}, {"device", k.device}, {"grad_fn", opt(k.grad_fn)},
                              {"allocated_at", opt(k.allocated_at)}, {"mib", k.mib_per_step}, {"count", k.per_step},
                              {"made_by", opt(k.made_by)}, {"from_step", opt(k.from_step)}});
            }
            json buffers = json::array();
            for (const auto& [name, size] : x.buffers) buffers.push_back({{"name", name}, {"mib", size}});
            return {{"tensors", std::move(list)}, {"buffer_mib", x.buffer_mib}, {"buffers", std::move(buffers)},
                    {"mib", x.mib}, {"peak_mib", x.peak_mib}, {"first_step", x.first_step}, {"last_step", x.last_step}};
          },
          [](const evidence::KeptAcrossSteps& x) -> json {
            json list = json::array();
            for (const KeptRecord& k : x.kept) {
              list.push_back({{"what", to_string(k.what)}, {"shape", k.shape}, {"dtype", k.dtype},
                              {"shape_varies", k.shape_varies},
                              {"shapes", opt(k.shapes)},
                              {"grad_fn", opt(k.grad_fn)}, {"made_by", opt(k.made_by)}, {"where", opt(k.where)},
                              {"allocated_at", opt(k.allocated_at)},
                              {"per_step", k.per_step}, {"every_steps", opt(k.every_steps)},
                              {"mib_per_step", k.mib_per_step},
                              {"graph_nodes", opt(k.graph_nodes)}, {"graph_nodes_before", opt(k.graph_nodes_before)}});
            }
            return {{"kept", list}};
          },
          [](const evidence::ForwardByModule& x) -> json {
            auto list = [](const std::vector<evidence::ModuleShare>& v, bool named) {
              json out = json::array();
              for (const evidence::ModuleShare& m : v) {
                json r = {{"type", m.type}, {"mib", m.mib}, {"share", m.share}};
                if (named) r["name"] = m.name;
                out.push_back(std::move(r));
              }
              return out;
            };
            return {{"step", x.step}, {"model_type", x.model_type}, {"total_mib", x.total_mib},
                    {"forward_increment_mib", opt(x.forward_increment_mib)}, {"types", list(x.types, false)},
                    {"freed_in_parents_mib", x.freed_in_parents_mib},
                    {"under", x.under}, {"modules", list(x.modules, true)}, {"outside", list(x.outside, false)}};
          },
          [](const evidence::OutOfMemory& x) -> json {
            json tensors = nullptr;
            if (x.tensors) {
              tensors = {{"parameters_mib", x.tensors->parameters_mib},
                         {"gradients_mib", x.tensors->gradients_mib},
                         {"optimizer_state_mib", x.tensors->optimizer_state_mib}};
            }
            return {{"cause", to_string(x.cause)},
                    {"phase", x.phase ? json(to_string(*x.phase)) : json(nullptr)},
                    {"step", opt(x.step)},
                    {"request_mib", opt(x.request_mib)},
                    {"budget_mib", opt(x.budget_mib)},
                    {"in_use_mib", opt(x.in_use_mib)},
                    {"tensors", tensors},
                    {"other_mib", opt(x.other_mib)},
                    {"parameter_mib", x.parameter_mib},
                    {"cached_free_mib", opt(x.cached_free_mib)},
                    {"unreserved_mib", opt(x.unreserved_mib)},
                    {"step_need_mib", opt(x.step_need_mib)},
                    {"step_need_measured", x.step_need_mib ? json(x.step_need_measured) : json(nullptr)},
                    {"largest_free_block_mib", opt(x.largest_free_block_mib)},
                    {"inactive_split_mib", opt(x.inactive_split_mib)},
                    {"inactive_split_blocks", opt(x.inactive_split_blocks)},
                    {"num_alloc_retries", opt(x.num_alloc_retries)},
                    {"growth_per_step_mib", opt(x.growth_per_step_mib)},
                    {"completed_steps", x.completed_steps}};
          },
      },
      e);
}

json figures(const Warning& w) {
  return std::visit(Overload{
                        [](const warning::RunStopped& x) -> json {
                          return {{"source", x.source}, {"stop", stop_json(x.stop)}};
                        },
                        [](const warning::RankImbalance& x) -> json {
                          return {{"run", point_json(x.run)}, {"imbalance", x.imbalance},
                                  {"max_rank", x.max_rank}, {"max_peak_mib", x.max_peak_mib}, {"variant", x.variant},
                                  {"cpu_readings_overstate", x.cpu_readings_overstate},
                                  {"kept_per_step_mib", opt(x.kept_per_step_mib)}, {"kept_mib", x.kept_mib},
                                  {"samples", x.most_samples > x.fewest_samples
                                                  ? json{{"most", x.most_samples}, {"fewest", x.fewest_samples},
                                                         {"most_rank", x.most_samples_rank}}
                                                  : json(nullptr)},
                                  {"optimizer_state", x.most_state_mib && x.least_state_mib
                                                          ? json{{"most_mib", *x.most_state_mib},
                                                                 {"least_mib", *x.least_state_mib},
                                                                 {"most_rank", x.most_state_rank}}
                                                          : json(nullptr)}};
                        },
                        [](const warning::RankSetIncomplete& x) -> json {
                          return {{"run", point_json(x.run)}, {"world_size", x.gaps.world_size},
                                  {"missing_ranks", x.gaps.missing}, {"missing_count", x.gaps.missing_count},
                                  {"repeated_ranks", x.gaps.repeated}, {"repeated_sources", x.repeated_sources}};
                        },
                        [](const warning::BatchAssumed& x) -> json { return {{"source", x.source}}; },
                        [](const warning::BatchGiven& x) -> json {
                          return {{"source", x.source}, {"given", x.given}, {"seen", x.seen}};
                        },
                        [](const warning::RecordingProblems& x) -> json {
                          return {{"source", x.source}, {"problems", x.problems}};
                        },
                        [](const warning::StepNotes& x) -> json {
                          return {{"source", x.source}, {"notes", x.notes}, {"count", x.count}};
                        },
                        [](const warning::GrowthUnseenFrees& x) -> json {
                          return {{"source", x.source}, {"growth_per_step_mib", x.growth_per_step_mib},
                                  {"rise", x.rise ? json{{"after_step", x.rise->after_step}, {"mib", x.rise->mib}}
                                                  : json(nullptr)},
                                  {"buckets_before_recording_mib", opt(x.buckets_before_recording_mib)}};
                        },
                        [](const warning::InputsVaried& x) -> json {
                          const auto range = [](const std::optional<SizeRange>& r) -> json {
                            if (!r) return nullptr;
                            return {{"least", r->least}, {"most", r->most}, {"steps", r->steps}};
                          };
                          return {{"source", x.source}, {"samples", range(x.samples)}, {"tokens", range(x.tokens)},
                                  {"configured_batch", x.configured_batch}};
                        },
                    },
                    w);
}

const char* code_of(const Evidence& e) { return evidence_code(e); }
const char* code_of(const Warning& w) { return warning_code(w); }

// Each record twice: its sentence in `texts`, its figures with code and
// sentence in `data`.
template <typename Record>
void add_records(const std::vector<Record>& records, json& texts, json& data) {
  for (const Record& r : records) {
    const std::string text = describe(r);
    texts.push_back(text);
    json d = figures(r);
    d["code"] = code_of(r);
    d["text"] = text;
    data.push_back(std::move(d));
  }
}

json decision_json(const Decision& d) {
  return {{"rule", to_string(d.rule)},
          {"top", d.top ? component_json(*d.top) : json(nullptr)},
          {"runner_up", d.runner_up ? component_json(*d.runner_up) : json(nullptr)},
          {"margin", opt(d.margin)},
          {"threshold", d.threshold},
          {"first_step_persistent_mib", opt(d.first_step_persistent_mib)},
          {"peak_split", d.peak_split ? json{{"phase", to_string(d.peak_split->phase)},
                                             {"peak_mib", d.peak_split->peak_mib},
                                             {"with_batch_mib", d.peak_split->with_batch_mib},
                                             {"model_state_mib", d.peak_split->model_state_mib}}
                                      : json(nullptr)}};
}

json run_json(const RunFeatures& r) {
  json steps = json::array();
  for (const StepFigures& s : r.steps) {
    steps.push_back({{"step", s.step},
                     {"forward_increment_mib", opt(s.forward_increment_mib)},
                     {"backward_increment_mib", opt(s.backward_increment_mib)},
                     {"step_increment_mib", opt(s.step_increment_mib)},
                     {"cleanup_allocated_mib", opt(s.cleanup_allocated_mib)},
                     {"peak_mib", s.peak_mib}});
  }
  json peaks = json::object();
  for (const auto& [phase, mib] : r.peak_by_phase) peaks[to_string(phase)] = mib;
  json notes = json::array();
  json stops = json::array();
  for (const RunStop& s : r.stops) {
    notes.push_back(describe(s));
    stops.push_back(stop_json(s));
  }
  return {{"source", r.source},
          {"rank", r.id.rank},
          {"world_size", r.id.world_size},
          {"batch_size_per_device", r.config.batch_size_per_device},
          {"local_batch", r.local_batch},
          {"preset", r.config.preset},
          {"steps", r.steps.size()},
          {"device", r.config.device},
          {"status", to_string(r.status)},
          {"parameter_mib", r.parameter_mib},
          {"forward_increment_mib", opt(r.forward_increment_mib)},
          {"forward_per_sample_mib", opt(r.forward_per_sample_mib)},
          {"first_step_persistent_mib", opt(r.first_step_persistent_mib)},
          {"first_step_excess_mib", opt(r.first_step_excess_mib)},
          {"excess_to_parameter_ratio", opt(r.excess_to_parameter_ratio)},
          {"growth_per_step_mib", opt(r.growth_per_step_mib)},
          {"growth_significant", r.growth_significant},
          {"retained_growth_mib", opt(r.retained_growth_mib)},
          {"peak_allocated_mib", r.peak_allocated_mib},
          {"peak_reserved_mib", opt(r.peak_reserved_mib)},
          {"peak_host_resident_mib", opt(r.peak_host_resident_mib)},
          {"peak_host_pinned_mib", opt(r.peak_host_pinned_mib)},
          {"max_reserved_gap_mib", opt(r.max_reserved_gap_mib)},
          {"device_minus_reserved_mib", opt(r.device_minus_reserved_mib)},
          {"warmup_mib", opt(r.warmup_mib)},
          {"peak_by_phase_mib", peaks},
          {"per_step", steps},
          {"notes", notes},
          {"stops", stops},
          {"remedy", variant_label(r.id)},
          {"losses", r.losses},
          {"ms_per_step", opt(r.ms_per_step)}};
}

json remedies_json(const Verdict& v) {
  json remedies = json::array();
  for (const RemedyRow& r : v.remedies) {
    json observed = json::array();
    for (RemedyKind k : r.observed) observed.push_back(to_string(k));
    remedies.push_back({{"remedy", r.remedy},
                        {"source", r.source},
                        {"baseline_source", r.baseline_source},
                        {"status", to_string(r.status)},
                        {"baseline_status", to_string(r.baseline_status)},
                        {"peak_mib", r.peak_mib},
                        {"baseline_peak_mib", r.baseline_peak_mib},
                        {"peak_change_mib", r.peak_change_mib},
                        {"peak_change_fraction", r.peak_change_fraction},
                        {"forward_increment_mib", opt(r.forward_increment_mib)},
                        {"first_step_persistent_mib", opt(r.first_step_persistent_mib)},
                        {"growth_per_step_mib", opt(r.growth_per_step_mib)},
                        {"final_reserved_mib", opt(r.final_reserved_mib)},
                        {"host_peak_mib", opt(r.host_peak_mib)},
                        {"baseline_host_peak_mib", opt(r.baseline_host_peak_mib)},
                        {"host_pinned_peak_mib", opt(r.host_pinned_peak_mib)},
                        {"ms_per_step", opt(r.ms_per_step)},
                        {"ms_per_step_min", opt(r.ms_per_step_min)},
                        {"ms_per_step_max", opt(r.ms_per_step_max)},
                        {"time_ratio", opt(r.time_ratio)},
                        {"max_loss_diff", opt(r.max_loss_diff)},
                        {"loss_at_diff", opt(r.loss_at_diff)},
                        {"baseline_loss_at_diff", opt(r.baseline_loss_at_diff)},
                        {"loss_tolerance", r.loss_tolerance},
                        {"precision", r.precision.empty() ? json(nullptr) : json(r.precision)},
                        {"changes_training", r.changes_training},
                        {"gradients_mib", opt(r.gradients_mib)},
                        {"baseline_gradients_mib", opt(r.baseline_gradients_mib)},
                        {"bytes_per_parameter", opt(r.bytes_per_parameter)},
                        {"baseline_bytes_per_parameter", opt(r.baseline_bytes_per_parameter)},
                        {"observed", observed},
                        {"peak_phase", r.peak_phase ? json(to_string(*r.peak_phase)) : json(nullptr)},
                        {"baseline_peak_phase", r.baseline_peak_phase ? json(to_string(*r.baseline_peak_phase)) : json(nullptr)},
                        {"cause", r.cause ? json(to_string(*r.cause)) : json(nullptr)},
                        {"cause_mib", opt(r.cause_mib)},
                        {"baseline_cause_mib", opt(r.baseline_cause_mib)},
                        {"baseline_cause_at_failure", r.baseline_cause_at_failure},
                        {"reduces_cause", r.reduces_cause},
                        {"host_is_device", r.host_is_device},
                        {"model_state_mib", opt(r.model_state_mib)},
                        {"formula_mib", opt(r.formula_mib)}});
  }
  return remedies;
}

json line_json(const PhaseLine& l) {
  const char* piece = l.piece == PhaseLine::Piece::kStart ? "start"
                      : l.piece == PhaseLine::Piece::kEnd ? "end"
                      : l.piece == PhaseLine::Piece::kNode ? "node"
                      : l.piece == PhaseLine::Piece::kEvaluation ? "evaluation"
                                                           : "whole";
  json tensors = nullptr;
  if (l.tensors) {
    tensors = {{"parameters_mib", l.tensors->parameters_mib},
               {"gradients_mib", l.tensors->gradients_mib},
               {"optimizer_state_mib", l.tensors->optimizer_state_mib}};
  }
  json j = {{"phase", to_string(l.phase)}, {"piece", piece},         {"fixed_mib", l.fixed_mib},
            {"per_sample_mib", l.per_sample_mib}, {"tensors", tensors}, {"other_mib", l.other_mib},
            {"held_mib", l.held_mib}};
  if (l.piece == PhaseLine::Piece::kEvaluation) j["evaluation_samples"] = opt(l.evaluation_samples);
  if (l.piece == PhaseLine::Piece::kNode) {
    j["node"] = {{"index", l.node}, {"of", l.nodes}, {"name", l.node_name}, {"gradients_mib", l.gradients_mib}};
    if (l.temporary_mib > 0) j["node"]["temporary_mib"] = l.temporary_mib;
  }
  return j;
}

json replay_json(const ReplayCapacity& r) {
  const ReplayState& f = r.failure.at_failure;
  json failure = nullptr;
  if (!r.failure.completed) {
    failure = {{"phase", to_string(r.failure.phase)},
               {"step", opt(r.failure.step)},
               {"request_mib", to_mib(r.failure.request)},
               {"allocated_mib", to_mib(f.allocated)},
               {"reserved_mib", to_mib(f.reserved)},
               {"largest_free_block_mib", to_mib(f.largest_free_block)},
               {"free_blocks", f.free_blocks},
               {"stranded_mib", to_mib(r.stranded_bytes)}};
  }
  return {{"max_batch", r.max_batch},
          {"max_batch_if_workspaces_held", r.max_batch_if_held},
          {"limit_bytes", r.limit_bytes},
          {"traced_batches", {r.traced_batch, r.other_batch}},
          {"staging_buffers", r.staging_buffers},
          {"staging_cap_mib", r.staging_cap ? json(to_mib(*r.staging_cap)) : json(nullptr)},
          {"workspaces", r.workspaces},
          {"largest_workspace_mib", to_mib(r.workspace_bytes)},
          {"first_failing_batch", r.failure.completed ? json(nullptr) : json(r.max_batch + 1)},
          {"failure", failure}};
}


json searched_json(const std::optional<CapacityPrediction::Searched>& s) {
  if (!s) return nullptr;
  return {{"max_batch", s->max_batch}, {"first_failing_batch", opt(s->first_failing_batch)},
          {"confirmed", opt(s->confirmed)}, {"source", s->source}, {"replayed_max_batch", opt(s->replayed)}};
}

json capacity_json(const Verdict& v) {
  json capacity = json::array();
  for (const CapacityPrediction& c : v.capacity) {
    const CapacityAnswer& a = c.answer;
    capacity.push_back({{"budget_mib", a.budget_mib},
                        {"budget_source", to_string(c.source)},
                        {"max_batch", a.max_batch},
                        {"binding", line_json(a.binding)},
                        {"fitted_batches", a.fitted_batches},
                        {"extrapolation", a.extrapolation},
                        {"from_search", c.from_search},
                        {"capped_by_oom", opt(a.capped_by_oom)},
                        {"raised_by_run", opt(a.raised_by_run)},
                        {"caveats", {{"one_run", a.caveats.one_run},
                                     {"backward_start_assumed", a.caveats.backward_start_assumed},
                                     {"reserve_min_mib", opt(a.caveats.reserve_min_mib)},
                                     {"reserve_max_mib", opt(a.caveats.reserve_max_mib)},
                                     {"batch_at_max_reserve", opt(a.caveats.batch_at_max_reserve)},
                                     {"batch_at_min_reserve", opt(a.caveats.batch_at_min_reserve)},
                                     {"trapped_at_oom_mib", opt(a.caveats.trapped_at_oom_mib)},
                                     {"batch_if_trapped", opt(a.caveats.batch_if_trapped)},
                                     {"batch_if_all_grows", opt(a.caveats.batch_if_all_grows)},
                                     {"batch_if_activations_grow", opt(a.caveats.batch_if_activations_grow)},
                                     {"reserve_grows_mib", opt(a.caveats.reserve_grows_mib)},
                                     {"low_end_unknown", opt(a.caveats.low_end_unknown)},
                                     {"activations_mib", opt(a.caveats.activations_mib)},
                                     {"batch_if_superlinear", opt(a.caveats.batch_if_superlinear)},
                                     {"default_allocator_extrapolated", opt(a.caveats.default_allocator_extrapolated)}}},
                        {"allocator_overhead_mib", a.reserve_overhead_mib},
                        {"primary_batch", c.primary_batch}, {"rank", c.rank ? json(*c.rank) : json(nullptr)},
                        {"primary_needs_mib", c.primary_needs_mib},
                        {"preset", c.preset},
                        {"steps", c.steps},
                        {"micro_batches", c.micro_batches},
                        {"largest_inputs_step", opt(c.largest_inputs_step)},
                        {"needs_more_than_mib", opt(c.needs_more_than_mib)},
                        {"searched", searched_json(c.searched)},
                        {"searched_expandable", searched_json(c.searched_expandable)},
                        {"replay", c.replay ? replay_json(*c.replay) : json(nullptr)},
                        {"lines_max_batch", c.lines_max_batch},
                        {"replay_unusable", c.replay_unusable.empty() ? json(nullptr) : json(c.replay_unusable)},
                        {"text", describe(c)}});
  }
  return capacity;
}

json step_capacity_json(const Verdict& v) {
  json out = json::array();
  for (const StepSizeCapacity& c : v.step_capacity) {
    out.push_back({{"unit", to_string(c.unit)},
                   {"budget_mib", c.budget_mib},
                   {"budget_source", to_string(c.source)},
                   {"max_size", c.max_size},
                   {"max_size_at_steepest", c.max_size_steepest},
                   {"per_unit_mib", c.per_unit_mib}, {"per_step_mib", c.per_step_mib},
                   {"steepest_per_unit_mib", c.steepest_per_unit_mib},
                   {"spread", c.spread},
                   {"other_unit_spread", opt(c.other_spread)},
                   {"base_mib", c.base_mib},
                   {"steps", c.steps},
                   {"least", c.least},
                   {"most", c.most},
                   {"other_least", opt(c.other_least)},
                   {"other_most", opt(c.other_most)},
                   {"largest_step_peak_mib", c.largest_step_need_mib},
                   {"failed_step", opt(c.failed_step)},
                   {"per_token_per_length_mib", opt(c.per_token_per_length_mib)},
                   {"length_samples", opt(c.length_samples)},
                   {"shortest_length", opt(c.shortest_length)},
                   {"longest_length", opt(c.longest_length)},
                   {"max_size_if_all_grows_with_length", opt(c.max_size_if_all_grows_with_length)},
                   {"growth_per_step_mib", opt(c.growth_per_step_mib)},
                   {"text", describe(c)}});
  }
  return out;
}

json length_replay_json(const ReplayCapacity& r) {
  json j = replay_json(r);
  j.erase("max_batch");
  j.erase("max_batch_if_workspaces_held");
  j.erase("traced_batches");
  j.erase("first_failing_batch");
  j["max_sequence_length"] = r.max_batch;
  j["max_sequence_length_if_workspaces_held"] = r.max_batch_if_held;
  j["traced_length"] = r.traced_batch;
  j["first_failing_length"] = r.failure.completed ? json(nullptr) : json(r.max_batch + 1);
  return j;
}

json sequence_capacity_json(const Verdict& v) {
  json out = json::array();
  for (const SequenceCapacity& c : v.sequence_capacity) {
    out.push_back({{"budget_mib", c.budget_mib},
                   {"budget_source", to_string(c.source)},
                   {"max_sequence_length", c.max_sequence_length},
                   {"binding_phase", to_string(c.binding_phase)},
                   {"batch", c.batch},
                   {"preset", c.preset},
                   {"steps", c.steps},
                   {"fitted_lengths", c.fitted_lengths},
                   {"fixed_mib", c.fixed_mib},
                   {"held_per_token_mib", c.held_linear_mib},
                   {"held_per_token_squared_mib", c.held_quadratic_mib},
                   {"transient_mib", c.transient_mib},
                   {"transient_quadratic_assumed", c.transient_quadratic_assumed},
                   {"reserve_share", c.reserve_share},
                   {"needs_mib", c.needs_mib},
                   {"exponent_at_answer", c.exponent_at_answer},
                   {"extrapolation", c.extrapolation},
                   {"replay", c.replay ? length_replay_json(*c.replay) : json(nullptr)},
                   {"lines_max_sequence_length", c.lines_max_sequence_length},
                   {"text", describe(c)}});
  }
  return out;
}

json sharded_capacity_json(const Verdict& v) {
  json out = json::array();
  for (const ShardedCapacity& c : v.sharded_capacity) {
    out.push_back({{"mode", to_string(c.mode)},
                   {"world_size", c.world_size},
                   {"budget_mib", c.budget_mib},
                   {"budget_source", to_string(c.source)},
                   {"max_batch", c.answer.max_batch},
                   {"binding", line_json(c.answer.binding)},
                   {"model_state_mib", c.model_state_mib},
                   {"unit_mib", opt(c.unit_mib)},
                   {"parameter_mib", c.parameter_mib},
                   {"weights_fit_budget", c.weights_fit_budget}});
  }
  return out;
}

json parallel_modes_json(const Verdict& v) {
  json rows = json::array();
  for (const ModeRow& r : v.parallel_modes) {
    rows.push_back({{"mode", to_string(r.mode)},
                    {"variant", r.variant},
                    {"source", r.source},
                    {"world_size", r.world_size},
                    {"ranks", r.ranks},
                    {"status", to_string(r.status)},
                    {"parameters_mib", opt(r.parameters_mib)},
                    {"parameters_formula_mib", opt(r.parameters_formula_mib)},
                    {"model_state_mib", opt(r.model_state_mib)},
                    {"model_state_formula_mib", opt(r.model_state_formula_mib)},
                    {"split_parameter_mib", opt(r.split_parameter_mib)},
                    {"forward_increment_mib", opt(r.forward_increment_mib)},
                    {"peak_mib", r.peak_mib},
                    {"max_loss_diff", opt(r.max_loss_diff)}});
  }
  if (rows.empty()) return nullptr;
  return {{"text", describe_parallel_modes(v)}, {"rows", rows}};
}

json group_json(const Group& g, const Verdict& v) {
  json comps = json::array();
  for (const Component& c : v.components) comps.push_back(component_json(c));
  json sweeps = json::array();
  for (const Sweep& s : v.sweeps) sweeps.push_back(sweep_json(s));
  json dist = json::array();
  for (const DistributedView& d : v.distributed) {
    json ranks = json::array();
    for (const RankRow& r : d.ranks) {
      ranks.push_back({{"rank", r.rank}, {"source", r.source}, {"peak_allocated_mib", r.peak_allocated_mib},
                       {"forward_increment_mib", opt(r.forward_increment_mib)},
                       {"first_step_excess_mib", opt(r.first_step_excess_mib)},
                       {"capacity_constraint", r.capacity_constraint}});
    }
    dist.push_back({{"run", describe_rank_run(d.run)}, {"run_point", point_json(d.run)}, {"variant", d.variant},
                    {"launch", d.launch.empty() ? json(nullptr) : json(d.launch)},
                    {"ranks", ranks},
                    {"capacity_constraint_rank", d.max_rank}, {"max_peak_mib", d.max_peak_mib},
                    {"imbalance", d.imbalance}, {"imbalanced", d.imbalanced}, {"world_size", d.gaps.world_size},
                    {"missing_ranks", d.gaps.missing}, {"missing_count", d.gaps.missing_count},
                    {"repeated_ranks", d.gaps.repeated}});
  }
  json evidence = json::array(), evidence_data = json::array();
  if (const std::string why = describe(v.decision, v.primary_source); !why.empty()) evidence.push_back(why);
  add_records(v.evidence, evidence, evidence_data);
  json warnings = json::array(), warning_data = json::array();
  add_records(v.warnings, warnings, warning_data);
  json confirm = json::array(), confirming = json::array();
  for (const ConfirmingRun& c : v.confirm) {
    json cost = {{"peak_mib", c.expected_peak_mib ? json(*c.expected_peak_mib) : json(nullptr)},
                 {"seconds", c.expected_seconds ? json(*c.expected_seconds) : json(nullptr)},
                 {"seconds_at_most", c.seconds_at_most},
                 {"text", describe_cost(c)}};
    if (!c.runnable) {
      confirming.push_back({{"confirms", to_string(c.confirms)}, {"runnable", false}, {"argv", nullptr},
                            {"command", nullptr}, {"output", nullptr}, {"change", describe(c)},
                            {"producer", c.producer}, {"micro_batches", c.micro_batches},
                            {"step_size", opt(c.step_size)},
                            {"step_size_unit", c.step_size ? json(c.step_size_in_tokens ? "tokens" : "samples") : json(nullptr)},
                            {"step_sequences", opt(c.step_sequences)},
                            {"expected", cost}});
      continue;
    }
    const std::vector<std::string> argv = to_argv(c.run);
    confirm.push_back(shell_command(argv));
    confirming.push_back({{"confirms", to_string(c.confirms)}, {"runnable", true}, {"argv", argv},
                          {"command", shell_command(argv)}, {"output", c.run.output}, {"change", describe(c)},
                          {"producer", c.producer}, {"micro_batches", c.micro_batches},
                            {"step_size", opt(c.step_size)},
                            {"step_size_unit", c.step_size ? json(c.step_size_in_tokens ? "tokens" : "samples") : json(nullptr)},
                            {"step_sequences", opt(c.step_sequences)},
                            {"expected", cost}});
  }
  json not_helpful = json::array();
  for (const std::string& n : not_helpful_for(v)) not_helpful.push_back(n);
  json runs = json::array();
  for (const RunFeatures& r : g.runs) runs.push_back(run_json(r));
  const std::string best = describe_best_remedy(v);
  json not_measured = json::array();
  if (!v.remedies.empty()) {
    // Names, as records; the sentences (with each one's flag) are the text's.
    for (RemedyKind k : v.remedies_not_measured) not_measured.push_back(to_string(k));
    for (ParallelMode m : v.modes_not_measured) not_measured.push_back(to_string(m));
  }
  return {{"case", g.case_name},
          {"group", g.label},
          {"device", g.device_kind},
          {"world_size", g.world_size},
          {"dominant_cause", to_string(v.dominant)},
          {"label", cause_label_for(v)},
          {"confirmed", v.confirmed},
          {"primary_report", v.primary_source},
          {"decision", decision_json(v.decision)},
          {"evidence", evidence},
          {"evidence_data", evidence_data},
          {"response", response_for(v)},
          {"not_helpful", not_helpful},
          {"confirm", confirm},
          {"confirming_runs", confirming},
          {"warnings", warnings},
          {"warning_data", warning_data},
          {"components", comps},
          {"sweeps", sweeps},
          {"distributed", dist},
          {"remedies", remedies_json(v)},
          {"best_remedy", v.best_remedy ? json(*v.best_remedy) : json(nullptr)},
          {"lowest_peak_remedy", v.lowest_peak_remedy ? json(*v.lowest_peak_remedy) : json(nullptr)},
          {"best_remedy_text", best.empty() ? json(nullptr) : json(best)},
          {"remedies_not_measured", not_measured},
          {"math_attention", v.math_attention},
          {"lower_precision", v.lower_precision.empty() ? json(nullptr) : json(v.lower_precision)},
          {"checkpointing_taken", v.checkpointing_taken.empty() ? json(nullptr) : json(v.checkpointing_taken)},
          {"checkpointing_outside_mib", opt(v.checkpointing_outside_mib)},
          {"outside_parameters_mib", opt(v.outside_parameters_mib)},
          {"capacity", capacity_json(v)},
          {"sequence_capacity", sequence_capacity_json(v)},
          {"step_capacity", step_capacity_json(v)},
          {"sharded_capacity", sharded_capacity_json(v)},
          {"parallel_modes", parallel_modes_json(v)},
          {"runs", runs}};
}

json thresholds_json() {
  return {{"dominance_ratio", thresholds::kDominanceRatio},
          {"minimum_signal_mib", thresholds::kMinimumSignalMib},
          {"growth_floor_mib", thresholds::kGrowthFloorMib},
          {"growth_baseline_fraction", thresholds::kGrowthBaselineFraction},
          {"growth_positive_share", thresholds::kGrowthPositiveShare},
          {"linear_tolerance", thresholds::kLinearTolerance},
          {"rank_imbalance", thresholds::kRankImbalance},
          {"remedy_reduction", thresholds::kRemedyReduction},
          {"loss_tolerance", thresholds::kLossTolerance},
          {"temporary_scale", thresholds::kTemporaryScale}};
}

}  // namespace

json comparison_json(const Comparison& c) {
  const Analysis& a = c.analysis;
  json groups = json::array();
  for (std::size_t i = 0; i < a.groups.size(); ++i) groups.push_back(group_json(a.groups[i], a.verdicts[i]));
  json errs = json::array();
  for (const InputError& e : c.errors) errs.push_back({{"source", e.source()}, {"path", e.path().empty() ? std::string("$") : e.path()}, {"message", e.message()}});
  json out = {{"schema_version", kComparisonSchemaVersion},
              {"memdiag_version", MEMDIAG_VERSION},
              {"thresholds", thresholds_json()},
              {"groups", groups},
              {"errors", errs}};
  if (c.baseline != nullptr) out["baseline"] = detail::regression_json(*c.baseline);
  return out;
}

std::string render_json(const Comparison& c) {
  // File names are bytes, not always UTF-8: replaced (U+FFFD) rather than
  // aborting the whole comparison.
  return comparison_json(c).dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace memdiag
