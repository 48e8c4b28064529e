#include "fuzz_targets.hpp"

#include "memdiag/case_spec.hpp"
#include "memdiag/errors.hpp"
#include "memdiag/gates.hpp"
#include "memdiag/regression.hpp"
#include "memdiag/render.hpp"
#include "memdiag/report_json.hpp"
#include "memdiag/report_reader.hpp"
#include "memdiag/limits.hpp"
#include "memdiag/output_names.hpp"
#include "memdiag/flag_values.hpp"
#include "memdiag/sweep_plan.hpp"

#include "compare_flags.hpp"

#include <cmath>
#include <sstream>
#include <string>

namespace memdiag::fuzz {

void report_pipeline(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ReadResult r = parse_report_text(text, "fuzz.json");
  if (!r.report) return;  // refused with an InputError: what should happen to junk
  // What the writer makes of an accepted report must read back.
  const std::string again = dump_report(*r.report);
  if (!parse_report_text(again, "again.json").report) __builtin_trap();
  const std::vector<std::pair<std::string, Report>> reports{{"fuzz.json", *r.report}};
  const Analysis a = analyse(reports, {}, {1024.0});
  GateSpec gates;
  gates.expect = {{r.report->case_info.name, Cause::kActivations}};
  gates.fail_on = {Cause::kRetainedGraph};
  const RegressionReport reg = compare_to_baseline(reports, reports, RegressionThresholds{});
  if (reg.regressed()) __builtin_trap();  // a report never regresses against itself
  const std::vector<GateCheck> checks = check_gates(a, gates);
  for (const OutputFormat f : {OutputFormat::kText, OutputFormat::kMarkdown, OutputFormat::kJson, OutputFormat::kJunit,
                               OutputFormat::kHtml}) {
    (void)render(Comparison{a}, f);
    (void)render(Comparison{a, reports, {}, checks, &reg}, f);
  }
}

void case_reader(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    (void)parse_case_text(text, "fuzz.json");
  } catch (const InputError&) {
    // Refused, naming the path: what should happen to junk.
  }
}

namespace {

// A name made from input: one path component, not hidden, not "..", no
// byte outside the sanitiser's set, each input part at most
// kMaxFileNamePart bytes (a template of several parts may exceed the file
// system's limit: check_writable refuses that before the run).
void check_safe_component(const std::string& name, std::size_t parts = 2) {
  if (name.empty() || name[0] == '.' || name.size() > parts * kMaxFileNamePart + 64) __builtin_trap();
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-' || c == '=' || c == '+';
    if (!ok) __builtin_trap();
  }
}

}  // namespace

void plan_reader(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<RunRequest> runs;
  try {
    runs = parse_plan_text(text, "fuzz.json");
  } catch (const InputError&) {
    return;  // refused, naming the path
  } catch (const UsageError&) {
    return;
  }
  std::vector<RunLabel> labels;
  for (const RunRequest& r : runs) {
    RunLabel l{r.name, r.case_arg, r.preset.value_or("small"), r.batch_size_per_device.value_or(1),
               r.steps.value_or(1), remedies_label(r.remedies)};
    if (l.batch < 1 || l.batch > limits::kMaxBatch || l.steps < 1 || l.steps > limits::kMaxSteps) __builtin_trap();
    labels.push_back(l);
  }
  const Varying v = varying(labels);
  for (const RunLabel& l : labels) {
    check_safe_component(default_output_name(l, v));
    check_safe_component(max_batch_output_name(l));
    check_safe_component(expand_output("{name}-{case}-{preset}-{batch}-{steps}-{remedy}.json", l), 6);
    const std::string ranked = output_for_rank(default_output_name(l, v), 1, 2);
    check_safe_component(ranked);
    (void)describe_run(l, v);
  }
}

void flag_parser(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args{"compare_memory_reports"};
  std::string cur;
  for (std::size_t i = 0; i < size && args.size() < 64; ++i) {
    const char c = static_cast<char>(data[i]);
    if (c == '\0' || c == '\n') {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  args.push_back(cur);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  CompareOptions opts;
  std::ostringstream out, err;
  const auto code = parse_compare_flags(static_cast<int>(argv.size()), argv.data(), opts, out, err);
  if (!code) {
    for (const double b : opts.budgets_mib) {
      if (!(std::isfinite(b) && b > 0 && b <= limits::kAbsurdMiB)) __builtin_trap();
    }
    const double f = opts.thresholds.max_increase_fraction;
    if (!(std::isfinite(f) && f >= 0 && f <= limits::kMaxIncreaseFraction)) __builtin_trap();
    if (opts.thresholds.max_increase_mib && !(*opts.thresholds.max_increase_mib >= 0 &&
                                               *opts.thresholds.max_increase_mib <= limits::kAbsurdMiB)) {
      __builtin_trap();
    }
    if (opts.inputs.empty()) __builtin_trap();  // required
  } else if (*code != 0 && *code != 2) {
    __builtin_trap();
  } else if (*code == 2 && (err.str().empty() || err.str().find('\n') != err.str().size() - 1)) {
    __builtin_trap();  // a usage error is exactly one line
  }
  // memory_diagnostics' value parsers, on every argument.
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    try {
      for (const int n : parse_count_list("--steps", a, 1, limits::kMaxSteps)) {
        if (n < 1 || n > limits::kMaxSteps) __builtin_trap();
      }
    } catch (const UsageError&) {
    }
    try {
      for (const std::int64_t n : parse_integer_list("--seed", a, 0, limits::kMaxExactInteger)) {
        if (n < 0 || n > limits::kMaxExactInteger) __builtin_trap();
      }
    } catch (const UsageError&) {
    }
    try {
      const double d = parse_decimal("--memory-limit-mib", a, 0, limits::kAbsurdMiB);
      if (!(std::isfinite(d) && d >= 0 && d <= limits::kAbsurdMiB)) __builtin_trap();
    } catch (const UsageError&) {
    }
    try {
      (void)parse_remedy_list("--remedy", a);
    } catch (const UsageError&) {
    }
    try {
      for (const std::string& n : parse_name_list("--case", a)) {
        if (n.empty()) __builtin_trap();
      }
    } catch (const UsageError&) {
    }
  }
}

}  // namespace memdiag::fuzz
