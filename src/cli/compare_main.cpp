// compare_memory_reports: read reports, diagnose, render, gate.
#include "memdiag/analysis.hpp"
#include "memdiag/render.hpp"
#include "memdiag/report_reader.hpp"

#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>
#include <map>
#include <set>

namespace {

constexpr int kExitGate = 1;
constexpr int kExitBadInput = 2;

constexpr const char* kFooter = R"(Causes: activations, optimizer_state, retained_graph, parameters,
allocator_cache, inconclusive. Each verdict is read off the measured numbers:
  activations      forward increment, largest share; grows with batch size
  optimizer_state  persistent allocation made at the first step(), stable after;
                   grows with parameter count
  retained_graph   post-cleanup allocation grows every step
Reports of one case that differ only in batch size, preset, steps or rank are
read together as a sweep; give the batch-1 and batch-4 runs to confirm an
activations verdict, different presets for optimizer state, different step
counts for a retained graph.

Exit codes: 0 fine, 1 a gate (--expect, --fail-on) failed, 2 bad input (every
other file is still analysed; each problem is one line on stderr).

Examples:
  compare_memory_reports alpha.json beta.json gamma.json
  compare_memory_reports reports/ --format markdown
  compare_memory_reports ci-run.json --expect mymodel=activations --fail-on retained_graph)";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> inputs;
  std::string format = "text";
  std::vector<std::string> expects;
  std::vector<std::string> fail_on;

  CLI::App app{"compare_memory_reports: read memory_diagnostics reports and name the dominant cause of\n"
               "memory use, with the numbers that decide it, the targeted response and what would not help."};
  app.footer(kFooter);
  app.set_version_flag("--version", std::string("compare_memory_reports ") + MEMDIAG_VERSION);
  app.add_option("reports", inputs, "Report files, directories of *.json reports, or - for standard input")
      ->required();
  app.add_option("--format,-f", format, "text, markdown or json")
      ->check(CLI::IsMember({"text", "markdown", "json"}))
      ->capture_default_str();
  app.add_option("--expect", expects, "CASE=CAUSE: exit 1 unless every group of CASE has that dominant cause");
  app.add_option("--fail-on", fail_on, "CAUSE: exit 1 if any group's dominant cause is CAUSE");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "compare_memory_reports: " << e.what() << " (see --help)\n";
    return kExitBadInput;
  }

  std::vector<std::pair<std::string, memdiag::Cause>> expected;
  for (const std::string& e : expects) {
    const auto eq = e.find('=');
    const auto cause = eq == std::string::npos ? std::nullopt : memdiag::cause_from_string(e.substr(eq + 1));
    if (eq == std::string::npos || eq == 0 || !cause) {
      std::cerr << "compare_memory_reports: --expect: '" << e << "' is not CASE=CAUSE with a known cause\n";
      return kExitBadInput;
    }
    expected.emplace_back(e.substr(0, eq), *cause);
  }
  std::set<memdiag::Cause> failing;
  for (const std::string& f : fail_on) {
    const auto cause = memdiag::cause_from_string(f);
    if (!cause) {
      std::cerr << "compare_memory_reports: --fail-on: '" << f << "' is not a known cause\n";
      return kExitBadInput;
    }
    failing.insert(*cause);
  }

  memdiag::InputList list = memdiag::expand_inputs(inputs);
  std::vector<memdiag::ReadError> errors = list.errors;
  std::vector<std::pair<std::string, memdiag::Report>> reports;
  std::map<std::size_t, std::string> seen_content;
  std::set<std::string> seen_paths;
  for (const std::string& file : list.files) {
    std::error_code ec;
    const std::string canonical = file == "-" ? "-" : std::filesystem::weakly_canonical(file, ec).string();
    if (!seen_paths.insert(canonical).second) {
      errors.push_back({file, "$", "given more than once"});
      continue;
    }
    memdiag::ReadResult r = memdiag::read_report_file(file);
    if (r.error) {
      errors.push_back(*r.error);
      continue;
    }
    auto [it, fresh] = seen_content.emplace(r.content_hash, file);
    if (!fresh) {
      errors.push_back({file, "$", "duplicate of " + it->second + " (same bytes); analysed once"});
      continue;
    }
    reports.emplace_back(file, std::move(*r.report));
  }
  for (const memdiag::ReadError& e : errors) std::cerr << "compare_memory_reports: " << e.to_string() << "\n";

  const memdiag::Analysis analysis = memdiag::analyse(reports);
  if (format == "json") {
    std::cout << memdiag::render_json(analysis, errors).dump(2) << "\n";
  } else if (format == "markdown") {
    std::cout << memdiag::render_markdown(analysis);
  } else {
    std::cout << memdiag::render_text(analysis);
  }

  bool gate_failed = false;
  for (const auto& [case_name, cause] : expected) {
    bool found = false;
    for (const memdiag::Verdict& v : analysis.verdicts) {
      if (v.case_name != case_name) continue;
      found = true;
      if (v.dominant != cause) {
        std::cerr << "compare_memory_reports: gate failed: " << case_name << " is " << to_string(v.dominant)
                  << ", expected " << to_string(cause) << " (" << v.group_key << ")\n";
        gate_failed = true;
      }
    }
    if (!found) {
      std::cerr << "compare_memory_reports: gate failed: no report of case " << case_name << "\n";
      gate_failed = true;
    }
  }
  for (const memdiag::Verdict& v : analysis.verdicts) {
    if (failing.count(v.dominant)) {
      std::cerr << "compare_memory_reports: gate failed: " << v.case_name << " is " << to_string(v.dominant)
                << " (--fail-on)\n";
      gate_failed = true;
    }
  }

  if (reports.empty()) {
    if (errors.empty()) std::cerr << "compare_memory_reports: no reports to analyse\n";
    return kExitBadInput;
  }
  if (!errors.empty()) return kExitBadInput;
  return gate_failed ? kExitGate : 0;
}
