#include "memdiag/report_json.hpp"

#include "memdiag/atomic_file.hpp"

#include <nlohmann/json.hpp>

namespace memdiag {
using nlohmann::json;

namespace {

template <typename T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}
json census_json(const TensorCensus& t) {
  return {{"parameters_mib", t.parameters_mib},
          {"gradients_mib", t.gradients_mib},
          {"optimizer_state_mib", t.optimizer_state_mib}};
}

json to_json(const Sample& s) {
  json j = {
      {"phase", to_string(s.phase)},
      {"step", opt(s.step)},
      {"allocated_mib", s.allocated_mib},
      {"reserved_mib", opt(s.reserved_mib)},
      {"device_used_mib", opt(s.device_used_mib)},
      {"peak_allocated_mib", s.peak_allocated_mib},
      {"inactive_split_mib", opt(s.inactive_split_mib)},
      {"process_device_mib", opt(s.process_device_mib)},
      {"elapsed_ms", s.elapsed_ms},
  };
  if (s.alloc_retries) j["alloc_retries"] = *s.alloc_retries;
  // Absent, not null, where the writer could not read the host (earlier
  // reports, writers without /proc).
  if (s.host_resident_mib) j["host_resident_mib"] = *s.host_resident_mib;
  if (s.host_pinned_mib) j["host_pinned_mib"] = *s.host_pinned_mib;
  if (s.micro_batch) j["micro_batch"] = *s.micro_batch;
  if (s.samples) j["samples"] = *s.samples;
  if (s.tokens) j["tokens"] = *s.tokens;
  if (s.input_mib) j["input_mib"] = *s.input_mib;
  if (s.forwards) j["forwards"] = *s.forwards;
  if (s.forwards_chunked) j["forwards_chunked"] = true;
  if (s.loss) j["loss"] = *s.loss;
  j["tensors"] = s.tensors ? census_json(*s.tensors) : json(nullptr);
  if (s.evaluation) {
    j["evaluation"] = {{"forwards", s.evaluation->forwards},
                       {"samples", opt(s.evaluation->samples)},
                       {"tokens", opt(s.evaluation->tokens)},
                       {"peak_mib", s.evaluation->peak_mib},
                       {"start_mib", s.evaluation->start_mib}};
  }
  return j;
}

json to_json(const CaseInfo& c) {
  // The opaque rest of the case first, then the fields the model knows.
  json j = json::parse(c.detail_json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) j = json::object();
  j["name"] = c.name;
  j["description"] = c.description;
  j["source"] = c.source;
  j["builtin"] = c.builtin;
  j["presets"] = c.presets;
  if (!c.preset_parameters.empty()) j["preset_parameters"] = c.preset_parameters;
  return j;
}

json remedy_names(const std::vector<Remedy>& remedies) {
  json a = json::array();
  for (const Remedy& r : remedies) a.push_back(to_string(r));
  return a;
}

json to_json(const Parallelism& p) {
  json j = {
      {"mode", to_string(p.mode)},
      {"world_size", p.world_size},
      {"rank", p.rank},
      {"local_rank", p.local_rank},
      {"backend", p.backend},
      {"rank_zero_extra_samples", p.rank_zero_extra_samples},
  };
  // Only where gradients are sharded by unit: other reports stay as they were.
  if (definition(p.mode).shards_gradients) {
    j["unit_modules"] = p.unit_modules;
    j["prefetch"] = p.prefetch_next ? "next" : "none";
  }
  if (!p.launch.empty()) j["launch"] = p.launch;
  return j;
}

json to_json(const RunConfig& c) {
  json j = {
      {"batch_size_per_device", c.batch_size_per_device},
      {"preset", c.preset},
      {"steps", c.steps},
      {"device", c.device},
      {"seed", c.seed},
      {"memory_limit_mib", opt(c.memory_limit_mib)},
      {"remedies", remedy_names(c.remedies)},
      {"allocator_settings", c.allocator_settings},
      {"parallelism", to_json(c.parallel)},
  };
  // Only where the model has a sequence: an older reader then refuses only
  // the reports it could not have understood.
  if (c.sequence_length) j["sequence_length"] = *c.sequence_length;
  if (!c.variant.empty()) j["variant"] = c.variant;
  if (c.batch_assumed) j["batch_assumed"] = true;
  if (c.batch_seen) j["batch_seen"] = *c.batch_seen;
  if (c.step_sampling) j["step_sampling"] = {{"all_below", c.step_sampling->all_below}, {"every", c.step_sampling->every}};
  return j;
}

json to_json(const Environment& e) {
  json j = {
      {"device_name", e.device_name},
      {"device_total_mib", opt(e.device_total_mib)},
      {"torch_version", e.torch_version},
      {"cuda_runtime_version", opt(e.cuda_runtime_version)},
      {"driver_version", opt(e.driver_version)},
      {"host", e.host},
      {"start_time", e.start_time},
      {"memdiag_version", e.memdiag_version},
  };
  if (e.earlier_runs_in_process) j["earlier_runs_in_process"] = *e.earlier_runs_in_process;
  return j;
}


json model_json(const ModelInfo& m) {
  json j = {{"parameters", m.parameters}, {"parameter_bytes", m.parameter_bytes}};
  if (!m.attention.empty()) j["attention"] = m.attention;
  if (!m.autocast.empty()) j["autocast"] = m.autocast;
  if (m.checkpointing) j["checkpointing"] = true;
  if (m.checkpoint_outside_mib) j["checkpoint_outside_mib"] = *m.checkpoint_outside_mib;
  if (m.outside_parameters_mib) j["outside_parameters_mib"] = *m.outside_parameters_mib;
  if (m.backward_profile) {
    const BackwardProfile& b = *m.backward_profile;
    json bp = {{"step", b.step}, {"samples", b.samples}, {"start_mib", b.start_mib}, {"names", b.names},
               {"rise_mib", b.rise_mib}, {"gradients_mib", b.gradients_mib}};
    if (b.tokens) bp["tokens"] = *b.tokens;
    if (!b.held_mib.empty()) {
      bp["held_mib"] = b.held_mib;
      bp["operands_mib"] = b.operands_mib;
    }
    j["backward_profile"] = std::move(bp);
  }
  if (m.forward_profile) {
    const BackwardProfile& f = *m.forward_profile;
    json fp = {{"step", f.step},         {"samples", f.samples},   {"start_mib", f.start_mib},
               {"names", f.names},       {"rise_mib", f.rise_mib}, {"held_mib", f.held_mib},
               {"operands_mib", f.operands_mib}};
    if (f.tokens) fp["tokens"] = *f.tokens;
    j["forward_profile"] = std::move(fp);
  }
  if (m.vocab) j["vocab"] = *m.vocab;
  if (m.layers) j["layers"] = *m.layers;
  if (m.largest_module_bytes) j["largest_module_bytes"] = *m.largest_module_bytes;
  if (m.buffer_bytes) j["buffer_bytes"] = *m.buffer_bytes;
  if (m.trainable_parameter_bytes) j["trainable_parameter_bytes"] = *m.trainable_parameter_bytes;
  if (!m.largest_buffers.empty()) {
    json list = json::array();
    for (const ModelInfo::NamedBytes& b : m.largest_buffers) list.push_back({{"name", b.name}, {"bytes", b.bytes}});
    j["largest_buffers"] = std::move(list);
  }
  if (m.split_parameter_bytes) j["split_parameter_bytes"] = *m.split_parameter_bytes;
  if (m.final_parameter_sum) j["final_parameter_sum"] = *m.final_parameter_sum;
  if (m.final_parameter_sum_of_squares) j["final_parameter_sum_of_squares"] = *m.final_parameter_sum_of_squares;
  return j;
}

json to_json(const OomDetails& o) {
  json j = {{"request_mib", opt(o.request_mib)},
          {"limit_mib", opt(o.limit_mib)},
          {"device_free_mib", opt(o.device_free_mib)},
          {"allocated_mib", opt(o.allocated_mib)},
          {"reserved_mib", opt(o.reserved_mib)},
          {"inactive_split_mib", opt(o.inactive_split_mib)},
          {"inactive_split_blocks", opt(o.inactive_split_blocks)},
          {"largest_free_block_mib", opt(o.largest_free_block_mib)},
          {"num_alloc_retries", opt(o.num_alloc_retries)},
          {"num_ooms", opt(o.num_ooms)},
          {"tensors", o.tensors ? census_json(*o.tensors) : json(nullptr)}};
  if (o.samples) j["samples"] = *o.samples;
  if (o.tokens) j["tokens"] = *o.tokens;
  return j;
}

json to_json(const Event& ev) {
  // An event in no particular phase has an empty phase, as 0.1 wrote it.
  json j = {{"kind", to_string(ev.kind)},
            {"phase", ev.phase ? to_string(*ev.phase) : ""},
            {"step", opt(ev.step)},
            {"message", ev.message},
            {"mib", opt(ev.mib)}};
  if (ev.oom) j["oom"] = to_json(*ev.oom);
  if (!ev.kept.empty()) {
    json list = json::array();
    for (const KeptRecord& k : ev.kept) {
      json r = {{"what", to_string(k.what)}};
      if (k.what == KeptRecord::What::kResident) {
        r["shape"] = k.shape;
        r["dtype"] = k.dtype;
        r["device"] = k.device;
        r["grad_fn"] = opt(k.grad_fn);
        r["per_step"] = k.per_step;
        r["mib_per_step"] = k.mib_per_step;
        if (k.made_by) r["made_by"] = *k.made_by;
      }
      if (k.what == KeptRecord::What::kTensor) {
        r["shape"] = k.shape;
        if (k.shape_varies) r["shape_varies"] = true;
        if (k.shapes) r["shapes"] = *k.shapes;
        r["dtype"] = k.dtype;
        r["device"] = k.device;
        r["grad_fn"] = opt(k.grad_fn);
        r["made_by"] = opt(k.made_by);
        r["per_step"] = k.per_step;
        if (k.every_steps) r["every_steps"] = *k.every_steps;
        r["mib_per_step"] = k.mib_per_step;
        if (k.held_steps) r["held_steps"] = *k.held_steps;
        if (k.grows) r["grows"] = true;
      }
      if (k.what == KeptRecord::What::kHeld || k.what == KeptRecord::What::kHeldGraph) r["mib_per_step"] = k.mib_per_step;
      if (k.what == KeptRecord::What::kHeldGraph) r["made_by"] = opt(k.made_by);
      if (k.where) r["where"] = *k.where;
      if (k.allocated_at) r["allocated_at"] = *k.allocated_at;
      if (k.graph_nodes) r["graph_nodes"] = *k.graph_nodes;
      if (k.from_step) r["from_step"] = *k.from_step;
      if (k.graph_nodes_before) r["graph_nodes_before"] = *k.graph_nodes_before;
      list.push_back(std::move(r));
    }
    j["kept"] = std::move(list);
  }
  if (!ev.walked_steps.empty()) j["walked_steps"] = ev.walked_steps;
  if (!ev.modules.empty()) {
    json list = json::array();
    for (const ModuleRecord& m : ev.modules) {
      list.push_back({{"name", opt(m.name)}, {"type", m.type}, {"parent", opt(m.parent)},
                      {"mib", m.mib}, {"own_mib", m.own_mib}, {"calls", m.calls}});
    }
    j["modules"] = std::move(list);
  }
  return j;
}

json to_json(const PhaseShape& p) {
  return {{"phase", to_string(p.phase)},
          {"peak_mib", p.peak_mib},
          {"start_mib", p.start_mib},
          {"end_mib", p.end_mib},
          {"start_tensors", p.start_census ? census_json(*p.start_census) : json(nullptr)},
          {"end_tensors", p.end_census ? census_json(*p.end_census) : json(nullptr)}};
}

json to_json(const CapacityTry& t) {
  json phases = json::array();
  for (const PhaseShape& p : t.phases) phases.push_back(to_json(p));
  return {{"batch", t.batch},
          {"status", to_string(t.status)},
          {"peak_allocated_mib", t.peak_allocated_mib},
          {"seconds", t.seconds},
          {"phases", phases},
          {"reserve_overhead_mib", opt(t.reserve_overhead_mib)},
          {"persistent_other_mib", opt(t.persistent_other_mib)},
          {"failed_phase", t.failed_phase ? json(to_string(*t.failed_phase)) : json(nullptr)},
          {"needed_mib", opt(t.needed_mib)}};
}

json to_json(const CapacitySearch& c) {
  json tries = json::array();
  for (const CapacityTry& t : c.tries) tries.push_back(to_json(t));
  json checks = json::array();
  for (const CapacityTry& t : c.checks) checks.push_back(to_json(t));
  json out{{"limit_mib", c.limit_mib},
              {"limit_source", to_string(c.limit_source)},
              {"max_batch", c.max_batch},
              {"first_failing_batch", opt(c.first_failing_batch)},
              {"tries", tries},
              {"predicted_max_batch", opt(c.predicted_max_batch)},
              {"replayed_max_batch", opt(c.replayed_max_batch)},
              {"fit",
               {{"fixed_mib", opt(c.fit_fixed_mib)},
                {"per_sample_mib", opt(c.fit_per_sample_mib)},
                {"binding_phase", c.binding_phase ? json(to_string(*c.binding_phase)) : json(nullptr)}}},
              {"confirmed", opt(c.confirmed)}};
  // Only where fresh processes checked the answer: reports of searches
  // that ran none read as they did before.
  if (!c.checks.empty()) out["checks"] = checks;
  return out;
}

// Each event a short array, [kind, ...]: a trace has thousands of them.
json to_json(const TraceEvent& e) {
  json a = json::array({to_string(e.kind)});
  switch (e.kind) {
    case TraceEvent::Kind::kAlloc:
    case TraceEvent::Kind::kFailed: a.push_back(e.bytes); break;
    case TraceEvent::Kind::kFree: a.push_back(e.id); break;
    case TraceEvent::Kind::kPhase:
      a.push_back(to_string(e.phase));
      a.push_back(e.step ? json(*e.step) : json(nullptr));
      break;
    case TraceEvent::Kind::kSegmentAlloc:
    case TraceEvent::Kind::kSegmentFree:
      a.push_back(e.bytes);
      a.push_back(e.address);
      break;
    case TraceEvent::Kind::kEmptyCache: break;
  }
  return a;
}

json to_json(const AllocationTrace& t) {
  json passes = json::array();
  for (const TracePass& p : t.passes) {
    json events = json::array();
    for (const TraceEvent& e : p.events) events.push_back(to_json(e));
    passes.push_back({{"batch", p.batch},
                      {"sequence_length", opt(p.sequence_length)},
                      {"step_samples", p.step_samples},
                      {"status", to_string(p.status)},
                      {"events", std::move(events)}});
  }
  return {{"allocator", t.allocator},
          {"limit_bytes", opt(t.limit_bytes)},
          {"staging_cap_bytes", opt(t.staging_cap_bytes)},
          {"passes", std::move(passes)}};
}

json to_json(const Report& r) {
  json samples = json::array();
  for (const Sample& s : r.samples) samples.push_back(to_json(s));
  json events = json::array();
  for (const Event& ev : r.events) events.push_back(to_json(ev));
  json j{
      // The writer writes the current layout whatever version was read.
      {"schema_version", kSchemaVersion},
      {"case", to_json(r.case_info)},
      {"config", to_json(r.config)},
      {"producer", {{"name", r.producer.name}, {"version", r.producer.version}}},
      {"model", model_json(r.model)},
      {"environment", to_json(r.environment)},
      {"samples", samples},
      {"events", events},
      {"status", to_string(r.status)},
  };
  if (r.capacity) j["capacity"] = to_json(*r.capacity);
  if (r.allocation_trace) j["allocation_trace"] = to_json(*r.allocation_trace);
  return j;
}

}  // namespace

// A case file's path is bytes, not always UTF-8: replaced (U+FFFD) so the
// report is still written, and still reads back.
// A trace's events one to a line ("["a", 16384],"): indented like the rest
// they took four lines each and made a traced report five times larger.
// Each pass's events are dumped apart and put where a placeholder stood.
std::string dump_report(const Report& report) {
  json j = to_json(report);
  std::vector<std::string> compact;
  if (j.contains("allocation_trace")) {
    for (json& pass : j["allocation_trace"]["passes"]) {
      std::string lines = "[";
      const json& events = pass["events"];
      for (std::size_t i = 0; i < events.size(); ++i) {
        lines += (i == 0 ? "\n" : ",\n") + std::string(10, ' ') + events[i].dump();
      }
      lines += events.empty() ? "]" : "\n" + std::string(8, ' ') + "]";
      pass["events"] = "\x01" + std::to_string(compact.size()) + "\x01";
      compact.push_back(std::move(lines));
    }
  }
  std::string text = j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
  for (std::size_t k = 0; k < compact.size(); ++k) {
    // The placeholder is a JSON string, escaped by dump() as "\u0001k\u0001".
    const std::string token = "\"\\u0001" + std::to_string(k) + "\\u0001\"";
    const std::size_t at = text.find(token);
    if (at != std::string::npos) text.replace(at, token.size(), compact[k]);
  }
  return text;
}

void write_report(const std::string& path, const Report& report) {
  write_file_atomically(path, dump_report(report));
}

}  // namespace memdiag
