// One configuration in this process: the report described, the workload
// run under a recorder, and with --trace-allocations its passes.
#include "configuration_run.hpp"
#include "torch_device.hpp"

#include "memdiag/allocation_tracer.hpp"
#include "memdiag/allocator_settings.hpp"
#include "memdiag/case_spec.hpp"
#include "memdiag/distributed.hpp"
#include "memdiag/environment.hpp"
#include "memdiag/recorder.hpp"
#include "memdiag/replay_capacity.hpp"
#include "memdiag/workload.hpp"

#include <chrono>

namespace memdiag::detail {

namespace {

// The report's description of the run: case, configuration, machine. The
// model's figures are filled by the workload once it has built the model.
void describe_report(Report& r, const PlannedRun& run, const ResolvedPlan& plan, const HarnessOptions& opts,
                     const MemoryProbe& probe) {
  r.case_info.name = run.spec.name;
  r.case_info.description = run.spec.description;
  r.case_info.source = run.spec.source;
  r.case_info.builtin = run.spec.builtin;
  for (const auto& kv : run.spec.presets) {
    r.case_info.presets.push_back(kv.first);
    r.case_info.preset_parameters[kv.first] = parameter_count(kv.second.model);
  }
  r.case_info.detail_json = resolved_case_detail(run.spec, run.preset, probe.name());
  r.config = config_of(run, plan, opts);
  // What the allocator runs under (the environment's settings too), read
  // back from it; the CPU has no caching allocator to set.
  if (plan.device.is_cuda()) r.config.allocator_settings = current_allocator_settings();
  r.producer = Producer{kProducerDiagnostics, MEMDIAG_VERSION};
  r.environment = describe_environment(to_c10(plan.device));
}

// A single run's heading and its samples as they are taken, for the live table.
void show_progress(Recorder& rec, const PlannedRun& run, const ResolvedPlan& plan, RunObserver& obs) {
  const Report& r = rec.report();
  obs.run_started(RunHeading{run.spec.name, run.preset, run.remedies.empty() ? std::string() : remedies_label(run.remedies),
                             plan.device.str(), r.environment.device_name, run.batch, run.steps});
  rec.set_listener([&obs, &r](const Sample& sample) { obs.sample_taken(sample, r); });
}

WorkloadOptions workload_options(const PlannedRun& run, const ResolvedPlan& plan, const HarnessOptions& opts) {
  WorkloadOptions w;
  w.spec = run.spec;
  w.preset = run.preset;
  w.batch_size = run.batch;
  w.steps = run.steps;
  w.sequence_length = run.sequence_length;
  w.device = to_c10(plan.device);
  w.seed = opts.seed;
  w.warm_up_kernels = opts.warm_up_kernels;
  w.rank_zero_extra_samples = opts.rank_zero_extra_samples;
  w.mode = plan.launch ? (opts.parallel_mode == ParallelMode::kNone ? ParallelMode::kDdp : opts.parallel_mode)
                      : ParallelMode::kNone;
  w.unit_modules = opts.shard_unit_modules;
  w.prefetch_next = opts.shard_prefetch_next;
  w.remedies = run.remedies;
  // A launched rank's batch is its launcher's, never waited for.
  if (!plan.launch) w.await_batch = opts.await_batch;
  return w;
}

}  // namespace

void build_first_model_ahead(const ResolvedPlan& plan, const HarnessOptions& opts, Session& session) {
  if (!plan.device.is_cuda() || plan.launch || plan.runs.empty() ||
      (plan.runs.size() != 1 && !opts.find_max_batch)) {
    return;
  }
  auto cache = std::make_unique<ModelCache>();
  cache->keep_builds = opts.find_max_batch;
  if (build_model_ahead(workload_options(plan.runs.front(), plan, opts), *cache)) session.model_cache = std::move(cache);
}

namespace {

// Joins the process group (at the first run) when launched as a rank, runs
// the workload, and records how it ended. Any failure becomes an error event
// and status failed, so a report is always written.
RunStatus execute(const PlannedRun& run, const ResolvedPlan& plan, const HarnessOptions& opts, Session& session,
                  Recorder& rec, RunObserver& obs) {
  WorkloadOptions w = workload_options(run, plan, opts);
  w.model_cache = session.model_cache.get();
  RunStatus status = RunStatus::kFailed;
  try {
    if (plan.launch && !session.comm) {
      // Joined after the recorder exists: a peer that never comes still
      // leaves this rank a report (status failed) once the timeout passes.
      const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(opts.dist_timeout_s * 1000));
      session.comm = join_process_group(*plan.launch, to_c10(plan.device), timeout);
      rec.restart_phase();
    }
    if (session.comm) rec.report().config.parallel.launch = session.comm->launch_id();
    w.comm = session.comm.get();
    if (session.threads_note) rec.add_event(make_event(EventKind::kNote, Phase::kSetup, std::nullopt, *session.threads_note));
    if (!plan.device.is_cuda() && has_process_scope(run.remedies)) {
      rec.add_event(make_event(EventKind::kNote, Phase::kSetup, std::nullopt,
                               "allocator settings " + allocator_settings_of(run.remedies) +
                                   ": not applicable on the CPU (no caching allocator); the run trains and measures "
                                   "as the baseline does"));
    }
    if (!plan.device.is_cuda()) {
      for (const Remedy& r : run.remedies) {
        if (!definition(r.kind).moves_to_host) continue;
        rec.add_event(make_event(EventKind::kNote, Phase::kSetup, std::nullopt,
                                 std::string(to_string(r.kind)) +
                                     ": on the CPU the host is the device; what it moves leaves the tracked allocator, "
                                     "not the machine's memory (host MiB shows it): the device figures say what it "
                                     "would move off a GPU, and it is not the best remedy here"));
      }
    }
    // Where a Python job of the same loop would read otherwise, measured
    // (docs/measurements/cpu/python-differences.txt, README: Where memdiag's
    // workloads differ from Python).
    const bool adam = run.spec.optimizer.type != OptimizerType::kSgd && !find_remedy(run.remedies, RemedyKind::kSgd);
    if (adam) {
      rec.add_event(make_event(EventKind::kNote, Phase::kSetup, std::nullopt,
                               "Adam/AdamW: LibTorch makes each parameter's state inside its update loop, torch.optim "
                               "(foreach=False) makes all of it first, so the same job in Python peaks a little "
                               "higher in its first step() (README: Where memdiag's workloads differ from Python)"));
    }
    if (adam && find_remedy(run.remedies, RemedyKind::kBf16)) {
      rec.add_event(make_event(EventKind::kNote, Phase::kSetup, std::nullopt,
                               "bf16 with Adam/AdamW: LibTorch's update arithmetic in bf16 differs from "
                               "torch.optim's, so the losses drift from a Python run of the same job from the second "
                               "step on; the memory is the same but for step()'s peak, within a fraction of a MiB (README: Where "
                               "memdiag's workloads differ from Python)"));
    }
    // The MLP's layers are the C++ API's Linear; the transformer's go
    // through ATen's linear, as Python's do, and cast the weight itself (on
    // the H200 its forward read within 0.5 MiB of Python's under autocast).
    const bool cpp_api_linear = run.spec.preset(run.preset).model.kind != ModelKind::kTransformer;
    if (cpp_api_linear && find_remedy(run.remedies, RemedyKind::kAutocastBf16)) {
      rec.add_event(make_event(EventKind::kNote, Phase::kSetup, std::nullopt,
                               "autocast-bf16: LibTorch's Linear multiplies by a transposed view of its weight, "
                               "which autocast does not cache; Python's nn.Linear casts the weight itself, cached "
                               "until the autocast block ends, so the same job in Python peaks higher in forward by "
                               "about one layer's bf16 weight (README: Where memdiag's workloads differ from Python)"));
    }
    status = run_workload(w, *session.probe, rec, opts.stop);
  } catch (const std::exception& e) {
    const std::string msg = first_line(e.what());
    rec.add_event(EventKind::kError, msg);
    obs.problem((plan.launch ? "rank " + std::to_string(plan.launch->rank) + ": " : std::string()) + "run failed: " + msg);
  }
  if (status == RunStatus::kInterrupted) {
    rec.add_event(EventKind::kInterrupted,
                  "stopped by " + signal_name(opts.stop != nullptr ? opts.stop->signal() : 0));
  }
  return status;
}

// Each step's samples at a batch, as the workload makes them (a schedule's
// fractions; rank 0's extra samples).
std::vector<std::int64_t> step_samples(const PlannedRun& run, std::int64_t batch, const ResolvedPlan& plan,
                                       const HarnessOptions& opts) {
  const std::int64_t extra = plan.launch && plan.launch->rank == 0 ? opts.rank_zero_extra_samples : 0;
  std::vector<std::int64_t> out;
  for (int s = 0; s < run.steps; ++s) out.push_back(run.spec.batch_samples(batch, s) + extra);
  return out;
}

// A transformer's tokens per sample in a planned run (its own, or its
// preset's); none for an MLP.
std::optional<int> sequence_length_of(const PlannedRun& run) {
  const ModelSpec& m = run.spec.preset(run.preset).model;
  if (m.kind != ModelKind::kTransformer) return std::nullopt;
  return run.sequence_length > 0 ? run.sequence_length : m.sequence_length;
}

// One more pass of the configuration, changed as `variant` says, traced
// from what a fresh process holds and measured for nothing else.
TracePass trace_pass(const PlannedRun& variant, const ResolvedPlan& plan, const HarnessOptions& opts, Session& session,
                     RunObserver& obs) {
  session.probe->reset_between_runs();
  Recorder scratch(*session.probe);
  tracer::start_pass(to_c10(plan.device));
  RunStatus status = RunStatus::kFailed;
  try {
    WorkloadOptions w = workload_options(variant, plan, opts);
    w.model_cache = session.model_cache.get();
    status = run_workload(w, *session.probe, scratch, opts.stop);
  } catch (const std::exception& e) {
    obs.problem("--trace-allocations: a pass at batch " + std::to_string(variant.batch) + " failed: " + first_line(e.what()));
  }
  TracePass p = tracer::finish_pass(variant.batch, step_samples(variant, variant.batch, plan, opts), status);
  p.sequence_length = sequence_length_of(variant);
  return p;
}

// A run to its report; with --trace-allocations, traced: the run's own
// requests of the allocator, then (where it completed or ran out) the same
// configuration at half the batch, and a transformer's at three quarters
// and half its length, each in this process and measured for nothing
// else, so the analysis sees how each request grows with the batch and
// the length.
Report finish_run(const PlannedRun& run, const ResolvedPlan& plan, const HarnessOptions& opts, Session& session,
                  Recorder& rec, RunObserver& obs) {
  if (!opts.trace_allocations) return rec.finish(execute(run, plan, opts, session, rec, obs));
  AllocationTrace trace;
  trace.allocator = session.probe->name();
  trace.limit_bytes = session.limit_bytes;
  tracer::start_pass(to_c10(plan.device));
  const RunStatus status = execute(run, plan, opts, session, rec, obs);
  trace.passes.push_back(tracer::finish_pass(run.batch, step_samples(run, run.batch, plan, opts), status));
  trace.passes.back().sequence_length = sequence_length_of(run);
  Report report = rec.finish(status);
  const auto stopping = [&] { return opts.stop != nullptr && opts.stop->requested(); };
  const bool traced_whole = status == RunStatus::kComplete || status == RunStatus::kOom;
  if (traced_whole && run.batch >= 2 && !stopping() && !plan.launch) {
    PlannedRun half = run;
    half.batch = run.batch / 2;
    trace.passes.push_back(trace_pass(half, plan, opts, session, obs));
  }
  const std::optional<int> length = sequence_length_of(run);
  if (traced_whole && length && *length >= 8 && !plan.launch) {
    for (const int l : {*length * 3 / 4, *length / 2}) {
      if (stopping()) break;
      PlannedRun shorter = run;
      shorter.sequence_length = l;
      trace.passes.push_back(trace_pass(shorter, plan, opts, session, obs));
    }
  }
  // Where the run's reductions staged through global memory, how far such
  // a buffer grows on this device (the replay's bound on them).
  if (plan.device.is_cuda() && largest_staging_buffer(trace.passes.front()) > 0 && !stopping()) {
    session.probe->reset_between_runs();
    try {
      trace.staging_cap_bytes = tracer::measure_staging_cap(to_c10(plan.device));
    } catch (const std::exception& e) {
      obs.problem("--trace-allocations: measuring the reductions' staging bound failed: " + first_line(e.what()));
    }
  }
  report.allocation_trace = std::move(trace);
  return report;
}

}  // namespace

std::string first_line(const std::string& what) { return what.substr(0, what.find('\n')); }

Report run_configuration(const PlannedRun& run, const ResolvedPlan& plan, const HarnessOptions& opts,
                         Session& session, RunObserver& obs, bool live) {
  Recorder rec(*session.probe);
  describe_report(rec.report(), run, plan, opts, *session.probe);
  rec.report().environment.earlier_runs_in_process = session.runs_made++;
  if (live) show_progress(rec, run, plan, obs);
  return finish_run(run, plan, opts, session, rec, obs);
}

}  // namespace memdiag::detail
