#include "synthetic.hpp"

#include "memdiag/phase_shape.hpp"

#include <stdexcept>

namespace memdiag::testkit {

namespace {
Sample& sample(Report& r, Phase phase, int step) {
  for (Sample& s : r.samples) {
    if (s.phase == phase && s.step == step) return s;
  }
  throw std::logic_error("no such sample");
}

}  // namespace

Report synth(const Synth& s) {
  Report r;
  r.case_info.name = s.case_name;
  r.case_info.description = "synthetic";
  r.case_info.builtin = true;
  r.config.batch_size_per_device = s.batch;
  r.config.preset = s.preset;
  r.config.steps = s.steps;
  r.config.device = s.device;
  r.producer = Producer{kProducerDiagnostics, "test"};
  r.config.parallel.rank = s.rank;
  r.config.parallel.world_size = s.world_size;
  if (s.world_size > 1) {
    r.config.parallel.mode = ParallelMode::kDdp;
    r.config.parallel.backend = s.device == "cpu" ? "gloo" : "nccl";
  }
  r.model.parameter_bytes = static_cast<std::int64_t>(s.params_mib * kMiB);
  r.model.parameters = r.model.parameter_bytes / 4;
  r.environment.device_name = "synthetic";
  r.environment.torch_version = "0";
  r.environment.host = "test";
  r.environment.start_time = "2026-01-01T00:00:00Z";

  const bool cuda = s.device != "cpu";
  double peak_alloc = 0;
  auto add = [&](Phase phase, std::optional<int> step, double alloc, double peak) {
    Sample x;
    x.phase = phase;
    x.step = step;
    x.allocated_mib = alloc;
    x.peak_allocated_mib = std::max(alloc, peak);
    peak_alloc = std::max(peak_alloc, x.peak_allocated_mib);
    if (cuda) {
      x.reserved_mib = peak_alloc + s.cache_mib;
      x.device_used_mib = *x.reserved_mib + 500;
      x.inactive_split_mib = 0;
      x.alloc_retries = 0;
    }
    x.elapsed_ms = 1;
    r.samples.push_back(x);
  };
  add(Phase::kModelReady, std::nullopt, s.params_mib, s.params_mib);
  add(Phase::kOptimizerReady, std::nullopt, s.params_mib, s.params_mib);
  double base = s.params_mib;
  for (int k = 0; k < s.steps; ++k) {
    const double fwd = base + s.activations_mib;
    add(Phase::kForward, k, fwd, fwd);
    const double bwd = base + s.params_mib + s.retained_per_step_mib;  // grads; activations freed
    add(Phase::kBackward, k, bwd, fwd + s.params_mib);
    if (k == 0) base += s.optimizer_state_mib;
    const double st = base + s.params_mib + s.retained_per_step_mib;
    add(Phase::kStep, k, st, st);
    base += s.retained_per_step_mib;
    const double noise = (k % 2 ? -1 : 1) * s.noise_mib;
    add(Phase::kCleanup, k, base + noise, st);
  }
  r.status = RunStatus::kComplete;
  return r;
}

Report full_report() {
  Report r = synth({});
  r.config.memory_limit_mib = 1024;
  r.config.batch_assumed = true;  // every field written: a loop whose batch its recorder could not see
  r.case_info.source = "/cases/synthetic.json";
  r.case_info.builtin = false;
  r.case_info.presets = {"small", "medium"};
  r.case_info.preset_parameters = {{"small", 1000}, {"medium", 4000}};
  r.model.attention = "math";
  r.model.autocast = "bfloat16";
  r.config.sequence_length = 256;
  r.model.vocab = 512;
  r.model.layers = 2;
  r.model.largest_module_bytes = 4096;
  r.model.buffer_bytes = 2048;
  r.model.trainable_parameter_bytes = 1024;
  r.model.largest_buffers = {{"queue", 2040}, {"ptr", 8}};
  r.model.final_parameter_sum = 0.25;
  r.model.final_parameter_sum_of_squares = 12.5;
  r.events.push_back(make_event(EventKind::kWarmup, Phase::kSetup, std::nullopt, "cuBLAS", 64.0));
  r.events.push_back(make_event(EventKind::kOom, Phase::kBackward, 2, "CUDA out of memory", 900.5));
  for (Sample& s : r.samples) s.tensors = TensorCensus{10, s.phase == Phase::kBackward ? 10.0 : 0.0, 0};
  sample(r, Phase::kStep, 0).process_device_mib = 700;
  sample(r, Phase::kStep, 0).host_resident_mib = 1500.5;
  sample(r, Phase::kStep, 0).host_pinned_mib = 64;
  r.environment.earlier_runs_in_process = 0;
  sample(r, Phase::kStep, 0).loss = 2.5;
  sample(r, Phase::kForward, 1).micro_batch = 0;
  sample(r, Phase::kForward, 1).samples = 8;
  sample(r, Phase::kForward, 1).tokens = 2048;
  sample(r, Phase::kForward, 1).input_mib = 0.0625;
  sample(r, Phase::kBackward, 1).micro_batch = 0;
  sample(r, Phase::kForward, 1).evaluation = Sample::Evaluation{2, 256, 32768, 300.5, 120.0};
  r.events.back().oom = OomDetails{};
  OomDetails& o = *r.events.back().oom;
  o.request_mib = 64;
  o.limit_mib = 1024;
  o.device_free_mib = 100;
  o.allocated_mib = 900;
  o.reserved_mib = 1000;
  o.inactive_split_mib = 40;
  o.inactive_split_blocks = 3;
  o.largest_free_block_mib = 20;
  o.num_alloc_retries = 1;
  o.samples = 8;
  o.tokens = 2048;
  o.num_ooms = 1;
  o.tensors = TensorCensus{10, 10, 20};
  {
    Event kept = make_event(EventKind::kKept, std::nullopt, std::nullopt, "kept across steps: ...");
    KeptRecord t;
    t.shape = {16, 128, 30522};
    t.dtype = "float32";
    t.device = "cuda";
    t.grad_fn = "ViewBackward0";
    t.made_by = "logits of BertForMaskedLM";
    t.where = "job.py:42";
    t.per_step = 1;
    t.mib_per_step = 238.5;
    t.shape_varies = true;  // every field written: a job whose steps vary in size
    t.every_steps = 2;      // and kept every second step
    KeptRecord c = t;  // a cache of the last few steps' tensors: bounded
    c.every_steps.reset();
    c.made_by.reset();
    c.where.reset();
    c.allocated_at = "train.py:57";  // the allocator's stack named the line (CUDA)
    c.shape_varies = false;
    c.shapes = 3;  // of three shapes in a step
    c.held_steps = 3;
    KeptRecord h = t;  // a history grown every step
    h.grad_fn.reset();
    h.made_by = "buffer hist of Net";
    h.where.reset();
    h.shape_varies = false;
    h.grows = true;
    h.every_steps.reset();
    KeptRecord g;
    g.what = KeptRecord::What::kGraph;
    g.graph_nodes = 40;
    g.graph_nodes_before = 20;
    kept.kept = {t, c, h, g};
    kept.walked_steps = {0, 1, 2, 3};
    r.events.insert(r.events.end() - 1, kept);  // the oom event stays last
    Event modules = make_event(EventKind::kModules, Phase::kForward, 1, "forward by module, step 1: ...");
    modules.mib = 30;
    modules.modules = {ModuleRecord{std::string(""), "Net", std::nullopt, 28, 2, 1},
                       ModuleRecord{std::string("blocks.0"), "Block", std::string(""), 26, 0, 1},
                       ModuleRecord{std::nullopt, "CrossEntropyLoss", std::nullopt, 2, 2, 1}};
    r.events.insert(r.events.end() - 1, modules);
  }
  r.config.remedies = {Remedy{RemedyKind::kCheckpoint, 2}};
  r.config.allocator_settings = "expandable_segments:True";
  r.environment.cuda_runtime_version = "13.0";
  r.status = RunStatus::kOom;
  CapacitySearch c;
  c.limit_mib = 1024;
  c.max_batch = 3;
  c.first_failing_batch = 4;
  auto attempt = [](std::int64_t batch, RunStatus status, double peak, double seconds) {
    CapacityTry t;
    t.batch = batch;
    t.status = status;
    t.peak_allocated_mib = peak;
    t.seconds = seconds;
    return t;
  };
  c.tries = {attempt(1, RunStatus::kComplete, 100.5, 0.25), attempt(2, RunStatus::kComplete, 200.5, 0.5),
             attempt(4, RunStatus::kOom, 1023.5, 0.1), attempt(3, RunStatus::kComplete, 300.5, 0.75)};
  c.tries[1].phases = phase_shapes(r);
  c.tries[1].reserve_overhead_mib = 2;
  c.tries[2].failed_phase = Phase::kForward;
  c.tries[2].needed_mib = 1030;
  c.checks = {attempt(3, RunStatus::kComplete, 300.5, 0.75), attempt(4, RunStatus::kOom, 1000.5, 0.5)};
  c.checks[0].phases = phase_shapes(r);
  c.checks[1].reserve_overhead_mib = 20;
  c.checks[1].failed_phase = Phase::kBackward;
  c.checks[1].needed_mib = 1040;
  c.fit_fixed_mib = -0.5;
  c.fit_per_sample_mib = 100;
  c.binding_phase = Phase::kBackward;
  c.predicted_max_batch = 10;
  c.replayed_max_batch = 3;
  c.confirmed = false;
  r.capacity = c;
  // A trace with every kind of event, and a second pass.
  AllocationTrace t;
  t.allocator = "cuda-caching-allocator";
  t.limit_bytes = std::int64_t{1024} << 20;
  t.staging_cap_bytes = std::int64_t{132} << 20;
  auto event = [](TraceEvent::Kind k, std::int64_t bytes, std::int64_t id = 0) {
    TraceEvent e;
    e.kind = k;
    e.bytes = bytes;
    e.id = id;
    return e;
  };
  TracePass p;
  p.batch = 8;
  p.step_samples = {8};
  p.status = RunStatus::kOom;
  TraceEvent setup;
  setup.kind = TraceEvent::Kind::kPhase;
  TraceEvent forward = setup;
  forward.phase = Phase::kForward;
  forward.step = 0;
  TraceEvent segment = event(TraceEvent::Kind::kSegmentAlloc, 2 << 20);
  segment.address = 1 << 30;
  TraceEvent released = segment;
  released.kind = TraceEvent::Kind::kSegmentFree;
  p.events = {setup,   segment, event(TraceEvent::Kind::kAlloc, 4096), forward, event(TraceEvent::Kind::kFree, 0, 0),
              event(TraceEvent::Kind::kEmptyCache, 0), released, event(TraceEvent::Kind::kFailed, 64 << 20)};
  p.sequence_length = 256;
  TracePass half = p;
  half.batch = 4;
  half.step_samples = {4};
  half.status = RunStatus::kComplete;
  t.passes = {p, half};
  r.allocation_trace = t;
  return r;
}

}  // namespace memdiag::testkit
