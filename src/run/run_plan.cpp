#include "memdiag/run_plan.hpp"
#include "option_values.hpp"

#include "memdiag/atomic_file.hpp"
#include "memdiag/errors.hpp"
#include "memdiag/limits.hpp"
#include "memdiag/output_guard.hpp"
#include "memdiag/report_reader.hpp"
#include "memdiag/run_identity.hpp"
#include "memdiag/tensor_parallel_refusal.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <sys/stat.h>
#include <map>

namespace memdiag {
namespace fs = std::filesystem;

namespace {

// What the remedies can do with this model, as the workload builds it
// (src/torch/model.cpp, transformer.cpp): checkpointing splits the MLP's
// 2 * depth + 1 Linear and activation modules, by default into the square
// root of the depth (rounded) segments; a transformer's embedding, blocks
// and head, each block its own segment, as training frameworks do (only
// each block's input is kept, and the block recomputed in backward).
RemedyContext remedy_context(const ModelSpec& m, int batch) {
  RemedyContext c;
  const int blocks = m.kind == ModelKind::kTransformer ? m.layers : m.depth;
  c.checkpoint_modules = m.kind == ModelKind::kTransformer ? m.layers + 2 : 2 * m.depth + 1;
  c.checkpoint_default = std::max(1, static_cast<int>(std::lround(std::sqrt(static_cast<double>(blocks)))));
  if (m.kind == ModelKind::kTransformer) c.checkpoint_default = c.checkpoint_modules;
  c.batch = batch;
  c.math_attention = m.kind == ModelKind::kTransformer && m.attention == AttentionKernel::kMath;
  c.transformer = m.kind == ModelKind::kTransformer;
  return c;
}

// Each case is read once however many runs name it: a plan of 40,000 runs
// of one case read its file 40,000 times (4 s before the first run).
using CaseCache = std::map<std::string, CaseSpec>;

PlannedRun resolve_request(const RunRequest& req, const HarnessOptions& opts, CaseCache& cases) {
  PlannedRun run;
  run.case_arg = req.case_arg;
  auto cached = cases.find(req.case_arg);
  if (cached == cases.end()) {
    try {
      cached = cases.emplace(req.case_arg, resolve_case(req.case_arg, opts.case_dirs)).first;
    } catch (const InputError& e) {
      throw UsageError(std::string("--case: ") + e.what());
    }
  }
  run.spec = cached->second;
  run.preset = req.preset.value_or(run.spec.default_preset);
  const PresetSpec& p = run.spec.preset(run.preset);
  run.batch = req.batch_size_per_device.value_or(p.batch_size);
  run.steps = req.steps.value_or(p.steps);
  if (p.model.kind == ModelKind::kTransformer) {
    run.sequence_length = req.sequence_length.value_or(p.model.sequence_length);
  } else if (req.sequence_length) {
    throw UsageError("--sequence-length: " + run.spec.name + " is an MLP, which has no sequence (a transformer case has)");
  }
  RemedyContext context = remedy_context(p.model, static_cast<int>(run.spec.min_batch_samples(run.batch)));
  context.adam_state = run.spec.optimizer.type != OptimizerType::kSgd;
  run.remedies = resolve_remedies(req.remedies, context, run.spec.name);
  run.label = RunLabel{req.name, run.spec.name, run.preset, run.batch, run.steps, remedies_label(run.remedies),
                       run.sequence_length};
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

// Whether the run's report path is one memdiag made (a default name,
// --output-dir, a template with placeholders, a plan's {name}) rather than
// one file the user named: a made name that meets a report of another
// configuration is a collision, a named file is the user's choice.
bool made_name(const HarnessOptions& opts) {
  return opts.output.empty() || opts.output.find('{') != std::string::npos;
}

// The files this invocation reads: no report may replace one of them.
InputFiles inputs_of(const CaseCache& cases, const HarnessOptions& opts) {
  InputFiles in;
  if (!opts.plan_file.empty()) in.add(opts.plan_file, "the plan file");
  for (const auto& [arg, spec] : cases) in.add(spec.source, "the case file");
  return in;
}

// An existing report at a made name: replaced when it is of the same
// configuration (a run repeated), refused when of another, unless
// --overwrite says so.
void check_existing_report(const PlannedRun& run, const ResolvedPlan& plan, const HarnessOptions& opts) {
  if (opts.overwrite || !made_name(opts)) return;
  struct stat st {};
  if (::stat(run.output.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) return;
  const ReadResult existing = read_report_file(run.output);
  if (!existing.report) return;  // check_replaces_only_a_report said why already
  CaseInfo c;
  c.name = run.spec.name;
  const RunIdentity planned = identity_of(c, config_of(run, plan, opts), Producer{kProducerDiagnostics, ""});
  const RunIdentity there = identity_of(*existing.report);
  if (same(projection::kBaselineMatch, planned, there)) return;
  throw UsageError("--output: " + run.output + " holds a report of another configuration (" +
                   describe(projection::kBaselineMatch, there) + "); this run is " +
                   describe(projection::kBaselineMatch, planned) +
                   ". Use another --output-dir, or --overwrite to replace it");
}

// Two runs writing one file would lose a report silently: refused before
// anything runs, naming both. So is a report path that is an input, a
// stream's file, read-only, not a report, or a report of another run.
// Without the device (the front, where it cannot tell), a report already
// there is not compared with the run: the device is part of its
// configuration.
void check_outputs(const ResolvedPlan& plan, const Varying& v, const InputFiles& inputs, const HarnessOptions& opts,
                   bool with_device) {
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
    if (const std::string why = check_output(run.output, inputs); !why.empty()) {
      throw UsageError("--output: " + run.output + ": " + why);
    }
    if (const std::string why = check_replaces_only_a_report(run.output); !why.empty()) {
      throw UsageError("--output: " + run.output + ": " + why);
    }
    if (with_device) check_existing_report(run, plan, opts);
    remember_output(run.output);  // what the write may replace: this, and nothing written meanwhile
  }
}

// --find-max-batch searches one configuration's batch in this process. The
// CPU's refusal is the device's, left out without it.
void check_search(const ResolvedPlan& plan, const HarnessOptions& opts, bool with_device) {
  if (!opts.find_max_batch) return;
  const char* why = nullptr;
  if (opts.from_plan) why = "takes a case, not a plan";
  else if (plan.runs.size() != 1) why = "searches one configuration; leave the lists out";
  else if (opts.runs.front().batch_size_per_device) why = "searches the batch; leave out --batch-size-per-device";
  else if (plan.launch) why = "runs in one process, not under a launcher";
  else if (opts.isolate) why = "runs its tries in one process and confirms in fresh ones; leave out --isolate";
  else if (with_device && !plan.device.is_cuda() && !opts.memory_limit_mib) {
    why = "on the CPU needs --memory-limit-mib (the host has no device capacity to search against)";
  }
  if (why) throw UsageError(std::string("--find-max-batch: ") + why);
}

// Snapshots record one CUDA run's allocator history. Their checks start
// with the device: without it, none is made.
void check_snapshot(const char* flag, const std::string& path, const ResolvedPlan& plan, const HarnessOptions& opts) {
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
  for (const PlannedRun& run : plan.runs) {
    if (normal_path(run.output) == normal_path(path)) {
      throw UsageError(std::string(flag) + ": " + path + " is the report's own file; name another");
    }
  }
}

void check_snapshots(const ResolvedPlan& plan, const HarnessOptions& opts, bool with_device) {
  if (!with_device) return;
  for (const auto& [flag, path] : {std::pair<const char*, const std::string&>{"--memory-snapshot", opts.memory_snapshot},
                                   {"--oom-snapshot", opts.oom_snapshot}}) {
    if (!path.empty()) check_snapshot(flag, path, plan, opts);
  }
  if (!opts.memory_snapshot.empty() && opts.memory_snapshot == opts.oom_snapshot) {
    throw UsageError("--oom-snapshot: the same file as --memory-snapshot");
  }
}

}  // namespace

bool needs_own_process(const PlannedRun& run, const ResolvedPlan& plan) {
  return plan.runs.size() > 1 && plan.device.is_cuda() && has_process_scope(run.remedies);
}

RunConfig config_of(const PlannedRun& run, const ResolvedPlan& plan, const HarnessOptions& opts) {
  RunConfig c;
  c.batch_size_per_device = run.batch;
  c.preset = run.preset;
  c.steps = run.steps;
  if (run.sequence_length > 0) c.sequence_length = run.sequence_length;
  c.device = plan.device.str();
  c.seed = opts.seed;
  c.memory_limit_mib = opts.memory_limit_mib;
  c.remedies = run.remedies;
  // What the run will run under: the process's settings (the environment's)
  // with the run's own laid on them; the report records the allocator's
  // reading of it (src/torch/configuration_run.cpp).
  if (plan.device.is_cuda()) {
    c.allocator_settings = merge_allocator_settings(plan.process_allocator_settings, allocator_settings_of(run.remedies));
  }
  if (plan.launch) {
    Parallelism& p = c.parallel;
    p.mode = opts.parallel_mode == ParallelMode::kNone ? ParallelMode::kDdp : opts.parallel_mode;
    p.rank = plan.launch->rank;
    p.local_rank = plan.launch->local_rank;
    p.world_size = plan.launch->world_size;
    p.backend = plan.device.is_cuda() ? "nccl" : "gloo";
    p.rank_zero_extra_samples = opts.rank_zero_extra_samples;
    if (definition(p.mode).shards_gradients) {
      p.unit_modules = opts.shard_unit_modules;
      p.prefetch_next = opts.shard_prefetch_next;
    }
  }
  return c;
}

namespace {

bool any_remedy(const ResolvedPlan& plan, RemedyKind kind) {
  for (const PlannedRun& r : plan.runs) {
    if (find_remedy(r.remedies, kind)) return true;
  }
  return false;
}

// Flags that only mean something in a data-parallel job do nothing in one
// process: refused rather than recorded as a variant that was never run.
// And what a sharded mode cannot do.
void check_parallel_flags(const ResolvedPlan& plan, const HarnessOptions& opts) {
  const ParallelModeDefinition& mode = definition(opts.parallel_mode);
  if (!plan.launch && is_sharded(opts.parallel_mode)) {
    throw UsageError((opts.shard_flag.empty() ? std::string(mode.flag) : opts.shard_flag) +
                     ": shards across the ranks of a data-parallel job; start it under a launcher "
                     "(torchrun --nproc-per-node=N --no-python memory_diagnostics ...)");
  }
  if ((opts.shard_unit_modules != 1 || opts.shard_prefetch_next) && !mode.shards_gradients) {
    throw UsageError(std::string(opts.shard_unit_modules != 1 ? "--shard-unit-modules" : "--shard-prefetch") +
                     ": units are what --shard=gradients and --shard=parameters gather and reduce-scatter; "
                     "replicated and optimizer-sharded runs have none");
  }
  if (mode.shards_parameters && any_remedy(plan, RemedyKind::kCheckpoint)) {
    throw UsageError("--shard=parameters: checkpointing recomputes forward inside backward, which would need "
                     "each unit gathered again there; not supported yet (leave out --remedy checkpoint)");
  }
  if (!plan.launch && opts.rank_zero_extra_samples > 0) {
    throw UsageError("--rank-zero-extra-samples: rank 0's extra samples need a data-parallel job; start it under a "
                     "launcher (torchrun)");
  }
}

// What tensor parallelism cannot split, run by run (before the data-parallel
// checks: its own words for a run without a launcher).
void check_tensor_parallel(const ResolvedPlan& plan, const HarnessOptions& opts) {
  if (opts.parallel_mode != ParallelMode::kTensor) return;
  const auto world = plan.launch ? std::optional<int>(plan.launch->world_size) : std::nullopt;
  for (const PlannedRun& r : plan.runs) {
    const auto why = tensor_parallel_refusal(r.spec.name, r.preset, r.spec.preset(r.preset).model, r.remedies, world,
                                             opts.rank_zero_extra_samples);
    if (why) throw UsageError(*why);
  }
}

// Under a launcher each rank stays one process in the process group.
void check_under_launcher(const ResolvedPlan& plan, const HarnessOptions& opts) {
  if (!plan.launch) return;
  if (plan.runs.size() > 1) {
    for (const PlannedRun& r : plan.runs) {
      if (has_process_scope(r.remedies)) {
        throw UsageError("--remedy: " + allocator_settings_of(r.remedies) +
                         " is an allocator setting of the whole process; under a launcher each rank stays one "
                         "process, so run it as a configuration of its own");
      }
    }
  }
  if (opts.isolate) throw UsageError("--isolate: not under a launcher (each rank must stay in the process group)");
}

// Each request against its case file, and what varies among them.
void plan_runs(ResolvedPlan& plan, const HarnessOptions& opts, CaseCache& cases) {
  if (opts.runs.empty()) throw UsageError("--case: no configuration to run");
  std::vector<RunLabel> labels;
  for (const RunRequest& req : opts.runs) {
    plan.runs.push_back(resolve_request(req, opts, cases));
    labels.push_back(plan.runs.back().label);
  }
  plan.varying = varying(labels);
  try {
    plan.launch = launch_from_environment();
  } catch (const UsageError& e) {
    throw UsageError(std::string("launcher environment: ") + e.what());
  }
}

// --output-dir, made once everything else is known to be right, so a
// usage error still leaves nothing behind.
void make_output_dir(const HarnessOptions& opts) {
  if (opts.output_dir.empty()) return;
  std::error_code ec;
  fs::create_directories(opts.output_dir, ec);
  if (ec) throw UsageError("--output-dir: " + opts.output_dir + ": " + ec.message());
}

// The plan; where the machine cannot tell the device, nullopt once every
// check that does not need it is made.
std::optional<ResolvedPlan> resolve(const HarnessOptions& opts, const Machine& machine) {
  detail::check_option_values(opts);
  ResolvedPlan plan;
  CaseCache cases;
  plan_runs(plan, opts, cases);
  check_tensor_parallel(plan, opts);
  check_parallel_flags(plan, opts);
  check_under_launcher(plan, opts);
  const std::optional<Device> device = resolve_device(opts.device, machine);
  if (device) plan.device = *device;
  if (plan.device.is_cuda()) plan.process_allocator_settings = machine.allocator_settings();
  check_search(plan, opts, device.has_value());
  check_snapshots(plan, opts, device.has_value());
  name_outputs(plan, opts);
  if (device) make_output_dir(opts);
  check_outputs(plan, plan.varying, inputs_of(cases, opts), opts, device.has_value());
  if (!device) return std::nullopt;
  // One GPU per local rank, unless a device index was given explicitly.
  if (plan.launch && plan.device.is_cuda() && opts.device.rfind("cuda:", 0) != 0) {
    plan.device = *resolve_device("cuda:" + std::to_string(plan.launch->local_rank), machine);
  }
  return plan;
}

}  // namespace

ResolvedPlan resolve_plan(const HarnessOptions& opts, const Machine& machine) {
  std::optional<ResolvedPlan> plan = resolve(opts, machine);
  if (!plan) throw Error("--device: " + opts.device + ": which device this is cannot be told here");
  return std::move(*plan);
}

bool check_plan(const HarnessOptions& opts, const Machine& machine) { return resolve(opts, machine).has_value(); }

}  // namespace memdiag
