#include "run_plan.hpp"

#include "memdiag/atomic_file.hpp"
#include "memdiag/errors.hpp"
#include "memdiag/limits.hpp"
#include "memdiag/probes.hpp"
#include "model.hpp"

#include <torch/cuda.h>

#include <filesystem>
#include <map>

namespace memdiag::detail {
namespace fs = std::filesystem;

namespace {

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

PlannedRun resolve_request(const RunRequest& req, const HarnessOptions& opts) {
  PlannedRun run;
  run.case_arg = req.case_arg;
  try {
    run.spec = resolve_case(req.case_arg, opts.case_dirs);
  } catch (const InputError& e) {
    throw UsageError(std::string("--case: ") + e.what());
  }
  run.preset = req.preset.value_or(run.spec.default_preset);
  const PresetSpec& p = run.spec.preset(run.preset);
  run.batch = req.batch_size_per_device.value_or(p.batch_size);
  run.steps = req.steps.value_or(p.steps);
  run.remedies = resolve_remedies(req.remedies, remedy_context(p.model, run.batch), run.spec.name);
  run.label = RunLabel{req.name, run.spec.name, run.preset, run.batch, run.steps, remedies_label(run.remedies)};
  return run;
}

// Each run's report path: --output's template, or --output-dir's default
// names, then the rank.
void name_outputs(ResolvedPlan& plan, const HarnessOptions& opts) {
  for (PlannedRun& run : plan.runs) {
    std::string path;
    if (!opts.output.empty()) {
      path = expand_output(opts.output, run.label);
    } else {
      path = opts.find_max_batch ? max_batch_output_name(run.label) : default_output_name(run.label, plan.varying);
      if (!opts.output_dir.empty()) path = (fs::path(opts.output_dir) / path).string();
    }
    // Outside a launcher this process is rank 0 of 1: "{rank}" means 0
    // rather than a literal "{rank}" in the file name.
    path = plan.launch ? output_for_rank(path, plan.launch->rank, plan.launch->world_size) : output_for_rank(path, 0, 1);
    run.output = path;
  }
}

// Two runs writing one file would lose a report silently: refused before
// anything runs, naming both.
void check_outputs(const ResolvedPlan& plan, const Varying& v) {
  std::map<std::string, std::size_t> seen;
  for (std::size_t i = 0; i < plan.runs.size(); ++i) {
    const PlannedRun& run = plan.runs[i];
    std::error_code ec;
    const std::string key = fs::weakly_canonical(run.output, ec).string();
    auto [it, fresh] = seen.emplace(ec ? run.output : key, i);
    if (!fresh) {
      throw UsageError("--output: runs " + std::to_string(it->second + 1) + " (" +
                       describe_run(plan.runs[it->second].label, v) + ") and " + std::to_string(i + 1) + " (" +
                       describe_run(run.label, v) + ") would both write " + run.output +
                       "; add placeholders such as {batch} or use --output-dir");
    }
    if (const std::string why = check_writable(run.output); !why.empty()) {
      throw UsageError("--output: " + run.output + ": " + why);
    }
  }
}

// --find-max-batch searches one configuration's batch in this process;
// snapshots record one CUDA run's allocator history.
void check_search_and_snapshots(const ResolvedPlan& plan, const HarnessOptions& opts) {
  if (opts.find_max_batch) {
    const char* why = nullptr;
    if (opts.from_plan) why = "takes a case, not a plan";
    else if (plan.runs.size() != 1) why = "searches one configuration; leave the lists out";
    else if (opts.runs.front().batch_size_per_device) why = "searches the batch; leave out --batch-size-per-device";
    else if (plan.launch) why = "runs in one process, not under a launcher";
    else if (opts.isolate) why = "runs its tries in one process and confirms in fresh ones; leave out --isolate";
    else if (!plan.device.is_cuda() && !opts.memory_limit_mib) {
      why = "on the CPU needs --memory-limit-mib (the host has no device capacity to search against)";
    }
    if (why) throw UsageError(std::string("--find-max-batch: ") + why);
  }
  for (const auto& [flag, path] : {std::pair<const char*, const std::string&>{"--memory-snapshot", opts.memory_snapshot},
                                   {"--oom-snapshot", opts.oom_snapshot}}) {
    if (path.empty()) continue;
    if (!plan.device.is_cuda()) {
      throw UsageError(std::string(flag) + ": needs a CUDA device (memory_viz reads the CUDA caching allocator's "
                                           "history); this run is on " + plan.device.str());
    }
    if (plan.runs.size() != 1 || opts.find_max_batch || plan.launch) {
      throw UsageError(std::string(flag) + ": records one run of one process; leave out the lists, "
                                           "--find-max-batch and the launcher");
    }
    if (const std::string why = check_writable(path); !why.empty()) {
      throw UsageError(std::string(flag) + ": " + path + ": " + why);
    }
  }
  if (!opts.memory_snapshot.empty() && opts.memory_snapshot == opts.oom_snapshot) {
    throw UsageError("--oom-snapshot: the same file as --memory-snapshot");
  }
}

}  // namespace

ResolvedPlan resolve_plan(const HarnessOptions& opts) {
  // The report must read back what was run: an infinite limit or one past
  // any device is no limit at all, and the reader refuses such a figure.
  if (opts.memory_limit_mib && !(*opts.memory_limit_mib > 0 && *opts.memory_limit_mib <= limits::kAbsurdMiB)) {
    throw UsageError("--memory-limit-mib: must be greater than 0 and at most " +
                     std::to_string(static_cast<long long>(limits::kAbsurdMiB)) + " (1 PiB); leave it out for no limit");
  }
  if (opts.rank_zero_extra_samples < 0) throw UsageError("--rank-zero-extra-samples: must be 0 or more");
  if (!(opts.dist_timeout_s > 0)) throw UsageError("--dist-timeout-s: must be greater than 0");
  if (opts.runs.empty()) throw UsageError("--case: no configuration to run");
  ResolvedPlan plan;
  for (const RunRequest& req : opts.runs) plan.runs.push_back(resolve_request(req, opts));
  std::vector<RunLabel> labels;
  for (const PlannedRun& r : plan.runs) labels.push_back(r.label);
  plan.varying = varying(labels);
  try {
    plan.launch = launch_from_environment();
  } catch (const UsageError& e) {
    throw UsageError(std::string("launcher environment: ") + e.what());
  }
  // Flags that only mean something in a data-parallel job do nothing in one
  // process: refused rather than recorded as a variant that was never run.
  if (!plan.launch && is_sharded(opts.parallel_mode)) {
    throw UsageError(std::string(definition(opts.parallel_mode).flag) +
                     ": shards across the ranks of a data-parallel job; start it under a launcher "
                     "(torchrun --nproc-per-node=N --no-python memory_diagnostics ...)");
  }
  if (!plan.launch && opts.rank_zero_extra_samples > 0) {
    throw UsageError("--rank-zero-extra-samples: rank 0's extra samples need a data-parallel job; start it under a "
                     "launcher (torchrun)");
  }
  if (plan.launch && opts.isolate) {
    throw UsageError("--isolate: not under a launcher (each rank must stay in the process group)");
  }
  plan.device = resolve_device(opts.device);
  check_search_and_snapshots(plan, opts);
  name_outputs(plan, opts);
  if (!opts.output_dir.empty()) {
    // Made once everything else is known to be right, so a usage error
    // still leaves nothing behind.
    std::error_code ec;
    fs::create_directories(opts.output_dir, ec);
    if (ec) throw UsageError("--output-dir: " + opts.output_dir + ": " + ec.message());
  }
  check_outputs(plan, plan.varying);
  // One GPU per local rank, unless a device index was given explicitly.
  if (plan.launch && plan.device.is_cuda() && opts.device.rfind("cuda:", 0) != 0) {
    plan.device = resolve_device("cuda:" + std::to_string(plan.launch->local_rank));
  }
  return plan;
}

}  // namespace memdiag::detail
