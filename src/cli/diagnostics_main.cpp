// memory_diagnostics: flags in, memdiag::run_harness out.
#include "cli_parse.hpp"
#include "memdiag/harness.hpp"

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

Exit codes: 0 complete, 1 failed, 2 bad usage, 3 out of memory (report still
written, status "oom"), 130 interrupted.

Example (the batch sweep that confirms an activation diagnosis):
  memory_diagnostics --case alpha --batch-size-per-device 1 --output alpha-batch1.json
  memory_diagnostics --case alpha --batch-size-per-device 4 --output alpha-batch4.json
  compare_memory_reports alpha-batch1.json alpha-batch4.json)";

}  // namespace

int main(int argc, char** argv) {
  memdiag::HarnessOptions opts;
  bool list = false;
  std::vector<std::string> extra_dirs;

  CLI::App app{"memory_diagnostics: run a training workload and record, phase by phase, what the\n"
               "allocator and the device hold, to a JSON report for compare_memory_reports."};
  app.footer(kFooter);
  app.set_version_flag("--version", std::string("memory_diagnostics ") + MEMDIAG_VERSION);
  app.add_option("--case", opts.case_arg, "Built-in case (alpha, beta, gamma) or a case file PATH.json")
      ->capture_default_str();
  app.add_option("--output,-o", opts.output, "Report file to write (default: <case>.json)");
  app.add_option("--batch-size-per-device", opts.batch_size, "Samples per step (default: the preset's)");
  app.add_option("--preset", opts.preset, "Model size from the case file: small, medium, large (default: the case's)");
  app.add_option("--steps", opts.steps, "Training steps to record (default: the preset's)");
  app.add_option("--device", opts.device, "auto (CUDA when available), cpu, cuda or cuda:K")->capture_default_str();
  app.add_option("--seed", opts.seed, "Seed for weights and data")->capture_default_str();
  app.add_option("--memory-limit-mib", opts.memory_limit_mib,
                 "Cap the allocator at N MiB to see whether the run fits a smaller GPU (CPU: simulated)");
  app.add_option("--cases-dir", extra_dirs, "Extra directory searched first for built-in case names");
  app.add_flag("--list-cases", list, "List the built-in cases and exit");
  app.add_flag("--quiet,-q", opts.quiet, "No table on stdout");
  app.add_option("--rank-zero-extra-samples", opts.rank_zero_extra_samples,
                 "Data parallel: N more samples in rank 0's local batch (an imbalanced job)");
  app.add_flag("--shard-optimizer-state", opts.shard_optimizer_state,
               "Data parallel: ZeRO-1, each rank keeps optimizer state for its shard of the parameters");
  app.add_option("--dist-timeout-s", opts.dist_timeout_s,
                 "Data parallel: give up on a peer that does not join or answer after this long")
      ->capture_default_str();
  bool no_warmup = false;
  app.add_flag("--no-warmup", no_warmup,
               "Do not make cuBLAS workspaces before the first sample (step 0 then carries them)");

  if (auto code = memdiag::cli::parse(app, argc, argv, "memory_diagnostics", std::cout, std::cerr)) return *code;
  opts.warm_up_kernels = !no_warmup;
  opts.case_dirs = extra_dirs;
  for (const std::string& d : memdiag::default_case_dirs(argv[0])) opts.case_dirs.push_back(d);

  try {
    if (list) return memdiag::list_cases(opts.case_dirs, std::cout, std::cerr);
    return memdiag::run_harness(opts, std::cout, std::cerr);
  } catch (const std::exception& e) {
    // Anything run_harness did not turn into a report: one line, exit 1.
    const std::string what = e.what();
    std::cerr << "memory_diagnostics: error: " << what.substr(0, what.find('\n')) << "\n";
    return memdiag::to_int(memdiag::ExitCode::kFailed);
  }
}
