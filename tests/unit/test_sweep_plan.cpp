#include "memdiag/errors.hpp"
#include "memdiag/output_names.hpp"
#include "memdiag/flag_values.hpp"
#include "memdiag/sweep_plan.hpp"

#include "test_paths.hpp"

#include <gtest/gtest.h>

#include <functional>

using namespace memdiag;

namespace {
std::string usage_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST(SweepPlan, ListsAreStrictDecimal) {
  EXPECT_EQ(parse_count_list("--steps", "1,4,1024", 1, 2048), (std::vector<int>{1, 4, 1024}));
  EXPECT_EQ(parse_count_list("--steps", "10", 1, 100), (std::vector<int>{10}));
  EXPECT_EQ(usage_error([] { parse_count_list("--steps", "010", 1, 100); }),
            "--steps: '010' is not a whole number in decimal");
  EXPECT_EQ(usage_error([] { parse_count_list("--steps", "", 1, 100); }),
            "--steps: empty; give a number or a comma-separated list");
  EXPECT_EQ(usage_error([] { parse_count_list("--steps", "1,,2", 1, 100); }),
            "--steps: '' is not a whole number in decimal (empty item in '1,,2')");
  EXPECT_EQ(usage_error([] { parse_count_list("--steps", "-3", 1, 100); }), "--steps: must be at least 1, got -3");
  EXPECT_EQ(usage_error([] { parse_count_list("--steps", "0", 1, 100); }), "--steps: must be at least 1, got 0");
  EXPECT_EQ(usage_error([] { parse_count_list("--steps", "101", 1, 100); }), "--steps: must be at most 100, got 101");
  EXPECT_EQ(usage_error([] { parse_count_list("--steps", "1e3", 1, 100); }),
            "--steps: '1e3' is not a whole number in decimal");
  EXPECT_EQ(usage_error([] { parse_count_list("--steps", "4,", 1, 100); }),
            "--steps: '' is not a whole number in decimal (empty item in '4,')");
  EXPECT_EQ(usage_error([] { parse_name_list("--case", "alpha,,beta"); }), "--case: empty item in 'alpha,,beta'");
}

TEST(SweepPlan, ProductInTheOrderGiven) {
  SweepAxes a;
  a.cases = {"alpha", "beta"};
  a.batch_sizes = {4, 1};
  a.steps = {2};
  const std::vector<RunRequest> runs = expand_product(a);
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[0].case_arg, "alpha");
  EXPECT_EQ(runs[0].batch_size_per_device, 4);
  EXPECT_EQ(runs[1].batch_size_per_device, 1);
  EXPECT_EQ(runs[2].case_arg, "beta");
  EXPECT_FALSE(runs[3].preset);  // unset: the case's default
  EXPECT_EQ(runs[3].steps, 2);
  SweepAxes one;
  one.cases = {"gamma"};
  EXPECT_EQ(expand_product(one).size(), 1u);
}

TEST(SweepPlan, PlanFilesAreStrict) {
  const auto runs = parse_plan_text(R"({"runs": [{"name": "a", "case": "alpha"},
      {"name": "b1", "case": "alpha", "batch_size_per_device": 1, "preset": "small", "steps": 2}]})",
                                    "p.json");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[1].name, "b1");
  EXPECT_EQ(runs[1].batch_size_per_device, 1);
  auto error = [](const std::string& text) {
    try {
      parse_plan_text(text, "p.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error(R"({"runs": []})"), "p.json: $.runs: needs at least one run");
  EXPECT_EQ(error(R"({"runs": [{"name": "a", "case": "alpha", "batch": 3}]})"), "p.json: $.runs[0].batch: unknown field (did you mean batch_size_per_device?); the fields here: name, case, "
            "preset, batch_size_per_device, steps, sequence_length, remedy");
  EXPECT_EQ(error(R"({"runs": [{"name": "a", "case": "alpha"}, {"name": "a", "case": "beta"}]})"),
            "p.json: $.runs[1].name: 'a' names two runs");
  EXPECT_EQ(error(R"({"runs": [{"name": "../x", "case": "alpha"}]})"),
            "p.json: $.runs[0].name: '../x' is not a name of letters, digits, '_' and '-'");
  EXPECT_EQ(error(R"({"runs": [{"name": "a", "case": "alpha", "steps": 0}]})"),
            "p.json: $.runs[0].steps: value 0 is out of range [1, 10000000]");
}

// A run's report is named after it, and a file name part holds
// kMaxFileNamePart characters: a name of 96 is kept whole, one of 97 is
// refused naming the entry and the limit (it was cut silently, so two
// names alike in their first 96 characters named one report).
TEST(SweepPlan, ANameLongerThanAFileNamePartIsRefused) {
  auto plan = [](const std::string& name) {
    return R"({"runs": [{"name": "short", "case": "alpha"}, {"name": ")" + name + R"(", "case": "alpha"}]})";
  };
  const std::string longest(kMaxFileNamePart, 'n');
  const auto runs = parse_plan_text(plan(longest), "p.json");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[1].name, longest);
  EXPECT_EQ(kMaxFileNamePart, 96u);
  try {
    parse_plan_text(plan(std::string(97, 'n')), "p.json");
    ADD_FAILURE() << "a 97-character name was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "$.runs[1].name");
    EXPECT_EQ(std::string(e.what()),
              "p.json: $.runs[1].name: 'nnnnnnnnnnnnnnnnnnnnnnnn...' is 97 characters; a run's name is at most 96 "
              "(its report is named after it)");
  }
}

TEST(SweepPlan, TheShippedReferencePlanReads) {
  const auto runs = read_plan_file(std::string(MEMDIAG_CASES_DIR) + "/plans/reference.json");
  ASSERT_EQ(runs.size(), 7u);
  EXPECT_EQ(runs[5].name, "beta-medium");
  EXPECT_EQ(runs[5].preset, "medium");
}
