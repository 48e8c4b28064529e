// compare_memory_reports' flags: CLI11 definitions, strict values, CompareOptions out.
#include "cli_parse.hpp"
#include "compare.hpp"
#include "compare_flags.hpp"

#include "memdiag/errors.hpp"
#include "memdiag/exit_code.hpp"
#include "memdiag/format.hpp"
#include "memdiag/limits.hpp"
#include "memdiag/sweep_plan.hpp"

#include <ostream>
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

Exit codes: 0 fine, 1 a gate (--expect, --fail-on, --baseline) failed or -o
could not be written, 2 bad input (every other file is still analysed; each
problem is one line on stderr).

Against a baseline (a memory regression gate for pull requests): reports are
matched by case, preset, batch, steps, rank, device kind and remedies; per
phase the peak and the end-of-phase allocated are shown against the
baseline's, with the component that moved; unmatched reports are listed.

Examples:
  compare_memory_reports alpha.json beta.json gamma.json
  compare_memory_reports reports/ --format markdown
  compare_memory_reports ci-run.json --expect mymodel=activations --fail-on retained_graph
  compare_memory_reports new/ --baseline tests/fixtures/cpu --max-increase 5% --format junit -o junit.xml
  compare_memory_reports reports/ --format html -o report.html)";

}  // namespace

namespace memdiag {

std::optional<int> parse_compare_flags(int argc, char** argv, CompareOptions& opts, std::ostream& out,
                                       std::ostream& err) {
  std::vector<std::string> expects, fail_on;

  CLI::App app{"compare_memory_reports: read memory_diagnostics reports and name the dominant cause of\n"
               "memory use, with the numbers that decide it, the targeted response and what would not help."};
  app.footer(kFooter);
  app.set_version_flag("--version", std::string("compare_memory_reports ") + MEMDIAG_VERSION);
  app.add_option("reports", opts.inputs, "Report files, directories of *.json reports, or - for standard input")
      ->required();
  const std::map<std::string, memdiag::OutputFormat> formats = {{"text", memdiag::OutputFormat::kText},
                                                                {"markdown", memdiag::OutputFormat::kMarkdown},
                                                                {"json", memdiag::OutputFormat::kJson},
                                                                {"junit", memdiag::OutputFormat::kJunit},
                                                                {"html", memdiag::OutputFormat::kHtml}};
  app.add_option("--format,-f", opts.format,
                 "text, markdown, json, junit (the gates as JUnit XML for CI) or html (one self-contained page with "
                 "plots) (default: text)")
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
  std::vector<std::string> budgets;
  std::string max_increase_mib;
  app.add_option("--budget-mib", budgets,
                 "Predict the largest batch that fits N MiB (repeatable; default: the run's memory limit, or the "
                 "device less what is outside the allocator)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->type_name("MIB");
  std::vector<std::string> worlds;
  app.add_option("--world-size", worlds,
                 "With a single-rank run: predict the largest batch per rank at N data-parallel ranks under each mode "
                 "(replicated, ZeRO-1, ZeRO-2, ZeRO-3), within the same budgets (repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->type_name("N");

  app.add_option("--output,-o", opts.output, "Write the output to FILE (replaced whole, never half-written)")
      ->type_name("FILE");
  app.add_option("--baseline", opts.baseline,
                 "Baseline reports (files or directories): each report given is matched by case, configuration and "
                 "rank, and exit 1 if any peak grew beyond --max-increase")
      ->type_name("PATH")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  std::string max_increase = "5%";
  app.add_option("--max-increase", max_increase, "With --baseline: a peak may grow by this much (5% or 0.05)")
      ->type_name("PERCENT")
      ->capture_default_str();
  auto* mib_opt = app.add_option("--max-increase-mib", max_increase_mib,
                                 "With --baseline: and, when given, by no more than N MiB before it counts")
                      ->type_name("MIB");

  auto* check_opt = app.add_flag("--check", opts.check,
                                 "Only validate the reports: each read with the comparison's full rules (schema, phase "
                                 "order, steps, bounds), a line each; exit 0 when all are valid, 2 otherwise (for "
                                 "writers of reports other than memdiag)");
  for (const char* other : {"--format", "--expect", "--fail-on", "--budget-mib", "--world-size", "--baseline", "--output"}) {
    check_opt->excludes(app.get_option(other));
  }
  if (auto code = memdiag::cli::parse(app, argc, argv, "compare_memory_reports", out, err)) return code;
  try {
    for (const std::string& e : expects) opts.expect.push_back(memdiag::parse_expectation(e));
    for (const std::string& f : fail_on) opts.fail_on.insert(memdiag::parse_fail_on(f));
    // Numbers parsed strictly, within the report's own bounds (no nan, inf,
    // hex or exponent): a nan threshold would turn the gate off.
    namespace lim = memdiag::limits;
    for (const std::string& b : budgets) {
      const double v = memdiag::parse_decimal("--budget-mib", b, 0, lim::kAbsurdMiB);
      if (!(v > 0)) throw memdiag::UsageError("--budget-mib: must be greater than 0, got " + b);
      opts.budgets_mib.push_back(v);
    }
    for (const std::string& w : worlds) {
      opts.world_sizes.push_back(
          static_cast<int>(memdiag::parse_integer_list("--world-size", w, 2, lim::kMaxWorldSize).at(0)));
    }
    if (mib_opt->count() > 0) {
      opts.thresholds.max_increase_mib = memdiag::parse_decimal("--max-increase-mib", max_increase_mib, 0, lim::kAbsurdMiB);
    }
    opts.thresholds.max_increase_fraction = memdiag::parse_fraction("--max-increase", max_increase);
    if (opts.baseline.empty() && (app.get_option("--max-increase")->count() > 0 || mib_opt->count() > 0)) {
      throw memdiag::UsageError("--max-increase: only with --baseline");
    }
    if (opts.output.empty() && app.get_option("--output")->count() > 0) throw memdiag::UsageError("--output: empty path");
  } catch (const memdiag::UsageError& e) {
    err << "compare_memory_reports: " << memdiag::printable(e.what()) << "\n";
    return memdiag::to_int(memdiag::ExitCode::kUsage);
  }
  return std::nullopt;
}

}  // namespace memdiag

