// compare_memory_reports as a user runs it: gates, formats and bad input.
#include "memdiag/report_json.hpp"
#include "memdiag/exit_code.hpp"
#include "process.hpp"
#include "synthetic.hpp"

#include <gtest/gtest.h>

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
