#include "memdiag/case_spec.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

using namespace memdiag;
using nlohmann::json;

namespace {

json minimal() {
  return json::parse(R"({
    "name": "mine", "description": "d",
    "optimizer": {"type": "adamw", "lr": 0.001},
    "graph": {"retain_graph": true},
    "presets": {"small": {"model": {"input_dim": 4, "hidden_dim": 8, "depth": 2, "output_dim": 3},
                          "batch_size": 2, "steps": 3}}
  })");
}

std::string error_of(const json& j) {
  try {
    parse_case(j, "my.json");
  } catch (const CaseError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST(CaseSpec, ParsesAndFillsDefaults) {
  CaseSpec c = parse_case(minimal(), "my.json");
  EXPECT_EQ(c.name, "mine");
  EXPECT_EQ(c.optimizer.type, "adamw");
  EXPECT_DOUBLE_EQ(c.optimizer.weight_decay, 0.01);  // AdamW's usual default
  EXPECT_TRUE(c.graph.retain_graph);
  EXPECT_FALSE(c.graph.keep_graph_connected_loss);
  EXPECT_EQ(c.default_preset, "small");
  EXPECT_EQ(c.preset("small").model.activation, "relu");
  EXPECT_EQ(c.preset("small").steps, 3);
  EXPECT_THROW(c.preset("huge"), CaseError);
}

TEST(CaseSpec, ErrorsNameFileAndField) {
  json j = minimal();
  j["presets"]["small"]["model"]["depth"] = 0;
  EXPECT_EQ(error_of(j), "my.json: presets.small.model.depth: expected a positive integer, got 0");
  j = minimal();
  j["optimizer"]["type"] = "lion";
  EXPECT_EQ(error_of(j), "my.json: optimizer.type: 'lion' is not one of: sgd, adam, adamw");
  j = minimal();
  j["graph"]["retain_grpah"] = true;
  EXPECT_EQ(error_of(j), "my.json: graph.retain_grpah: unknown field");
  j = minimal();
  j.erase("presets");
  EXPECT_EQ(error_of(j), "my.json: presets: missing");
  j = minimal();
  j["default_preset"] = "large";
  EXPECT_EQ(error_of(j), "my.json: default_preset: names no preset ('large')");
  j = minimal();
  j["optimizer"]["lr"] = "fast";
  EXPECT_EQ(error_of(j), "my.json: optimizer.lr: expected a number");
  EXPECT_EQ(error_of(json::array()), "my.json: (top level): expected an object");
}

TEST(CaseSpec, FilesAndLookup) {
  const auto dir = std::filesystem::temp_directory_path() / "memdiag_case_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "mine.json") << minimal().dump();
  std::ofstream(dir / "broken.json") << "{ not json";
  const std::vector<std::string> dirs{dir.string()};
  EXPECT_EQ(resolve_case("mine", dirs).name, "mine");
  EXPECT_EQ(resolve_case((dir / "mine.json").string(), {}).name, "mine");
  try {
    resolve_case((dir / "broken.json").string(), {});
    FAIL();
  } catch (const CaseError& e) {
    EXPECT_NE(std::string(e.what()).find("broken.json: not valid JSON"), std::string::npos);
  }
  try {
    resolve_case("nosuch", {(dir / "none").string()});
    FAIL();
  } catch (const CaseError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown case 'nosuch'"), std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

TEST(CaseSpec, ShippedCasesLoad) {
  const std::vector<CaseSpec> cases = list_cases({MEMDIAG_CASES_DIR});
  ASSERT_EQ(cases.size(), 3u);
  for (const CaseSpec& c : cases) {
    for (const char* p : {"small", "medium", "large"}) EXPECT_NO_THROW(c.preset(p)) << c.name << " " << p;
  }
  const json resolved = resolved_case_json(cases[1], "medium");
  EXPECT_EQ(resolved["name"], "beta");
  EXPECT_EQ(resolved["model"]["hidden_dim"], 4096);
}
