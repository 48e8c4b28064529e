// The committed reports (tests/fixtures/<machine>/) and the documents built
// from them: every fixture is a valid report, compare_memory_reports gives the
// seed's diagnosis on them, and SOLUTION.md shows exactly what it prints.
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

TEST(Fixtures, SeedDiagnosisOnEachMachine) {
  for (const std::string& m : machines()) {
    const Proc r = run({MEMDIAG_COMPARE_EXE, (fs::path(kFixtures) / m).string(), "--expect", "alpha=activations",
                       "--expect", "beta=optimizer_state", "--expect", "gamma=retained_graph"});
    EXPECT_EQ(r.exit_code, 0) << m << "\n" << r.out << r.err;
  }
}

TEST(Fixtures, SolutionMdShowsWhatCompareReportsPrint) {
  const std::string doc = read_text(std::string(MEMDIAG_SOURCE_DIR) + "/SOLUTION.md");
  ASSERT_FALSE(doc.empty());
  for (const std::string& m : machines()) {
    const Proc r = run({MEMDIAG_COMPARE_EXE, (fs::path(kFixtures) / m).string(), "--format", "markdown"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(block(doc, m), r.out) << "SOLUTION.md is out of date for tests/fixtures/" << m
                                    << "; run scripts/update-solution.sh";
  }
}
