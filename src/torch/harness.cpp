#include "memdiag/harness.hpp"
#include "build_config.hpp"
#include "run_plan.hpp"

#include "memdiag/atomic_file.hpp"
#include "memdiag/case_spec.hpp"
#include "memdiag/distributed.hpp"
#include "memdiag/environment.hpp"
#include "memdiag/errors.hpp"
#include "memdiag/format.hpp"
#include "memdiag/memory_snapshot.hpp"
#include "memdiag/probes.hpp"
#include "memdiag/recorder.hpp"
#include "memdiag/report_json.hpp"
#include "memdiag/tracking_allocator.hpp"
#include "memdiag/workload.hpp"

#include <atomic>

#include <unistd.h>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <ostream>
#include <sstream>


namespace memdiag {
namespace fs = std::filesystem;

namespace {

std::atomic<bool> g_interrupt{false};
std::atomic<int> g_signal{0};  // the signal that asked to stop
// SIGINT (Ctrl-C), SIGTERM (timeout, CI cancellation, schedulers) and SIGHUP
// all stop the run between phases, so its report is written. A second
// signal while the run finishes its phase ends the process at once: reports
// are written by rename, so none is left torn.
extern "C" void on_stop_signal(int sig) {
  if (g_interrupt.exchange(true)) _exit(128 + sig);
  g_signal.store(sig);
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "a signal";
  }
}



void print_header(std::ostream& out) {
  out << std::right << std::setw(5) << "step" << "  " << std::left << std::setw(16) << "phase" << std::right
      << std::setw(12) << "alloc MiB" << std::setw(12) << "peak MiB" << std::setw(12) << "reserved"
      << std::setw(12) << "device" << std::setw(10) << "ms" << "\n";
}

void print_row(std::ostream& out, const Sample& s) {
  out << std::right << std::setw(5) << (s.step ? std::to_string(*s.step) : std::string("-")) << "  " << std::left
      << std::setw(16) << to_string(s.phase) << std::right << std::setw(12) << format_mib(s.allocated_mib)
      << std::setw(12) << format_mib(s.peak_allocated_mib) << std::setw(12) << format_mib(s.reserved_mib)
      << std::setw(12) << format_mib(s.device_used_mib) << std::setw(10) << format_fixed(s.elapsed_ms, 1) << "\n"
      << std::flush;
}

// c10 errors carry a backtrace after the first line; users need the first.
std::string first_line(const std::string& what) { return what.substr(0, what.find('\n')); }

ExitCode exit_code_for(RunStatus s) {
  switch (s) {
    case RunStatus::kComplete: return ExitCode::kOk;
    case RunStatus::kOom: return ExitCode::kOom;
    case RunStatus::kInterrupted: return ExitCode::kInterrupted;
    case RunStatus::kFailed: return ExitCode::kFailed;
  }
  return ExitCode::kFailed;
}

// A sweep's exit code: interrupted over failed over out of memory.
ExitCode sweep_exit_code(const std::vector<RunStatus>& statuses) {
  ExitCode code = ExitCode::kOk;
  for (RunStatus s : statuses) {
    const ExitCode c = exit_code_for(s);
    if (c == ExitCode::kInterrupted) return c;
    if (c == ExitCode::kFailed || (c == ExitCode::kOom && code == ExitCode::kOk)) code = c;
  }
  return code;
}

}  // namespace

std::string self_executable(const std::string& argv0) {
  std::error_code ec;
  const fs::path exe = fs::canonical("/proc/self/exe", ec);
  return ec ? argv0 : exe.string();
}

std::vector<std::string> default_case_dirs(const std::string& argv0) {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("MEMDIAG_CASES_DIR"); env && *env) dirs.emplace_back(env);
  std::error_code ec;
  const fs::path exe = fs::canonical("/proc/self/exe", ec);
  const fs::path base = ec ? fs::path(argv0).parent_path() : exe.parent_path();
  dirs.push_back((base / ".." / "share" / "memdiag" / "cases").lexically_normal().string());
  if (*MEMDIAG_SOURCE_CASES_DIR) dirs.emplace_back(MEMDIAG_SOURCE_CASES_DIR);
  return dirs;
}

int list_cases(const std::vector<std::string>& case_dirs, std::ostream& out, std::ostream& err) {
  try {
    for (const CaseSpec& c : list_cases(case_dirs)) {
      std::string presets;
      for (const auto& kv : c.presets) {
        presets += (presets.empty() ? "" : ", ") + kv.first + (kv.first == c.default_preset ? "*" : "");
      }
      out << std::left << std::setw(8) << c.name << " " << c.description << "\n"
          << std::setw(8) << "" << " presets: " << presets << "  (file: " << c.source << ")\n";
    }
  } catch (const Error& e) {
    err << "memory_diagnostics: " << e.what() << "\n";
    return to_int(ExitCode::kUsage);
  }
  return to_int(ExitCode::kOk);
}

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
  for (const auto& kv : run.spec.presets) r.case_info.presets.push_back(kv.first);
  r.case_info.detail_json = resolved_case_detail(run.spec, run.preset, probe.name());
  r.config.batch_size_per_device = run.batch;
  r.config.preset = run.preset;
  r.config.steps = run.steps;
  r.config.device = plan.device.str();
  r.config.seed = opts.seed;
  r.config.memory_limit_mib = opts.memory_limit_mib;
  r.config.remedies = run.remedies;
  r.producer = Producer{kProducerDiagnostics, MEMDIAG_VERSION};
  if (plan.launch) {
    Parallelism& p = r.config.parallel;
    p.mode = opts.shard_optimizer_state ? ParallelMode::kZero1 : ParallelMode::kDdp;
    p.rank = plan.launch->rank;
    p.local_rank = plan.launch->local_rank;
    p.world_size = plan.launch->world_size;
    p.backend = plan.device.is_cuda() ? "nccl" : "gloo";
    p.rank_zero_extra_samples = opts.rank_zero_extra_samples;
  }
  r.environment = describe_environment(plan.device);
}

// The probe for the run's device, with the memory limit applied. On the CPU
// this installs the tracking allocator, which must happen before the first
// CPU tensor.
std::unique_ptr<MemoryProbe> make_probe(const ResolvedPlan& plan, const HarnessOptions& opts) {
  if (plan.device.is_cuda()) {
    auto probe = make_cuda_probe(plan.device.index());
    if (opts.memory_limit_mib) cuda_set_memory_limit(plan.device.index(), *opts.memory_limit_mib);
    return probe;
  }
  auto probe = make_cpu_probe();
  if (opts.memory_limit_mib) {
    CpuTrackingAllocator::install().set_limit(static_cast<std::int64_t>(*opts.memory_limit_mib * kMiB));
  }
  return probe;
}

// The live table of a single run on stdout: a heading, then a row per sample
// as it is taken.
void show_progress(Recorder& rec, const PlannedRun& run, const ResolvedPlan& plan, std::ostream& out) {
  const Report& r = rec.report();
  out << "memdiag " << MEMDIAG_VERSION << ": case " << run.spec.name << " (preset " << run.preset << ", batch "
      << run.batch << ", " << run.steps << " step" << (run.steps == 1 ? "" : "s")
      << (run.remedies.empty() ? std::string() : ", remedy " + remedies_label(run.remedies)) << ") on "
      << plan.device.str() << " [" << r.environment.device_name << "]\n";
  print_header(out);
  rec.set_listener([&out, &r](const Sample& s) {
    print_row(out, s);
    if (s.phase == Phase::kModelReady) {
      out << "       model: " << r.model.parameters << " parameters (" << format_mib(to_mib(r.model.parameter_bytes))
          << " MiB)\n";
    }
  });
}

WorkloadOptions workload_options(const PlannedRun& run, const ResolvedPlan& plan, const HarnessOptions& opts) {
  WorkloadOptions w;
  w.spec = run.spec;
  w.preset = run.preset;
  w.batch_size = run.batch;
  w.steps = run.steps;
  w.device = plan.device;
  w.seed = opts.seed;
  w.warm_up_kernels = opts.warm_up_kernels;
  w.rank_zero_extra_samples = opts.rank_zero_extra_samples;
  w.shard_optimizer_state = opts.shard_optimizer_state;
  w.remedies = run.remedies;
  return w;
}

// Joins the process group (at the first run) when launched as a rank, runs
// the workload, and records how it ended. Any failure becomes an error event
// and status failed, so a report is always written.
RunStatus execute(const PlannedRun& run, const ResolvedPlan& plan, const HarnessOptions& opts, Session& session,
                  Recorder& rec, std::ostream& err) {
  WorkloadOptions w = workload_options(run, plan, opts);
  w.known_warmup_mib = session.warmup_mib;
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
    status = run_workload(w, *session.probe, rec, &g_interrupt);
  } catch (const std::exception& e) {
    const std::string msg = first_line(e.what());
    rec.add_event(EventKind::kError, msg);
    err << "memory_diagnostics: " << (plan.launch ? "rank " + std::to_string(plan.launch->rank) + ": " : std::string())
        << "run failed: " << msg << "\n";
  }
  if (status == RunStatus::kInterrupted) {
    rec.add_event(EventKind::kInterrupted, std::string("stopped by ") + signal_name(g_signal.load()));
  }
  return status;
}

void print_outcome(const Report& report, const std::string& output, bool talk, std::ostream& out,
                   std::ostream& err) {
  if (talk) {
    for (const Event& ev : report.events) {
      if (ev.kind == EventKind::kOom) {
        out << "out of memory in phase " << (ev.phase ? to_string(*ev.phase) : "?")
            << (ev.step ? " of step " + std::to_string(*ev.step) : "") << ": " << ev.message << "\n";
      }
    }
    out << "wrote " << output << " (status " << to_string(report.status) << ")\n";
  } else if (report.status == RunStatus::kOom) {
    err << "memory_diagnostics: out of memory; report written to " << output << "\n";
  }
}

// --memory-snapshot and --oom-snapshot, after the run: each file written is
// named in the report (a note), so the report leads to its snapshot.
// Returns false when a snapshot asked for could not be written.
bool write_snapshots(const HarnessOptions& opts, Report& report, bool talk, std::ostream& out, std::ostream& err) {
  if (opts.memory_snapshot.empty() && opts.oom_snapshot.empty()) return true;
  bool ok = true;
  auto write = [&](const std::string& flag, const std::string& path, const std::string& pickle, const char* what) {
    try {
      write_file_atomically(path, pickle);
      report.events.push_back(make_event(EventKind::kNote, std::nullopt, std::nullopt,
                                    std::string(what) + " written to " + path + " (open it in https://pytorch.org/memory_viz)",
                                    std::nullopt));
      if (talk) out << "wrote " << path << " (" << what << ", " << format_mib(to_mib(static_cast<std::int64_t>(pickle.size())))
                    << " MiB)\n";
    } catch (const std::exception& e) {
      err << "memory_diagnostics: " << flag << ": " << e.what() << "\n";
      ok = false;
    }
  };
  if (!opts.oom_snapshot.empty()) {
    if (std::optional<std::string> pickle = take_oom_snapshot()) {
      write("--oom-snapshot", opts.oom_snapshot, *pickle, "allocator snapshot at the out-of-memory error");
    } else if (talk) {
      out << "no out-of-memory error: " << opts.oom_snapshot << " not written\n";
    }
  }
  if (!opts.memory_snapshot.empty()) {
    try {
      write("--memory-snapshot", opts.memory_snapshot, memory_snapshot_pickle(), "allocator history of the run");
    } catch (const std::exception& e) {
      err << "memory_diagnostics: --memory-snapshot: " << first_line(e.what()) << "\n";
      ok = false;
    }
  }
  stop_memory_history();
  return ok;
}

// A plain run: the live table, then one line saying where the report went.
int run_single(const ResolvedPlan& plan, const HarnessOptions& opts, Session& session, bool talk,
               std::ostream& out, std::ostream& err) {
  const PlannedRun& run = plan.runs.front();
  Recorder rec(*session.probe);
  describe_report(rec.report(), run, plan, opts, *session.probe);
  if (talk) show_progress(rec, run, plan, out);
  Report report = rec.finish(execute(run, plan, opts, session, rec, err));
  const bool snapshots_ok = write_snapshots(opts, report, talk, out, err);
  try {
    write_report(run.output, report);
  } catch (const std::exception& e) {
    err << "memory_diagnostics: --output: " << e.what() << "\n";
    return to_int(ExitCode::kFailed);
  }
  print_outcome(report, run.output, talk, out, err);
  if (!snapshots_ok && report.status == RunStatus::kComplete) return to_int(ExitCode::kFailed);
  return to_int(exit_code_for(report.status));
}

// Every configuration in this process, one after another, each starting
// from what a fresh process holds after its warm-up.
int run_sweep(const ResolvedPlan& plan, const HarnessOptions& opts, Session& session, bool talk,
              std::ostream& out, std::ostream& err) {
  std::vector<detail::SweepRow> rows;
  std::vector<RunStatus> statuses;
  for (std::size_t i = 0; i < plan.runs.size(); ++i) {
    const PlannedRun& run = plan.runs[i];
    if (i > 0) session.probe->reset_between_runs();
    const auto t0 = std::chrono::steady_clock::now();
    Report report = detail::run_configuration(run, plan, opts, session, err);
    try {
      write_report(run.output, report);
    } catch (const std::exception& e) {
      err << "memory_diagnostics: --output: " << e.what() << "\n";
      report.status = RunStatus::kFailed;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rows.push_back(detail::sweep_row(run, plan.varying, report, seconds));
    statuses.push_back(report.status);
    if (talk) detail::print_progress_line(rows.back(), i + 1, plan.runs.size(), err);
    if (report.status == RunStatus::kInterrupted) break;
    // A rank that did not complete leaves its peers' collectives hanging:
    // every rank stops, as a single run would.
    if (plan.launch && report.status != RunStatus::kComplete) break;
  }
  if (talk) detail::print_summary(rows, plan.runs.size(), out);
  return to_int(sweep_exit_code(statuses));
}

}  // namespace

namespace detail {

Report run_configuration(const PlannedRun& run, const ResolvedPlan& plan, const HarnessOptions& opts,
                         Session& session, std::ostream& err) {
  Report report;
  {
    Recorder rec(*session.probe);
    describe_report(rec.report(), run, plan, opts, *session.probe);
    report = rec.finish(execute(run, plan, opts, session, rec, err));
  }
  if (!session.warmup_mib) {
    for (const Event& e : report.events) {
      if (e.kind == EventKind::kWarmup) session.warmup_mib = e.mib;
    }
  }
  return report;
}

}  // namespace detail

int run_harness(const HarnessOptions& opts, std::ostream& out, std::ostream& err) {
  ResolvedPlan plan;
  try {
    plan = detail::resolve_plan(opts);
  } catch (const UsageError& u) {
    err << "memory_diagnostics: " << u.what() << "\n";
    return to_int(ExitCode::kUsage);
  }
  const bool talk = !opts.quiet && (!plan.launch || plan.launch->rank == 0);
  if (opts.isolate) return detail::run_isolated(plan, opts, talk, out, err);

  Session session;
  try {
    session.probe = make_probe(plan, opts);
  } catch (const std::exception& e) {
    err << "memory_diagnostics: --device: cannot use " << plan.device.str() << ": " << first_line(e.what()) << "\n";
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
      err << "memory_diagnostics: --memory-snapshot: cannot record: " << first_line(e.what()) << "\n";
      return to_int(ExitCode::kFailed);
    }
  }
  g_interrupt.store(false);
  g_signal.store(0);
  auto previous_int = std::signal(SIGINT, on_stop_signal);
  auto previous_term = std::signal(SIGTERM, on_stop_signal);
  auto previous_hup = std::signal(SIGHUP, on_stop_signal);
  const int code = opts.find_max_batch        ? detail::run_max_batch_search(plan, opts, session, talk, out, err)
                   : plan.runs.size() == 1 ? run_single(plan, opts, session, talk, out, err)
                                           : run_sweep(plan, opts, session, talk, out, err);
  std::signal(SIGINT, previous_int);
  std::signal(SIGTERM, previous_term);
  std::signal(SIGHUP, previous_hup);
  return code;
}

}  // namespace memdiag
