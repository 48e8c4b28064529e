// The one namer: --output templates, --output-dir's default names, plan
// entries, ranks, --find-max-batch and confirming runs all make file names
// through memdiag/output_names.hpp, with one sanitiser.
#include "memdiag/errors.hpp"
#include "memdiag/output_names.hpp"

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

TEST(OutputNames, TheSanitiserKeepsNamesInTheirDirectoryAndTheirLine) {
  EXPECT_EQ(file_name_part("alpha"), "alpha");
  EXPECT_EQ(file_name_part("checkpoint=4+bf16"), "checkpoint=4+bf16");
  EXPECT_EQ(file_name_part("../v2/big"), "_.._v2_big");
  EXPECT_EQ(file_name_part("sub/../../esc"), "sub_.._.._esc");
  EXPECT_EQ(file_name_part(".hidden"), "_.hidden");
  EXPECT_EQ(file_name_part(".."), "_..");
  EXPECT_EQ(file_name_part(""), "_");
  EXPECT_EQ(file_name_part("a b\tc\nd\x1b[31m"), "a_b_c_d__31m");
  EXPECT_EQ(file_name_part("caf\xc3\xa9"), "caf__");          // non-ASCII bytes
  EXPECT_EQ(file_name_part("it's*$(x)"), "it_s___x_");       // nothing a shell reads
  EXPECT_EQ(file_name_part(std::string(500, 'a')).size(), kMaxFileNamePart);
}

TEST(OutputNames, TemplatesAndDefaultNamesSanitiseAlike) {
  const RunLabel r{"", "mycase", "../v2/big", 4, 3, "none"};
  // The instance: {preset} and --output-dir's name disagreed.
  const Varying presets = varying({r, RunLabel{"", "mycase", "small", 4, 3, "none"}});
  ASSERT_TRUE(presets.preset);
  EXPECT_EQ(default_output_name(r, presets), "mycase-_.._v2_big.json");
  EXPECT_EQ(expand_output("{case}-{preset}.json", r), "mycase-_.._v2_big.json");
  // Plan entries and --find-max-batch go through the same sanitiser.
  EXPECT_EQ(default_output_name(RunLabel{"a/b", "x", "s", 1, 1, "none"}, Varying{}), "a_b.json");
  EXPECT_EQ(max_batch_output_name(RunLabel{"", "../up", "s", 1, 1, "none"}), "_.._up-max-batch.json");
}

TEST(OutputNames, PlaceholdersAndDefaultNames) {
  const RunLabel r{"", "alpha", "small", 4, 3, "none"};
  EXPECT_EQ(expand_output("out/{case}-{preset}-b{batch}-s{steps}-{rank}.json", r), "out/alpha-small-b4-s3-{rank}.json");
  EXPECT_EQ(expand_output("{remedy}.json", RunLabel{"", "a", "s", 1, 1, "checkpoint=4+bf16"}), "checkpoint=4+bf16.json");
  EXPECT_EQ(usage_error([&] { expand_output("{name}.json", r); }), "--output: {name} is for plan files (--plan)");
  EXPECT_NE(usage_error([&] { expand_output("{bach}.json", r); }).find("unknown placeholder {bach}"), std::string::npos);
  EXPECT_NE(usage_error([&] { expand_output("x{case.json", r); }).find("'{' without '}'"), std::string::npos);
  EXPECT_EQ(expand_output("{name}.json", RunLabel{"ref-1", "alpha", "small", 4, 3, "none"}), "ref-1.json");

  const std::vector<RunLabel> sweep = {{"", "alpha", "small", 1024, 4, "none"},
                                       {"", "alpha", "small", 4, 4, "none"},
                                       {"", "gamma", "small", 512, 4, "none"}};
  const Varying v = varying(sweep);
  EXPECT_TRUE(v.case_name);
  EXPECT_TRUE(v.batch);  // within alpha
  EXPECT_FALSE(v.steps);
  EXPECT_EQ(default_output_name(sweep[1], v), "alpha-batch4.json");
  EXPECT_EQ(describe_run(sweep[1], v), "alpha batch 4");
  // Different cases at their own default batches: the batch does not vary.
  const Varying cases_only = varying({{"", "alpha", "small", 1024, 4, "none"}, {"", "gamma", "small", 512, 6, "none"}});
  EXPECT_FALSE(cases_only.batch);
  EXPECT_FALSE(cases_only.steps);
  EXPECT_EQ(default_output_name({"", "gamma", "small", 512, 6, "none"}, cases_only), "gamma.json");
  const Varying remedies = varying({{"", "beta", "small", 8, 4, "none"}, {"", "beta", "small", 8, 4, "sgd"}});
  EXPECT_TRUE(remedies.remedy);
  EXPECT_EQ(default_output_name({"", "beta", "small", 8, 4, "none"}, remedies), "beta-baseline.json");
  EXPECT_EQ(default_output_name({"", "beta", "small", 8, 4, "sgd"}, remedies), "beta-sgd.json");
}

TEST(OutputNames, OnePathPerRank) {
  EXPECT_EQ(output_for_rank("beta-{rank}.json", 3, 4), "beta-3.json");
  EXPECT_EQ(output_for_rank("out/beta.json", 1, 2), "out/beta-rank1.json");
  EXPECT_EQ(output_for_rank("out.d/beta", 1, 2), "out.d/beta-rank1");
  EXPECT_EQ(output_for_rank("beta.json", 0, 1), "beta.json");
  EXPECT_EQ(output_for_rank("r{rank}/b{rank}.json", 2, 4), "r2/b2.json");
  // Outside a launcher this process is rank 0 of 1: {rank} is 0.
  EXPECT_EQ(output_for_rank("b-{rank}.json", 0, 1), "b-0.json");
}

TEST(OutputNames, ConfirmingRunsAreNamedBesideTheReportsClashingWithNone) {
  std::set<std::string> taken = {normal_path("out/alpha-batch1.json"), normal_path("./out/../out/alpha-batch4.json")};
  EXPECT_EQ(unique_output("out", "alpha-batch1", taken), "out/alpha-batch1-2.json");
  EXPECT_EQ(unique_output("out", "alpha-batch1", taken), "out/alpha-batch1-3.json");
  EXPECT_EQ(unique_output("out/", "alpha-batch4", taken), "out/alpha-batch4-2.json");
  EXPECT_EQ(unique_output("", "x/../y", taken, "-{rank}"), "x_.._y-{rank}.json");
  EXPECT_EQ(normal_path("a/./b/../c"), "a/c");
  EXPECT_EQ(normal_path("../x"), "../x");
  EXPECT_EQ(normal_path("/../x"), "/x");
  EXPECT_EQ(normal_path("./"), ".");
}
