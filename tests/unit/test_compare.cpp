// run_compare, called as a library: formats, gates and bad input, with no
// process started.
#include "compare.hpp"

#include "memdiag/errors.hpp"
#include "memdiag/exit_code.hpp"
#include "memdiag/report_json.hpp"
#include "process.hpp"
#include "synthetic.hpp"

#include <gtest/gtest.h>

#include <sstream>

using namespace memdiag;
using namespace memdiag::testkit;

namespace {

struct Result {
  int code = -1;
  std::string out, err;
};

Result compare(const CompareOptions& o) {
  std::ostringstream out, err;
  Result r;
  r.code = run_compare(o, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

CompareOptions options(std::vector<std::string> inputs, OutputFormat format = OutputFormat::kText) {
  CompareOptions o;
  o.inputs = std::move(inputs);
  o.format = format;
  return o;
}

std::string activation_report(const TempDir& d, const std::string& name = "a.json") {
  Synth s;
  s.case_name = "model";
  s.activations_mib = 200;
  write_report(d.file(name), synth(s));
  return d.file(name);
}

}  // namespace

TEST(RunCompare, TextByDefaultAndExitZero) {
  TempDir d;
  const Result r = compare(options({activation_report(d)}));
  EXPECT_EQ(r.code, to_int(ExitCode::kOk)) << r.err;
  EXPECT_NE(r.out.find("dominant cause: activations"), std::string::npos);
  EXPECT_EQ(r.err, "");
}

TEST(RunCompare, GatesAreDataThenOneLineEach) {
  TempDir d;
  CompareOptions o = options({activation_report(d)});
  o.expect = {parse_expectation("model=retained_graph"), parse_expectation("other=activations")};
  o.fail_on = {parse_fail_on("activations")};
  const Result r = compare(o);
  EXPECT_EQ(r.code, to_int(ExitCode::kGateFailed));
  EXPECT_EQ(count_lines(r.err), 3) << r.err;
  EXPECT_NE(r.err.find("gate failed: model is activations, expected retained_graph"), std::string::npos);
  EXPECT_NE(r.err.find("gate failed: no report of case other"), std::string::npos);
  EXPECT_NE(r.err.find("gate failed: model is activations (--fail-on)"), std::string::npos);
}

TEST(RunCompare, BadExpectationsAreUsageErrors) {
  EXPECT_THROW(parse_expectation("model"), UsageError);
  EXPECT_THROW(parse_expectation("=activations"), UsageError);
  EXPECT_THROW(parse_expectation("model=leaky"), UsageError);
  EXPECT_THROW(parse_fail_on("leaky"), UsageError);
  EXPECT_EQ(parse_expectation("a=b=activations").first, "a=b");
}

TEST(RunCompare, AnUnreadableFileIsExitTwoAndTheRestIsStillPrinted) {
  TempDir d;
  write_text(d.file("bad.json"), "{");
  const CompareOptions o = options({activation_report(d), d.file("bad.json")}, OutputFormat::kJson);
  const Result r = compare(o);
  EXPECT_EQ(r.code, to_int(ExitCode::kUsage));
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["groups"].size(), 1u);
  EXPECT_EQ(j["errors"].size(), 1u);
  EXPECT_NE(r.err.find("bad.json: $: not valid JSON"), std::string::npos);
}

TEST(RunCompare, ConfirmingRunsAvoidReportsOnDiskBesideTheOnesGiven) {
  TempDir d;
  const std::string given = activation_report(d, "model.json");
  write_text(d.file("model-batch1.json"), "not given, but there");
  const CompareOptions o = options({given}, OutputFormat::kJson);
  const Result r = compare(o);
  const auto runs = nlohmann::json::parse(r.out)["groups"][0]["confirming_runs"];
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0]["output"], d.file("model-batch1-2.json"));
  EXPECT_EQ(runs[1]["output"], d.file("model-batch4.json"));
}

TEST(RunCompare, NothingToReadIsExitTwo) {
  TempDir d;
  const Result r = compare(options({d.path()}));
  EXPECT_EQ(r.code, to_int(ExitCode::kUsage));
  EXPECT_NE(r.err.find("no *.json reports"), std::string::npos);
}

TEST(RunCompare, AFileNameThatIsNotUtf8DoesNotStopTheJsonOutput) {
  TempDir d;
  const std::string name = activation_report(d, std::string("bad-\xff\xfe-name.json"));
  const Result r = compare(options({name}, OutputFormat::kJson));
  EXPECT_EQ(r.code, to_int(ExitCode::kOk)) << r.err;
  const auto j = nlohmann::json::parse(r.out);  // valid JSON, the bytes replaced
  EXPECT_NE(j["groups"][0]["runs"][0]["source"].get<std::string>().find("\xEF\xBF\xBD"), std::string::npos);
}

// The reports of a data-parallel run that do not make its world: a rank
// given twice (both copies at the highest peak) and a rank missing (world 3,
// ranks 0 and 1). Every format warns, and one row only is the capacity
// constraint.
TEST(RunCompare, ARankGivenTwiceOrMissingWarnsInEveryFormat) {
  TempDir d;
  auto rank_report = [&](const std::string& name, int rank, int world, double activations, const std::string& host) {
    Synth s;
    s.case_name = "model";
    s.rank = rank;
    s.world_size = world;
    s.activations_mib = activations;
    Report r = synth(s);
    r.environment.host = host;  // the same rank's copies differ in bytes
    write_report(d.file(name), r);
    return d.file(name);
  };
  const std::vector<std::string> twice = {rank_report("twice-0.json", 0, 2, 40, "a"),
                                          rank_report("twice-1.json", 1, 2, 60, "a"),
                                          rank_report("twice-1-again.json", 1, 2, 60, "b")};
  const std::vector<std::string> missing = {rank_report("w3-0.json", 0, 3, 40, "a"),
                                            rank_report("w3-1.json", 1, 3, 60, "a")};
  const std::vector<std::pair<std::vector<std::string>, std::string>> sets = {
      {twice, "rank 1 given more than once"}, {missing, "rank 2 not given"}};
  for (const auto& [inputs, says] : sets) {
    for (OutputFormat f : {OutputFormat::kText, OutputFormat::kMarkdown, OutputFormat::kJson, OutputFormat::kHtml,
                           OutputFormat::kJunit}) {
      const Result r = compare(options(inputs, f));
      EXPECT_EQ(r.code, to_int(ExitCode::kOk)) << r.err;
      EXPECT_NE(r.out.find(says), std::string::npos) << static_cast<int>(f) << ":\n" << r.out;
    }
    const Result text = compare(options(inputs));
    std::size_t marks = 0;
    for (std::size_t at = text.out.find("<- capacity constraint"); at != std::string::npos;
         at = text.out.find("<- capacity constraint", at + 1)) {
      ++marks;
    }
    EXPECT_EQ(marks, 1u) << text.out;
    const nlohmann::json j = nlohmann::json::parse(compare(options(inputs, OutputFormat::kJson)).out);
    const nlohmann::json& dist = j["groups"][0]["distributed"][0];
    int flagged = 0;
    for (const auto& row : dist["ranks"]) flagged += row["capacity_constraint"].get<bool>() ? 1 : 0;
    EXPECT_EQ(flagged, 1) << dist.dump(1);
    bool coded = false;
    for (const auto& w : j["groups"][0]["warning_data"]) coded = coded || w["code"] == "rank_set_incomplete";
    EXPECT_TRUE(coded) << j["groups"][0]["warning_data"].dump(1);
    const Result junit = compare(options(inputs, OutputFormat::kJunit));
    EXPECT_NE(junit.out.find("skipped=\"1\""), std::string::npos) << junit.out;
    EXPECT_NE(junit.out.find("failures=\"0\""), std::string::npos) << junit.out;
  }
  // JSON: which ranks, as data.
  const nlohmann::json j = nlohmann::json::parse(compare(options(missing, OutputFormat::kJson)).out);
  EXPECT_EQ(j["groups"][0]["distributed"][0]["missing_ranks"], nlohmann::json::array({2}));
  EXPECT_EQ(j["groups"][0]["distributed"][0]["world_size"], 3);
  // A whole set says nothing of the kind.
  const Result whole = compare(options({twice[0], twice[1]}));
  EXPECT_EQ(whole.out.find("do not make the run's world"), std::string::npos) << whole.out;
  // One rank of a world of two, alone: the other rank is named as not given.
  const Result alone = compare(options({twice[0]}));
  EXPECT_NE(alone.out.find("rank 1 not given"), std::string::npos) << alone.out;
}
