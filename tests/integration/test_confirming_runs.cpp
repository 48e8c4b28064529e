// The confirming runs compare_memory_reports suggests run as printed: taken
// from its JSON output (argv), started as they are, each exits 0, writes the
// report it names and overwrites nothing that was there.
#include "memdiag/exit_code.hpp"
#include "process.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

using namespace memdiag;
using namespace memdiag::testkit;
namespace fs = std::filesystem;

namespace {

std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files[e.path().string()] = read_text(e.path().string());
  return files;
}

// Runs every suggestion compare makes for the reports in dir; returns how
// many ran.
int run_suggestions(const std::string& dir) {
  const Proc cmp = run({MEMDIAG_COMPARE_EXE, dir, "--format", "json"});
  EXPECT_EQ(cmp.exit_code, to_int(ExitCode::kOk)) << cmp.err;
  const auto groups = nlohmann::json::parse(cmp.out)["groups"];
  int ran = 0;
  std::set<std::string> outputs;
  for (const auto& g : groups) {
    for (const auto& c : g["confirming_runs"]) {
      std::vector<std::string> argv = c["argv"].get<std::vector<std::string>>();
      EXPECT_EQ(argv.at(0), "memory_diagnostics");
      argv[0] = MEMDIAG_DIAGNOSTICS_EXE;  // the installed name, here the built one
      const std::string output = c["output"];
      EXPECT_TRUE(outputs.insert(output).second) << "two suggestions write " << output;
      EXPECT_FALSE(fs::exists(output)) << c["command"] << " would overwrite " << output;
      const auto before = snapshot(dir);
      const Proc r = run(argv);
      EXPECT_EQ(r.exit_code, to_int(ExitCode::kOk)) << c["command"] << "\n" << r.err;
      EXPECT_TRUE(fs::exists(output)) << c["command"];
      for (const auto& [path, text] : before) EXPECT_EQ(read_text(path), text) << c["command"] << " changed " << path;
      // The cost it said to expect: its peak as the run measures it (the
      // CPU's counts are exact, so the model's error is all there is), and
      // a time for its steps wherever the report it confirms was timed.
      const auto& expected = c["expected"];
      if (fs::exists(output) && !expected["peak_mib"].is_null()) {
        double peak = 0;
        const nlohmann::json report = nlohmann::json::parse(read_text(output));
        for (const auto& smp : report["samples"]) {
          peak = std::max(peak, smp["peak_allocated_mib"].get<double>());
        }
        const double want = expected["peak_mib"].get<double>();
        EXPECT_NEAR(peak, want, std::max(1.0, 0.10 * want)) << c["command"] << ": " << expected["text"];
      }
      const bool search = std::find(argv.begin(), argv.end(), "--find-max-batch") != argv.end();
      if (c["confirms"] != "parameters" && !search) {
        EXPECT_FALSE(expected["seconds"].is_null()) << c["command"];
        EXPECT_NE(expected["text"].get<std::string>().find("expected: "), std::string::npos) << c["command"];
      }
      ++ran;
    }
  }
  return ran;
}

}  // namespace

TEST(ConfirmingRuns, EverySuggestionForEachCpuFixtureRunsAndOverwritesNothing) {
  // One report alone cannot confirm its own scaling: the defaults of alpha,
  // beta and gamma, and the longer gamma, each suggest runs (the small alpha
  // batches are dominated by their weights, which no run would confirm).
  std::map<std::string, int> ran;
  for (const auto& e : fs::directory_iterator(std::string(MEMDIAG_FIXTURES_DIR) + "/cpu")) {
    TempDir d;
    fs::copy_file(e.path(), fs::path(d.path()) / e.path().filename());
    ran[e.path().filename().string()] = run_suggestions(d.path());
  }
  EXPECT_EQ(ran["alpha.json"], 2);         // batch 1 and 4
  EXPECT_EQ(ran["beta.json"], 1);          // another preset
  EXPECT_EQ(ran["beta-medium.json"], 1);   // another preset
  EXPECT_EQ(ran["gamma.json"], 1);         // more steps
  EXPECT_EQ(ran["gamma-steps10.json"], 1);
}

TEST(ConfirmingRuns, ACaseFromAFileIsRerunFromThatFile) {
  TempDir d;
  // Named like the file but outside any cases/ directory, as a user's would be.
  write_text(d.file("my-model.json"), R"({"name": "my-model", "description": "wide MLP, plain SGD",
    "optimizer": {"type": "sgd", "lr": 0.01},
    "presets": {"small": {"model": {"input_dim": 256, "hidden_dim": 256, "depth": 8, "output_dim": 4},
                          "batch_size": 1024, "steps": 3}}})");
  write_text(d.file("adam-model.json"), R"({"name": "adam-model", "optimizer": {"type": "adam"},
    "presets": {"small": {"model": {"input_dim": 256, "hidden_dim": 256, "depth": 2, "output_dim": 4},
                          "batch_size": 2, "steps": 3},
                "wide": {"model": {"input_dim": 256, "hidden_dim": 512, "depth": 2, "output_dim": 4},
                          "batch_size": 2, "steps": 3}}})");
  TempDir reports;
  for (const char* name : {"my-model", "adam-model"}) {
    // The report keeps the case file's absolute path, so the suggestion
    // works from any directory.
    const Proc r = run({MEMDIAG_DIAGNOSTICS_EXE, "--case", d.file(std::string(name) + ".json"), "--device", "cpu",
                        "--quiet", "--output", reports.file(std::string(name) + ".json")});
    ASSERT_EQ(r.exit_code, to_int(ExitCode::kOk)) << r.err;
  }
  const Proc cmp = run({MEMDIAG_COMPARE_EXE, reports.path(), "--format", "json"});
  const auto groups = nlohmann::json::parse(cmp.out)["groups"];
  ASSERT_EQ(groups.size(), 2u);
  for (const auto& g : groups) {
    ASSERT_FALSE(g["confirming_runs"].empty()) << g["case"];
    for (const auto& c : g["confirming_runs"]) {
      EXPECT_EQ(c["argv"][2], d.file(g["case"].get<std::string>() + ".json")) << c["command"];
    }
  }
  EXPECT_EQ(run_suggestions(reports.path()), 3);  // batch 1 and 4 for my-model, preset wide for adam-model
}

// A run that ran out says what it can of what would fit (below its batch;
// its batch needs more than it had at the failure) and suggests the search
// that measures the rest; the search runs as printed and finds a batch
// below the one that ran out. Built-in alpha and the tests' own case.
TEST(ConfirmingRuns, AnOutOfMemoryRunBoundsWhatFitsAndTheSearchItSuggestsFindsIt) {
  const std::string own = std::string(MEMDIAG_SOURCE_DIR) + "/tests/cases/own.json";
  for (const auto& [case_ref, batch, limit] :
       {std::tuple<std::string, int, int>{"alpha", 8192, 30}, std::tuple<std::string, int, int>{own, 4096, 50}}) {
    SCOPED_TRACE(case_ref);
    TempDir d;
    const Proc oom = run({MEMDIAG_DIAGNOSTICS_EXE, "--case", case_ref, "--device", "cpu", "-q", "--steps", "2",
                          "--batch-size-per-device", std::to_string(batch), "--memory-limit-mib", std::to_string(limit),
                          "-o", d.file("oom.json")});
    ASSERT_EQ(oom.exit_code, to_int(ExitCode::kOom)) << oom.err;
    const Proc cmp = run({MEMDIAG_COMPARE_EXE, d.file("oom.json"), "--format", "json"});
    ASSERT_EQ(cmp.exit_code, to_int(ExitCode::kOk)) << cmp.err;
    const auto g = nlohmann::json::parse(cmp.out)["groups"][0];
    ASSERT_EQ(g["capacity"].size(), 1u) << g.dump(1);
    const auto& cap = g["capacity"][0];
    EXPECT_EQ(cap["max_batch"], batch - 1);
    EXPECT_EQ(cap["capped_by_oom"], batch);
    EXPECT_GT(cap["needs_more_than_mib"].get<double>(), limit);
    EXPECT_NE(cap["text"].get<std::string>().find("needs more than"), std::string::npos) << cap["text"];
    ASSERT_EQ(g["confirming_runs"].size(), 1u) << g.dump(1);
    const auto argv = g["confirming_runs"][0]["argv"].get<std::vector<std::string>>();
    EXPECT_NE(std::find(argv.begin(), argv.end(), "--find-max-batch"), argv.end());
    EXPECT_EQ(run_suggestions(d.path()), 1);
    const nlohmann::json found = nlohmann::json::parse(read_text(g["confirming_runs"][0]["output"]));
    const auto max_batch = found["capacity"]["max_batch"].get<int>();
    EXPECT_GT(max_batch, 0);
    EXPECT_LT(max_batch, batch);
  }
}
