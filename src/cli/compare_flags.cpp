// compare_memory_reports' flags: CLI11 definitions, strict values, CompareOptions out.
#include "cli_parse.hpp"
#include "compare.hpp"
#include "compare_flags.hpp"

#include "memdiag/errors.hpp"
#include "memdiag/exit_code.hpp"
#include "memdiag/format.hpp"
#include "memdiag/limits.hpp"
#include "memdiag/enum_names.hpp"
#include "memdiag/suggest.hpp"
#include "memdiag/flag_values.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <ostream>
#include <string>

namespace {

constexpr const char* kFooterRest = R"(
Reports of one case that differ only in batch size, preset, steps, sequence
length or rank are read together as a sweep: give the batch-1 and batch-4 runs
to confirm an activations verdict, different presets for optimizer state,
different step counts for a retained graph. When the reports given cannot
confirm a verdict, the output lists the memory_diagnostics runs that would,
each writing a new file beside the reports (the JSON output has them as argv
arrays too); for a report of one's own loop (memdiag::Recorder, the Python
recorder), the change to make and record instead.

Exit codes: 0 fine, 1 a gate (--expect, --fail-on, --baseline) failed or -o
could not be written, 2 bad input (every other file is still analysed; each
problem is one line on stderr; 2 wins over 1, and the gates' outcome is
still printed).

Against a baseline (a memory regression gate for pull requests): reports are
matched by case, preset, batch, steps, sequence length, seed, memory limit,
world, rank, device kind and remedies; per phase the peak and the
end-of-phase allocated are shown against the baseline's, with the component
that moved. A report without a baseline is listed; a baseline without a new
report fails the gate, and where the two are one job whose configuration
changed (its batch, steps, length) both peaks are said.

Examples:
  compare_memory_reports alpha.json beta.json gamma.json       diagnose, as text
  compare_memory_reports reports/ --format markdown             a folder, as markdown
  compare_memory_reports reports/ --format html -o report.html  one page with plots
  compare_memory_reports ci-run.json --expect mymodel=activations --fail-on retained_graph
  compare_memory_reports new/ --baseline tests/fixtures/cpu --max-increase 5% --format junit -o junit.xml
  compare_memory_reports beta.json --budget-mib 300 --world-size 4   what fits 300 MiB, alone and on 4 ranks
  compare_memory_reports --check my-writer-output.json               validate a report of your own)";

// The causes from their one definition (render's cause texts), then the
// rest in words.
std::string footer() {
  std::string s = "Causes, each read off the measured numbers, never off a case's name:\n";
  for (memdiag::Cause c : memdiag::all_values<memdiag::Cause>()) {
    std::string name = memdiag::to_string(c);
    name.resize(std::max<std::size_t>(name.size(), 16), ' ');
    s += "  " + name + " " + memdiag::cause_label(c) + "\n";
    const std::string basis = memdiag::cause_basis(c);
    if (!basis.empty()) s += "                   from: " + basis + "\n";
  }
  return s + kFooterRest;
}

}  // namespace

namespace memdiag {

std::optional<int> parse_compare_flags(int argc, char** argv, CompareOptions& opts, std::ostream& out,
                                       std::ostream& err) {
  std::vector<std::string> expects, fail_on;

  CLI::App app{"compare_memory_reports: read memory reports (memory_diagnostics', a memdiag::Recorder loop's, the\n"
               "Python recorder's) and name the dominant cause of memory use, with the numbers that decide it, the\n"
               "targeted response and what would not help."};
  app.footer(footer());
  app.set_version_flag("--version", std::string("compare_memory_reports ") + MEMDIAG_VERSION);
  // Each option's placeholder in words (option_text): CLI11's own would
  // print its validators and exclusions ("ENUM:value in {...}", "Excludes:").
  const std::string print = "What to print", gates = "Gates (exit 1 when one fails)",
                    predict = "Predictions", baseline = "Against a baseline", check = "Checking reports";
  app.add_option("reports", opts.inputs,
                 "Report files, directories of *.json reports, or - for standard input (at least one)")
      ->required()
      ->option_text("FILE|DIR|- ...");
  const std::map<std::string, memdiag::OutputFormat> formats = {{"text", memdiag::OutputFormat::kText},
                                                                {"markdown", memdiag::OutputFormat::kMarkdown},
                                                                {"json", memdiag::OutputFormat::kJson},
                                                                {"junit", memdiag::OutputFormat::kJunit},
                                                                {"html", memdiag::OutputFormat::kHtml}};
  app.add_option("--format,-f", opts.format,
                 "text, markdown, json, junit (the gates as JUnit XML for CI) or html (one self-contained page with "
                 "plots) (default: text)")
      ->transform(
          [formats](std::string value) -> std::string {
            std::string lower = value;
            std::transform(lower.begin(), lower.end(), lower.begin(),
                           [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
            const auto it = formats.find(lower);
            if (it != formats.end()) return std::to_string(static_cast<int>(it->second));  // an enum: its number
            // Not CLI11's "{html->4,...} OR {4,...} FAILED": what was typed and what is allowed.
            std::vector<std::string> names;
            for (const auto& [name, format] : formats) names.push_back(name);
            throw CLI::ValidationError("'" + value + "' is not a format" + memdiag::did_you_mean(value, names) +
                                       "; the formats: text, markdown, json, junit, html");
          },
          "FORMAT")
      ->option_text("text|markdown|json|junit|html")
      ->group(print);
  // One value per flag (repeat the flag for more): otherwise a report file
  // after --fail-on would be taken for a cause.
  app.add_option("--expect", expects, "Exit 1 unless every group of CASE has that dominant cause (repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->option_text("CASE=CAUSE")
      ->group(gates);
  app.add_option("--fail-on", fail_on, "Exit 1 if any group's dominant cause is CAUSE (repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->option_text("CAUSE")
      ->group(gates);
  std::vector<std::string> budgets;
  std::string max_increase_mib;
  app.add_option("--budget-mib", budgets,
                 "Predict the largest batch that fits N MiB (repeatable; default: the run's memory limit, or the "
                 "device less what is outside the allocator)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->option_text("MIB")
      ->group(predict);
  std::vector<std::string> worlds;
  app.add_option("--world-size", worlds,
                 "With a single-rank run: predict the largest batch per rank at N data-parallel ranks under each mode "
                 "(replicated, ZeRO-1, ZeRO-2, ZeRO-3), within the same budgets (repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->option_text("N")
      ->group(predict);

  app.add_option("--output,-o", opts.output, "Write the output to FILE (replaced whole, never half-written; missing directories are made)")
      ->option_text("FILE")
      ->group(print);
  app.add_option("--baseline", opts.baseline,
                 "Baseline reports (files or directories): each report given is matched by case, configuration and "
                 "rank, and exit 1 if any peak grew beyond --max-increase")
      ->option_text("PATH")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->group(baseline);
  std::string max_increase = "5%";
  app.add_option("--max-increase", max_increase,
                 "With --baseline: a peak may grow by this much, 5% or 0.05 (default: 5%)")
      ->option_text("PERCENT")
      ->group(baseline);
  auto* mib_opt = app.add_option("--max-increase-mib", max_increase_mib,
                                 "With --baseline: and, when given, by no more than N MiB before it counts")
                      ->option_text("MIB")
                      ->group(baseline);

  auto* check_opt = app.add_flag("--check", opts.check,
                                 "Only validate the reports: each read with the comparison's full rules (schema, phase "
                                 "order, steps, bounds), a line each; exit 0 when all are valid, 2 otherwise (for "
                                 "writers of reports other than memdiag); alone: no other option of the groups above")
                       ->option_text(" ")
                       ->group(check);
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

