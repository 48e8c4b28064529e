// compare_memory_reports as a user runs it: gates, formats and bad input.
#include "memdiag/report_json.hpp"
#include "memdiag/enum_names.hpp"
#include "memdiag/exit_code.hpp"
#include "golden.hpp"
#include "json_schema.hpp"
#include "process.hpp"
#include "synthetic.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

using namespace memdiag;
using namespace memdiag::testkit;

namespace {

const std::string kCompareExe = MEMDIAG_COMPARE_EXE;

Proc compare(std::vector<std::string> args, const std::string& stdin_text = {}) {
  args.insert(args.begin(), kCompareExe);
  return run(args, stdin_text);
}

std::string write_synth(const TempDir& d, const std::string& name, const Synth& s) {
  const std::string path = d.file(name);
  write_report(path, synth(s));
  return path;
}

Synth activation_heavy() {
  Synth s;
  s.case_name = "model";
  s.activations_mib = 200;
  return s;
}

}  // namespace

TEST(CompareCli, JsonGroupsCarryCaseCauseEvidenceResponse) {
  TempDir d;
  const std::string f = write_synth(d, "a.json", activation_heavy());
  const Proc r = compare({f, "--format", "json"});
  ASSERT_EQ(r.exit_code, to_int(ExitCode::kOk)) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["groups"].size(), 1u);
  EXPECT_EQ(j["groups"][0]["case"], "model");
  EXPECT_EQ(j["groups"][0]["dominant_cause"], "activations");
  EXPECT_FALSE(j["groups"][0]["evidence"].empty());
  EXPECT_FALSE(j["groups"][0]["response"].get<std::string>().empty());
}

TEST(CompareCli, GatesForSmokeTests) {
  TempDir d;
  const std::string f = write_synth(d, "a.json", activation_heavy());
  EXPECT_EQ(compare({f, "--expect", "model=activations"}).exit_code, to_int(ExitCode::kOk));
  const Proc wrong = compare({f, "--expect", "model=retained_graph"});
  EXPECT_EQ(wrong.exit_code, to_int(ExitCode::kGateFailed));
  EXPECT_NE(wrong.err.find("gate failed: model is activations, expected retained_graph"), std::string::npos);
  EXPECT_EQ(compare({f, "--expect", "other=activations"}).exit_code, to_int(ExitCode::kGateFailed));
  EXPECT_EQ(compare({f, "--fail-on", "activations"}).exit_code, to_int(ExitCode::kGateFailed));
  EXPECT_EQ(compare({f, "--fail-on", "retained_graph"}).exit_code, to_int(ExitCode::kOk));
  EXPECT_EQ(compare({f, "--expect", "model=leaky"}).exit_code, to_int(ExitCode::kUsage));
  EXPECT_EQ(compare({f, "--fail-on", "leaky"}).exit_code, to_int(ExitCode::kUsage));
}

TEST(CompareCli, StandardInputAndMarkdown) {
  const Proc r = compare({"-", "--format", "markdown"}, dump_report(synth(activation_heavy())));
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kOk)) << r.err;
  EXPECT_NE(r.out.find("**Dominant cause: `activations`**"), std::string::npos);
}

TEST(CompareCli, BadInputIsNamedAndTheRestIsStillAnalysed) {
  TempDir d;
  const std::string good = write_synth(d, "good.json", activation_heavy());
  const std::string text = dump_report(synth(activation_heavy()));
  nlohmann::json newer = nlohmann::json::parse(text);
  newer["schema_version"] = 99;
  nlohmann::json wrong_type = nlohmann::json::parse(text);
  const std::string bwd = std::to_string(sample_index(wrong_type, Phase::kBackward, 0));
  wrong_type["samples"][std::stoi(bwd)]["allocated_mib"] = "a lot";
  nlohmann::json negative = nlohmann::json::parse(text);
  const std::string fwd = std::to_string(sample_index(negative, Phase::kForward, 0));
  negative["samples"][std::stoi(fwd)]["allocated_mib"] = -5;
  struct Bad {
    std::string name, content, expect;
  };
  const std::vector<Bad> bad = {
      {"empty.json", "", "empty.json: $: empty file"},
      {"truncated.json", text.substr(0, 200), "truncated.json: $: not valid JSON"},
      {"binary.json", std::string("\x00\x01\x02\x03", 4), "binary.json: $: binary data"},
      {"newer.json", newer.dump(), "newer.json: $.schema_version: version 99 is newer"},
      {"type.json", wrong_type.dump(), "type.json: $.samples[" + bwd + "].allocated_mib: expected a number"},
      {"negative.json", negative.dump(), "negative.json: $.samples[" + fwd + "].allocated_mib: negative"},
  };
  std::vector<std::string> args{good};
  for (const Bad& b : bad) {
    write_text(d.file(b.name), b.content);
    args.push_back(d.file(b.name));
  }
  const std::string copy = d.file("copy.json");
  write_text(copy, read_text(good));
  args.push_back(copy);
  args.push_back(good);  // the same path twice
  const Proc r = compare(args);
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage));
  for (const Bad& b : bad) EXPECT_NE(r.err.find(b.expect), std::string::npos) << b.expect << "\n" << r.err;
  EXPECT_NE(r.err.find("copy.json: $: duplicate of"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("given more than once"), std::string::npos) << r.err;
  EXPECT_EQ(count_lines(r.err), static_cast<int>(bad.size()) + 2);
  EXPECT_NE(r.out.find("dominant cause: activations"), std::string::npos);  // good.json still analysed
}

TEST(CompareCli, DirectoriesAndNothingToRead) {
  TempDir d;
  write_synth(d, "one.json", activation_heavy());
  EXPECT_EQ(compare({d.path()}).exit_code, to_int(ExitCode::kOk));
  TempDir empty;
  const Proc r = compare({empty.path()});
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage));
  EXPECT_NE(r.err.find("no *.json reports"), std::string::npos);
  EXPECT_EQ(compare({}).exit_code, to_int(ExitCode::kUsage));
  EXPECT_EQ(compare({d.file("missing.json")}).exit_code, to_int(ExitCode::kUsage));
}

TEST(CompareCli, HelpExplainsCausesAndExitCodes) {
  const Proc r = compare({"--help"});
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kOk));
  EXPECT_NE(r.out.find("retained_graph"), std::string::npos);
  EXPECT_NE(r.out.find("Exit codes"), std::string::npos);
}

// --help reads as a manual: options in groups with placeholders in words,
// none of the parser's own notation, every cause in a line with what it is
// read from, an example per mode.
TEST(CompareCli, HelpReadsAsAManualWithoutParserInternals) {
  const Proc r = compare({"--help"});
  ASSERT_EQ(r.exit_code, to_int(ExitCode::kOk));
  for (const char* leak : {"Excludes", "ENUM", "->", "OR {", "REQUIRED", "Needs:", "At Most", "TEXT"}) {
    EXPECT_EQ(r.out.find(leak), std::string::npos) << leak << "\n" << r.out;
  }
  // Each cause by name with its label, and what it is read from (all but
  // inconclusive, which is read from nothing).
  std::size_t from = 0;
  for (std::size_t at = r.out.find("from: "); at != std::string::npos; at = r.out.find("from: ", at + 1)) ++from;
  EXPECT_EQ(from, all_values<Cause>().size() - 1) << r.out;
  for (Cause c : all_values<Cause>()) {
    const std::size_t at = r.out.find("\n  " + std::string(to_string(c)) + " ");
    ASSERT_NE(at, std::string::npos) << to_string(c);
    const std::size_t eol = r.out.find('\n', at + 1);
    EXPECT_GT(eol - at, std::string(to_string(c)).size() + 10) << to_string(c) << ": no label";
  }
  for (const char* group : {"What to print:", "Gates (exit 1 when one fails):", "Predictions:", "Against a baseline:",
                            "Checking reports:"}) {
    EXPECT_NE(r.out.find(group), std::string::npos) << group;
  }
  for (const char* mode : {"--format html", "--expect ", "--baseline ", "--budget-mib ", "--world-size ", "--check "}) {
    EXPECT_NE(r.out.find(std::string("  compare_memory_reports ")), std::string::npos);
    const std::size_t examples = r.out.find("Examples:");
    ASSERT_NE(examples, std::string::npos);
    EXPECT_NE(r.out.find(mode, examples), std::string::npos) << mode;
  }
}

TEST(CompareCli, AGateFlagTakesOneValueAndTheNextArgumentIsAReport) {
  TempDir d;
  const std::string f = write_synth(d, "a.json", activation_heavy());
  // The report after --fail-on is read as a report, not taken for a cause.
  const Proc r = compare({"--fail-on", "activations", f});
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kGateFailed)) << r.err;
  EXPECT_NE(r.err.find("gate failed: model is activations (--fail-on)"), std::string::npos) << r.err;
  EXPECT_EQ(compare({"--expect", "model=activations", f, "--fail-on", "retained_graph"}).exit_code,
            to_int(ExitCode::kOk));
}

namespace {

// A copy of the CPU fixtures with alpha batch 1's forward and backward
// peaks raised by a fifth: a made regression.
std::string regressed_copy(const TempDir& d) {
  const std::string dir = d.file("new");
  std::filesystem::create_directories(dir);
  for (const auto& e : std::filesystem::directory_iterator(std::string(MEMDIAG_FIXTURES_DIR) + "/cpu")) {
    auto j = nlohmann::json::parse(read_text(e.path().string()));
    if (e.path().filename() == "alpha-batch1.json") {
      for (auto& s : j["samples"]) {
        if (s["phase"] == "forward" || s["phase"] == "backward") s["peak_allocated_mib"] = s["peak_allocated_mib"].get<double>() * 1.2;
      }
    }
    std::ofstream(dir + "/" + e.path().filename().string()) << j.dump(1);
  }
  return dir;
}

}  // namespace

TEST(Baseline, SameReportsPassAndAGrownPeakFailsNamingPhaseAndComponent) {
  TempDir d;
  const std::string base = std::string(MEMDIAG_FIXTURES_DIR) + "/cpu";
  const Proc same = run({MEMDIAG_COMPARE_EXE, base, "--baseline", base, "--format", "json"});
  EXPECT_EQ(same.exit_code, 0) << same.err;
  const auto js = nlohmann::json::parse(same.out)["baseline"];
  EXPECT_EQ(js["regressed"], false);
  EXPECT_EQ(js["pairs"].size(), 7u);
  EXPECT_TRUE(js["new_without_baseline"].empty());
  const auto errors = validate(load_json(MEMDIAG_COMPARISON_SCHEMA_FILE), nlohmann::json::parse(same.out));
  EXPECT_TRUE(errors.empty()) << errors.front();

  const std::string now = regressed_copy(d);
  const Proc grown = run({MEMDIAG_COMPARE_EXE, now, "--baseline", base});
  EXPECT_EQ(grown.exit_code, 1);
  EXPECT_NE(grown.err.find("regressed against the baseline: alpha, cpu, preset small, batch 1,"), std::string::npos) << grown.err;
  EXPECT_NE(grown.out.find("forward                   8.11          9.73  +20.0%"), std::string::npos) << grown.out;
  // Allowed by a wider threshold, or by a MiB floor above the 3.2 MiB rise.
  EXPECT_EQ(run({MEMDIAG_COMPARE_EXE, now, "--baseline", base, "--max-increase", "25%"}).exit_code, 0);
  EXPECT_EQ(run({MEMDIAG_COMPARE_EXE, now, "--baseline", base, "--max-increase-mib", "4"}).exit_code, 0);
  // A report without a partner is listed, not dropped.
  const Proc partial = run({MEMDIAG_COMPARE_EXE, base, "--baseline", base + "/alpha-batch1.json"});
  EXPECT_NE(partial.out.find("no baseline for"), std::string::npos) << partial.out;
  EXPECT_EQ(run({MEMDIAG_COMPARE_EXE, base, "--max-increase", "5%"}).exit_code, 2);
  // A bare 5 would be 500%: a +20% regression would pass; refused, saying so.
  const Proc bare = run({MEMDIAG_COMPARE_EXE, now, "--baseline", base, "--max-increase", "5"});
  EXPECT_EQ(bare.exit_code, 2);
  EXPECT_NE(bare.err.find("--max-increase: '5' is a fraction, 500%; write 5% for 5 percent"), std::string::npos)
      << bare.err;
  EXPECT_EQ(run({MEMDIAG_COMPARE_EXE, now, "--baseline", base, "--max-increase", "0.25"}).exit_code, 0);
  // A cause misspelt: the nearest named, and every cause listed.
  const Proc cause = run({MEMDIAG_COMPARE_EXE, base, "--fail-on", "retained-graph"});
  EXPECT_EQ(cause.exit_code, 2);
  EXPECT_NE(cause.err.find("(did you mean retained_graph?); the causes: activations, "), std::string::npos) << cause.err;
  // A format misspelt: what was typed and what is allowed, not CLI11's map.
  const Proc format = run({MEMDIAG_COMPARE_EXE, base, "--format", "htm"});
  EXPECT_EQ(format.exit_code, 2);
  EXPECT_NE(format.err.find("'htm' is not a format (did you mean html?); the formats: text, markdown, json, junit, html"),
            std::string::npos)
      << format.err;
  EXPECT_EQ(format.err.find("FAILED"), std::string::npos) << format.err;
  EXPECT_EQ(run({MEMDIAG_COMPARE_EXE, base, "--format", "JSON"}).exit_code, 0);  // case ignored, as before
  // A flag misspelt: named, with the nearest.
  const Proc flag = run({MEMDIAG_COMPARE_EXE, base, "--basline", base});
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_NE(flag.err.find("unknown flag --basline (did you mean --baseline?)"), std::string::npos) << flag.err;
}

TEST(Junit, GatesAndBaselineAreTestCasesThatPythonsXmlParserReads) {
  TempDir d;
  const std::string base = std::string(MEMDIAG_FIXTURES_DIR) + "/cpu";
  const std::string now = regressed_copy(d);
  const Proc j = run({MEMDIAG_COMPARE_EXE, now, "--baseline", base, "--expect", "alpha=activations", "--expect",
                      "beta=activations", "--fail-on", "retained_graph", "--format", "junit", "-o", d.file("j.xml")});
  EXPECT_EQ(j.exit_code, 1);
  const Proc py = run({"/usr/bin/env", "python3", "-c",
                       "import sys, xml.dom.minidom as m\n"
                       "d = m.parse(sys.argv[1])\n"
                       "cases = d.getElementsByTagName('testcase')\n"
                       "fails = [c.getAttribute('name') for c in cases if c.getElementsByTagName('failure')]\n"
                       "print(len(cases)); print('\\n'.join(fails))",
                       d.file("j.xml")});
  ASSERT_EQ(py.exit_code, 0) << py.err;
  // 1 alpha expect + 1 beta expect + 3 fail-on (one per group) + 7 baseline.
  EXPECT_EQ(py.out.substr(0, py.out.find('\n')), "12") << py.out;
  EXPECT_NE(py.out.find("beta, cpu is activations"), std::string::npos) << py.out;
  EXPECT_NE(py.out.find("alpha, cpu, preset small, batch 1, 4 steps peak"), std::string::npos) << py.out;
  EXPECT_NE(py.out.find("gamma, cpu is not retained_graph"), std::string::npos) << py.out;
  EXPECT_EQ(std::count(py.out.begin(), py.out.end(), '\n'), 4) << py.out;  // the count and three failures
}

// scripts/ci-memory-gate.sh ARGS with this build's tools, as CI calls it.
static Proc run_gate_script(const std::vector<std::string>& args) {
  const std::string script = std::string(MEMDIAG_SOURCE_DIR) + "/scripts/ci-memory-gate.sh";
  const std::string build = std::filesystem::path(MEMDIAG_COMPARE_EXE).parent_path().parent_path().string();
  std::vector<std::string> cmd = {"/usr/bin/env", "MEMDIAG_BUILD_DIR=" + build, "bash", script};
  cmd.insert(cmd.end(), args.begin(), args.end());
  return run(cmd);
}

// The gate as a template for a user's own model: a case file of the tests'
// own, no baseline yet (refused, saying how to make one), the first
// baseline made on purpose, the gate passing with PASS first, recorded
// reports gated as they are, and a bare --max-increase above 1 refused
// before anything runs.
TEST(CiExample, YourOwnCaseFileMakesItsFirstBaselineThenIsGated) {
  if (!std::filesystem::exists(MEMDIAG_DIAGNOSTICS_EXE)) {
    GTEST_SKIP() << "this build has no memory_diagnostics (built without LibTorch)";
  }
  TempDir d;
  const std::string own = std::string(MEMDIAG_SOURCE_DIR) + "/tests/cases/own.json";
  const auto gate = run_gate_script;
  const std::string base = d.file("baseline");
  const std::vector<std::string> job = {"--expect", "own=optimizer_state", "--", "--case", own, "--device", "cpu", "-q"};
  auto with = [&](std::vector<std::string> head) {
    head.insert(head.end(), job.begin(), job.end());
    return head;
  };
  const Proc none = gate(with({d.file("out"), base}));
  EXPECT_EQ(none.exit_code, 2) << none.err;
  EXPECT_NE(none.err.find("no baseline reports yet: make the first with scripts/ci-memory-gate.sh --refresh-baseline"),
            std::string::npos) << none.err;
  EXPECT_FALSE(std::filesystem::exists(d.file("out/reports"))) << "nothing ran";

  const Proc first = gate(with({"--refresh-baseline", d.file("out"), base}));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_TRUE(std::filesystem::exists(base + "/own.json")) << first.err;

  const Proc ok = gate(with({d.file("out"), base}));
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  const std::string summary = read_text(d.file("out/summary.md"));
  EXPECT_EQ(summary.rfind("## Memory gate: PASS", 0), 0u) << summary;
  EXPECT_NE(summary.find("- held: --expect own=optimizer_state: own"), std::string::npos) << summary;
  EXPECT_NE(read_text(d.file("out/junit.xml")).find("failures=\"0\""), std::string::npos);

  // Reports recorded elsewhere (a Python job's): gated as they are.
  const Proc wrong = gate({d.file("out2"), base, "--reports", base, "--expect", "own=activations"});
  EXPECT_EQ(wrong.exit_code, 1) << wrong.err;
  EXPECT_EQ(read_text(d.file("out2/summary.md")).rfind("## Memory gate: FAIL", 0), 0u);

  const Proc bare = gate(with({d.file("out3"), base, "--max-increase", "5"}));
  EXPECT_EQ(bare.exit_code, 2) << bare.err;
  EXPECT_NE(bare.err.find("'5' is a fraction, 500%; write 5% for 5 percent"), std::string::npos) << bare.err;
  EXPECT_FALSE(std::filesystem::exists(d.file("out3"))) << "refused before anything ran";
}

// The README's CI example on the CPU, with the committed CPU fixtures as
// the baseline: it passes as committed, and fails when the baseline says
// the peaks used to be lower.
TEST(CiExample, TheReadmeJobPassesAgainstTheCommittedFixturesAndCatchesAGrownPeak) {
  if (!std::filesystem::exists(MEMDIAG_DIAGNOSTICS_EXE)) {
    GTEST_SKIP() << "this build has no memory_diagnostics (built without LibTorch)";
  }
  TempDir d;
  const std::string base = std::string(MEMDIAG_FIXTURES_DIR) + "/cpu";
  const Proc ok = run_gate_script({d.file("ok"), base, "--device", "cpu", "-q"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  const std::string junit = read_text(d.file("ok/junit.xml"));
  EXPECT_NE(junit.find("tests=\"10\" failures=\"0\""), std::string::npos) << junit.substr(0, 300);  // 3 causes, 7 peaks
  EXPECT_NE(read_text(d.file("ok/report.html")).find("<svg"), std::string::npos);
  EXPECT_NE(read_text(d.file("ok/summary.md")).find("No regression."), std::string::npos);

  // A baseline whose alpha peaks were a fifth lower: the same runs (the
  // reports just gated, with the plan's expected causes) regress.
  const std::string lower = d.file("lower");
  std::filesystem::create_directories(lower);
  for (const auto& e : std::filesystem::directory_iterator(base)) {
    auto j = nlohmann::json::parse(read_text(e.path().string()));
    if (j["case"]["name"] == "alpha") {
      for (auto& s : j["samples"]) {
        s["peak_allocated_mib"] = s["peak_allocated_mib"].get<double>() / 1.25;
        const double was = s["allocated_mib"].get<double>();
        s["allocated_mib"] = std::min(was, s["peak_allocated_mib"].get<double>());
        // The census stays within allocated, as the reader asks.
        if (s.contains("tensors") && was > 0) {
          for (auto& [role, v] : s["tensors"].items()) v = v.get<double>() * s["allocated_mib"].get<double>() / was;
        }
      }
    }
    std::ofstream(lower + "/" + e.path().filename().string()) << j.dump(1);
  }
  const Proc grown = run_gate_script({d.file("grown"), lower, "--reports", d.file("ok/reports"), "--expect",
                                      "alpha=activations", "--expect", "beta=optimizer_state", "--expect",
                                      "gamma=retained_graph"});
  EXPECT_EQ(grown.exit_code, 1) << grown.err;
  EXPECT_NE(read_text(d.file("grown/junit.xml")).find("failures=\"3\""), std::string::npos);
  EXPECT_NE(read_text(d.file("grown/summary.md")).find("Memory regressed."), std::string::npos);

  // Runs that run out of memory: every artifact is still written, and the
  // job fails.
  const Proc oom = run_gate_script({d.file("oom"), base, "--device", "cpu", "-q", "--memory-limit-mib", "40"});
  EXPECT_NE(oom.exit_code, 0) << oom.err;
  for (const char* f : {"junit.xml", "report.html", "summary.md"}) {
    EXPECT_TRUE(std::filesystem::exists(d.file(std::string("oom/") + f))) << f << "\n" << oom.err;
  }

  // The documented refresh: the lowered baseline replaced by the new
  // reports, after which the job passes against it.
  const Proc refresh = run_gate_script({"--refresh-baseline", d.file("refresh"), lower, "--device", "cpu", "-q"});
  ASSERT_EQ(refresh.exit_code, 0) << refresh.err;
  const Proc again = run_gate_script({d.file("again"), lower, "--device", "cpu", "-q"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
}

// Hostile input, class 3: output that fails is a failure.
TEST(HostileInput, AFullDiskIsAFailureNotACutOffSuccess) {
  const std::string cmd = std::string(MEMDIAG_COMPARE_EXE) + " " + MEMDIAG_FIXTURES_DIR + "/h200 --format json > /dev/full";
  const Proc r = run({"/bin/sh", "-c", cmd});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("cannot write the output (No space left on device)"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// Hostile input, class 4: what a report carries cannot drive the terminal.
TEST(HostileInput, ControlCharactersFromAReportOrAFileNameArePrintedAsReplacements) {
  TempDir d;
  auto j = nlohmann::json::parse(read_text(std::string(MEMDIAG_FIXTURES_DIR) + "/cpu/alpha.json"));
  j["case"]["name"] = "alpha\x1b[2J\nFAKE: line\x07\xc2\x9b";
  std::ofstream(d.file("evil.json")) << j.dump();
  for (const char* format : {"text", "markdown", "json", "junit", "html"}) {
    const Proc r = run({MEMDIAG_COMPARE_EXE, d.file("evil.json"), "--format", format});
    EXPECT_EQ(r.exit_code, 0) << format << r.err;
    EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << format;
    EXPECT_EQ(r.out.find('\x07'), std::string::npos) << format;
    EXPECT_EQ(r.out.find("\xc2\x9b"), std::string::npos) << format;
    EXPECT_EQ(r.out.find("\nFAKE: line"), std::string::npos) << format;
  }
  // A file name with a newline and an escape: its error is one line.
  const std::string odd = d.file("a\nb\x1b[31m.json");
  std::ofstream(odd) << "{";
  const Proc bad = run({MEMDIAG_COMPARE_EXE, odd});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
  EXPECT_EQ(bad.err.find('\x1b'), std::string::npos) << bad.err;
}

// Hostile input, classes 1 and 2: each bad file is one error line naming
// it, and the good reports beside it are still analysed.
TEST(HostileInput, EndlessDeepOrLoopingInputIsOneErrorAndTheRestIsRead) {
  TempDir d;
  const std::string dir = d.file("dir");
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(std::string(MEMDIAG_FIXTURES_DIR) + "/cpu/alpha.json", dir + "/good.json");
  // A symlink loop, and a report whose opaque case object nests 100,000 deep.
  std::filesystem::create_symlink("loop.json", dir + "/loop.json");
  auto j = nlohmann::json::parse(read_text(std::string(MEMDIAG_FIXTURES_DIR) + "/cpu/beta.json"));
  std::string text = j.dump();
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  text.replace(text.find("\"case\":{") + 8, 0, "\"deep\":" + deep + ",");
  std::ofstream(dir + "/deep.json") << text;
  const Proc r = run({MEMDIAG_COMPARE_EXE, dir, "/dev/zero", "--format", "json"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("/dev/zero: $: larger than 256 MiB"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("deep.json: $: nested deeper than 512 levels"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("loop.json: $: cannot read (Too many levels of symbolic links)"), std::string::npos) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["groups"].size(), 1u) << "good.json is still analysed";
  for (std::size_t at = 0, n = 0; (at = r.err.find('\n', at)) != std::string::npos; ++at) {
    EXPECT_LT(++n, 5u) << r.err;
  }
}

// The JUnit and baseline renderers on the committed CPU fixtures against
// the made regression, line by line against golden files.
TEST(Golden, JunitAndBaselineOnTheCpuFixtures) {
  TempDir d;
  const std::string base = std::string(MEMDIAG_FIXTURES_DIR) + "/cpu";
  const std::string now = regressed_copy(d);
  auto check = [](const std::string& name, const std::string& actual) { expect_golden(name, actual); };
  const Proc junit = run({MEMDIAG_COMPARE_EXE, now, "--baseline", base, "--expect", "alpha=activations", "--expect",
                          "beta=activations", "--fail-on", "retained_graph", "--format", "junit"});
  EXPECT_EQ(junit.exit_code, 1);
  check("junit.xml", junit.out);
  const Proc text = run({MEMDIAG_COMPARE_EXE, now, "--baseline", base});
  check("baseline.txt", text.out.substr(text.out.find("== against the baseline")));
}

TEST(Baseline, TheComponentThatMovedIsNamed) {
  TempDir d;
  // The "old" alpha held batch 4's activations; the new one holds 1024's.
  auto old_run = nlohmann::json::parse(read_text(std::string(MEMDIAG_FIXTURES_DIR) + "/cpu/alpha-batch4.json"));
  old_run["config"]["batch_size_per_device"] = 1024;
  std::ofstream(d.file("old.json")) << old_run.dump();
  const Proc r = run({MEMDIAG_COMPARE_EXE, std::string(MEMDIAG_FIXTURES_DIR) + "/cpu/alpha.json", "--baseline",
                      d.file("old.json"), "--format", "json"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto pair = nlohmann::json::parse(r.out)["baseline"]["pairs"][0];
  EXPECT_EQ(pair["regressed"], true);
  EXPECT_EQ(pair["moved"], "activations") << pair;
  bool forward_regressed = false;
  for (const auto& ph : pair["phases"]) forward_regressed = forward_regressed || (ph["phase"] == "forward" && ph["regressed"] == true);
  EXPECT_TRUE(forward_regressed) << pair["phases"];
}

// --check: a report of another writer's, validated with the reader's full
// rules, a line per file, exit 0 or 2.
TEST(Check, ValidatesEveryReportWithTheReadersRulesALineEach) {
  TempDir d;
  const Proc ok = run({MEMDIAG_COMPARE_EXE, "--check", std::string(MEMDIAG_FIXTURES_DIR) + "/cpu"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(count_lines(ok.out), 7) << ok.out;
  EXPECT_NE(ok.out.find("alpha.json: valid (schema 1, read through the upgrade to 3, written by memory_diagnostics"),
            std::string::npos) << ok.out;
  // A phase out of order, a bound broken: each one line naming the file and the path.
  auto j = nlohmann::json::parse(read_text(std::string(MEMDIAG_FIXTURES_DIR) + "/cpu/gamma.json"));
  std::swap(j["samples"][3], j["samples"][4]);
  write_text(d.file("swapped.json"), j.dump());
  j = nlohmann::json::parse(read_text(std::string(MEMDIAG_FIXTURES_DIR) + "/cpu/gamma.json"));
  j["samples"][2]["allocated_mib"] = -1;
  write_text(d.file("negative.json"), j.dump());
  const Proc bad = run({MEMDIAG_COMPARE_EXE, "--check", d.file("swapped.json"), d.file("negative.json"),
                        std::string(MEMDIAG_FIXTURES_DIR) + "/cpu/beta.json"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(count_lines(bad.err), 2) << bad.err;
  EXPECT_NE(bad.err.find(d.file("swapped.json") + ": $.samples[3]"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find(d.file("negative.json") + ": $.samples[2].allocated_mib"), std::string::npos) << bad.err;
  EXPECT_NE(bad.out.find("beta.json: valid"), std::string::npos);
  // Checking only: the comparison's flags are refused with it.
  EXPECT_EQ(run({MEMDIAG_COMPARE_EXE, "--check", d.file("swapped.json"), "--format", "json"}).exit_code, 2);
}

// A CI gate's outputs lead with its outcome: PASS or FAIL, the failed checks
// and regressions before what held, the threshold said, ahead of the
// diagnoses (a pull-request comment's first lines are what a reviewer reads).
TEST(GateSummary, PassOrFailAndTheFailuresComeFirst) {
  TempDir d;
  const std::string base = std::string(MEMDIAG_FIXTURES_DIR) + "/cpu";
  const std::string now = regressed_copy(d);
  const Proc md = run({MEMDIAG_COMPARE_EXE, now, "--baseline", base, "--expect", "alpha=activations", "--expect",
                       "beta=activations", "--format", "markdown"});
  EXPECT_EQ(md.exit_code, 1) << md.err;
  EXPECT_EQ(md.out.rfind("## Memory gate: FAIL\n\nA peak regresses when it grows by more than 5.0%.", 0), 0u) << md.out;
  const std::size_t first_held = md.out.find("- held: ");
  const std::size_t last_failed = md.out.rfind("- **FAILED:** ");
  ASSERT_NE(first_held, std::string::npos) << md.out;
  ASSERT_NE(last_failed, std::string::npos) << md.out;
  EXPECT_LT(last_failed, first_held) << md.out;
  EXPECT_NE(md.out.find("**FAILED:** --expect beta=activations: beta"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("**FAILED:** regressed: alpha"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("- held: --expect alpha=activations: alpha"), std::string::npos) << md.out;
  EXPECT_LT(md.out.find("## Memory gate"), md.out.find("### alpha")) << "the diagnoses follow the outcome";

  const Proc ok = run({MEMDIAG_COMPARE_EXE, base, "--baseline", base, "--expect", "alpha=activations"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(ok.out.rfind("== memory gate: PASS ==\nheld    --expect alpha=activations: alpha", 0), 0u) << ok.out;
  EXPECT_EQ(ok.out.find("FAILED"), std::string::npos) << ok.out;

  const Proc none = run({MEMDIAG_COMPARE_EXE, base});
  EXPECT_EQ(none.out.find("memory gate"), std::string::npos) << "no gate, no gate summary";

  // The HTML: the gate's table before the first group, failures first, and
  // each matched run's phases beside its baseline's.
  const Proc html = run({MEMDIAG_COMPARE_EXE, now, "--baseline", base, "--expect", "alpha=activations", "--format",
                         "html"});
  EXPECT_EQ(html.exit_code, 1) << html.err;
  const std::size_t gate = html.out.find("<section class=\"gate\"><h2 class=\"fail\">Memory gate: FAIL</h2>");
  ASSERT_NE(gate, std::string::npos) << html.out.substr(0, 2000);
  EXPECT_LT(gate, html.out.find("<section class=\"group\""));
  EXPECT_LT(html.out.find("<tr class=\"failed\">"), html.out.find("<tr class=\"held\">"));
  EXPECT_NE(html.out.find("A peak regresses when it grows by more than 5.0%."), std::string::npos);
  EXPECT_NE(html.out.find("class=\"baseline-phases\""), std::string::npos) << "the per-phase table";
}
