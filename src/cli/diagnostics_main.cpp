// memory_diagnostics: flags in, memdiag::run_diagnostics out.
#include "cli_parse.hpp"
#include "diagnostics.hpp"
#include "signals.hpp"
#include "memdiag/errors.hpp"
#include "memdiag/harness.hpp"
#include "memdiag/limits.hpp"
#include "memdiag/sweep_plan.hpp"

#include <iostream>

namespace {

constexpr const char* kFooter = R"(Phases, recorded in this order (MiB at the end of each phase, peak within it):
  model_ready      model built and moved to the device (parameters)
  optimizer_ready  optimizer built (AdamW's moments do not exist yet)
  then per step:   forward (activations saved for backward), backward (gradients),
                   step (optimizer.step(); lazy optimizer state appears here),
                   cleanup (zero_grad(set_to_none) and the step's tensors dropped)
Fields: allocated_mib = live tensors; reserved_mib = caching-allocator segments
(CUDA); device_used_mib = whole device per cudaMemGetInfo; peak_allocated_mib;
inactive_split_mib = fragmentation; process_device_mib = NVML, this process.
On CPU every tensor goes through a tracking allocator; reserved and device are null.

Data parallel: started by a launcher, it joins a c10d process group (NCCL on
CUDA, one GPU per local rank; Gloo on CPU) and writes one report per rank:
  torchrun --nproc-per-node=2 --no-python build/bin/memory_diagnostics \
      --case beta --output 'beta-{rank}.json' [--shard-optimizer-state]

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
process, and each report equals what a separate run would write (the
allocator's cache is emptied and its statistics reset between runs; --isolate
uses a child process per run instead). A line per run goes to stderr as it
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
  std::string plan;
  std::string remedies;
  // Given on the command line (an empty value given is an error, not the default).
  bool presets_given = false;
  bool batch_sizes_given = false;
  bool steps_given = false;
  bool remedies_given = false;
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
  if (f.remedies_given) axes.remedies = memdiag::parse_remedy_list("--remedy", f.remedies);
  return memdiag::expand_product(axes);
}

// Values a report could not hold, or that would silently mean something
// else, are refused here rather than written. Fills opts.seed.
void check_values(bool output_given, bool output_dir_given, const std::string& seed, memdiag::HarnessOptions& opts) {
  if (output_given && opts.output.empty()) {
    throw memdiag::UsageError("--output: empty path (leave the flag out for <case>.json)");
  }
  if (output_dir_given && opts.output_dir.empty()) throw memdiag::UsageError("--output-dir: empty path");
  if (seed.find(',') != std::string::npos) throw memdiag::UsageError("--seed: one seed, not a list");
  opts.seed = static_cast<std::uint64_t>(
      memdiag::parse_integer_list("--seed", seed, 0, memdiag::limits::kMaxExactInteger).at(0));
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything slow: a signal during plan resolution is honoured too.
  memdiag::cli::install_stop_signals();
  memdiag::DiagnosticsOptions diag;
  memdiag::HarnessOptions& opts = diag.harness;
  SweepFlags sweep;
  bool& list = diag.list_cases;
  std::vector<std::string> extra_dirs;

  CLI::App app{"memory_diagnostics: run a training workload and record, phase by phase, what the\n"
               "allocator and the device hold, to a JSON report for compare_memory_reports. Lists of\n"
               "cases, presets, batch sizes or steps run every combination in one process."};
  app.footer(kFooter);
  app.set_version_flag("--version", std::string("memory_diagnostics ") + MEMDIAG_VERSION);
  auto* case_opt = app.add_option("--case", sweep.cases,
                                  "Built-in case (alpha, beta, gamma) or a case file PATH.json; a comma-separated "
                                  "list sweeps them")
                       ->capture_default_str();
  app.add_option("--output,-o", opts.output,
                 "Report file (default: <case>.json); in a sweep a template with {case} {preset} {batch} {steps} "
                 "{name} {rank}");
  auto* dir_opt = app.add_option("--output-dir", opts.output_dir,
                                 "Write each report into DIR, named from the case and what varies "
                                 "(alpha-batch4.json, beta-medium.json)");
  auto* batch_opt = app.add_option("--batch-size-per-device", sweep.batch_sizes,
                                   "Samples per step, or a list (1,4,1024) (default: the preset's)");
  auto* preset_opt = app.add_option("--preset", sweep.presets,
                                    "Model size from the case file: small, medium, large, or a list (default: the "
                                    "case's)");
  auto* steps_opt = app.add_option("--steps", sweep.steps, "Training steps to record, or a list (default: the preset's)");
  auto* plan_opt = app.add_option("--plan", sweep.plan,
                                  "A plan file: a list of named runs (cases/plans/reference.json); {name} names "
                                  "their reports");
  auto* remedy_opt = app.add_option("--remedy", sweep.remedies,
                                    "A remedy, remedies joined with '+', or a list of them: checkpoint[=N], "
                                    "accumulate=K, bf16, autocast-bf16, empty-cache, fix-graph, sgd, none "
                                    "(e.g. none,checkpoint,accumulate=4+bf16)");
  plan_opt->excludes(case_opt)->excludes(batch_opt)->excludes(preset_opt)->excludes(steps_opt)->excludes(remedy_opt);
  app.get_option("--output")->excludes(dir_opt);
  app.add_flag("--isolate", opts.isolate,
               "Run each configuration of a sweep in a fresh child process (same reports)");
  app.add_option("--device", opts.device, "auto (CUDA when available), cpu, cuda or cuda:K")->capture_default_str();
  std::string seed = "0";
  app.add_option("--seed", seed, "Seed for weights and data: 0 to 2^53 (what JSON readers hold exactly)")
      ->capture_default_str();
  app.add_option("--memory-limit-mib", opts.memory_limit_mib,
                 "Cap the allocator at N MiB to see whether the run fits a smaller GPU (CPU: simulated)");
  app.add_option("--cases-dir", extra_dirs, "Extra directory searched first for built-in case names");
  app.add_flag("--list-cases", list, "List the built-in cases and exit");
  app.add_flag("--quiet,-q", diag.quiet, "No table on stdout (a sweep: no progress lines or summary)");
  app.add_option("--rank-zero-extra-samples", opts.rank_zero_extra_samples,
                 "Data parallel: N more samples in rank 0's local batch (an imbalanced job)");
  app.add_flag("--shard-optimizer-state", opts.shard_optimizer_state,
               "Data parallel: ZeRO-1, each rank keeps optimizer state for its shard of the parameters");
  app.add_option("--dist-timeout-s", opts.dist_timeout_s,
                 "Data parallel: give up on a peer that does not join or answer after this long")
      ->capture_default_str();
  app.add_flag("--find-max-batch", opts.find_max_batch,
               "Search the largest batch that completes --steps steps within --memory-limit-mib (CUDA: or the "
               "device): doubling, then bisection, in this process; confirmed in fresh processes. Writes that "
               "batch's report with a capacity object (default <case>-max-batch.json); exit 3 if one sample "
               "does not fit");
  app.add_option("--memory-snapshot", opts.memory_snapshot,
                 "CUDA: write the caching allocator's history of the run, phases marked, as FILE.pickle for "
                 "https://pytorch.org/memory_viz or python -m torch.cuda._memory_viz")
      ->type_name("FILE");
  app.add_option("--oom-snapshot", opts.oom_snapshot,
                 "CUDA: write the allocator snapshot taken when an allocation is refused, as FILE.pickle")
      ->type_name("FILE");
  app.add_option("--snapshot-max-entries", opts.snapshot_max_entries,
                 "Allocation events a snapshot keeps (the oldest go first; ~136 bytes each)")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{100'000'000}));
  app.add_flag("--snapshot-cpp-stacks", opts.snapshot_cpp_stacks,
               "Record the C++ stack of every allocation in snapshots (symbolising them can take minutes)");
  bool no_warmup = false;
  app.add_flag("--no-warmup", no_warmup,
               "Do not make cuBLAS workspaces before the first sample (step 0 then carries them)");

  if (auto code = memdiag::cli::parse(app, argc, argv, "memory_diagnostics", std::cout, std::cerr)) return *code;
  sweep.presets_given = preset_opt->count() > 0;
  sweep.batch_sizes_given = batch_opt->count() > 0;
  sweep.steps_given = steps_opt->count() > 0;
  sweep.remedies_given = remedy_opt->count() > 0;
  try {
    check_values(app.get_option("--output")->count() > 0, dir_opt->count() > 0, seed, opts);
    opts.runs = runs_from(sweep);
  } catch (const memdiag::UsageError& e) {
    std::cerr << "memory_diagnostics: " << e.what() << "\n";
    return memdiag::to_int(memdiag::ExitCode::kUsage);
  }
  opts.from_plan = !sweep.plan.empty();
  opts.self_exe = memdiag::self_executable(argv[0]);
  opts.warm_up_kernels = !no_warmup;
  opts.case_dirs = extra_dirs;
  for (const std::string& d : memdiag::default_case_dirs(argv[0])) opts.case_dirs.push_back(d);

  try {
    return memdiag::run_diagnostics(diag, std::cout, std::cerr);
  } catch (const std::exception& e) {
    // Anything run_harness did not turn into a report: one line, exit 1.
    const std::string what = e.what();
    std::cerr << "memory_diagnostics: error: " << what.substr(0, what.find('\n')) << "\n";
    return memdiag::to_int(memdiag::ExitCode::kFailed);
  }
}
