#include "memdiag/case_spec.hpp"

#include "process.hpp"
#include "test_paths.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>

#include <gtest/gtest.h>

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

std::string case_error(const json& j) {
  try {
    parse_case_text(j.dump(), "my.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST(CaseSpec, ParsesAndFillsDefaults) {
  CaseSpec c = parse_case_text(minimal().dump(), "my.json");
  EXPECT_EQ(c.name, "mine");
  EXPECT_EQ(c.optimizer.type, OptimizerType::kAdamW);
  EXPECT_DOUBLE_EQ(c.optimizer.weight_decay, 0.01);  // AdamW's usual default
  EXPECT_TRUE(c.graph.retain_graph);
  EXPECT_FALSE(c.graph.keep_graph_connected_loss);
  EXPECT_EQ(c.default_preset, "small");
  EXPECT_EQ(c.preset("small").model.activation, Activation::kRelu);
  EXPECT_EQ(c.preset("small").model.dtype, DType::kFloat32);
  EXPECT_EQ(c.preset("small").steps, 3);
  EXPECT_THROW(c.preset("huge"), UsageError);
}

TEST(CaseSpec, ErrorsNameFileAndJsonPath) {
  json j = minimal();
  j["presets"]["small"]["model"]["depth"] = 0;
  EXPECT_EQ(case_error(j), "my.json: $.presets.small.model.depth: value 0 is out of range [1, 65536]");
  // Hostile input, class 2: a model that cannot be built is refused before
  // anything is (depth 1e9 used to run the host out of memory).
  j = minimal();
  j["presets"]["small"]["model"]["depth"] = 1000000000;
  EXPECT_EQ(case_error(j), "my.json: $.presets.small.model.depth: value 1000000000 is out of range [1, 65536]");
  j = minimal();
  j["presets"]["small"]["model"]["hidden_dim"] = 1 << 20;
  j["presets"]["small"]["model"]["depth"] = 1024;
  EXPECT_NE(case_error(j).find("my.json: $.presets.small.model: the model would have"), std::string::npos)
      << case_error(j);
  j = minimal();
  j["optimizer"]["type"] = "lion";
  EXPECT_EQ(case_error(j), "my.json: $.optimizer.type: 'lion' is not one of: sgd, adam, adamw");
  j = minimal();
  j["presets"]["small"]["model"]["activation"] = "swish";
  EXPECT_EQ(case_error(j), "my.json: $.presets.small.model.activation: 'swish' is not one of: relu, gelu, tanh");
  j = minimal();
  j["graph"]["retain_grpah"] = true;
  EXPECT_EQ(case_error(j),
            "my.json: $.graph.retain_grpah: unknown field (did you mean retain_graph?); the fields here: retain_graph, "
            "keep_graph_connected_loss");
  j = minimal();
  j["presets"]["small"]["batch_size_per_device"] = 4;  // memory_diagnostics' flag's name, inside a preset
  EXPECT_NE(case_error(j).find("batch_size_per_device: unknown field (did you mean batch_size?); the fields here: "
                               "model, batch_size, steps"),
            std::string::npos)
      << case_error(j);
  // A field of a transformer's model misspelt as another tool spells it: the nearest, and the list.
  j = minimal();
  j["presets"]["small"]["model"]["hidden_dmi"] = 8;
  EXPECT_NE(case_error(j).find("$.presets.small.model.hidden_dmi: unknown field (did you mean hidden_dim?); the fields "
                               "here: type, input_dim, hidden_dim"),
            std::string::npos)
      << case_error(j);
  j = minimal();
  j.erase("presets");
  EXPECT_EQ(case_error(j), "my.json: $.presets: missing");
  j = minimal();
  j["default_preset"] = "large";
  EXPECT_EQ(case_error(j), "my.json: $.default_preset: names no preset ('large')");
  j = minimal();
  j["optimizer"]["lr"] = "fast";
  EXPECT_EQ(case_error(j), "my.json: $.optimizer.lr: expected a number, got string");
  j = minimal();
  j["presets"]["my preset"] = j["presets"]["small"];
  j["presets"]["my preset"]["steps"] = -1;
  EXPECT_EQ(case_error(j), "my.json: $.presets[\"my preset\"].steps: value -1 is out of range [1, 10000000]");
  EXPECT_EQ(case_error(json::array()), "my.json: $: expected an object, got array");
  // Another optimizer's setting would be read and never used.
  for (const char* type : {"adam", "adamw"}) {
    j = minimal();
    j["optimizer"]["type"] = type;
    j["optimizer"]["momentum"] = 0.9;
    EXPECT_EQ(case_error(j), std::string("my.json: $.optimizer.momentum: not a setting of ") + type +
                                 " (it takes lr, beta1, beta2, eps, weight_decay)");
  }
  j = minimal();
  j["optimizer"] = {{"type", "sgd"}, {"lr", 0.1}, {"momentum", 0.9}, {"eps", 1e-6}};
  EXPECT_EQ(case_error(j), "my.json: $.optimizer.eps: not a setting of sgd (it takes lr, momentum, weight_decay)");
  j["optimizer"].erase("eps");
  EXPECT_NO_THROW(parse_case_text(j.dump(), "my.json"));
}

TEST(CaseSpec, FilesAndLookup) {
  testkit::TempDir dir;
  testkit::write_text(dir.file("mine.json"), minimal().dump());
  testkit::write_text(dir.file("broken.json"), "{ not json");
  const std::vector<std::string> dirs{dir.path()};
  const CaseSpec by_name = resolve_case("mine", dirs);
  EXPECT_EQ(by_name.name, "mine");
  EXPECT_TRUE(by_name.builtin);
  const CaseSpec by_path = resolve_case(dir.file("mine.json"), {});
  EXPECT_FALSE(by_path.builtin);
  EXPECT_EQ(by_path.source, dir.file("mine.json"));
  try {
    resolve_case(dir.file("broken.json"), {});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("broken.json: $: not valid JSON"), std::string::npos) << e.what();
  }
  try {
    resolve_case("nosuch", {dir.file("none")});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown case 'nosuch'"), std::string::npos);
  }
}

TEST(CaseSpec, ShippedCasesLoad) {
  const std::vector<CaseSpec> cases = list_cases({MEMDIAG_CASES_DIR});
  ASSERT_EQ(cases.size(), 5u);  // alpha, beta, delta, epsilon, gamma
  for (const CaseSpec& c : cases) {
    EXPECT_TRUE(c.builtin);
    for (const char* p : {"small", "medium", "large"}) EXPECT_NO_THROW(c.preset(p)) << c.name << " " << p;
  }
  const auto beta = std::find_if(cases.begin(), cases.end(), [](const CaseSpec& c) { return c.name == "beta"; });
  ASSERT_NE(beta, cases.end());
  const json resolved = json::parse(resolved_case_detail(*beta, "medium", "probe"));
  EXPECT_EQ(resolved["model"]["hidden_dim"], 4096);
  EXPECT_EQ(resolved["optimizer"]["type"], "adamw");
  EXPECT_EQ(resolved["probe"], "probe");
}



TEST(CaseSpec, ABatchScheduleVariesTheSamplesByStepAndIsChecked) {
  json j = minimal();
  j["batch_schedule"] = {0.5, 1.0, 1.25};
  const CaseSpec c = parse_case_text(j.dump(), "my.json");
  EXPECT_EQ(c.batch_samples(100, 0), 50);
  EXPECT_EQ(c.batch_samples(100, 1), 100);
  EXPECT_EQ(c.batch_samples(100, 2), 125);
  EXPECT_EQ(c.batch_samples(100, 3), 50) << "the schedule repeats";
  EXPECT_EQ(c.batch_samples(1, 0), 1) << "never fewer than one sample";
  EXPECT_EQ(c.min_batch_samples(100), 50);
  EXPECT_NE(resolved_case_detail(c, "small", "p").find("\"batch_schedule\":[0.5,1.0,1.25]"), std::string::npos);
  // Without one, every step trains the batch, and the detail says nothing.
  const CaseSpec plain = parse_case_text(minimal().dump(), "my.json");
  EXPECT_EQ(plain.batch_samples(100, 7), 100);
  EXPECT_EQ(resolved_case_detail(plain, "small", "p").find("batch_schedule"), std::string::npos);
  for (const json& bad : {json::array(), json{0.0}, json{-1}, json{5}, json{"half"}, json(0.5)}) {
    j["batch_schedule"] = bad;
    EXPECT_NE(case_error(j).find("my.json: $.batch_schedule"), std::string::npos) << bad.dump() << ": " << case_error(j);
  }
}

TEST(CaseSpec, ATransformerIsDescribedAsDataAndCheckedByPath) {
  json j = minimal();
  j["presets"]["small"]["model"] = json::parse(R"({"type": "transformer", "vocab": 100, "sequence_length": 32,
      "width": 48, "heads": 4, "layers": 3, "dropout": 0.1, "tied_embeddings": false, "attention": "sdpa"})");
  const CaseSpec c = parse_case_text(j.dump(), "my.json");
  const ModelSpec& m = c.preset("small").model;
  EXPECT_EQ(m.kind, ModelKind::kTransformer);
  EXPECT_EQ(m.ffn_width, 4 * 48) << "the feed-forward defaults to four times the width";
  EXPECT_EQ(m.attention, AttentionKernel::kSdpa);
  EXPECT_FALSE(m.tied_embeddings);
  const json detail = json::parse(resolved_case_detail(c, "small", "p"));
  EXPECT_EQ(detail["model"]["type"], "transformer");
  EXPECT_EQ(detail["model"]["attention"], "sdpa");
  EXPECT_EQ(detail["model"]["sequence_length"], 32);
  EXPECT_EQ(detail["model"].count("input_dim"), 0u);
  // Errors name the file and the path.
  auto with = [&](const char* key, const json& v) {
    json k = j;
    k["presets"]["small"]["model"][key] = v;
    return case_error(k);
  };
  EXPECT_NE(with("heads", 5).find("my.json: $.presets.small.model.heads: must divide width (48)"), std::string::npos)
      << with("heads", 5);
  EXPECT_NE(with("attention", "fast").find("$.presets.small.model.attention"), std::string::npos);
  EXPECT_NE(with("input_dim", 4).find("$.presets.small.model"), std::string::npos) << "an MLP field on a transformer";
  EXPECT_NE(with("sequence_length", 0).find("$.presets.small.model.sequence_length"), std::string::npos);
  EXPECT_NE(with("vocab", 1 << 30).find("parameters"), std::string::npos);
  EXPECT_NE(with("type", "cnn").find("$.presets.small.model.type"), std::string::npos);
}

// parameter_count from a preset's dimensions equals what the built model
// held, for every committed report of a built-in case (CPU and H200, MLPs
// and the transformer at several lengths) and for the tests' own cases.
TEST(CaseSpec, ParameterCountFromDimensionsIsWhatTheBuiltModelHeld) {
  namespace fs = std::filesystem;
  const std::vector<std::string> dirs{std::string(MEMDIAG_SOURCE_DIR) + "/cases"};
  int checked = 0;
  for (const auto& dir : fs::directory_iterator(std::string(MEMDIAG_SOURCE_DIR) + "/tests/fixtures")) {
    for (const auto& e : fs::directory_iterator(dir.path())) {
      if (e.path().extension() != ".json") continue;
      const Report r = memdiag::testkit::load_report(e.path().string());
      if (!r.case_info.builtin || r.model.parameters <= 0 || r.config.preset.empty()) continue;
      CaseSpec c;
      try {
        c = resolve_case(r.case_info.name, dirs);
      } catch (const std::exception&) {
        continue;  // a case the project no longer ships
      }
      if (c.presets.count(r.config.preset) == 0) continue;
      ModelSpec m = c.preset(r.config.preset).model;
      if (r.config.sequence_length) m.sequence_length = *r.config.sequence_length;
      EXPECT_EQ(parameter_count(m), r.model.parameters) << e.path();
      ++checked;
    }
  }
  EXPECT_GE(checked, 20);
  // The tests' own: an MLP by its layers, and the untied transformer with
  // dropout against its H200 reports at three lengths.
  const CaseSpec own = load_case_file(std::string(MEMDIAG_SOURCE_DIR) + "/tests/cases/own.json");
  EXPECT_EQ(parameter_count(own.preset("small").model),
            (1024LL * 768 + 768) + 2 * (768LL * 768 + 768) + (768LL * 10 + 10));
  const CaseSpec tr = load_case_file(std::string(MEMDIAG_SOURCE_DIR) + "/tests/cases/own-transformer.json");
  int lengths = 0;
  for (const auto& e :
       fs::directory_iterator(std::string(MEMDIAG_SOURCE_DIR) + "/docs/measurements/h200/sequence-capacity/own-math")) {
    if (e.path().extension() != ".json") continue;
    const Report r = memdiag::testkit::load_report(e.path().string());
    ModelSpec m = tr.preset(r.config.preset).model;
    m.sequence_length = r.config.sequence_length.value_or(m.sequence_length);
    EXPECT_EQ(parameter_count(m), r.model.parameters) << e.path();
    ++lengths;
  }
  EXPECT_GE(lengths, 3);
}
