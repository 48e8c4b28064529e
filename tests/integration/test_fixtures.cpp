// The committed reports (tests/fixtures/<machine>/) and the documents built
// from them: every fixture is a valid report, compare_memory_reports gives the
// seed's diagnosis on them, and SOLUTION.md shows exactly what it prints.
#include "json_schema.hpp"
#include "memdiag/exit_code.hpp"
#include "memdiag/report_json.hpp"
#include "process.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <map>

using namespace memdiag;
using namespace memdiag::testkit;
namespace fs = std::filesystem;

namespace {

const std::string kFixtures = MEMDIAG_FIXTURES_DIR;

std::vector<std::string> machines() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(kFixtures)) {
    if (e.is_directory()) out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string block(const std::string& doc, const std::string& name) {
  const std::string begin = "<!-- compare:" + name + " begin -->\n";
  const std::string end = "<!-- compare:" + name + " end -->";
  const auto b = doc.find(begin);
  const auto e = doc.find(end);
  if (b == std::string::npos || e == std::string::npos || e < b) return "(block " + name + " missing)";
  return doc.substr(b + begin.size(), e - b - begin.size());
}

}  // namespace

// Fixtures written at older schema versions stay valid: the reader upgrades
// them, and what it reads is a valid report of the current schema.
TEST(Fixtures, EveryFixtureIsAValidReport) {
  int n = 0;
  const nlohmann::json schema = load_json(MEMDIAG_SCHEMA_FILE);
  for (const std::string& m : machines()) {
    for (const auto& e : fs::directory_iterator(fs::path(kFixtures) / m)) {
      if (e.path().extension() != ".json") continue;
      ++n;
      const Report r = load_report(e.path().string());
      const auto upgraded = validate(schema, nlohmann::json::parse(dump_report(r)));
      EXPECT_TRUE(upgraded.empty()) << e.path() << " read and written again: " << upgraded.front();
      if (load_json(e.path().string())["schema_version"] == kSchemaVersion) {
        const auto errors = schema_errors(e.path().string());
        EXPECT_TRUE(errors.empty()) << e.path() << ": " << errors.front();
      }
    }
  }
  EXPECT_GE(n, 3);
}

TEST(Fixtures, TwoRankH200RunsShowRanksImbalanceAndSharding) {
  const std::string dir = (fs::path(kFixtures) / "h200-2rank").string();
  if (!fs::exists(dir)) GTEST_SKIP() << "no 2-rank fixtures";
  const Proc r = run({MEMDIAG_COMPARE_EXE, dir, "--format", "json"});
  ASSERT_EQ(r.exit_code, to_int(ExitCode::kOk)) << r.err;
  const auto groups = nlohmann::json::parse(r.out)["groups"];
  std::map<std::string, nlohmann::json> by_group;
  for (const auto& g : groups) by_group[g["group"].get<std::string>()] = g;
  const auto& equal = by_group.at("alpha, cuda, world 2");
  const auto& extra = by_group.at("alpha, cuda, world 2 (rank 0 +512)");
  EXPECT_FALSE(equal["distributed"][0]["imbalanced"]);
  EXPECT_TRUE(extra["distributed"][0]["imbalanced"]);
  EXPECT_EQ(extra["distributed"][0]["capacity_constraint_rank"], 0);
  // ZeRO-1 counts as a remedy of the unsharded runs: one group, a row for it.
  const auto& beta = by_group.at("beta, cuda, world 2");
  int full = 0, shard = 0;
  for (const auto& run : beta["runs"]) {
    // Unsharded: AdamW's 2P plus DDP's P of buckets; sharded: P of state plus P.
    const bool sharded = run["remedy"] == "zero1";
    EXPECT_NEAR(run["excess_to_parameter_ratio"].get<double>(), sharded ? 2.0 : 3.0, 0.05) << run["source"];
    (sharded ? shard : full) += 1;
  }
  EXPECT_EQ(full, 2);
  EXPECT_EQ(shard, 2);
  ASSERT_EQ(beta["remedies"].size(), 1u);
  EXPECT_EQ(beta["remedies"][0]["remedy"], "zero1");
  EXPECT_TRUE(beta["remedies"][0]["reduces_cause"]);
  EXPECT_EQ(beta["dominant_cause"], "optimizer_state");
}

TEST(Fixtures, ComparisonJsonFollowsItsSchema) {
  const nlohmann::json schema = load_json(MEMDIAG_COMPARISON_SCHEMA_FILE);
  for (const std::string& m : machines()) {
    const Proc r = run({MEMDIAG_COMPARE_EXE, (fs::path(kFixtures) / m).string(), "--format", "json"});
    ASSERT_EQ(r.exit_code, to_int(ExitCode::kOk)) << r.err;
    const auto errors = validate(schema, nlohmann::json::parse(r.out));
    EXPECT_TRUE(errors.empty()) << m << ": " << errors.front();
  }
}

TEST(Fixtures, SeedDiagnosisOnEachMachine) {
  for (const std::string& m : machines()) {
    // The out-of-memory fixtures run beta into its weights' and gradients'
    // limits on purpose: there beta is rightly "parameters" (OutOfMemory.*).
    if (m.size() > 4 && m.compare(m.size() - 4, 4, "-oom") == 0) continue;
    // The transformer's fixtures hold delta alone: no seed case to diagnose.
    if (m == "h200-transformer") continue;
    const Proc r = run({MEMDIAG_COMPARE_EXE, (fs::path(kFixtures) / m).string(), "--expect", "alpha=activations",
                       "--expect", "beta=optimizer_state", "--expect", "gamma=retained_graph"});
    EXPECT_EQ(r.exit_code, to_int(ExitCode::kOk)) << m << "\n" << r.out << r.err;
  }
}

TEST(Fixtures, SolutionMdShowsWhatCompareReportsPrint) {
  const std::string doc = read_text(std::string(MEMDIAG_SOURCE_DIR) + "/SOLUTION.md");
  ASSERT_FALSE(doc.empty());
  for (const std::string& m : machines()) {
    // From the source tree with a relative path, as scripts/update-solution.sh
    // runs it: the suggested outputs are then the same in any checkout.
    const Proc r = run_in(MEMDIAG_SOURCE_DIR, {MEMDIAG_COMPARE_EXE, "tests/fixtures/" + m, "--format", "markdown"});
    ASSERT_EQ(r.exit_code, to_int(ExitCode::kOk)) << r.err;
    EXPECT_EQ(block(doc, m), r.out) << "SOLUTION.md is out of date for tests/fixtures/" << m
                                    << "; run scripts/update-solution.sh";
  }
}

namespace {

// Blocks of README.md and SOLUTION.md written by a command:
//   <!-- generated by: compare_memory_reports ARGS -->
//   ```text            (no fence when ARGS has --format markdown)
//   what it prints
//   ```
//   <!-- generated end -->
struct GeneratedBlock {
  std::vector<std::string> args;
  std::string body;
};

std::vector<GeneratedBlock> generated_blocks(const std::string& doc) {
  const std::string open = "<!-- generated by: compare_memory_reports", close = "<!-- generated end -->";
  std::vector<GeneratedBlock> out;
  for (auto b = doc.find(open); b != std::string::npos; b = doc.find(open, b + 1)) {
    const auto eol = doc.find(" -->\n", b);
    const auto e = doc.find(close, b);
    if (eol == std::string::npos || e == std::string::npos) break;
    GeneratedBlock g;
    std::istringstream words(doc.substr(b + open.size(), eol - b - open.size()));
    for (std::string w; words >> w;) g.args.push_back(w);
    g.body = doc.substr(eol + 5, e - eol - 5);
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace

TEST(Fixtures, GeneratedBlocksShowWhatTheirCommandsPrint) {
  int n = 0;
  for (const char* name : {"README.md", "SOLUTION.md"}) {
    const std::string doc = read_text(std::string(MEMDIAG_SOURCE_DIR) + "/" + name);
    for (const GeneratedBlock& g : generated_blocks(doc)) {
      std::vector<std::string> argv{MEMDIAG_COMPARE_EXE};
      argv.insert(argv.end(), g.args.begin(), g.args.end());
      const Proc r = run_in(MEMDIAG_SOURCE_DIR, argv);
      const bool markdown = std::find(g.args.begin(), g.args.end(), "markdown") != g.args.end();
      const std::string expected = markdown ? r.out : "```text\n" + r.out + "```\n";
      EXPECT_EQ(g.body, expected) << name << ": the block of compare_memory_reports " << testing::PrintToString(g.args)
                                  << " is out of date; run scripts/update-solution.sh";
      ++n;
    }
  }
  EXPECT_GE(n, 2);
}

// The H200's out-of-memory reports, one per phase (scripts/oom-procedure.sh):
// each verdict from the one report, by the rule for out-of-memory runs.
TEST(Fixtures, H200OutOfMemoryInEachPhaseNamesItsCause) {
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"1-model_ready", "parameters"}, {"2-forward", "activations"}, {"3-backward", "parameters"},
      {"4-step", "optimizer_state"},   {"5-later-step", "retained_graph"}};
  for (const auto& [name, cause] : expected) {
    const Proc r = run({MEMDIAG_COMPARE_EXE, (fs::path(kFixtures) / "h200-oom" / (name + ".json")).string(), "--format",
                        "json"});
    ASSERT_EQ(r.exit_code, to_int(ExitCode::kOk)) << r.err;
    const auto g = nlohmann::json::parse(r.out)["groups"][0];
    EXPECT_EQ(g["dominant_cause"], cause) << name;
    EXPECT_EQ(g["decision"]["rule"], "out_of_memory") << name;
  }
}
