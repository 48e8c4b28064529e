#include "memdiag/render.hpp"

#include "synthetic.hpp"

#include <gtest/gtest.h>

using namespace memdiag;

namespace {
Analysis sample_analysis() {
  testkit::Synth s;
  s.case_name = "mycase";
  s.activations_mib = 100;
  return analyse({{"dir/run.json", testkit::synth(s)}});
}
}  // namespace

TEST(Render, TextNamesCauseEvidenceResponseAndRuns) {
  const std::string t = render_text(sample_analysis());
  EXPECT_NE(t.find("== mycase on cuda (1 report) =="), std::string::npos) << t;
  EXPECT_NE(t.find("dominant cause: activations"), std::string::npos);
  EXPECT_NE(t.find("forward adds 100.0 MiB"), std::string::npos) << t;
  EXPECT_NE(t.find("would not help:"), std::string::npos);
  EXPECT_NE(t.find("$ memory_diagnostics --case mycase"), std::string::npos);
  EXPECT_NE(t.find("run.json"), std::string::npos);
}

TEST(Render, MarkdownTablesAreWellFormed) {
  const std::string m = render_markdown(sample_analysis());
  EXPECT_NE(m.find("**Dominant cause: `activations`**"), std::string::npos);
  EXPECT_NE(m.find("| report | rank | batch |"), std::string::npos);
  EXPECT_NE(m.find("| --- | ---: |"), std::string::npos);
}

TEST(Render, JsonCarriesTheContractFields) {
  const nlohmann::json j = render_json(sample_analysis(), {{"bad.json", "$.status", "unknown status"}});
  ASSERT_EQ(j["groups"].size(), 1u);
  const auto& g = j["groups"][0];
  EXPECT_EQ(g["case"], "mycase");
  EXPECT_EQ(g["dominant_cause"], "activations");
  EXPECT_TRUE(g["evidence"].is_array() && !g["evidence"].empty());
  EXPECT_TRUE(g["response"].is_string());
  EXPECT_EQ(g["runs"][0]["source"], "dir/run.json");
  EXPECT_EQ(j["errors"][0]["path"], "$.status");
}

TEST(Render, TableAlignsColumns) {
  Table t{{"name", "value"}, {{"a", "1.0"}, {"longer", "100.25"}}};
  EXPECT_EQ(t.to_text(), "name     value\na          1.0\nlonger  100.25\n");
}
