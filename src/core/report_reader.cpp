#include "memdiag/report_reader.hpp"

#include "memdiag/json_reader.hpp"
#include "memdiag/case_spec.hpp"
#include "memdiag/enum_names.hpp"
#include "memdiag/format.hpp"
#include "memdiag/limits.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

namespace memdiag {
using detail::JsonNode;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// The recorder's node-by-node backward: three arrays of one length (five
// where the writer measured what each node held when done and the
// gradients it took and gave), the gradients never above what was
// allocated (a rise of at least them is not required: a node may peak
// before the gradient it makes is counted).
// The forward's spans: the same, without gradients and with what each held
// and its operands required.
BackwardProfile read_backward_profile(const JsonNode& n, bool forward = false) {
  n.expect_object();
  if (forward) {
    n.only({"step", "samples", "tokens", "start_mib", "names", "rise_mib", "held_mib", "operands_mib"});
  } else {
    n.only({"step", "samples", "tokens", "start_mib", "names", "rise_mib", "gradients_mib", "held_mib", "operands_mib"});
  }
  BackwardProfile b;
  b.step = n.integer("step", 0, limits::kMaxExactInteger);
  b.samples = n.integer("samples", 1, limits::kMaxBatch);
  b.tokens = n.opt_integer("tokens", 1, limits::kMaxExactInteger);
  b.start_mib = n.mib("start_mib");
  const JsonNode names = n.field("names");
  const JsonNode rise = n.field("rise_mib");
  names.expect_array();
  rise.expect_array();
  if (!forward) {
    const JsonNode grads = n.field("gradients_mib");
    grads.expect_array();
    if (rise.size() != names.size() || grads.size() != names.size()) {
      n.fail("names, rise_mib and gradients_mib differ in length (" + std::to_string(names.size()) + ", " +
             std::to_string(rise.size()) + ", " + std::to_string(grads.size()) + ")");
    }
    for (std::size_t i = 0; i < grads.size(); ++i) b.gradients_mib.push_back(grads.at(i).as_mib());
  } else {
    if (rise.size() != names.size()) {
      n.fail("names and rise_mib differ in length (" + std::to_string(names.size()) + ", " + std::to_string(rise.size()) + ")");
    }
    b.gradients_mib.assign(names.size(), 0.0);
  }
  if (names.size() > static_cast<std::size_t>(limits::kMaxDepth)) n.fail("more than " + std::to_string(limits::kMaxDepth) + " nodes");
  for (std::size_t i = 0; i < names.size(); ++i) {
    b.names.push_back(names.at(i).as_string());
    b.rise_mib.push_back(rise.at(i).as_number(-limits::kAbsurdMiB, limits::kAbsurdMiB));
  }
  // Both or neither: one without the other reads nothing the model uses.
  if (forward && !n.has("held_mib")) n.field("held_mib");  // required: fails naming it
  if (n.has("held_mib") != n.has("operands_mib")) n.fail("held_mib and operands_mib come together");
  if (n.has("held_mib")) {
    const JsonNode held = n.field("held_mib");
    const JsonNode operands = n.field("operands_mib");
    held.expect_array();
    operands.expect_array();
    if (held.size() != names.size() || operands.size() != names.size()) {
      n.fail("names, held_mib and operands_mib differ in length (" + std::to_string(names.size()) + ", " +
             std::to_string(held.size()) + ", " + std::to_string(operands.size()) + ")");
    }
    for (std::size_t i = 0; i < names.size(); ++i) {
      const double h = held.at(i).as_number(-limits::kAbsurdMiB, limits::kAbsurdMiB);
      // Held when done is at most the peak since the node before.
      if (h > b.rise_mib[i] + 2e-6) {  // both rounded to 1e-6
        n.fail("held_mib[" + std::to_string(i) + "] " + std::to_string(h) + " is above rise_mib[" + std::to_string(i) +
               "] " + std::to_string(b.rise_mib[i]) + " (a node holds no more when done than at its peak)");
      }
      b.held_mib.push_back(h);
      b.operands_mib.push_back(operands.at(i).as_mib());
    }
  }
  return b;
}


TensorCensus read_census(const JsonNode& t) {
  t.expect_object();
  return TensorCensus{t.mib("parameters_mib"), t.mib("gradients_mib"), t.mib("optimizer_state_mib")};
}

OomDetails read_oom(const JsonNode& n) {
  n.expect_object();
  OomDetails o;
  o.request_mib = n.opt_mib("request_mib");
  o.limit_mib = n.opt_mib("limit_mib");
  o.device_free_mib = n.opt_mib("device_free_mib");
  o.allocated_mib = n.opt_mib("allocated_mib");
  o.reserved_mib = n.opt_mib("reserved_mib");
  o.inactive_split_mib = n.opt_mib("inactive_split_mib");
  o.inactive_split_blocks = n.opt_integer("inactive_split_blocks", 0, limits::kMaxExactInteger);
  o.largest_free_block_mib = n.opt_mib("largest_free_block_mib");
  o.num_alloc_retries = n.opt_integer("num_alloc_retries", 0, limits::kMaxExactInteger);
  o.num_ooms = n.opt_integer("num_ooms", 0, limits::kMaxExactInteger);
  if (n.given("tensors")) o.tensors = read_census(n.field("tensors"));
  o.samples = n.opt_integer("samples", 1, limits::kMaxBatch);
  o.tokens = n.opt_integer("tokens", 1, limits::kMaxExactInteger);
  if (o.tokens && o.samples && *o.tokens < *o.samples) n.field("tokens").fail("fewer tokens than samples");
  if (o.allocated_mib && o.reserved_mib && *o.allocated_mib > *o.reserved_mib + limits::kPeakSlackMiB) {
    n.field("allocated_mib").fail("allocated " + format_mib(*o.allocated_mib) + " MiB is above reserved " +
                                  format_mib(*o.reserved_mib) + " MiB (an allocator hands out only what it reserved)");
  }
  return o;
}

Sample read_sample(const JsonNode& n) {
  n.expect_object();
  Sample s;
  {
    // Every phase but the warm-up before model_ready, which is an event's.
    const std::string name = n.field("phase").as_string();
    const std::optional<Phase> phase = parse_enum<Phase>(name);
    if (!phase || *phase == Phase::kSetup) {
      std::string names;
      for (Phase p : all_values<Phase>()) {
        if (p != Phase::kSetup) names += (names.empty() ? "" : ", ") + std::string(to_string(p));
      }
      n.field("phase").fail("'" + name + "' is not one of: " + names);
    }
    s.phase = *phase;
  }
  if (auto st = n.opt_integer("step", 0, limits::kMaxSteps)) s.step = static_cast<int>(*st);
  s.allocated_mib = n.mib("allocated_mib");
  s.reserved_mib = n.opt_mib("reserved_mib");
  s.device_used_mib = n.opt_mib("device_used_mib");
  s.peak_allocated_mib = n.mib("peak_allocated_mib");
  s.inactive_split_mib = n.opt_mib("inactive_split_mib");
  s.process_device_mib = n.opt_mib("process_device_mib");
  s.host_resident_mib = n.opt_mib("host_resident_mib");
  s.host_pinned_mib = n.opt_mib("host_pinned_mib");
  s.alloc_retries = n.opt_integer("alloc_retries", 0, limits::kMaxExactInteger);
  s.elapsed_ms = n.field("elapsed_ms").as_number(0, limits::kMaxElapsedMs);
  if (auto mb = n.opt_integer("micro_batch", 0, limits::kMaxBatch)) s.micro_batch = static_cast<int>(*mb);
  s.samples = n.opt_integer("samples", 1, limits::kMaxBatch);
  s.tokens = n.opt_integer("tokens", 1, limits::kMaxExactInteger);
  s.input_mib = n.opt_mib("input_mib");
  if (auto f = n.opt_integer("forwards", 2, limits::kMaxBatch)) s.forwards = static_cast<int>(*f);
  if (n.given("forwards_chunked")) {
    s.forwards_chunked = n.field("forwards_chunked").as_bool();
    if (s.forwards_chunked && !s.forwards) n.field("forwards_chunked").fail("chunks of one batch need 'forwards' (2 or more calls)");
  }
  for (const char* key : {"samples", "tokens", "input_mib", "forwards", "forwards_chunked"}) {
    if (n.given(key) && s.phase != Phase::kForward) {
      n.field(key).fail(std::string("only a forward sample says what it was given, not '") + to_string(s.phase) + "'");
    }
  }
  if (s.tokens && s.samples && *s.tokens < *s.samples) n.field("tokens").fail("fewer tokens than samples");
  if (n.given("loss")) s.loss = n.field("loss").as_number(-1e30, 1e30);
  if (n.given("tensors")) s.tensors = read_census(n.field("tensors"));
  if (n.given("evaluation")) {
    const JsonNode e = n.field("evaluation");
    e.expect_object();
    e.only({"forwards", "samples", "tokens", "peak_mib", "start_mib"});
    Sample::Evaluation ev;
    if (auto f = e.opt_integer("forwards", 1, limits::kMaxBatch)) ev.forwards = static_cast<int>(*f);
    ev.samples = e.opt_integer("samples", 1, limits::kMaxBatch);
    ev.tokens = e.opt_integer("tokens", 1, limits::kMaxExactInteger);
    ev.peak_mib = e.mib("peak_mib");
    ev.start_mib = e.mib("start_mib");
    if (ev.peak_mib + limits::kPeakSlackMiB < ev.start_mib) e.field("peak_mib").fail("peak is below the start");
    s.evaluation = ev;
  }
  if (s.step.has_value() == is_setup_phase(s.phase)) {
    n.field("step").fail(s.step ? std::string("setup phase '") + to_string(s.phase) + "' has a step"
                                : std::string("phase '") + to_string(s.phase) + "' needs a step");
  }
  if (s.peak_allocated_mib + limits::kPeakSlackMiB < s.allocated_mib) {
    n.field("peak_allocated_mib").fail("peak is below allocated");
  }
  // Figures one allocator and one device give together: the allocator hands
  // out only what it reserved, the device's use includes this process's
  // reservation, and the census counts live tensors, which are allocated.
  if (s.reserved_mib && s.allocated_mib > *s.reserved_mib + limits::kPeakSlackMiB) {
    n.field("allocated_mib").fail("allocated " + format_mib(s.allocated_mib) + " MiB is above reserved " +
                                  format_mib(*s.reserved_mib) + " MiB (an allocator hands out only what it reserved)");
  }
  if (s.reserved_mib && s.device_used_mib && *s.device_used_mib + limits::kPeakSlackMiB < *s.reserved_mib) {
    n.field("device_used_mib").fail("device used " + format_mib(*s.device_used_mib) + " MiB is below reserved " +
                                    format_mib(*s.reserved_mib) + " MiB (the device's use includes what was reserved)");
  }
  if (s.tensors) {
    const double census = s.tensors->parameters_mib + s.tensors->gradients_mib + s.tensors->optimizer_state_mib;
    if (census > s.allocated_mib + limits::kPeakSlackMiB) {
      n.field("tensors").fail("the census's " + format_mib(census) + " MiB is above allocated " +
                              format_mib(s.allocated_mib) + " MiB (the tensors counted are allocated)");
    }
  }
  return s;
}

KeptRecord read_kept(const JsonNode& n) {
  n.expect_object();
  n.only({"what", "shape", "shape_varies", "shapes", "dtype", "device", "grad_fn", "made_by", "where", "allocated_at", "per_step", "every_steps", "mib_per_step",
          "graph_nodes", "graph_nodes_before", "held_steps", "grows", "from_step"});
  KeptRecord k;
  k.what = n.field("what").as_enum<KeptRecord::What>();
  if (n.given("shape")) {
    const JsonNode shape = n.field("shape");
    shape.expect_array();
    for (std::size_t i = 0; i < shape.size() && i < 16; ++i) k.shape.push_back(shape.at(i).as_integer(0, limits::kMaxExactInteger));
  }
  if (n.given("shape_varies")) k.shape_varies = n.field("shape_varies").as_bool();
  if (n.given("shapes")) k.shapes = n.field("shapes").as_integer(2, limits::kMaxExactInteger);
  k.dtype = n.opt_str("dtype").value_or("");
  k.device = n.opt_str("device").value_or("");
  k.grad_fn = n.opt_str("grad_fn");
  k.made_by = n.opt_str("made_by");
  k.where = n.opt_str("where");
  k.allocated_at = n.opt_str("allocated_at");
  k.every_steps = n.opt_integer("every_steps", 2, limits::kMaxSteps);
  k.per_step = n.opt_integer("per_step", 0, limits::kMaxExactInteger).value_or(0);
  k.mib_per_step = n.opt_mib("mib_per_step").value_or(0);
  k.graph_nodes = n.opt_integer("graph_nodes", 0, limits::kMaxExactInteger);
  k.graph_nodes_before = n.opt_integer("graph_nodes_before", 0, limits::kMaxExactInteger);
  k.held_steps = n.opt_integer("held_steps", 1, limits::kMaxSteps);
  k.from_step = n.opt_integer("from_step", 0, limits::kMaxSteps);
  if (n.given("grows")) k.grows = n.field("grows").as_bool();
  return k;
}

ModuleRecord read_module(const JsonNode& n) {
  n.expect_object();
  n.only({"name", "type", "parent", "mib", "own_mib", "calls"});
  ModuleRecord m;
  if (n.given("name") && !n.field("name").raw().is_null()) m.name = n.str("name");
  m.type = n.str("type");
  if (m.type.empty()) n.field("type").fail("empty module type");
  if (n.given("parent") && !n.field("parent").raw().is_null()) m.parent = n.str("parent");
  // Signed: a module's forward may free more than it makes (an in-place
  // chain that drops its input).
  m.mib = n.field("mib").as_number(-limits::kAbsurdMiB, limits::kAbsurdMiB);
  m.own_mib = n.field("own_mib").as_number(-limits::kAbsurdMiB, limits::kAbsurdMiB);
  m.calls = n.field("calls").as_integer(1, limits::kMaxExactInteger);
  return m;
}

Event read_event(const JsonNode& n) {
  n.expect_object();
  Event ev;
  ev.kind = n.field("kind").as_enum<EventKind>();
  // Older writers spelt "no phase" as an empty string.
  if (n.given("phase") && !n.str("phase").empty()) {
    ev.phase = n.field("phase").as_enum<Phase>();
  }
  if (auto st = n.opt_integer("step", 0, limits::kMaxSteps)) ev.step = static_cast<int>(*st);
  ev.message = n.opt_str("message").value_or("");
  if (ev.kind == EventKind::kModules) {
    // What the modules' forwards added, which a sharded model's (FSDP2
    // frees its gathered weights after each module's forward) makes
    // negative: recorders before session 58 wrote it so. Nothing reads
    // it; a negative one is dropped rather than the report refused.
    if (n.given("mib") && !n.field("mib").raw().is_null()) {
      const double v = n.field("mib").as_number(-limits::kAbsurdMiB, limits::kAbsurdMiB);
      if (v >= 0) ev.mib = v;
    }
  } else {
    ev.mib = n.opt_mib("mib");
  }
  if (n.given("oom")) ev.oom = read_oom(n.field("oom"));
  if (n.given("kept")) {
    const JsonNode list = n.field("kept");
    list.expect_array();
    for (std::size_t i = 0; i < list.size() && i < 64; ++i) ev.kept.push_back(read_kept(list.at(i)));
  }
  if (n.given("walked_steps")) {
    const JsonNode list = n.field("walked_steps");
    list.expect_array();
    for (std::size_t i = 0; i < list.size() && i < 64; ++i) {
      ev.walked_steps.push_back(static_cast<int>(list.at(i).as_integer(0, limits::kMaxSteps)));
    }
  }
  if (n.given("modules")) {
    const JsonNode list = n.field("modules");
    list.expect_array();
    for (std::size_t i = 0; i < list.size() && i < 1000; ++i) ev.modules.push_back(read_module(list.at(i)));
  }
  return ev;
}

// Reports written before case.builtin existed: a case file named after its
// case in a directory called "cases" is how built-in cases ship.
bool looks_builtin(const std::string& name, const std::string& source) {
  if (source.empty()) return true;
  const fs::path p(source);
  return p.stem().string() == name && p.parent_path().filename() == "cases";
}

CaseInfo read_case(const JsonNode& jcase) {
  jcase.expect_object();
  CaseInfo c;
  c.name = jcase.str("name");
  if (c.name.empty()) jcase.field("name").fail("empty case name");
  c.description = jcase.opt_str("description").value_or("");
  c.source = jcase.opt_str("source").value_or("");
  c.builtin = jcase.given("builtin") ? jcase.field("builtin").as_bool() : looks_builtin(c.name, c.source);
  if (jcase.given("presets")) {
    const JsonNode presets = jcase.field("presets");
    presets.expect_array();
    for (std::size_t i = 0; i < presets.size(); ++i) c.presets.push_back(presets.at(i).as_string());
  }
  if (jcase.given("preset_parameters")) {
    const JsonNode counts = jcase.field("preset_parameters");
    counts.expect_object();
    for (const auto& item : counts.raw().items()) {
      c.preset_parameters[item.key()] = counts.field(item.key().c_str()).as_integer(0, std::int64_t{1} << 53);
    }
  }
  json rest = jcase.raw();
  for (const char* k : {"name", "description", "source", "builtin", "presets", "preset_parameters"}) rest.erase(k);
  c.detail_json = rest.dump();
  return c;
}

// Schema 3's parallelism object.
Parallelism read_parallelism(const JsonNode& p) {
  p.expect_object();
  Parallelism out;
  out.mode = p.field("mode").as_enum<ParallelMode>();
  out.world_size = static_cast<int>(p.integer("world_size", 1, limits::kMaxWorldSize));
  out.rank = static_cast<int>(p.integer("rank", 0, out.world_size - 1));
  out.local_rank = static_cast<int>(p.integer("local_rank", 0, limits::kMaxWorldSize));
  out.backend = p.str("backend");
  out.rank_zero_extra_samples = static_cast<int>(p.integer("rank_zero_extra_samples", 0, limits::kMaxBatch));
  out.unit_modules = static_cast<int>(p.opt_integer("unit_modules", 1, limits::kMaxDepth).value_or(1));
  if (const auto prefetch = p.opt_str("prefetch")) {
    if (*prefetch != "none" && *prefetch != "next") p.field("prefetch").fail("prefetch '" + *prefetch + "' (none or next)");
    out.prefetch_next = *prefetch == "next";
  }
  if (const auto launch = p.opt_str("launch")) {
    const bool plain = std::all_of(launch->begin(), launch->end(), [](char ch) {
      return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.' || ch == ':';
    });
    if (launch->empty() || launch->size() > 64 || !plain) {
      p.field("launch").fail("a launch is 1 to 64 letters, digits and - _ . :");
    }
    out.launch = *launch;
  }
  if ((out.mode == ParallelMode::kNone) != (out.world_size == 1 && out.backend == "none")) {
    p.field("mode").fail(std::string("mode '") + to_string(out.mode) + "' with world_size " +
                         std::to_string(out.world_size) + " and backend '" + out.backend + "'");
  }
  // Every rank of a layer split trains the same batch: rank 0 cannot have
  // more samples than the others, and one rank splits nothing.
  if (definition(out.mode).splits_layers && out.rank_zero_extra_samples > 0) {
    p.field("rank_zero_extra_samples").fail("rank 0's extra samples in a run of mode '" +
                                            std::string(to_string(out.mode)) + "' (every rank trains the same batch)");
  }
  if (definition(out.mode).splits_layers && out.world_size < 2) {
    p.field("world_size").fail("world_size 1 in a run of mode '" + std::string(to_string(out.mode)) +
                               "' (a layer split needs 2 or more ranks)");
  }
  return out;
}

// Schemas 1 and 2 spelt the same as flat fields of config, and sharding as
// a flag: upgraded to schema 3's object.
Parallelism read_flat_parallelism(const JsonNode& c) {
  Parallelism p;
  p.world_size = static_cast<int>(c.opt_integer("world_size", 1, limits::kMaxWorldSize).value_or(1));
  p.rank = static_cast<int>(c.opt_integer("rank", 0, p.world_size - 1).value_or(0));
  p.local_rank = static_cast<int>(c.opt_integer("local_rank", 0, limits::kMaxWorldSize).value_or(0));
  p.backend = c.opt_str("backend").value_or("none");
  p.rank_zero_extra_samples =
      static_cast<int>(c.opt_integer("rank_zero_extra_samples", 0, limits::kMaxBatch).value_or(0));
  const bool launched = p.world_size > 1 || p.backend != "none";
  p.mode = !launched ? ParallelMode::kNone
                     : (c.boolean("shard_optimizer_state", false) ? ParallelMode::kZero1 : ParallelMode::kDdp);
  return p;
}

RunConfig read_config(const JsonNode& c, std::int64_t version) {
  c.expect_object();
  RunConfig r;
  r.batch_size_per_device = static_cast<int>(c.integer("batch_size_per_device", 1, limits::kMaxBatch));
  r.preset = c.str("preset");
  r.steps = static_cast<int>(c.integer("steps", 0, limits::kMaxSteps));
  r.device = c.str("device");
  r.seed = static_cast<std::uint64_t>(c.integer("seed", 0, limits::kMaxExactInteger));
  r.memory_limit_mib = c.opt_mib("memory_limit_mib");
  if (version >= 3) {
    c.only({"batch_size_per_device", "batch_assumed", "batch_seen", "preset", "steps", "device", "seed", "memory_limit_mib",
            "remedies", "allocator_settings", "parallelism", "sequence_length", "variant", "step_sampling"});
    if (c.given("batch_assumed")) r.batch_assumed = c.field("batch_assumed").as_bool();
    r.batch_seen = c.opt_integer("batch_seen", 1, limits::kMaxExactInteger);
    if (auto l = c.opt_integer("sequence_length", 1, limits::kMaxSequenceLength)) r.sequence_length = static_cast<int>(*l);
    r.parallel = read_parallelism(c.field("parallelism"));
    r.allocator_settings = c.str("allocator_settings");
    if (const auto v = c.opt_str("variant")) {
      // A label in tables and file names' stead: one short printable line.
      const bool printable = std::all_of(v->begin(), v->end(), [](char ch) { return ch >= 0x20 && ch < 0x7f; });
      if (v->empty() || v->size() > 80 || !printable) {
        c.field("variant").fail("a variant is 1 to 80 printable ASCII characters");
      }
      r.variant = *v;
    }
    if (c.given("step_sampling")) {
      const JsonNode n = c.field("step_sampling");
      n.expect_object();
      n.only({"all_below", "every"});
      RunConfig::StepSampling ss;
      ss.all_below = static_cast<int>(n.integer("all_below", 1, limits::kMaxSteps));
      ss.every = static_cast<int>(n.integer("every", 1, limits::kMaxSteps));
      r.step_sampling = ss;
    }
  } else {
    r.parallel = read_flat_parallelism(c);
  }
  if (c.given("remedies")) {
    const JsonNode list = c.field("remedies");
    list.expect_array();
    std::string joined;
    for (std::size_t i = 0; i < list.size(); ++i) joined += (joined.empty() ? "" : "+") + list.at(i).as_string();
    try {
      r.remedies = parse_remedies("remedies", joined);
    } catch (const UsageError& e) {
      list.fail(e.what());
    }
  }
  return r;
}

Environment read_environment(const JsonNode& e) {
  e.expect_object();
  Environment env;
  env.device_name = e.str("device_name");
  env.device_total_mib = e.opt_mib("device_total_mib");
  env.torch_version = e.str("torch_version");
  env.cuda_runtime_version = e.opt_str("cuda_runtime_version");
  env.driver_version = e.opt_str("driver_version");
  env.host = e.str("host");
  env.start_time = e.str("start_time");
  env.memdiag_version = e.opt_str("memdiag_version").value_or("");
  if (auto n = e.opt_integer("earlier_runs_in_process", 0, limits::kMaxSteps)) env.earlier_runs_in_process = static_cast<int>(*n);
  return env;
}

// The order a training loop makes samples in: model_ready and
// optimizer_ready once each, then steps numbered one after another, each
// forward, backward (repeated per micro-batch), step, cleanup; with several
// optimizers (a GAN), a step() between micro-batches, one per optimizer
// that stepped before the next backward; a report
// that stopped (out of memory, interrupted) ends partway. A duplicated
// phase or a gap in the steps would be read as extra steps or growth, so
// it is refused where it happens.
class PhaseOrder {
 public:
  explicit PhaseOrder(std::optional<RunConfig::StepSampling> sampling) : sampling_(sampling) {}

  void check(const Sample& s, const JsonNode& n) {
    if (!s.step) {
      if (step_ >= 0) n.field("step").fail(std::string("setup phase '") + to_string(s.phase) + "' after step samples");
      const bool ok = (s.phase == Phase::kModelReady && !model_ready_ && !optimizer_ready_) ||
                      (s.phase == Phase::kOptimizerReady && !optimizer_ready_);
      if (!ok) n.field("phase").fail(std::string("'") + to_string(s.phase) + "' twice or out of order in setup");
      (s.phase == Phase::kModelReady ? model_ready_ : optimizer_ready_) = true;
      return;
    }
    const int step = *s.step;
    if (step != step_) {
      if (step_ >= 0 && step != next_recorded(step_)) {
        n.field("step").fail("step " + std::to_string(step) + " after step " + std::to_string(step_) +
                             (step > step_ ? " (steps missing)" : " (out of order)"));
      }
      if (step_ >= 0 && last_ != Phase::kCleanup) {
        n.field("step").fail("step " + std::to_string(step) + " begins before step " + std::to_string(step_) + " ended");
      }
      if (s.phase != Phase::kForward) {
        n.field("phase").fail(std::string("step ") + std::to_string(step) + " begins with '" + to_string(s.phase) +
                              "', not forward");
      }
      step_ = step;
      last_ = Phase::kForward;
      return;
    }
    const bool ok = (last_ == Phase::kForward && s.phase == Phase::kBackward) ||
                    (last_ == Phase::kBackward && (s.phase == Phase::kForward || s.phase == Phase::kStep)) ||
                    (last_ == Phase::kStep && (s.phase == Phase::kCleanup || s.phase == Phase::kForward));
    if (!ok || (s.phase == Phase::kForward && !s.micro_batch)) {
      n.field("phase").fail(std::string("'") + to_string(s.phase) + "' after '" + to_string(last_) + "' in step " +
                            std::to_string(step) + " (a phase repeated or missing)");
    }
    last_ = s.phase;
  }

 private:
  // The step recorded after `step`: the next one, or under a sampling the
  // next one the sampling keeps.
  int next_recorded(int step) const {
    const int next = step + 1;
    if (!sampling_ || next < sampling_->all_below || next % sampling_->every == 0) return next;
    return (next / sampling_->every + 1) * sampling_->every;
  }

  std::optional<RunConfig::StepSampling> sampling_;
  bool model_ready_ = false, optimizer_ready_ = false;
  int step_ = -1;
  Phase last_ = Phase::kCleanup;
};

PhaseShape read_phase_shape(const JsonNode& n) {
  n.expect_object();
  n.only({"phase", "peak_mib", "start_mib", "end_mib", "start_tensors", "end_tensors"});
  PhaseShape p;
  p.phase = n.field("phase").as_enum<Phase>();
  p.peak_mib = n.mib("peak_mib");
  p.start_mib = n.mib("start_mib");
  p.end_mib = n.mib("end_mib");
  if (n.given("start_tensors")) p.start_census = read_census(n.field("start_tensors"));
  if (n.given("end_tensors")) p.end_census = read_census(n.field("end_tensors"));
  if (p.peak_mib + limits::kPeakSlackMiB < std::max(p.start_mib, p.end_mib)) {
    n.field("peak_mib").fail("peak is below the phase's start or end");
  }
  return p;
}

CapacitySearch read_capacity(const JsonNode& n) {
  n.expect_object();
  CapacitySearch c;
  c.limit_mib = n.mib("limit_mib");
  c.limit_source = n.field("limit_source").as_enum<CapacitySearch::LimitSource>();
  c.max_batch = n.integer("max_batch", 0, limits::kMaxBatch);
  c.first_failing_batch = n.opt_integer("first_failing_batch", 1, limits::kMaxBatch);
  auto read_try = [](const JsonNode& t) {
    t.expect_object();
    CapacityTry ct;
    ct.batch = t.integer("batch", 1, limits::kMaxBatch);
    ct.status = t.field("status").as_enum<RunStatus>();
    ct.peak_allocated_mib = t.mib("peak_allocated_mib");
    ct.seconds = t.field("seconds").as_number(0, limits::kMaxSeconds);
    if (t.given("phases")) {
      const JsonNode phases = t.field("phases");
      phases.expect_array();
      for (std::size_t k = 0; k < phases.size(); ++k) ct.phases.push_back(read_phase_shape(phases.at(k)));
    }
    ct.reserve_overhead_mib = t.opt_mib("reserve_overhead_mib");
    ct.persistent_other_mib = t.opt_mib("persistent_other_mib");
    if (t.given("failed_phase")) ct.failed_phase = t.field("failed_phase").as_enum<Phase>();
    ct.needed_mib = t.opt_mib("needed_mib");
    return ct;
  };
  // The search's own record must agree with its answer: what completed
  // fitted, what ran out did not.
  auto agrees = [&c](const JsonNode& t, const CapacityTry& ct, const char* what) {
    if (ct.status == RunStatus::kComplete && ct.batch > c.max_batch) {
      t.field("batch").fail(std::string("a ") + what + " of batch " + std::to_string(ct.batch) +
                            " completed, above max_batch " + std::to_string(c.max_batch));
    }
    if (ct.status == RunStatus::kOom && ct.batch <= c.max_batch) {
      t.field("batch").fail(std::string("a ") + what + " of batch " + std::to_string(ct.batch) +
                            " ran out of memory, at or below max_batch " + std::to_string(c.max_batch));
    }
  };
  auto read_tries = [&](const char* field, const char* what, std::vector<CapacityTry>& into) {
    const JsonNode list = n.field(field);
    list.expect_array();
    for (std::size_t i = 0; i < list.size(); ++i) {
      const JsonNode t = list.at(i);
      CapacityTry ct = read_try(t);
      agrees(t, ct, what);
      into.push_back(std::move(ct));
    }
  };
  read_tries("tries", "try", c.tries);
  if (n.given("checks")) read_tries("checks", "check", c.checks);
  if (c.first_failing_batch && *c.first_failing_batch <= c.max_batch) {
    n.field("first_failing_batch").fail("first_failing_batch " + std::to_string(*c.first_failing_batch) +
                                        " is not above max_batch " + std::to_string(c.max_batch));
  }
  c.predicted_max_batch = n.opt_integer("predicted_max_batch", 0, limits::kMaxBatch);
  c.replayed_max_batch = n.opt_integer("replayed_max_batch", 0, limits::kMaxBatch);
  if (n.given("fit")) {
    const JsonNode fit = n.field("fit");
    fit.expect_object();
    if (fit.given("fixed_mib")) c.fit_fixed_mib = fit.field("fixed_mib").as_number(-limits::kAbsurdMiB, limits::kAbsurdMiB);
    c.fit_per_sample_mib = fit.opt_mib("per_sample_mib");
    if (fit.given("binding_phase")) c.binding_phase = fit.field("binding_phase").as_enum<Phase>();
  }
  if (n.given("confirmed")) c.confirmed = n.field("confirmed").as_bool();
  return c;
}

// One event of a trace pass: [kind, ...] as report_json.cpp writes it.
// live: whether each allocation so far is still held (a free must name one
// that is).
TraceEvent read_trace_event(const JsonNode& n, std::vector<bool>& live) {
  n.expect_array();
  if (n.size() == 0) n.fail("an empty event; expected [kind, ...]");
  TraceEvent e;
  e.kind = n.at(0).as_enum<TraceEvent::Kind>();
  const auto arity = [&](std::size_t k) {
    if (n.size() != k + 1) {
      n.fail("event '" + std::string(to_string(e.kind)) + "' takes " + std::to_string(k) + " value" +
             (k == 1 ? "" : "s") + ", got " + std::to_string(n.size() - 1));
    }
  };
  switch (e.kind) {
    case TraceEvent::Kind::kAlloc:
      arity(1);
      e.bytes = n.at(1).as_integer(0, limits::kMaxExactInteger);
      live.push_back(true);
      break;
    case TraceEvent::Kind::kFailed:
      arity(1);
      e.bytes = n.at(1).as_integer(0, limits::kMaxExactInteger);
      break;
    case TraceEvent::Kind::kFree: {
      arity(1);
      e.id = n.at(1).as_integer(0, limits::kMaxExactInteger);
      const auto id = static_cast<std::size_t>(e.id);
      if (id >= live.size()) n.at(1).fail("frees allocation " + std::to_string(e.id) + ", which was never made");
      if (!live[id]) n.at(1).fail("frees allocation " + std::to_string(e.id) + " twice");
      live[id] = false;
      break;
    }
    case TraceEvent::Kind::kPhase:
      arity(2);
      e.phase = n.at(1).as_enum<Phase>();
      if (!n.at(2).raw().is_null()) e.step = static_cast<int>(n.at(2).as_integer(0, limits::kMaxSteps));
      if (is_setup_phase(e.phase) == e.step.has_value()) {
        n.at(2).fail(is_setup_phase(e.phase) ? "a setup phase has no step" : "a step's phase needs its step");
      }
      break;
    case TraceEvent::Kind::kSegmentAlloc:
    case TraceEvent::Kind::kSegmentFree:
      arity(2);
      e.bytes = n.at(1).as_integer(0, limits::kMaxExactInteger);
      e.address = n.at(2).as_integer(0, limits::kMaxExactInteger);
      break;
    case TraceEvent::Kind::kEmptyCache: arity(0); break;
  }
  return e;
}

AllocationTrace read_allocation_trace(const JsonNode& n) {
  n.expect_object();
  n.only({"allocator", "limit_bytes", "staging_cap_bytes", "passes"});
  AllocationTrace t;
  t.allocator = n.str("allocator");
  if (t.allocator != "cuda-caching-allocator" && t.allocator != "cpu-tracking-allocator") {
    n.field("allocator").fail("'" + t.allocator + "' is not an allocator memdiag replays (cuda-caching-allocator, "
                              "cpu-tracking-allocator)");
  }
  t.limit_bytes = n.opt_integer("limit_bytes", 1, limits::kMaxExactInteger);
  t.staging_cap_bytes = n.opt_integer("staging_cap_bytes", 1, limits::kMaxExactInteger);
  const JsonNode passes = n.field("passes");
  passes.expect_array();
  if (passes.size() == 0) passes.fail("no pass; the run's own comes first");
  for (std::size_t i = 0; i < passes.size(); ++i) {
    const JsonNode pn = passes.at(i);
    pn.expect_object();
    pn.only({"batch", "sequence_length", "step_samples", "status", "events"});
    TracePass p;
    p.batch = pn.integer("batch", 1, limits::kMaxBatch);
    if (const auto l = pn.opt_integer("sequence_length", 1, limits::kMaxSequenceLength)) p.sequence_length = static_cast<int>(*l);
    const JsonNode steps = pn.field("step_samples");
    steps.expect_array();
    if (steps.size() > static_cast<std::size_t>(limits::kMaxSteps)) steps.fail("more steps than a run makes");
    for (std::size_t k = 0; k < steps.size(); ++k) p.step_samples.push_back(steps.at(k).as_integer(1, limits::kMaxBatch));
    p.status = pn.field("status").as_enum<RunStatus>();
    const JsonNode events = pn.field("events");
    events.expect_array();
    std::vector<bool> live;
    p.events.reserve(events.size());
    for (std::size_t k = 0; k < events.size(); ++k) {
      p.events.push_back(read_trace_event(events.at(k), live));
      const TraceEvent& e = p.events.back();
      if (e.kind == TraceEvent::Kind::kPhase && e.step && static_cast<std::size_t>(*e.step) >= p.step_samples.size()) {
        events.at(k).fail("step " + std::to_string(*e.step) + " has no entry in step_samples");
      }
    }
    t.passes.push_back(std::move(p));
  }
  return t;
}

// What a run that completed must show: the samples it took, and a peak
// within the memory limit it ran under (the allocator refuses beyond it, so
// a run above its limit ran out of memory, not completed).
void check_complete(const Report& r, const JsonNode& root) {
  const JsonNode samples = root.field("samples");
  if (r.samples.empty()) samples.fail("a complete run has no samples (it records at least model_ready)");
  if (!r.config.memory_limit_mib) return;
  const auto peak = std::max_element(r.samples.begin(), r.samples.end(), [](const Sample& a, const Sample& b) {
    return a.peak_allocated_mib < b.peak_allocated_mib;
  });
  if (peak->peak_allocated_mib > *r.config.memory_limit_mib + limits::kPeakSlackMiB) {
    samples.at(static_cast<std::size_t>(peak - r.samples.begin()))
        .field("peak_allocated_mib")
        .fail("peak allocated " + format_mib(peak->peak_allocated_mib) +
              " MiB is above config.memory_limit_mib " + format_mib(*r.config.memory_limit_mib) +
              " MiB in a complete run (beyond its limit a run runs out of memory)");
  }
}

Report read(const JsonNode& root) {
  if (!root.raw().is_object()) {
    root.fail(std::string("expected a report object, got ") + JsonNode::type_name(root.raw()));
  }
  // compare_memory_reports' own JSON (a comparison: groups of verdicts)
  // carries a schema_version of its own, newer than a report's: said for
  // what it is rather than "upgrade memdiag".
  if (root.has("groups") && root.has("errors")) {
    throw InputError(root.source(), "$", "a comparison (compare_memory_reports --format json), not a report; give the "
                                         "reports it was made from");
  }
  if (!root.has("schema_version")) {
    throw InputError(root.source(), "$.schema_version", "missing; not a memdiag report");
  }
  const JsonNode version_node = root.field("schema_version");
  const std::int64_t version = version_node.as_integer(0, limits::kMaxExactInteger);
  if (version > kSchemaVersion) {
    version_node.fail("version " + std::to_string(version) + " is newer than this tool reads (" +
                      std::to_string(kSchemaVersion) + "); upgrade memdiag");
  }
  if (version < kOldestReadableSchemaVersion) {
    version_node.fail("version " + std::to_string(version) + " is older than this tool reads (" +
                      std::to_string(kOldestReadableSchemaVersion) + " to " + std::to_string(kSchemaVersion) +
                      "); re-run the workload");
  }

  Report r;
  r.schema_version = static_cast<int>(version);  // as written; the model is the current one
  r.case_info = read_case(root.field("case"));
  r.config = read_config(root.field("config"), version);
  if (version >= 3) {
    const JsonNode p = root.field("producer");
    p.expect_object();
    p.only({"name", "version"});
    r.producer.name = p.str("name");
    if (r.producer.name.empty()) p.field("name").fail("empty producer name");
    r.producer.version = p.str("version");
  } else {
    // Before schema 3 only memory_diagnostics and memdiag::Recorder wrote
    // reports, and did not say which: memory_diagnostics names its case file
    // or a built-in case; a loop of one's own has neither.
    r.producer.name = r.case_info.source.empty() && !r.case_info.builtin ? kProducerRecorder : kProducerDiagnostics;
  }
  const JsonNode m = root.field("model");
  m.expect_object();
  r.model.parameters = m.integer("parameters", 0, limits::kMaxExactInteger);
  r.model.parameter_bytes = m.integer("parameter_bytes", 0, limits::kMaxExactInteger);
  r.model.vocab = m.opt_integer("vocab", 1, limits::kMaxDimension);
  r.model.layers = m.opt_integer("layers", 1, limits::kMaxDepth);
  r.model.largest_module_bytes = m.opt_integer("largest_module_bytes", 0, limits::kMaxExactInteger);
  r.model.buffer_bytes = m.opt_integer("buffer_bytes", 0, limits::kMaxExactInteger);
  r.model.trainable_parameter_bytes = m.opt_integer("trainable_parameter_bytes", 0, r.model.parameter_bytes);
  if (m.given("largest_buffers")) {
    const JsonNode list = m.field("largest_buffers");
    list.expect_array();
    // The largest three are written; a writer that lists more is read for
    // its first three.
    for (std::size_t i = 0; i < list.size() && i < 3; ++i) {
      const JsonNode b = list.at(i);
      b.expect_object();
      b.only({"name", "bytes"});
      ModelInfo::NamedBytes nb{b.str("name"), b.integer("bytes", 0, r.model.buffer_bytes.value_or(limits::kMaxExactInteger))};
      if (nb.name.empty()) b.field("name").fail("empty buffer name");
      r.model.largest_buffers.push_back(std::move(nb));
    }
  }
  r.model.split_parameter_bytes = m.opt_integer("split_parameter_bytes", 0, r.model.parameter_bytes);
  if (r.model.split_parameter_bytes && !definition(r.config.parallel.mode).splits_layers) {
    m.field("split_parameter_bytes")
        .fail(std::string("split layers in a run of mode '") + to_string(r.config.parallel.mode) +
              "' (only tensor parallelism splits them)");
  }
  // Finite and bounded: a sum of weights, not a figure a gate reads.
  if (m.given("final_parameter_sum")) {
    r.model.final_parameter_sum = m.number("final_parameter_sum", 0, -limits::kAbsurdMiB * 1e6, limits::kAbsurdMiB * 1e6);
  }
  if (m.given("final_parameter_sum_of_squares")) {
    r.model.final_parameter_sum_of_squares = m.number("final_parameter_sum_of_squares", 0, 0, limits::kAbsurdMiB * 1e12);
  }
  if (m.given("attention")) r.model.attention = to_string(m.field("attention").as_enum<AttentionKernel>());
  if (m.given("checkpointing")) r.model.checkpointing = m.field("checkpointing").as_bool();
  r.model.checkpoint_outside_mib = m.opt_mib("checkpoint_outside_mib");
  r.model.outside_parameters_mib = m.opt_mib("outside_parameters_mib");
  if (m.given("backward_profile")) r.model.backward_profile = read_backward_profile(m.field("backward_profile"));
  if (m.given("forward_profile")) r.model.forward_profile = read_backward_profile(m.field("forward_profile"), true);
  if (m.given("autocast")) {
    const std::string a = m.field("autocast").as_string();
    if (a != "bfloat16" && a != "float16") m.field("autocast").fail("'" + a + "' (allowed: bfloat16, float16)");
    r.model.autocast = a;
  }
  r.environment = read_environment(root.field("environment"));
  if (version < 3) r.producer.version = r.environment.memdiag_version;

  const JsonNode samples = root.field("samples");
  samples.expect_array();
  PhaseOrder order(r.config.step_sampling);
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const JsonNode sn = samples.at(i);
    Sample s = read_sample(sn);
    order.check(s, sn);
    r.samples.push_back(std::move(s));
  }

  const JsonNode events = root.field("events");
  events.expect_array();
  for (std::size_t i = 0; i < events.size(); ++i) r.events.push_back(read_event(events.at(i)));

  r.status = root.field("status").as_enum<RunStatus>();
  if (r.status == RunStatus::kComplete) check_complete(r, root);
  if (root.given("capacity")) r.capacity = read_capacity(root.field("capacity"));
  if (root.given("allocation_trace")) r.allocation_trace = read_allocation_trace(root.field("allocation_trace"));
  return r;
}

}  // namespace

ReadResult parse_report_text(const std::string& text, const std::string& source) {
  try {
    const json doc = detail::parse_json_text(text, source);
    return {read(JsonNode(doc, source)), std::nullopt};
  } catch (const InputError& e) {
    return {std::nullopt, e};
  } catch (const json::exception& ex) {
    return {std::nullopt, InputError(source, "$", ex.what())};
  }
}

ReadResult read_report_file(const std::string& path) {
  std::string text;
  try {
    if (path == "-") {
      text = detail::read_bounded(std::cin, path);
    } else {
      std::error_code ec;
      if (fs::is_directory(path, ec)) return {std::nullopt, InputError(path, "", "is a directory"), 0};
      std::ifstream in(path, std::ios::binary);
      if (!in) return {std::nullopt, InputError(path, "", std::string("cannot open (") + std::strerror(errno) + ")"), 0};
      text = detail::read_bounded(in, path);
    }
  } catch (const InputError& e) {
    return {std::nullopt, e, 0};
  }
  ReadResult r = parse_report_text(text, path);
  r.content_hash = std::hash<std::string>{}(text);
  return r;
}

InputList expand_inputs(const std::vector<std::string>& args) {
  InputList out;
  for (const std::string& a : args) {
    std::error_code ec;
    if (a != "-" && fs::is_directory(a, ec)) {
      std::vector<std::string> found;
      for (const auto& entry : fs::directory_iterator(a, ec)) {
        if (entry.path().extension() != ".json") continue;
        std::error_code fec;
        if (entry.is_regular_file(fec)) {
          found.push_back(entry.path().string());
        } else if (fec) {
          // A symlink loop or a link to nowhere: said, not silently skipped.
          out.errors.emplace_back(entry.path().string(), "$", "cannot read (" + fec.message() + ")");
        }
      }
      if (ec) {
        out.errors.emplace_back(a, "$", "cannot list directory (" + ec.message() + ")");
        continue;
      }
      if (found.empty()) {
        out.errors.emplace_back(a, "$", "directory holds no *.json reports");
        continue;
      }
      std::sort(found.begin(), found.end());
      out.files.insert(out.files.end(), found.begin(), found.end());
    } else {
      out.files.push_back(a);
    }
  }
  return out;
}

ReportSet read_reports(const std::vector<std::string>& args) {
  InputList list = expand_inputs(args);
  ReportSet set;
  set.errors = std::move(list.errors);
  std::map<std::size_t, std::string> seen_content;
  std::set<std::string> seen_paths;
  for (const std::string& file : list.files) {
    std::error_code ec;
    const std::string canonical = file == "-" ? "-" : fs::weakly_canonical(file, ec).string();
    if (!seen_paths.insert(canonical).second) {
      set.errors.emplace_back(file, "$", "given more than once");
      continue;
    }
    ReadResult r = read_report_file(file);
    if (r.error) {
      set.errors.push_back(*r.error);
      continue;
    }
    auto [it, fresh] = seen_content.emplace(r.content_hash, file);
    if (!fresh) {
      set.errors.emplace_back(file, "$", "duplicate of " + it->second + " (same bytes); analysed once");
      continue;
    }
    set.reports.emplace_back(file, std::move(*r.report));
  }
  return set;
}

}  // namespace memdiag
