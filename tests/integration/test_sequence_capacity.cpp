// The capacity along the sequence length against runs at the answer: for
// the built-in transformer with each kernel and for a transformer case of
// the tests' own (untied, dropout, six heads), a sweep of three lengths
// under a memory limit, the comparer's longest length, and fresh runs at
// that length and beyond it.
#include "memdiag/exit_code.hpp"
#include "process.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>

using namespace memdiag;
using namespace memdiag::testkit;

struct SequenceBudget {
  std::string name;
  std::string case_arg;
  std::string remedy;
  std::string batch;
  std::string lengths;
  int budget_mib;
  // Runs at the answer times this many run out: how close the answer is.
  double beyond;
};
void PrintTo(const SequenceBudget& b, std::ostream* os) { *os << b.name; }

namespace sequence_capacity_test {

int run_at(const std::vector<std::string>& base, const TempDir& d, std::int64_t length) {
  std::vector<std::string> args = base;
  args.insert(args.end(), {"--sequence-length", std::to_string(length), "-o", d.file("at-" + std::to_string(length) + ".json")});
  return run(args).exit_code;
}

}  // namespace sequence_capacity_test

class SequenceCapacityModel : public ::testing::TestWithParam<SequenceBudget> {};

TEST_P(SequenceCapacityModel, TheLongestLengthPredictedCompletesAndALongerOneRunsOut) {
  const SequenceBudget& b = GetParam();
  TempDir d;
  const std::vector<std::string> base = {MEMDIAG_DIAGNOSTICS_EXE, "--device", "cpu", "-q", "--case", b.case_arg,
                                         "--steps", "2", "--batch-size-per-device", b.batch, "--remedy", b.remedy,
                                         "--memory-limit-mib", std::to_string(b.budget_mib)};
  std::vector<std::string> sweep = base;
  sweep.insert(sweep.end(), {"--sequence-length", b.lengths, "--output-dir", d.file("sweep")});
  const Proc s = run(sweep);
  ASSERT_EQ(s.exit_code, to_int(ExitCode::kOk)) << s.err;
  const Proc cmp = run({MEMDIAG_COMPARE_EXE, d.file("sweep"), "--format", "json"});
  ASSERT_EQ(cmp.exit_code, to_int(ExitCode::kOk)) << cmp.err;
  const nlohmann::json groups = nlohmann::json::parse(cmp.out)["groups"];
  ASSERT_EQ(groups.size(), 1u) << cmp.out;
  ASSERT_EQ(groups[0]["sequence_capacity"].size(), 1u) << cmp.out;
  const nlohmann::json c = groups[0]["sequence_capacity"][0];
  EXPECT_EQ(c["budget_source"], "memory_limit");
  EXPECT_EQ(c["fitted_lengths"].size(), 3u);
  const std::int64_t answer = c["max_sequence_length"];
  ASSERT_GT(answer, 0) << c.dump(2);
  // Well past the lengths fitted: the test is of extrapolation.
  EXPECT_GT(c["extrapolation"].get<double>(), 1.5) << c.dump(2);
  EXPECT_EQ(sequence_capacity_test::run_at(base, d, answer), to_int(ExitCode::kOk)) << c["text"];
  const auto longer = static_cast<std::int64_t>(std::ceil(static_cast<double>(answer) * b.beyond));
  EXPECT_EQ(sequence_capacity_test::run_at(base, d, longer), to_int(ExitCode::kOom)) << c["text"];
  // What forward holds at the answer is what the fitted parts say, within 2%.
  const Proc at = run({MEMDIAG_COMPARE_EXE, d.file("at-" + std::to_string(answer) + ".json"), "--format", "json"});
  ASSERT_EQ(at.exit_code, to_int(ExitCode::kOk)) << at.err;
  const nlohmann::json report = nlohmann::json::parse(read_text(d.file("at-" + std::to_string(answer) + ".json")));
  double held = 0;
  const nlohmann::json* before = nullptr;
  for (const nlohmann::json& sample : report["samples"]) {
    if (sample["phase"] == "forward" && sample["step"] == 1 && before != nullptr) {
      held = sample["allocated_mib"].get<double>() - (*before)["allocated_mib"].get<double>();
    }
    before = &sample;
  }
  const double l = static_cast<double>(answer);
  const double fitted = c["held_per_token_mib"].get<double>() * l + c["held_per_token_squared_mib"].get<double>() * l * l;
  EXPECT_NEAR(fitted, held, 0.02 * held) << c["text"];
  // A quadratic part only where the attention is spelt out.
  if (b.remedy == "efficient-attention") {
    EXPECT_LT(c["held_per_token_squared_mib"].get<double>() * l * l, 0.01 * held) << c["text"];
  } else {
    EXPECT_GT(c["exponent_at_answer"].get<double>(), 1.3) << c["text"];
  }
}

// Measured on this machine's CPU: the fused kernel's answer is exact (the
// next length runs out); with the attention spelt out the answer assumes
// one layer's length x length gradients at twice its scores, which on the
// CPU is about twice too many (delta 8.6%, the own case with dropout 17.7%
// below the longest that fits, scripts/sequence-capacity-check.sh): the
// answer runs, 25% more does not.
INSTANTIATE_TEST_SUITE_P(
    TransformerCases, SequenceCapacityModel,
    ::testing::Values(
        SequenceBudget{"delta_math", "delta", "none", "2", "64,128,256", 60, 1.25},
        SequenceBudget{"delta_fused", "delta", "efficient-attention", "2", "64,128,256", 60, 1.01},
        SequenceBudget{"own_math", std::string(MEMDIAG_SOURCE_DIR) + "/tests/cases/own-transformer.json", "none", "3",
                       "48,96,192", 120, 1.25}),
    [](const ::testing::TestParamInfo<SequenceBudget>& i) { return i.param.name; });
