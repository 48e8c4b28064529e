// compare_memory_reports: flags in, memdiag::run_compare out.
#include "cli_parse.hpp"
#include "compare.hpp"

#include "memdiag/errors.hpp"
#include "memdiag/exit_code.hpp"

#include <iostream>
#include <map>

namespace {

constexpr const char* kFooter = R"(Causes: activations, optimizer_state, retained_graph, parameters,
allocator_cache, inconclusive. Each verdict is read off the measured numbers:
  activations      forward increment, largest share; grows with batch size
  optimizer_state  persistent allocation made at the first step(), stable after;
                   grows with parameter count
  retained_graph   post-cleanup allocation grows every step
Reports of one case that differ only in batch size, preset, steps or rank are
read together as a sweep; give the batch-1 and batch-4 runs to confirm an
activations verdict, different presets for optimizer state, different step
counts for a retained graph. When the reports given cannot confirm a verdict,
the output lists the memory_diagnostics runs that would, each writing a new
file beside the reports (the JSON output has them as argv arrays too).

Exit codes: 0 fine, 1 a gate (--expect, --fail-on) failed, 2 bad input (every
other file is still analysed; each problem is one line on stderr).

Examples:
  compare_memory_reports alpha.json beta.json gamma.json
  compare_memory_reports reports/ --format markdown
  compare_memory_reports ci-run.json --expect mymodel=activations --fail-on retained_graph)";

}  // namespace

int main(int argc, char** argv) {
  memdiag::CompareOptions opts;
  std::vector<std::string> expects, fail_on;

  CLI::App app{"compare_memory_reports: read memory_diagnostics reports and name the dominant cause of\n"
               "memory use, with the numbers that decide it, the targeted response and what would not help."};
  app.footer(kFooter);
  app.set_version_flag("--version", std::string("compare_memory_reports ") + MEMDIAG_VERSION);
  app.add_option("reports", opts.inputs, "Report files, directories of *.json reports, or - for standard input")
      ->required();
  const std::map<std::string, memdiag::OutputFormat> formats = {{"text", memdiag::OutputFormat::kText},
                                                                {"markdown", memdiag::OutputFormat::kMarkdown},
                                                                {"json", memdiag::OutputFormat::kJson}};
  app.add_option("--format,-f", opts.format, "text, markdown or json (default: text)")
      ->transform(CLI::CheckedTransformer(formats, CLI::ignore_case));
  // One value per flag (repeat the flag for more): otherwise a report file
  // after --fail-on would be taken for a cause.
  app.add_option("--expect", expects, "CASE=CAUSE: exit 1 unless every group of CASE has that dominant cause (repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--fail-on", fail_on, "CAUSE: exit 1 if any group's dominant cause is CAUSE (repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--budget-mib", opts.budgets_mib,
                 "Predict the largest batch that fits N MiB (repeatable; default: the run's memory limit, or the "
                 "device less what is outside the allocator)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check(CLI::PositiveNumber);

  if (auto code = memdiag::cli::parse(app, argc, argv, "compare_memory_reports", std::cout, std::cerr)) return *code;
  try {
    for (const std::string& e : expects) opts.expect.push_back(memdiag::parse_expectation(e));
    for (const std::string& f : fail_on) opts.fail_on.insert(memdiag::parse_fail_on(f));
    return memdiag::run_compare(opts, std::cout, std::cerr);
  } catch (const memdiag::UsageError& e) {
    std::cerr << "compare_memory_reports: " << e.what() << "\n";
    return memdiag::to_int(memdiag::ExitCode::kUsage);
  }
}
