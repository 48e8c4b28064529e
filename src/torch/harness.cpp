#include "memdiag/harness.hpp"
#include "run_plan.hpp"

#include "memdiag/allocation_tracer.hpp"
#include "memdiag/allocator_settings.hpp"
#include "memdiag/atomic_file.hpp"
#include "memdiag/case_spec.hpp"
#include "memdiag/distributed.hpp"
#include "memdiag/environment.hpp"
#include "memdiag/errors.hpp"
#include "memdiag/format.hpp"
#include "memdiag/memory_snapshot.hpp"
#include "memdiag/output_guard.hpp"
#include "memdiag/probes.hpp"
#include "memdiag/recorder.hpp"
#include "memdiag/replay_capacity.hpp"
#include "memdiag/report_json.hpp"
#include "memdiag/tracking_allocator.hpp"
#include "memdiag/workload.hpp"

#include "memdiag/exit_code.hpp"

#include <chrono>
#include <cstdlib>

namespace memdiag {

namespace {

using detail::PlannedRun;
using detail::ResolvedPlan;
using detail::Session;

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
  r.config = detail::config_of(run, plan, opts);
  // What the allocator runs under (the environment's settings too), read
  // back from it; the CPU has no caching allocator to set.
  if (plan.device.is_cuda()) r.config.allocator_settings = current_allocator_settings();
  r.producer = Producer{kProducerDiagnostics, MEMDIAG_VERSION};
  r.environment = describe_environment(plan.device);
}

// The probe for the run's device, with the memory limit applied. On the CPU
// this installs the tracking allocator, which must happen before the first
// CPU tensor.
std::unique_ptr<MemoryProbe> make_probe(const ResolvedPlan& plan, const HarnessOptions& opts, Session& session) {
  if (plan.device.is_cuda()) {
    auto probe = make_cuda_probe(plan.device.index());
    if (opts.memory_limit_mib) session.limit_bytes = cuda_set_memory_limit(plan.device.index(), *opts.memory_limit_mib);
    return probe;
  }
  auto probe = make_cpu_probe();
  if (opts.memory_limit_mib) {
    session.limit_bytes = static_cast<std::int64_t>(*opts.memory_limit_mib * kMiB);
    CpuTrackingAllocator::install().set_limit(session.limit_bytes);
  }
  return probe;
}

// A single run's heading and its samples as they are taken, for the live table.
// c10 errors carry a backtrace after the first line; users need the first.
std::string first_line(const std::string& what) { return what.substr(0, what.find('\n')); }

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
  w.device = plan.device;
  w.seed = opts.seed;
  w.warm_up_kernels = opts.warm_up_kernels;
  w.rank_zero_extra_samples = opts.rank_zero_extra_samples;
  w.mode = plan.launch ? (opts.parallel_mode == ParallelMode::kNone ? ParallelMode::kDdp : opts.parallel_mode)
                      : ParallelMode::kNone;
  w.unit_modules = opts.shard_unit_modules;
  w.prefetch_next = opts.shard_prefetch_next;
  w.remedies = run.remedies;
  return w;
}

// Joins the process group (at the first run) when launched as a rank, runs
// the workload, and records how it ended. Any failure becomes an error event
// and status failed, so a report is always written.
RunStatus execute(const PlannedRun& run, const ResolvedPlan& plan, const HarnessOptions& opts, Session& session,
                  Recorder& rec, RunObserver& obs) {
  WorkloadOptions w = workload_options(run, plan, opts);
  w.model_cache = session.model_cache;
  RunStatus status = RunStatus::kFailed;
  try {
    if (plan.launch && !session.comm) {
      // Joined after the recorder exists: a peer that never comes still
      // leaves this rank a report (status failed) once the timeout passes.
      const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(opts.dist_timeout_s * 1000));
      session.comm = join_process_group(*plan.launch, plan.device, timeout);
      rec.restart_phase();
    }
    w.comm = session.comm.get();
    if (session.threads_note) rec.add_event(make_event(EventKind::kNote, Phase::kSetup, std::nullopt, *session.threads_note));
    if (!plan.device.is_cuda() && has_process_scope(run.remedies)) {
      rec.add_event(make_event(EventKind::kNote, Phase::kSetup, std::nullopt,
                               "allocator settings " + allocator_settings_of(run.remedies) +
                                   ": not applicable on the CPU (no caching allocator); the run trains and measures "
                                   "as the baseline does"));
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
  tracer::start_pass(plan.device);
  RunStatus status = RunStatus::kFailed;
  try {
    WorkloadOptions w = workload_options(variant, plan, opts);
    w.model_cache = session.model_cache;
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
  tracer::start_pass(plan.device);
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
      trace.staging_cap_bytes = tracer::measure_staging_cap(plan.device);
    } catch (const std::exception& e) {
      obs.problem("--trace-allocations: measuring the reductions' staging bound failed: " + first_line(e.what()));
    }
  }
  report.allocation_trace = std::move(trace);
  return report;
}

// --memory-snapshot and --oom-snapshot, after the run: each file written is
// named in the report (a note), so the report leads to its snapshot.
// Returns false when a snapshot asked for could not be written.
bool write_snapshots(const HarnessOptions& opts, Report& report, RunObserver& obs) {
  if (opts.memory_snapshot.empty() && opts.oom_snapshot.empty()) return true;
  bool ok = true;
  auto write = [&](const std::string& flag, const std::string& path, const std::string& pickle, const char* what) {
    try {
      write_file_atomically(path, pickle);
      report.events.push_back(make_event(EventKind::kNote, std::nullopt, std::nullopt,
                                         std::string(what) + " written to " + path +
                                             " (open it in https://pytorch.org/memory_viz)"));
      obs.file_written(path, what, to_mib(static_cast<std::int64_t>(pickle.size())));
    } catch (const std::exception& e) {
      obs.problem(flag + ": " + first_line(e.what()));
      ok = false;
    }
  };
  if (!opts.oom_snapshot.empty()) {
    if (std::optional<std::string> pickle = take_oom_snapshot()) {
      write("--oom-snapshot", opts.oom_snapshot, *pickle, "allocator snapshot at the out-of-memory error");
    } else {
      obs.note("no out-of-memory error: " + opts.oom_snapshot + " not written");
    }
  }
  if (!opts.memory_snapshot.empty()) {
    try {
      write("--memory-snapshot", opts.memory_snapshot, memory_snapshot_pickle(), "allocator history of the run");
    } catch (const std::exception& e) {
      obs.problem("--memory-snapshot: " + first_line(e.what()));
      ok = false;
    }
  }
  stop_memory_history();
  return ok;
}

// A plain run: the live table, then where the report went.
int run_single(const ResolvedPlan& plan, const HarnessOptions& opts, Session& session, RunObserver& obs) {
  const PlannedRun& run = plan.runs.front();
  Recorder rec(*session.probe);
  describe_report(rec.report(), run, plan, opts, *session.probe);
  rec.report().environment.earlier_runs_in_process = session.runs_made++;
  show_progress(rec, run, plan, obs);
  Report report = finish_run(run, plan, opts, session, rec, obs);
  const bool snapshots_ok = write_snapshots(opts, report, obs);
  GuardedWrite written;
  try {
    written = write_own_report(run.output, report);
  } catch (const std::exception& e) {
    obs.problem(std::string("--output: ") + e.what());
    obs.run_finished(report, "");
    return to_int(ExitCode::kFailed);
  }
  if (!written.refused.empty()) {
    // Another run wrote there meanwhile: its report stays, and so does this one.
    obs.problem(detail::kept_beside_line(run.output, written));
    obs.run_finished(report, written.kept_at);
    return to_int(ExitCode::kUsage);
  }
  obs.run_finished(report, run.output);
  if (!snapshots_ok && report.status == RunStatus::kComplete) return to_int(ExitCode::kFailed);
  return to_int(exit_code_for(report.status));
}

// Every configuration in this process, one after another, each starting
// from what a fresh process holds after its warm-up.
int run_sweep(const ResolvedPlan& plan, const HarnessOptions& opts, Session& session, RunObserver& obs) {
  std::vector<SweepRow> rows;
  std::vector<RunStatus> statuses;
  bool kept_beside = false;
  for (std::size_t i = 0; i < plan.runs.size(); ++i) {
    const PlannedRun& run = plan.runs[i];
    if (i > 0) session.probe->reset_between_runs();
    const auto t0 = std::chrono::steady_clock::now();
    Report report;
    if (detail::needs_own_process(run, plan)) {
      report = detail::run_in_child(run, plan, opts, obs);  // the child wrote it
    } else {
      report = detail::run_configuration(run, plan, opts, session, obs);
      try {
        const GuardedWrite written = write_own_report(run.output, report);
        if (!written.refused.empty()) {
          obs.problem(detail::kept_beside_line(run.output, written));
          kept_beside = true;
        }
      } catch (const std::exception& e) {
        obs.problem(std::string("--output: ") + e.what());
        report.status = RunStatus::kFailed;
      }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rows.push_back(detail::sweep_row(run, plan.varying, report, seconds));
    statuses.push_back(report.status);
    obs.sweep_run_finished(rows.back(), i + 1, plan.runs.size());
    // A stop request ends the sweep after the run in progress, whatever
    // that run's status (an out-of-memory run does not check it).
    if (report.status == RunStatus::kInterrupted || (opts.stop != nullptr && opts.stop->requested())) {
      statuses.push_back(RunStatus::kInterrupted);
      break;
    }
    // A rank that did not complete leaves its peers' collectives hanging:
    // every rank stops, as a single run would.
    if (plan.launch && report.status != RunStatus::kComplete) break;
  }
  obs.sweep_finished(rows, plan.runs.size());
  const ExitCode code = exit_code_for(statuses);
  return to_int(kept_beside && code != ExitCode::kInterrupted ? ExitCode::kUsage : code);
}

}  // namespace

namespace detail {

Report run_configuration(const PlannedRun& run, const ResolvedPlan& plan, const HarnessOptions& opts,
                         Session& session, RunObserver& obs) {
  Report report;
  {
    Recorder rec(*session.probe);
    describe_report(rec.report(), run, plan, opts, *session.probe);
    rec.report().environment.earlier_runs_in_process = session.runs_made++;
    report = finish_run(run, plan, opts, session, rec, obs);
  }
  return report;
}

}  // namespace detail

int run_harness(const HarnessOptions& opts) {
  RunObserver silent;
  RunObserver& obs = opts.observer != nullptr ? *opts.observer : silent;
  ResolvedPlan plan;
  try {
    plan = detail::resolve_plan(opts);
  } catch (const UsageError& u) {
    obs.problem(u.what());
    return to_int(ExitCode::kUsage);
  }
  obs.session_started(SessionInfo{plan.launch ? plan.launch->rank : 0, plan.launch ? plan.launch->world_size : 1,
                                  plan.device.str()});
  if (opts.isolate) return detail::run_isolated(plan, opts, obs);

  Session session;
  // Before anything computes: the pool's size is fixed at its first use.
  if (plan.launch && !plan.device.is_cuda()) session.threads_note = share_cpu_threads(*plan.launch);
  // A run alone in this process sets its allocator settings here, before
  // the allocator makes a segment; a sweep's runs with settings run in
  // children of their own (detail::needs_own_process).
  if (plan.device.is_cuda() && (plan.runs.size() == 1 || opts.find_max_batch)) {
    const std::string settings = allocator_settings_of(plan.runs.front().remedies);
    try {
      apply_allocator_settings(settings);
    } catch (const std::exception& e) {
      obs.problem("--remedy: " + settings + ": " + first_line(e.what()));
      return to_int(ExitCode::kFailed);
    }
  }
  try {
    session.probe = make_probe(plan, opts, session);
  } catch (const std::exception& e) {
    obs.problem("--device: cannot use " + plan.device.str() + ": " + first_line(e.what()));
    return to_int(ExitCode::kFailed);
  }
  if (!opts.memory_snapshot.empty() || !opts.oom_snapshot.empty()) {
    // After the probe, which initialises CUDA: nothing records before the
    // allocator exists. Before the warm-up, so its workspaces are in it.
    SnapshotOptions so;
    so.max_entries = opts.snapshot_max_entries;
    so.cpp_stacks = opts.snapshot_cpp_stacks;
    so.at_oom = !opts.oom_snapshot.empty();
    try {
      start_memory_history(so);
    } catch (const std::exception& e) {
      obs.problem("--memory-snapshot: cannot record: " + first_line(e.what()));
      return to_int(ExitCode::kFailed);
    }
  }
  return opts.find_max_batch        ? detail::run_max_batch_search(plan, opts, session, obs)
         : plan.runs.size() == 1 ? run_single(plan, opts, session, obs)
                                 : run_sweep(plan, opts, session, obs);
}

}  // namespace memdiag
