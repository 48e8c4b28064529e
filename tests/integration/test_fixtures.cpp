// The committed reports (tests/fixtures/<machine>/) and the documents built
// from them: every fixture is a valid report, compare_memory_reports gives the
// seed's diagnosis on them, and SOLUTION.md shows exactly what it prints.
#include "json_schema.hpp"
#include "memdiag/exit_code.hpp"
#include "process.hpp"

#include <gtest/gtest.h>

#include <filesystem>
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

TEST(Fixtures, EveryFixtureIsAValidReport) {
  int n = 0;
  for (const std::string& m : machines()) {
    for (const auto& e : fs::directory_iterator(fs::path(kFixtures) / m)) {
      if (e.path().extension() != ".json") continue;
      ++n;
      const auto errors = schema_errors(e.path().string());
      EXPECT_TRUE(errors.empty()) << e.path() << ": " << errors.front();
      load_report(e.path().string());
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
  const auto& equal = by_group.at("alpha | cuda | world 2 | nccl");
  const auto& extra = by_group.at("alpha | cuda | world 2 | nccl | rank0 +512");
  EXPECT_FALSE(equal["distributed"][0]["imbalanced"]);
  EXPECT_TRUE(extra["distributed"][0]["imbalanced"]);
  EXPECT_EQ(extra["distributed"][0]["capacity_constraint_rank"], 0);
  // ZeRO-1 counts as a remedy of the unsharded runs: one group, a row for it.
  const auto& beta = by_group.at("beta | cuda | world 2 | nccl");
  int full = 0, shard = 0;
  for (const auto& run : beta["runs"]) {
    // Unsharded: AdamW's 2P plus DDP's P of buckets; sharded: P of state plus P.
    const bool sharded = run["remedy"] == "shard-optimizer-state";
    EXPECT_NEAR(run["excess_to_parameter_ratio"].get<double>(), sharded ? 2.0 : 3.0, 0.05) << run["source"];
    (sharded ? shard : full) += 1;
  }
  EXPECT_EQ(full, 2);
  EXPECT_EQ(shard, 2);
  ASSERT_EQ(beta["remedies"].size(), 1u);
  EXPECT_EQ(beta["remedies"][0]["remedy"], "shard-optimizer-state");
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
