// examples/instrumented_loop: a loop of its own, instrumented with the
// recorder, writes a report that compare_memory_reports reads.
#include "memdiag/exit_code.hpp"
#include "process.hpp"

#include <gtest/gtest.h>

#include <filesystem>

using namespace memdiag::testkit;

TEST(Example, InstrumentedLoopReportIsReadByCompare) {
  const std::string exe = MEMDIAG_EXAMPLE_EXE;
  if (!exists(exe)) GTEST_SKIP() << "examples not built (MEMDIAG_BUILD_EXAMPLES=OFF)";
  TempDir d;
  const std::string out = d.file("loop.json");
  const Proc r = run({exe, out});
  ASSERT_EQ(r.exit_code, to_int(ExitCode::kOk)) << r.err;
  EXPECT_TRUE(schema_errors(out).empty());
  const Proc cmp = run({MEMDIAG_COMPARE_EXE, out, "--format", "json"});
  ASSERT_EQ(cmp.exit_code, to_int(ExitCode::kOk)) << cmp.err;
  const auto j = nlohmann::json::parse(cmp.out);
  EXPECT_EQ(j["groups"][0]["case"], "example-regression");
  // Adam's two moments over ~2 MiB of weights outweigh 64 samples' activations.
  EXPECT_EQ(j["groups"][0]["dominant_cause"], "optimizer_state");
}

TEST(Example, HelpTeachesAndAFlagIsNotAFileName) {
  const std::string exe = MEMDIAG_EXAMPLE_EXE;
  if (!exists(exe)) GTEST_SKIP() << "examples not built (MEMDIAG_BUILD_EXAMPLES=OFF)";
  TempDir d;
  const Proc help = run_in(d.path(), {exe, "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("usage: instrumented_loop [-o REPORT.json]"), std::string::npos) << help.out;
  for (const std::vector<std::string>& bad : {std::vector<std::string>{exe, "--out"}, {exe, "-o"}, {exe, "a", "b"}}) {
    const Proc flag = run_in(d.path(), bad);
    EXPECT_EQ(flag.exit_code, to_int(ExitCode::kUsage)) << bad.back();
    EXPECT_NE(flag.err.find("usage: instrumented_loop"), std::string::npos) << flag.err;
  }
  EXPECT_TRUE(std::filesystem::is_empty(d.path()));  // no report named --help or --out
  const Proc o = run_in(d.path(), {exe, "-o", "mine.json"});
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(d.path()) / "mine.json"));
}
