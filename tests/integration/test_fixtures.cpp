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
#include <cmath>
#include <iomanip>
#include <map>
#include <sstream>

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
    // The Python recorder's fixtures hold library models (and one alpha OOM).
    if (m == "h200-python") continue;
    // The optimizer-state and offloading remedies' fixtures hold alpha, beta
    // and a billion-parameter case file, no gamma: checked by name below.
    if (m == "h200-state") {
      const Proc s = run({MEMDIAG_COMPARE_EXE, (fs::path(kFixtures) / m).string(), "--expect", "alpha=activations",
                          "--expect", "beta=optimizer_state", "--expect", "billion=optimizer_state"});
      EXPECT_EQ(s.exit_code, to_int(ExitCode::kOk)) << m << "\n" << s.out << s.err;
      continue;
    }
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

// The documents the doc tests read, one path a line from the repository's
// root (tests/docs/documents.txt, which DocCommands and DocFigures read too):
// README.md, SOLUTION.md and the docs/ files that took text from the README.
std::vector<std::string> documents() {
  std::vector<std::string> out;
  std::istringstream lines(read_text(std::string(MEMDIAG_SOURCE_DIR) + "/tests/docs/documents.txt"));
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line[0] != '#') out.push_back(line);
  }
  return out;
}

// Blocks of the documents written by a command:
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
  for (const std::string& name : documents()) {
    ASSERT_TRUE(fs::exists(fs::path(MEMDIAG_SOURCE_DIR) / name)) << "tests/docs/documents.txt lists " << name;
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

// Measurements quoted in the documents, each the committed file
// its marker names (the file says which command wrote it):
//   <!-- quoted from: docs/measurements/... -->
//   ```text
//   the file
//   ```
//   <!-- quoted end -->
TEST(Fixtures, QuotedMeasurementsAreTheFilesTheyName) {
  const std::string open = "<!-- quoted from: ", close = "<!-- quoted end -->";
  int n = 0;
  for (const std::string& name : documents()) {
    ASSERT_TRUE(fs::exists(fs::path(MEMDIAG_SOURCE_DIR) / name)) << "tests/docs/documents.txt lists " << name;
    const std::string doc = read_text(std::string(MEMDIAG_SOURCE_DIR) + "/" + name);
    for (auto b = doc.find(open); b != std::string::npos; b = doc.find(open, b + 1)) {
      const auto eol = doc.find(" -->\n", b);
      const auto e = doc.find(close, b);
      ASSERT_NE(eol, std::string::npos) << name;
      ASSERT_NE(e, std::string::npos) << name << ": a quoted block without its end";
      const std::string file = doc.substr(b + open.size(), eol - b - open.size());
      const fs::path path = fs::path(MEMDIAG_SOURCE_DIR) / file;
      ASSERT_TRUE(fs::exists(path)) << name << " quotes " << file << ", which is not there";
      EXPECT_EQ(doc.substr(eol + 5, e - eol - 5), "```text\n" + read_text(path.string()) + "```\n")
          << name << ": the quote of " << file << " is out of date; run scripts/update-solution.sh";
      ++n;
    }
  }
  EXPECT_GE(n, 1);
}

// Text moved out of the README keeps its checks: every Markdown file of the
// README, SOLUTION.md and docs/ with a generated or quoted block or a
// doc-test tag is one the doc tests read (tests/docs/documents.txt), and
// the README and SOLUTION.md are among them.
TEST(Fixtures, EveryDocumentWithCheckedBlocksIsListed) {
  const std::vector<std::string> listed = documents();
  for (const char* must : {"README.md", "SOLUTION.md"}) {
    EXPECT_NE(std::find(listed.begin(), listed.end(), must), listed.end()) << must;
  }
  const fs::path root(MEMDIAG_SOURCE_DIR);
  std::vector<std::string> candidates{"README.md", "SOLUTION.md"};
  for (const auto& e : fs::recursive_directory_iterator(root / "docs")) {
    if (e.is_regular_file() && e.path().extension() == ".md") {
      candidates.push_back(fs::relative(e.path(), root).string());
    }
  }
  int n = 0;
  for (const std::string& name : candidates) {
    const std::string doc = read_text((root / name).string());
    const bool checked = doc.find("<!-- generated by:") != std::string::npos ||
                         doc.find("<!-- quoted from:") != std::string::npos ||
                         doc.find("<!-- doc-test:") != std::string::npos;
    if (!checked) continue;
    EXPECT_NE(std::find(listed.begin(), listed.end(), name), listed.end())
        << name << " has generated, quoted or doc-test blocks that no doc test reads: list it in tests/docs/documents.txt";
    ++n;
  }
  EXPECT_GE(n, 3);
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

// A search under the allocator's defaults beside one under expandable
// segments, same configuration and budget: the capacity line says what each
// found against the prediction and what the stranded memory cost between
// them (epsilon on the H200, gamma on the H100, whose defaults stop at 3413
// where the lines and expandable segments agree near 4800). Without the
// second report it is not said.
TEST(Fixtures, TheSearchUnderExpandableSegmentsIsSetBesideTheDefaults) {
  struct Pair {
    std::string dir, none, expandable;
    int budget;
    std::int64_t found, found_expandable;
  };
  const std::string root = MEMDIAG_SOURCE_DIR;
  for (const Pair& p : {Pair{kFixtures + "/h200-fragmentation", "epsilon-2600-max-batch-none.json",
                             "epsilon-2600-max-batch-expandable-segments.json", 2600, 7680, 8238},
                        Pair{root + "/docs/measurements/h100/gamma-search", "gamma-2000-max-batch-none.json",
                             "gamma-2000-max-batch-expandable-segments.json", 2000, 3413, 4805}}) {
    SCOPED_TRACE(p.none);
    const Proc r = run({MEMDIAG_COMPARE_EXE, p.dir + "/" + p.none, p.dir + "/" + p.expandable, "--format", "json",
                        "--budget-mib", std::to_string(p.budget)});
    ASSERT_EQ(r.exit_code, to_int(ExitCode::kOk)) << r.err;
    const auto c = nlohmann::json::parse(r.out)["groups"][0]["capacity"][0];
    EXPECT_EQ(c["searched"]["max_batch"], p.found);
    ASSERT_TRUE(c["searched_expandable"].is_object()) << c;
    EXPECT_EQ(c["searched_expandable"]["max_batch"], p.found_expandable);
    EXPECT_EQ(c["searched_expandable"]["confirmed"], true);
    const std::string gap = "the " + std::to_string(p.found_expandable - p.found) + " samples between the two searches";
    EXPECT_NE(c["text"].get<std::string>().find(gap), std::string::npos) << c["text"];

    const Proc alone = run({MEMDIAG_COMPARE_EXE, p.dir + "/" + p.none, "--format", "json", "--budget-mib",
                            std::to_string(p.budget)});
    ASSERT_EQ(alone.exit_code, to_int(ExitCode::kOk)) << alone.err;
    EXPECT_TRUE(nlohmann::json::parse(alone.out)["groups"][0]["capacity"][0]["searched_expandable"].is_null());
  }
}

// The capacity along the sequence length against the H200's searches
// (docs/measurements/h200/sequence-capacity.txt): in each directory the
// sweep the prediction reads and the two tries that bracket the longest
// length that fits (it completes, one token more runs out, in fresh
// processes under the same limit).
TEST(Fixtures, SequenceCapacityOnTheH200IsWithinEightPercentOfTheSearch) {
  const fs::path root = fs::path(MEMDIAG_SOURCE_DIR) / "docs/measurements/h200/sequence-capacity";
  int n = 0;
  for (const char* run_name : {"delta-math", "delta-fused", "own-math"}) {
    SCOPED_TRACE(run_name);
    std::vector<std::string> argv{MEMDIAG_COMPARE_EXE, "--format", "json"};
    std::int64_t fits = 0, runs_out = 0;
    double limit = 0;
    for (const auto& e : fs::directory_iterator(root / run_name)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("sweep-", 0) == 0) argv.push_back(e.path().string());
      if (name.rfind("try-", 0) != 0) continue;
      const nlohmann::json r = load_json(e.path().string());
      const std::int64_t length = r["config"]["sequence_length"];
      limit = r["config"]["memory_limit_mib"];
      (r["status"] == "complete" ? fits : runs_out) = length;
    }
    ASSERT_GT(fits, 0);
    ASSERT_EQ(runs_out, fits + 1) << "the tries do not bracket the answer";
    const Proc cmp = run(argv);
    ASSERT_EQ(cmp.exit_code, to_int(ExitCode::kOk)) << cmp.err;
    const nlohmann::json c = nlohmann::json::parse(cmp.out)["groups"][0]["sequence_capacity"].at(0);
    EXPECT_EQ(c["budget_mib"].get<double>(), limit);
    const double predicted = c["max_sequence_length"].get<double>();
    EXPECT_NEAR(predicted, static_cast<double>(fits), 0.08 * static_cast<double>(fits)) << c["text"];
    ++n;
  }
  EXPECT_EQ(n, 3);
}

// SOLUTION.md's kernel table (length x kernel: forward, peak, ms per step,
// loss against the math run) is what the H200's transformer reports hold.
TEST(Fixtures, SolutionMdKernelTableIsTheTransformerFixtures) {
  const std::string doc = read_text(std::string(MEMDIAG_SOURCE_DIR) + "/SOLUTION.md");
  const Proc cmp = run_in(MEMDIAG_SOURCE_DIR, {MEMDIAG_COMPARE_EXE, "tests/fixtures/h200-transformer", "--format", "json"});
  ASSERT_EQ(cmp.exit_code, to_int(ExitCode::kOk)) << cmp.err;
  std::map<std::string, nlohmann::json> runs;  // by report file name
  const nlohmann::json comparison = nlohmann::json::parse(cmp.out);  // kept: the loop reads into it
  for (const nlohmann::json& r : comparison["groups"][0]["runs"]) {
    runs[fs::path(r["source"].get<std::string>()).filename().string()] = r;
  }
  auto fixed = [](double v, int digits) {
    std::ostringstream o;
    o << std::fixed << std::setprecision(digits) << v;
    return o.str();
  };
  const std::map<std::string, std::string> remedy_of = {{"math", "none"},
                                                          {"fused", "efficient-attention"},
                                                          {"math + checkpoint", "checkpoint=10"},
                                                          {"fused + checkpoint", "checkpoint=10+efficient-attention"}};
  int rows = 0;
  std::istringstream lines(doc.substr(doc.find("| length | kernel | forward MiB |")));
  std::string line;
  std::getline(lines, line);
  std::getline(lines, line);
  while (std::getline(lines, line) && line.rfind("| ", 0) == 0) {
    std::vector<std::string> cells;
    std::istringstream in(line.substr(2));
    for (std::string c; std::getline(in, c, '|');) {
      const auto b = c.find_first_not_of(' '), e = c.find_last_not_of(' ');
      if (b != std::string::npos) cells.push_back(c.substr(b, e - b + 1));
    }
    ASSERT_EQ(cells.size(), 6u) << line;
    const std::string& kernel = cells[1];
    ASSERT_TRUE(remedy_of.count(kernel)) << line;
    const std::string name = "delta-seq" + cells[0] + "-" + remedy_of.at(kernel) + ".json";
    ASSERT_TRUE(runs.count(name)) << name;
    const nlohmann::json& r = runs[name];
    EXPECT_EQ(cells[2], fixed(r["forward_increment_mib"].get<double>(), 1)) << line;
    EXPECT_EQ(cells[3], fixed(r["peak_allocated_mib"].get<double>(), 1)) << line;
    EXPECT_EQ(cells[4], fixed(r["ms_per_step"].get<double>(), 1)) << line;
    if (kernel != "math") {
      const nlohmann::json& base = runs["delta-seq" + cells[0] + "-none.json"];
      double worst = 0;
      for (std::size_t i = 0; i < r["losses"].size(); ++i) {
        worst = std::max(worst, std::fabs(r["losses"][i].get<double>() - base["losses"][i].get<double>()) /
                                    std::fabs(base["losses"][i].get<double>()));
      }
      std::ostringstream o;
      o << std::scientific << std::setprecision(1) << worst;
      EXPECT_EQ(cells[5], worst == 0 ? "0" : o.str()) << line;
    }
    ++rows;
  }
  EXPECT_EQ(rows, 12);
}
