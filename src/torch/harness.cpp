#include "memdiag/harness.hpp"
#include "build_config.hpp"

#include "memdiag/atomic_file.hpp"
#include "memdiag/case_spec.hpp"
#include "memdiag/distributed.hpp"
#include "memdiag/environment.hpp"
#include "memdiag/errors.hpp"
#include "memdiag/format.hpp"
#include "memdiag/probes.hpp"
#include "memdiag/recorder.hpp"
#include "memdiag/report_json.hpp"
#include "memdiag/tracking_allocator.hpp"
#include "memdiag/workload.hpp"

#include <torch/cuda.h>

#include <atomic>
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
extern "C" void on_sigint(int) { g_interrupt.store(true); }

c10::Device resolve_device(const std::string& arg) {
  if (arg == "cpu") return c10::Device(c10::DeviceType::CPU);
  const bool cuda_ok = cuda_probe_compiled() && torch::cuda::is_available();
  if (arg == "auto") {
    return cuda_ok ? c10::Device(c10::DeviceType::CUDA, 0) : c10::Device(c10::DeviceType::CPU);
  }
  if (arg == "cuda" || arg.rfind("cuda:", 0) == 0) {
    if (!cuda_probe_compiled()) throw UsageError("--device: this build has no CUDA support (LibTorch without CUDA)");
    if (!cuda_ok) throw UsageError("--device: '" + arg + "' asked for, but CUDA is not available on this machine");
    int index = 0;
    if (arg.size() > 5) {
      const std::string digits = arg.substr(5);
      if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 4) {
        throw UsageError("--device: '" + arg + "' is not cuda:K with K a device index");
      }
      index = std::stoi(digits);
    }
    const int count = static_cast<int>(torch::cuda::device_count());
    if (index >= count) {
      throw UsageError("--device: cuda:" + std::to_string(index) + " does not exist (this machine has " +
                       std::to_string(count) + " CUDA device" + (count == 1 ? "" : "s") + ")");
    }
    return c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(index));
  }
  throw UsageError("--device: '" + arg + "' is not auto, cpu, cuda or cuda:K");
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

}  // namespace

std::string output_for_rank(const std::string& output, int rank, int world_size) {
  const std::string token = "{rank}";
  std::string out = output;
  if (const auto at = out.find(token); at != std::string::npos) {
    for (auto pos = at; pos != std::string::npos; pos = out.find(token)) out.replace(pos, token.size(), std::to_string(rank));
    return out;
  }
  if (world_size <= 1) return out;
  const fs::path p(out);
  const std::string ext = p.extension().string();
  return (p.parent_path() / (p.stem().string() + "-rank" + std::to_string(rank) + ext)).string();
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

// Everything the flags and the environment decide, checked before anything
// runs or is written.
struct ResolvedRun {
  CaseSpec spec;
  std::string preset;
  int batch = 0;
  int steps = 0;
  std::string output;
  c10::Device device = c10::Device(c10::DeviceType::CPU);
  std::optional<LaunchInfo> launch;
};

// Throws UsageError naming the flag at fault.
ResolvedRun resolve_run(const HarnessOptions& opts) {
  ResolvedRun run;
  try {
    run.spec = resolve_case(opts.case_arg, opts.case_dirs);
  } catch (const InputError& e) {
    throw UsageError(std::string("--case: ") + e.what());
  }
  const CaseSpec& spec = run.spec;
  run.preset = opts.preset.empty() ? spec.default_preset : opts.preset;
  const PresetSpec& p = spec.preset(run.preset);
  run.batch = opts.batch_size.value_or(p.batch_size);
  run.steps = opts.steps.value_or(p.steps);
  if (run.batch < 1) throw UsageError("--batch-size-per-device: must be at least 1, got " + std::to_string(run.batch));
  if (run.steps < 1) throw UsageError("--steps: must be at least 1, got " + std::to_string(run.steps));
  if (opts.memory_limit_mib && !(*opts.memory_limit_mib > 0)) {
    throw UsageError("--memory-limit-mib: must be greater than 0");
  }
  if (opts.rank_zero_extra_samples < 0) throw UsageError("--rank-zero-extra-samples: must be 0 or more");
  if (!(opts.dist_timeout_s > 0)) throw UsageError("--dist-timeout-s: must be greater than 0");
  try {
    run.launch = launch_from_environment();
  } catch (const UsageError& e) {
    throw UsageError(std::string("launcher environment: ") + e.what());
  }
  run.output = opts.output.empty() ? spec.name + ".json" : opts.output;
  if (run.launch) run.output = output_for_rank(run.output, run.launch->rank, run.launch->world_size);
  if (const std::string why = check_writable(run.output); !why.empty()) {
    throw UsageError("--output: " + run.output + ": " + why);
  }
  run.device = resolve_device(opts.device);
  // One GPU per local rank, unless a device index was given explicitly.
  if (run.launch && run.device.is_cuda() && opts.device.rfind("cuda:", 0) != 0) {
    run.device = resolve_device("cuda:" + std::to_string(run.launch->local_rank));
  }
  return run;
}

// The report's description of the run: case, configuration, model, machine.
void describe_run(Report& r, const ResolvedRun& run, const HarnessOptions& opts, const MemoryProbe& probe,
                  Environment environment) {
  r.case_info.name = run.spec.name;
  r.case_info.description = run.spec.description;
  r.case_info.source = run.spec.source;
  r.case_info.builtin = run.spec.builtin;
  for (const auto& kv : run.spec.presets) r.case_info.presets.push_back(kv.first);
  r.case_info.detail_json = resolved_case_detail(run.spec, run.preset, probe.name());
  r.config.batch_size_per_device = run.batch;
  r.config.preset = run.preset;
  r.config.steps = run.steps;
  r.config.device = run.device.str();
  r.config.seed = opts.seed;
  r.config.memory_limit_mib = opts.memory_limit_mib;
  r.config.rank_zero_extra_samples = opts.rank_zero_extra_samples;
  r.config.shard_optimizer_state = opts.shard_optimizer_state;
  if (run.launch) {
    r.config.rank = run.launch->rank;
    r.config.local_rank = run.launch->local_rank;
    r.config.world_size = run.launch->world_size;
    r.config.backend = run.device.is_cuda() ? "nccl" : "gloo";
  }
  r.environment = std::move(environment);
}

}  // namespace

namespace {

// The probe for the run's device, with the memory limit applied. On the CPU
// this installs the tracking allocator, which must happen before the first
// CPU tensor.
std::unique_ptr<MemoryProbe> make_probe(const ResolvedRun& run, const HarnessOptions& opts) {
  if (run.device.is_cuda()) {
    auto probe = make_cuda_probe(run.device.index());
    if (opts.memory_limit_mib) cuda_set_memory_limit(run.device.index(), *opts.memory_limit_mib);
    return probe;
  }
  auto probe = make_cpu_probe();
  if (opts.memory_limit_mib) {
    CpuTrackingAllocator::install().set_limit(static_cast<std::int64_t>(*opts.memory_limit_mib * kMiB));
  }
  return probe;
}

// The live table on stdout: a heading, then a row per sample as it is taken.
void show_progress(Recorder& rec, const ResolvedRun& run, std::ostream& out) {
  const Report& r = rec.report();
  out << "memdiag " << MEMDIAG_VERSION << ": case " << run.spec.name << " (preset " << run.preset << ", batch "
      << run.batch << ", " << run.steps << " step" << (run.steps == 1 ? "" : "s") << ") on " << run.device.str()
      << " [" << r.environment.device_name << "]\n";
  print_header(out);
  rec.set_listener([&out, &r](const Sample& s) {
    print_row(out, s);
    if (s.phase == Phase::kModelReady) {
      out << "       model: " << r.model.parameters << " parameters (" << format_mib(to_mib(r.model.parameter_bytes))
          << " MiB)\n";
    }
  });
}

WorkloadOptions workload_options(const ResolvedRun& run, const HarnessOptions& opts) {
  WorkloadOptions w;
  w.spec = run.spec;
  w.preset = run.preset;
  w.batch_size = run.batch;
  w.steps = run.steps;
  w.device = run.device;
  w.seed = opts.seed;
  w.warm_up_kernels = opts.warm_up_kernels;
  w.rank_zero_extra_samples = opts.rank_zero_extra_samples;
  w.shard_optimizer_state = opts.shard_optimizer_state;
  return w;
}

// Joins the process group when launched as a rank, runs the workload with
// SIGINT caught between phases, and records how it ended. Any failure
// becomes an error event and status failed, so a report is always written.
RunStatus execute(const ResolvedRun& run, const HarnessOptions& opts, MemoryProbe& probe, Recorder& rec,
                  std::ostream& err) {
  g_interrupt.store(false);
  auto previous = std::signal(SIGINT, on_sigint);
  WorkloadOptions w = workload_options(run, opts);
  std::unique_ptr<Communicator> comm;
  RunStatus status = RunStatus::kFailed;
  try {
    if (run.launch) {
      // Joined after the recorder exists: a peer that never comes still
      // leaves this rank a report (status failed) once the timeout passes.
      const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(opts.dist_timeout_s * 1000));
      comm = join_process_group(*run.launch, run.device, timeout);
      w.comm = comm.get();
      rec.restart_phase();
    }
    status = run_workload(w, probe, rec, &g_interrupt);
  } catch (const std::exception& e) {
    const std::string msg = first_line(e.what());
    rec.add_event(EventKind::kError, msg);
    err << "memory_diagnostics: " << (run.launch ? "rank " + std::to_string(run.launch->rank) + ": " : std::string())
        << "run failed: " << msg << "\n";
  }
  std::signal(SIGINT, previous);
  if (status == RunStatus::kInterrupted) rec.add_event(EventKind::kInterrupted, "stopped by SIGINT");
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

}  // namespace

int run_harness(const HarnessOptions& opts, std::ostream& out, std::ostream& err) {
  ResolvedRun run;
  try {
    run = resolve_run(opts);
  } catch (const UsageError& u) {
    err << "memory_diagnostics: " << u.what() << "\n";
    return to_int(ExitCode::kUsage);
  }

  std::unique_ptr<MemoryProbe> probe;
  Environment environment;
  try {
    probe = make_probe(run, opts);
    environment = describe_environment(run.device);
  } catch (const std::exception& e) {
    err << "memory_diagnostics: --device: cannot use " << run.device.str() << ": " << first_line(e.what()) << "\n";
    return to_int(ExitCode::kFailed);
  }

  Recorder rec(*probe);
  describe_run(rec.report(), run, opts, *probe, environment);
  const bool talk = !opts.quiet && (!run.launch || run.launch->rank == 0);
  if (talk) show_progress(rec, run, out);

  const Report report = rec.finish(execute(run, opts, *probe, rec, err));
  try {
    write_report(run.output, report);
  } catch (const std::exception& e) {
    err << "memory_diagnostics: --output: " << e.what() << "\n";
    return to_int(ExitCode::kFailed);
  }
  print_outcome(report, run.output, talk, out, err);
  return to_int(exit_code_for(report.status));
}

}  // namespace memdiag
