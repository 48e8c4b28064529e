// compare_memory_reports as a user runs it: gates, formats and bad input.
#include "memdiag/report_json.hpp"
#include "memdiag/exit_code.hpp"
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

  const std::string now = regressed_copy(d);
  const Proc grown = run({MEMDIAG_COMPARE_EXE, now, "--baseline", base});
  EXPECT_EQ(grown.exit_code, 1);
  EXPECT_NE(grown.err.find("regressed against the baseline: alpha preset small batch 1"), std::string::npos) << grown.err;
  EXPECT_NE(grown.out.find("forward                   8.11          9.73  +20.0%"), std::string::npos) << grown.out;
  // Allowed by a wider threshold, or by a MiB floor above the 3.2 MiB rise.
  EXPECT_EQ(run({MEMDIAG_COMPARE_EXE, now, "--baseline", base, "--max-increase", "25%"}).exit_code, 0);
  EXPECT_EQ(run({MEMDIAG_COMPARE_EXE, now, "--baseline", base, "--max-increase-mib", "4"}).exit_code, 0);
  // A report without a partner is listed, not dropped.
  const Proc partial = run({MEMDIAG_COMPARE_EXE, base, "--baseline", base + "/alpha-batch1.json"});
  EXPECT_NE(partial.out.find("no baseline for"), std::string::npos) << partial.out;
  EXPECT_EQ(run({MEMDIAG_COMPARE_EXE, base, "--max-increase", "5%"}).exit_code, 2);
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
  EXPECT_NE(py.out.find("beta | cpu | world 1 | none is activations"), std::string::npos) << py.out;
  EXPECT_NE(py.out.find("alpha preset small batch 1 steps 4 rank 0/1 cpu peak"), std::string::npos) << py.out;
  EXPECT_NE(py.out.find("gamma | cpu | world 1 | none is not retained_graph"), std::string::npos) << py.out;
  EXPECT_EQ(std::count(py.out.begin(), py.out.end(), '\n'), 4) << py.out;  // the count and three failures
}
