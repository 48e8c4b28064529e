// Every input in the fuzzers' seed corpus and every input a fuzzer ever
// crashed on (tests/fuzz/regressions), replayed through the same code the
// fuzz targets run, in the ordinary suite (and under the asan preset).
#include "../fuzz/fuzz_targets.hpp"
#include "process.hpp"

#include <gtest/gtest.h>

#include <filesystem>

namespace fs = std::filesystem;

namespace {

int replay(const std::string& dir, void (*target)(const std::uint8_t*, std::size_t)) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file() || e.path().filename().string().front() == '.') continue;
    const std::string bytes = memdiag::testkit::read_text(e.path().string());
    SCOPED_TRACE(e.path().string());
    target(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    ++n;
  }
  return n;
}

}  // namespace

TEST(FuzzRegressions, SeedCorpusAndEveryKeptCrashRunCleanly) {
  const std::string root = std::string(MEMDIAG_SOURCE_DIR) + "/tests/fuzz/";
  EXPECT_GE(replay(root + "corpus/report", memdiag::fuzz::report_pipeline), 10);
  EXPECT_GE(replay(root + "corpus/case", memdiag::fuzz::case_reader), 3);
  replay(root + "regressions/report", memdiag::fuzz::report_pipeline);
  replay(root + "regressions/case", memdiag::fuzz::case_reader);
  EXPECT_GE(replay(root + "corpus/plan", memdiag::fuzz::plan_reader), 3);
  EXPECT_GE(replay(root + "corpus/flags", memdiag::fuzz::flag_parser), 5);
  replay(root + "regressions/plan", memdiag::fuzz::plan_reader);
  replay(root + "regressions/flags", memdiag::fuzz::flag_parser);
}
