// memory_diagnostics's flags: defined (with --help's words), parsed and
// checked here without LibTorch, by both executables.
#include "diagnostics_flags.hpp"

#include "cli_parse.hpp"
#include "memdiag/case_spec.hpp"
#include "memdiag/errors.hpp"
#include "memdiag/exit_code.hpp"
#include "memdiag/flag_values.hpp"
#include "memdiag/format.hpp"
#include "memdiag/limits.hpp"
#include "memdiag/remedy.hpp"
#include "memdiag/sweep_plan.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iomanip>
#include <limits>
#include <ostream>

namespace {

constexpr const char* kFooter = R"(Phases, recorded in this order (MiB at the end of each phase, peak within it):
  model_ready      model built and moved to the device (parameters)
  optimizer_ready  optimizer built (AdamW's moments do not exist yet)
  then per step:   forward (activations saved for backward), backward (gradients),
                   step (optimizer.step(); lazy optimizer state appears here),
                   cleanup (zero_grad(set_to_none) and the step's tensors dropped)
Fields: allocated_mib = live tensors; reserved_mib = caching-allocator segments
(CUDA); device_used_mib = whole device per cudaMemGetInfo; peak_allocated_mib;
inactive_split_mib = fragmentation; process_device_mib = NVML, this process;
host_resident_mib = this process's RAM; host_pinned_mib = pinned host bytes (CUDA).
On CPU every tensor goes through a tracking allocator; reserved and device are null.

Data and tensor parallel: started by a launcher, it joins a c10d process group
(NCCL on CUDA, one GPU per local rank; Gloo on CPU) and writes one report per rank:
  torchrun --nproc-per-node=2 --no-python build/bin/memory_diagnostics \
      --case beta --output 'beta-{rank}.json' [--shard optimizer|gradients|parameters | --parallel tensor]
Reports of the same configuration in several modes (ddp, zero3, tensor) are
set side by side per rank by compare_memory_reports, each against its formula.

Out of memory: a run that ran out still writes its report (status "oom") with
the allocator's state at the failure; compare_memory_reports explains it.
  memory_diagnostics --case alpha --preset medium --find-max-batch --memory-limit-mib 4096
searches the largest batch that fits and records the search in its report;
--oom-snapshot FILE.pickle (CUDA) keeps the allocator snapshot of the moment.

Exit codes: 0 complete, 1 failed, 2 bad usage, 3 out of memory (report still
written, status "oom"), 130 interrupted by SIGINT, SIGTERM or SIGHUP (report
written, status "interrupted"; a second signal ends the process at once).

Sweeps: --case, --preset, --batch-size-per-device and --steps each take a
comma-separated list; every combination runs, in the order given, in this one
process, each from what a fresh process holds (workspaces freed, the
allocator's cache emptied and its statistics reset between runs; on CUDA a
later run's blocks can still sit at other addresses, a few MiB apart: --isolate
runs each in a child process of its own). A line per run goes to stderr as it
ends, then a summary table; exit 3 if any ran out of memory, 1 if any failed,
130 on Ctrl-C (reports already written stay).

Examples:
  memory_diagnostics --case alpha --batch-size-per-device 1,4,1024 -o 'reports/alpha-b{batch}.json'
  memory_diagnostics --case alpha,beta,gamma --output-dir reports
  memory_diagnostics --plan cases/plans/reference.json --output-dir reports
  compare_memory_reports reports/)";

// The sweep flags as given, before they become a list of runs.
struct SweepFlags {
  std::string cases = "alpha";
  std::string presets;
  std::string batch_sizes;
  std::string steps;
  std::string sequence_lengths;
  std::string plan;
  std::string remedies;
  // Given on the command line (an empty value given is an error, not the default).
  bool presets_given = false;
  bool batch_sizes_given = false;
  bool steps_given = false;
  bool sequence_given = false;
  bool remedies_given = false;
};

// Every flag as given, before it becomes HarnessOptions: numbers as text,
// parsed strictly (no hex, no exponent, no "inf").
struct Flags {
  SweepFlags sweep;
  std::string seed = "0";
  std::string allocator_settings;
  std::string memory_limit, extra_samples, dist_timeout = "60", snapshot_entries = "100000";
  std::vector<std::string> extra_dirs;
  bool no_warmup = false;
  bool shard_optimizer_state = false;
  std::string shard, unit_modules, prefetch;
  std::string parallel;  // --parallel: data (the default) or tensor
};

// The runs the flags ask for: a plan file's, or the product of the lists.
// Throws UsageError (or InputError for the plan file) naming the flag.
std::vector<memdiag::RunRequest> runs_from(const SweepFlags& f) {
  namespace lim = memdiag::limits;
  if (!f.plan.empty()) {
    try {
      return memdiag::read_plan_file(f.plan);
    } catch (const memdiag::InputError& e) {
      throw memdiag::UsageError(std::string("--plan: ") + e.what());
    }
  }
  memdiag::SweepAxes axes;
  axes.cases = memdiag::parse_name_list("--case", f.cases);
  if (f.presets_given) axes.presets = memdiag::parse_name_list("--preset", f.presets);
  if (f.batch_sizes_given) {
    axes.batch_sizes = memdiag::parse_count_list("--batch-size-per-device", f.batch_sizes, 1, lim::kMaxBatch);
  }
  if (f.steps_given) axes.steps = memdiag::parse_count_list("--steps", f.steps, 1, lim::kMaxSteps);
  if (f.sequence_given) {
    axes.sequence_lengths = memdiag::parse_count_list("--sequence-length", f.sequence_lengths, 1, lim::kMaxSequenceLength);
  }
  if (f.remedies_given) axes.remedies = memdiag::parse_remedy_list("--remedy", f.remedies);
  return memdiag::expand_product(axes);
}

// Each value as it is spelt: plain decimals (no sign, exponent, hex, "inf"
// or "nan"), read into their type. Whether a value is in its range is the
// plan's one check (src/run/option_values.cpp), made by the front and the
// runner alike; what only the flags can say (an empty path, flags that
// exclude each other) is said here.
void read_values(const CLI::App& app, const Flags& f, memdiag::HarnessOptions& opts) {
  constexpr double kAny = std::numeric_limits<double>::max();
  constexpr std::int64_t kAnyInt = std::numeric_limits<int>::max();
  constexpr std::int64_t kAnyWide = std::int64_t{1} << 62;
  if (app.get_option("--output")->count() > 0 && opts.output.empty()) {
    throw memdiag::UsageError("--output: empty path (leave the flag out for <case>.json)");
  }
  if (app.get_option("--output-dir")->count() > 0 && opts.output_dir.empty()) {
    throw memdiag::UsageError("--output-dir: empty path");
  }
  if (!opts.output.empty() && !opts.output_dir.empty()) {
    throw memdiag::UsageError("--output-dir: not with --output (one names every report, the other a directory)");
  }
  if (!f.sweep.plan.empty()) {
    for (const char* flag : {"--case", "--preset", "--batch-size-per-device", "--steps", "--sequence-length", "--remedy"}) {
      if (app.get_option(flag)->count() > 0) {
        throw memdiag::UsageError(std::string("--plan: not with ") + flag + " (the plan file names its runs)");
      }
    }
  }
  if (app.get_option("--allocator-settings")->count() > 0) {
    if (f.allocator_settings.empty()) throw memdiag::UsageError("--allocator-settings: empty (leave it out for the defaults)");
    // Checked here; added to each run's remedies once the runs are known.
    (void)memdiag::parse_allocator_settings("--allocator-settings", f.allocator_settings);
  }
  if (f.seed.find(',') != std::string::npos) throw memdiag::UsageError("--seed: one seed, not a list");
  opts.seed = static_cast<std::uint64_t>(memdiag::parse_integer_list("--seed", f.seed, 0, kAnyWide).at(0));
  if (app.get_option("--memory-limit-mib")->count() > 0) {
    opts.memory_limit_mib = memdiag::parse_decimal("--memory-limit-mib", f.memory_limit, 0, kAny);
  }
  if (app.get_option("--rank-zero-extra-samples")->count() > 0) {
    opts.rank_zero_extra_samples =
        static_cast<int>(memdiag::parse_integer_list("--rank-zero-extra-samples", f.extra_samples, 0, kAnyInt).at(0));
  }
  if (!f.shard.empty()) {
    if (f.shard_optimizer_state && f.shard != "optimizer") {
      throw memdiag::UsageError("--shard-optimizer-state: is --shard=optimizer; it cannot go with --shard=" + f.shard);
    }
    opts.shard_flag = "--shard=" + f.shard;
    if (f.shard == "optimizer") {
      opts.parallel_mode = memdiag::ParallelMode::kZero1;
    } else if (f.shard == "gradients") {
      opts.parallel_mode = memdiag::ParallelMode::kZero2;
    } else if (f.shard == "parameters") {
      opts.parallel_mode = memdiag::ParallelMode::kZero3;
    } else {
      throw memdiag::UsageError("--shard: '" + f.shard + "' is not optimizer, gradients or parameters");
    }
  }
  if (!f.parallel.empty() && f.parallel != "data") {
    if (f.parallel != "tensor") throw memdiag::UsageError("--parallel: '" + f.parallel + "' is not data or tensor");
    if (!f.shard.empty() || f.shard_optimizer_state) {
      throw memdiag::UsageError(std::string("--parallel=tensor: not with ") +
                                (f.shard.empty() ? "--shard-optimizer-state" : "--shard") +
                                " (ZeRO shards the state of data-parallel ranks; tensor parallelism splits the "
                                "layers and gives every rank the same batch; they do not combine here)");
    }
    opts.parallel_mode = memdiag::ParallelMode::kTensor;
    opts.shard_flag = "--parallel=tensor";
  }
  if (app.get_option("--shard-unit-modules")->count() > 0) {
    opts.shard_unit_modules =
        static_cast<int>(memdiag::parse_integer_list("--shard-unit-modules", f.unit_modules, 0, kAnyInt).at(0));
  }
  if (!f.prefetch.empty()) {
    if (f.prefetch != "none" && f.prefetch != "next") {
      throw memdiag::UsageError("--shard-prefetch: '" + f.prefetch + "' is not none or next");
    }
    opts.shard_prefetch_next = f.prefetch == "next";
  }
  opts.snapshot_max_entries = static_cast<std::size_t>(
      memdiag::parse_integer_list("--snapshot-max-entries", f.snapshot_entries, 0, kAnyWide).at(0));
  opts.dist_timeout_s = memdiag::parse_decimal("--dist-timeout-s", f.dist_timeout, 0, kAny);
}

// --help: the flags in groups, in people's words, remedies from their
// definitions.
void define_flags(CLI::App& app, Flags& f, memdiag::DiagnosticsOptions& diag) {
  memdiag::HarnessOptions& opts = diag.harness;
  SweepFlags& sweep = f.sweep;
  const char* what = "What to run";
  app.add_option("--case", sweep.cases,
                 "A built-in case (alpha, beta, gamma, delta, epsilon; see --list-cases) or a case file PATH.json; a "
                 "comma-separated list sweeps them (default: alpha)")
      ->type_name("NAME|FILE,...")->group(what);
  app.add_option("--preset", sweep.presets, "The case's model size (small, medium, large), or a list (default: the case's)")
      ->type_name("NAME,...")->group(what);
  app.add_option("--batch-size-per-device", sweep.batch_sizes,
                 "Samples per step on each device, or a list such as 1,4,1024 (default: the preset's)")
      ->type_name("N,...")->group(what);
  app.add_option("--steps", sweep.steps, "Training steps to record, or a list (default: the preset's)")
      ->type_name("N,...")->group(what);
  app.add_option("--sequence-length", sweep.sequence_lengths,
                 "A transformer case's tokens per sample, or a list such as 256,512,1024 (default: the preset's)")
      ->type_name("N,...")->group(what);
  app.add_option("--remedy", sweep.remedies,
                 "A remedy, remedies joined with '+', or a list of sets, none for the baseline, e.g. "
                 "none,checkpoint,accumulate=4+bf16 (the remedies are listed below)")
      ->type_name("SET,...")->group(what);
  app.add_option("--plan", sweep.plan, "A plan file: a list of named runs (cases/plans/reference.json), instead of the "
                                       "flags above; {name} names their reports")
      ->type_name("FILE")->group(what);
  app.add_option("--seed", f.seed, "Seed of weights and data, 0 to 2^53 (default: 0)")->type_name("N")->group(what);
  app.add_option("--cases-dir", f.extra_dirs, "A directory searched first for case names (repeatable)")
      ->type_name("DIR")->group(what);
  app.add_flag("--list-cases", diag.list_cases, "List the cases by name, with their presets, and exit")->group(what);
  // Hidden (an empty group): memdiag/isolate.hpp's kBatchFromStdinFlag.
  app.add_flag("--batch-from-stdin", diag.batch_from_stdin, "")->group("");

  const char* where = "Where and how";
  app.add_option("--device", opts.device, "auto (CUDA when available, else the CPU), cpu, cuda or cuda:K (default: auto)")
      ->type_name("DEVICE")->group(where);
  app.add_option("--memory-limit-mib", f.memory_limit,
                 "Cap the allocator at this many MiB, as a smaller GPU would (the CPU simulates it)")
      ->type_name("MIB")->group(where);
  app.add_option("--allocator-settings", f.allocator_settings,
                 "The CUDA caching allocator's settings for every run, in PYTORCH_ALLOC_CONF's syntax, e.g. "
                 "expandable_segments:True,max_split_size_mb:64 (the same as the remedies expandable-segments, "
                 "max-split=N, gc-threshold=P, roundup-pow2=N); recorded in the report with what the environment set")
      ->type_name("K:V,...")->group(where);
  app.add_flag("--isolate", opts.isolate, "Run each configuration of a sweep in a child process of its own (the same "
                                          "reports, isolated by construction)")
      ->group(where);
  app.add_flag("--no-warmup", f.no_warmup, "Do not make the cuBLAS workspaces before the first sample (step 0 then "
                                          "carries them)")
      ->group(where);

  const char* output = "Reports and output";
  app.add_option("--output,-o", opts.output,
                 std::string("The report file (default: <case>.json; missing directories are made); in a sweep a template with ") +
                     memdiag::output_placeholders())
      ->type_name("FILE")->group(output);
  app.add_option("--output-dir", opts.output_dir,
                 "Write each report into DIR, named from the case and what varies (alpha-batch4.json)")
      ->type_name("DIR")->group(output);
  app.add_flag("--overwrite", opts.overwrite,
               "Replace reports of other configurations where --output-dir or a template names this run's (refused "
               "otherwise; a report of the same configuration is always replaced)")
      ->group(output);
  app.add_flag("--quiet,-q", diag.quiet, "No live table, progress lines or summary (problems are still said)")
      ->group(output);

  const char* capacity = "Out of memory";
  app.add_flag("--find-max-batch", opts.find_max_batch,
               "Search the largest batch that completes the steps within --memory-limit-mib (CUDA: or the device): "
               "one sample, then (under a limit) a traced try whose replay of the allocator names the answer, "
               "checked with the batch above it in fresh processes side by side (started before the search starts "
               "its own, so they have made their model when the answer is known); where they disagree, tries guided "
               "by the capacity model until a gap of one sample, confirmed the same way. Writes that batch's report "
               "with the search in it (default <case>-max-batch.json); exit 3 if one sample does not fit")
      ->group(capacity);
  app.add_option("--memory-snapshot", opts.memory_snapshot,
                 "CUDA: the allocator's history of the run, phases marked, for https://pytorch.org/memory_viz")
      ->type_name("FILE")->group(capacity);
  app.add_option("--oom-snapshot", opts.oom_snapshot, "CUDA: the allocator's snapshot when an allocation is refused")
      ->type_name("FILE")->group(capacity);
  app.add_option("--snapshot-max-entries", f.snapshot_entries,
                 "Allocation events a snapshot keeps, 1 to 10^8, the oldest dropped first, about 136 bytes each "
                 "(default: 100000)")
      ->type_name("N")->group(capacity);
  app.add_flag("--snapshot-cpp-stacks", opts.snapshot_cpp_stacks,
               "Keep the C++ stack of every allocation in snapshots (symbolising them can take minutes)")
      ->group(capacity);
  app.add_flag("--trace-allocations", opts.trace_allocations,
               "Put every request the run makes of the allocator in the report, with the same configuration's at half "
               "the batch (run after it, about half its time more), so compare_memory_reports --budget-mib replays "
               "the allocator, its rounding, cache and fragmentation, to say what fits at other batches and limits")
      ->group(capacity);

  const char* parallel = "Data and tensor parallel (under torchrun or its variables)";
  app.add_option("--shard", f.shard,
                 "What each rank keeps only its shard of: optimizer (ZeRO-1: AdamW's state), gradients (ZeRO-2: "
                 "and the gradients, reduce-scattered after each unit's backward), parameters (ZeRO-3, FSDP: and "
                 "the weights, gathered around each unit's forward and backward); default: everything replicated")
      ->type_name("WHAT")->group(parallel);
  app.add_flag("--shard-optimizer-state", f.shard_optimizer_state, "The same as --shard=optimizer")->group(parallel);
  app.add_option("--parallel", f.parallel,
                 "data (default: each rank a batch of its own, drawn from the run's seed like every rank's, the "
                 "model replicated or sharded as --shard says) or "
                 "tensor (Megatron-LM's MLP split: the Linears in pairs, the first of each split by its output "
                 "features, the second by its input features, partial outputs all-reduced; every rank trains the "
                 "same batch on 1/N of each pair's weights, gradients, optimizer state and activations between "
                 "them; an unpaired output layer stays whole). MLP cases whose hidden width N divides; not with "
                 "--shard, checkpoint, offload-activations or adafactor")
      ->type_name("data|tensor")->group(parallel);
  app.add_option("--shard-unit-modules", f.unit_modules,
                 "--shard gradients|parameters: consecutive modules holding parameters per unit, gathered and "
                 "reduce-scattered together (default: 1, each layer or block its own unit)")
      ->type_name("N")->group(parallel);
  app.add_option("--shard-prefetch", f.prefetch,
                 "--shard gradients|parameters: none, or next to gather the following unit while one runs (two "
                 "units in flight; default: none)")
      ->type_name("none|next")->group(parallel);
  app.add_option("--rank-zero-extra-samples", f.extra_samples, "N more samples in rank 0's batch (an imbalanced job)")
      ->type_name("N")->group(parallel);
  app.add_option("--dist-timeout-s", f.dist_timeout,
                 "Give up on a peer that does not join or answer after this long (default: 60)")
      ->type_name("S")->group(parallel);
}

}  // namespace

namespace memdiag {

std::optional<int> parse_diagnostics_flags(int argc, char** argv, DiagnosticsOptions& diag, std::ostream& out,
                                           std::ostream& err) {
  HarnessOptions& opts = diag.harness;
  Flags flags;

  CLI::App app{"memory_diagnostics: run a training workload and record, phase by phase, what the\n"
               "allocator and the device hold, to a JSON report for compare_memory_reports. Lists of\n"
               "cases, presets, batch sizes, steps or remedies run every combination in one process."};
  app.footer(std::string("Remedies (--remedy; joined with '+'):\n") + remedies_help() + "\n" + kFooter);
  app.set_version_flag("--version", std::string("memory_diagnostics ") + MEMDIAG_VERSION);
  app.get_formatter()->column_width(34);
  define_flags(app, flags, diag);

  if (auto code = cli::parse(app, argc, argv, "memory_diagnostics", out, err)) return code;
  SweepFlags& sweep = flags.sweep;
  sweep.presets_given = app.get_option("--preset")->count() > 0;
  sweep.batch_sizes_given = app.get_option("--batch-size-per-device")->count() > 0;
  sweep.steps_given = app.get_option("--steps")->count() > 0;
  sweep.sequence_given = app.get_option("--sequence-length")->count() > 0;
  sweep.remedies_given = app.get_option("--remedy")->count() > 0;
  try {
    read_values(app, flags, opts);
    opts.runs = runs_from(sweep);
    if (!flags.allocator_settings.empty()) {
      const auto settings = parse_allocator_settings("--allocator-settings", flags.allocator_settings);
      for (RunRequest& run : opts.runs) {
        for (const Remedy& s : settings) {
          if (find_remedy(run.remedies, s.kind)) {
            throw UsageError("--allocator-settings: " + to_string(s) + " is also a --remedy of a run; give it once");
          }
          run.remedies.push_back(s);
        }
        std::sort(run.remedies.begin(), run.remedies.end());
      }
    }
  } catch (const UsageError& e) {
    err << "memory_diagnostics: " << printable(e.what()) << "\n";
    return to_int(ExitCode::kUsage);
  }
  opts.from_plan = !sweep.plan.empty();
  opts.plan_file = sweep.plan;
  opts.warm_up_kernels = !flags.no_warmup;
  if (flags.shard_optimizer_state) {
    opts.parallel_mode = ParallelMode::kZero1;
    opts.shard_flag = "--shard-optimizer-state";
  }
  opts.case_dirs = flags.extra_dirs;
  return std::nullopt;
}

int flush_output(std::ostream& out, std::ostream& err, int code) {
  if (!(out << std::flush)) {
    err << "memory_diagnostics: cannot write the output (" << std::strerror(errno ? errno : EIO) << ")\n";
    if (code == to_int(ExitCode::kOk)) code = to_int(ExitCode::kFailed);
  }
  return code;
}

int print_case_list(const std::vector<std::string>& case_dirs, std::ostream& out, std::ostream& err) {
  try {
    for (const CaseSpec& c : list_cases(case_dirs)) {
      std::string presets;
      for (const auto& kv : c.presets) {
        presets += (presets.empty() ? "" : ", ") + kv.first + (kv.first == c.default_preset ? "*" : "");
      }
      out << std::left << std::setw(8) << printable(c.name) << " " << printable(c.description) << "\n"
          << std::setw(8) << "" << " presets: " << printable(presets) << "  (file: " << printable(c.source) << ")\n";
    }
  } catch (const Error& e) {
    err << "memory_diagnostics: " << printable(e.what()) << "\n";
    return to_int(ExitCode::kUsage);
  }
  return to_int(ExitCode::kOk);
}

}  // namespace memdiag
