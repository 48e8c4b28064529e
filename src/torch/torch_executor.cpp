// The torch executor: the session a plan's runs share (the probe with the
// memory limit, the allocator's settings, the CPU's threads under a
// launcher, snapshot recording) and what the run layer reads of it.
#include "memdiag/torch_executor.hpp"

#include "configuration_run.hpp"
#include "session.hpp"
#include "torch_device.hpp"

#include "memdiag/allocator_settings.hpp"
#include "memdiag/atomic_file.hpp"
#include "memdiag/exit_code.hpp"
#include "memdiag/format.hpp"
#include "memdiag/memory_snapshot.hpp"
#include "memdiag/probes.hpp"
#include "memdiag/tracking_allocator.hpp"

#include <torch/cuda.h>

namespace memdiag {

namespace {

// The probe for the run's device, with the memory limit applied. On the CPU
// this installs the tracking allocator, which must happen before the first
// CPU tensor.
std::unique_ptr<MemoryProbe> make_probe(const ResolvedPlan& plan, const HarnessOptions& opts, detail::Session& session) {
  if (plan.device.is_cuda()) {
    auto probe = make_cuda_probe(plan.device.index);
    if (opts.memory_limit_mib) session.limit_bytes = cuda_set_memory_limit(plan.device.index, *opts.memory_limit_mib);
    return probe;
  }
  auto probe = make_cpu_probe();
  if (opts.memory_limit_mib) {
    session.limit_bytes = static_cast<std::int64_t>(*opts.memory_limit_mib * kMiB);
    CpuTrackingAllocator::install().set_limit(session.limit_bytes);
  }
  return probe;
}

}  // namespace

TorchExecutor::TorchExecutor() : session_(std::make_unique<detail::Session>()) {}
TorchExecutor::~TorchExecutor() = default;

bool TorchExecutor::cuda_compiled() const { return cuda_probe_compiled(); }

std::optional<int> TorchExecutor::cuda_device_count() const {
  return cuda_probe_compiled() ? static_cast<int>(torch::cuda::device_count()) : 0;
}

std::string TorchExecutor::allocator_settings() const { return current_allocator_settings(); }

std::optional<int> TorchExecutor::open_session(const ResolvedPlan& plan, const HarnessOptions& opts, RunObserver& obs) {
  detail::Session& session = *session_;
  device_index_ = plan.device.index;
  // Before anything computes: the pool's size is fixed at its first use.
  if (plan.launch && !plan.device.is_cuda()) session.threads_note = share_cpu_threads(*plan.launch);
  // A run alone in this process sets its allocator settings here, before
  // the allocator makes a segment; a sweep's runs with settings run in
  // children of their own (needs_own_process).
  if (plan.device.is_cuda() && (plan.runs.size() == 1 || opts.find_max_batch)) {
    const std::string settings = allocator_settings_of(plan.runs.front().remedies);
    try {
      apply_allocator_settings(settings);
    } catch (const std::exception& e) {
      obs.problem("--remedy: " + settings + ": " + detail::first_line(e.what()));
      return to_int(ExitCode::kFailed);
    }
  }
  // The model built on the host while CUDA starts, before the probe that starts it.
  detail::build_first_model_ahead(plan, opts, session);
  try {
    session.probe = make_probe(plan, opts, session);
  } catch (const std::exception& e) {
    obs.problem("--device: cannot use " + plan.device.str() + ": " + detail::first_line(e.what()));
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
      obs.problem("--memory-snapshot: cannot record: " + detail::first_line(e.what()));
      return to_int(ExitCode::kFailed);
    }
  }
  return std::nullopt;
}

Report TorchExecutor::run(const PlannedRun& run, const ResolvedPlan& plan, const HarnessOptions& opts, RunObserver& obs,
                          bool live) {
  return detail::run_configuration(run, plan, opts, *session_, obs, live);
}

// --memory-snapshot and --oom-snapshot, after the run: each file written is
// named in the report (a note), so the report leads to its snapshot.
bool TorchExecutor::write_snapshots(const HarnessOptions& opts, Report& report, RunObserver& obs) {
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
      obs.problem(flag + ": " + detail::first_line(e.what()));
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
      obs.problem("--memory-snapshot: " + detail::first_line(e.what()));
      ok = false;
    }
  }
  stop_memory_history();
  return ok;
}

void TorchExecutor::reset_between_runs() { session_->probe->reset_between_runs(); }

ProbeReading TorchExecutor::read_probe() { return session_->probe->read(); }

double TorchExecutor::device_total_mib() { return cuda_device_info(device_index_).total_mib; }

std::optional<std::int64_t> TorchExecutor::limit_bytes() const { return session_->limit_bytes; }

void TorchExecutor::share_model_builds(bool on) {
  // A search's build ahead (open_session) is its first build.
  if (on && session_->model_cache != nullptr && session_->model_cache->keep_builds) return;
  session_->model_cache = on ? std::make_unique<ModelCache>() : nullptr;
}

}  // namespace memdiag
