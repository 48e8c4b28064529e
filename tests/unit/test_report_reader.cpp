// Bad input never crashes the reader and never passes silently: each case
// gives one error naming the source and the JSON path.
#include "memdiag/report_json.hpp"
#include "memdiag/report_reader.hpp"

#include "process.hpp"
#include "synthetic.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <tuple>
#include <fstream>
#include <stdexcept>

using namespace memdiag;
using nlohmann::json;

namespace {

using testkit::sample_index;

json good() { return json::parse(dump_report(testkit::synth({}))); }

InputError error_of(const std::string& text) {
  ReadResult r = parse_report_text(text, "f.json");
  EXPECT_FALSE(r.report);
  EXPECT_TRUE(r.error);
  return r.error.value_or(InputError("", "", "no error"));
}

InputError error_of(const json& j) { return error_of(j.dump()); }

}  // namespace

TEST(ReportReader, AcceptsAGoodReport) {
  ReadResult r = parse_report_text(good().dump(), "f.json");
  ASSERT_TRUE(r.report) << r.error->what();
}

TEST(ReportReader, EmptyTruncatedBinaryAndNonJson) {
  EXPECT_EQ(error_of(std::string()).message(), "empty file");
  const std::string text = good().dump();
  EXPECT_NE(error_of(text.substr(0, text.size() / 2)).message().find("not valid JSON"), std::string::npos);
  EXPECT_EQ(error_of(std::string("\x7f" "ELF\0\0\x01", 7)).message(), "binary data, not JSON");
  EXPECT_NE(error_of(std::string("hello")).message().find("not valid JSON"), std::string::npos);
  EXPECT_EQ(error_of(std::string("[1,2]")).path(), "$");
}

TEST(ReportReader, NaNIsNotJson) {
  std::string text = good().dump();
  const auto at = text.find("\"allocated_mib\":") + 16;
  const auto end = text.find(',', at);
  text.replace(at, end - at, "NaN");
  EXPECT_NE(error_of(text).message().find("not valid JSON"), std::string::npos);
}

TEST(ReportReader, SchemaVersions) {
  json j = good();
  j["schema_version"] = kSchemaVersion + 1;
  InputError e = error_of(j);
  EXPECT_EQ(e.path(), "$.schema_version");
  EXPECT_NE(e.message().find("newer"), std::string::npos);
  j["schema_version"] = 0;
  EXPECT_NE(error_of(j).message().find("older"), std::string::npos);
  j.erase("schema_version");
  EXPECT_NE(error_of(j).message().find("not a memdiag report"), std::string::npos);
  // The comparer's own JSON, fed back: a comparison, not a newer report.
  const json comparison = {{"schema_version", kSchemaVersion + 1}, {"groups", json::array()}, {"errors", json::array()}};
  const std::string said = error_of(comparison).message();
  EXPECT_NE(said.find("a comparison (compare_memory_reports --format json), not a report"), std::string::npos) << said;
  EXPECT_EQ(said.find("upgrade"), std::string::npos) << said;
}

// An FSDP2 job's forward by module frees what each module gathered: the
// modules event's total was written negative by the recorder until
// session 58, and a report carrying it is read (the total dropped), not
// refused; any other event's negative MiB still is.
TEST(ReportReader, AModulesEventsNegativeTotalIsDroppedNotRefused) {
  json j = good();
  j["events"].push_back({{"kind", "modules"}, {"phase", "forward"}, {"step", 1}, {"message", "forward by module"},
                         {"mib", -12.82},
                         {"modules", json::array({{{"name", ""}, {"type", "FSDPNet"}, {"parent", nullptr}, {"mib", -12.82},
                                                   {"own_mib", 0.97}, {"calls", 1}}})}});
  const ReadResult r = parse_report_text(j.dump(), "fsdp2-0.json");
  ASSERT_TRUE(r.report) << r.error->what();
  const Event& e = r.report->events.back();
  EXPECT_EQ(e.kind, EventKind::kModules);
  EXPECT_FALSE(e.mib);
  EXPECT_DOUBLE_EQ(e.modules.at(0).mib, -12.82);
  j["events"].back()["kind"] = "warmup";
  j["events"].back().erase("modules");
  EXPECT_NE(error_of(j).message().find("negative MiB"), std::string::npos);
}

TEST(ReportReader, Version1ReportsStillRead) {
  // The committed fixtures were written by 0.1: no remedies, no loss.
  json j = good();
  j["schema_version"] = 1;
  j["config"].erase("remedies");
  ReadResult r = parse_report_text(j.dump(), "v1.json");
  ASSERT_TRUE(r.report) << r.error->what();
  EXPECT_TRUE(r.report->config.remedies.empty());
}

TEST(ReportReader, RemediesAreReadByName) {
  json j = good();
  j["config"]["remedies"] = json::array({"checkpoint=4", "bf16"});
  ReadResult r = parse_report_text(j.dump(), "r.json");
  ASSERT_TRUE(r.report) << r.error->what();
  ASSERT_EQ(r.report->config.remedies.size(), 2u);
  EXPECT_EQ(remedies_label(r.report->config.remedies), "checkpoint=4+bf16");
  j["config"]["remedies"] = json::array({"magic"});
  EXPECT_EQ(error_of(j).path(), "$.config.remedies");
}

// A writer's own variant label (the Python recorder's variant=) reads back
// as written and makes the run a variant; an empty, overlong or unprintable
// one is refused at its path.
TEST(ReportReader, AWritersVariantIsReadAndBounded) {
  json j = good();
  j["config"]["variant"] = "grad-checkpointing";
  ReadResult r = parse_report_text(j.dump(), "r.json");
  ASSERT_TRUE(r.report) << r.error->what();
  EXPECT_EQ(r.report->config.variant, "grad-checkpointing");
  EXPECT_EQ(json::parse(dump_report(*r.report))["config"]["variant"], "grad-checkpointing");
  for (const std::string& bad : {std::string(), std::string(81, 'v'), std::string("two\nlines")}) {
    j["config"]["variant"] = bad;
    EXPECT_EQ(error_of(j).path(), "$.config.variant") << bad;
  }
  j["config"]["variant"] = 3;
  EXPECT_EQ(error_of(j).path(), "$.config.variant");
  j = good();
  EXPECT_EQ(json::parse(dump_report(*parse_report_text(j.dump(), "r.json").report))["config"].count("variant"), 0u);
}

TEST(ReportReader, MissingFieldsAndWrongTypesNameThePath) {
  json j = good();
  const std::size_t fwd = sample_index(j, Phase::kForward, 0);
  j["samples"][fwd].erase("allocated_mib");
  EXPECT_EQ(error_of(j).path(), "$.samples[" + std::to_string(fwd) + "].allocated_mib");
  j = good();
  const std::size_t opt = sample_index(j, Phase::kOptimizerReady);
  j["samples"][opt]["reserved_mib"] = "12";
  InputError e = error_of(j);
  EXPECT_EQ(e.path(), "$.samples[" + std::to_string(opt) + "].reserved_mib");
  EXPECT_NE(e.message().find("expected a number, got string"), std::string::npos);
  j = good();
  j["config"]["batch_size_per_device"] = 2.5;
  EXPECT_EQ(error_of(j).path(), "$.config.batch_size_per_device");
  j = good();
  j["case"].erase("name");
  EXPECT_EQ(error_of(j).path(), "$.case.name");
  j = good();
  j["status"] = "finished";
  EXPECT_EQ(error_of(j).path(), "$.status");
}

TEST(ReportReader, NegativeAndAbsurdMiB) {
  json j = good();
  const std::size_t bwd = sample_index(j, Phase::kBackward, 0);
  j["samples"][bwd]["allocated_mib"] = -4.0;
  EXPECT_NE(error_of(j).message().find("negative"), std::string::npos);
  j = good();
  j["samples"][bwd]["peak_allocated_mib"] = 1e15;
  EXPECT_NE(error_of(j).message().find("absurd"), std::string::npos);
  j = good();
  j["samples"][bwd]["peak_allocated_mib"] = 0.0;
  EXPECT_NE(error_of(j).message().find("peak is below allocated"), std::string::npos);
}

TEST(ReportReader, StepsOutOfOrder) {
  json j = good();
  // A step-1 sample before step 0's.
  std::swap(j["samples"][sample_index(j, Phase::kForward, 0)], j["samples"][sample_index(j, Phase::kForward, 1)]);
  InputError e = error_of(j);
  EXPECT_NE(e.message().find("out of order"), std::string::npos) << e.what();
}

TEST(ReportReader, FilesAndDirectories) {
  testkit::TempDir tmp;
  const std::filesystem::path dir = tmp.path();
  std::filesystem::create_directories(dir / "empty");
  std::ofstream(dir / "b.json") << good().dump();
  std::ofstream(dir / "a.json") << good().dump();
  std::ofstream(dir / "notes.txt") << "x";
  InputList in = expand_inputs({(dir / "empty").string(), dir.string(), "x.json"});
  ASSERT_EQ(in.errors.size(), 1u);
  EXPECT_NE(in.errors[0].message().find("no *.json"), std::string::npos);
  ASSERT_EQ(in.files.size(), 3u);
  EXPECT_EQ(std::filesystem::path(in.files[0]).filename(), "a.json");
  EXPECT_EQ(in.files[2], "x.json");
  EXPECT_EQ(read_report_file((dir / "nope.json").string()).error->message(),
            "cannot open (No such file or directory)");
  EXPECT_EQ(read_report_file(dir.string()).error->message(), "is a directory");
}

TEST(ReportReader, ClosedSetsAreRefusedByName) {
  json j = good();
  const std::size_t i = sample_index(j, Phase::kStep, 1);
  j["samples"][i]["phase"] = "lunch";
  InputError e = error_of(j);
  EXPECT_EQ(e.path(), "$.samples[" + std::to_string(i) + "].phase");
  EXPECT_NE(e.message().find("'lunch' is not one of: model_ready"), std::string::npos) << e.what();
  j = good();
  j["events"] = json::array({{{"kind", "party"}, {"phase", ""}, {"step", nullptr}, {"message", ""}, {"mib", nullptr}}});
  EXPECT_EQ(error_of(j).path(), "$.events[0].kind");
}

TEST(ReportReader, StepsBelongToStepPhasesOnly) {
  json j = good();
  j["samples"][sample_index(j, Phase::kModelReady)]["step"] = 0;
  EXPECT_NE(error_of(j).message().find("setup phase 'model_ready' has a step"), std::string::npos);
  j = good();
  const std::size_t i = sample_index(j, Phase::kCleanup, 0);
  j["samples"][i]["step"] = nullptr;
  EXPECT_EQ(error_of(j).path(), "$.samples[" + std::to_string(i) + "].step");
}

TEST(ReportReader, OldReportsWithoutBuiltinAreReadFromTheirSource) {
  json j = good();
  j["case"].erase("builtin");
  j["case"]["name"] = "alpha";
  j["case"]["source"] = "/somewhere/memdiag/cases/alpha.json";
  EXPECT_TRUE(parse_report_text(j.dump(), "old.json").report->case_info.builtin);
  j["case"]["source"] = "/home/me/alpha.json";
  EXPECT_FALSE(parse_report_text(j.dump(), "old.json").report->case_info.builtin);
}

TEST(ReportReader, ReadReportsSkipsRepeatsAndKeepsGoodOnes) {
  testkit::TempDir d;
  const std::string text = good().dump();
  testkit::write_text(d.file("a.json"), text);
  testkit::write_text(d.file("b.json"), text);
  testkit::write_text(d.file("c.json"), "{");
  const ReportSet set = read_reports({d.file("a.json"), d.file("a.json"), d.file("b.json"), d.file("c.json")});
  ASSERT_EQ(set.reports.size(), 1u);
  ASSERT_EQ(set.errors.size(), 3u);
  EXPECT_EQ(set.errors[0].message(), "given more than once");
  EXPECT_NE(set.errors[1].message().find("duplicate of"), std::string::npos);
  EXPECT_NE(set.errors[2].message().find("not valid JSON"), std::string::npos);
}

TEST(ReportReader, ANumberBeyondADoubleIsOneErrorNotAnAbort) {
  // Anywhere in the file, even in a field nobody reads.
  std::string text = good().dump();
  text.insert(text.find('{') + 1, "\"unread\": 1e888, ");
  const InputError e = error_of(text);
  EXPECT_EQ(e.path(), "$");
  EXPECT_NE(e.message().find("number overflow"), std::string::npos) << e.what();
}

// Figures that cannot stand together are refused, one mutated report per
// rule, each at the path of the figure that breaks it and naming the rule
// (--check called them valid, and the comparer then printed "device used -
// reserved: -162.0 MiB" and a negative trend).
TEST(ReportReader, FiguresThatCannotBeTogetherAreRefused) {
  struct Case {
    const char* rule;
    std::function<void(json&)> mutate;
    std::string path;
    std::string says;
  };
  const json base = good();  // CUDA, complete, reserved and device used on every sample
  const std::size_t bwd = sample_index(base, Phase::kBackward, 1);
  const std::string at = "$.samples[" + std::to_string(bwd) + "]";
  const double reserved = base["samples"][bwd]["reserved_mib"].get<double>();
  const double allocated = base["samples"][bwd]["allocated_mib"].get<double>();
  const std::vector<Case> cases = {
      {"allocated above reserved",
       [&](json& j) {
         j["samples"][bwd]["allocated_mib"] = reserved + 1;
         j["samples"][bwd]["peak_allocated_mib"] = reserved + 1;
       },
       at + ".allocated_mib", "is above reserved"},
      {"device used below reserved", [&](json& j) { j["samples"][bwd]["device_used_mib"] = reserved - 1; },
       at + ".device_used_mib", "is below reserved"},
      {"a census above allocated",
       [&](json& j) {
         j["samples"][bwd]["tensors"] = {
             {"parameters_mib", allocated / 2}, {"gradients_mib", allocated / 2}, {"optimizer_state_mib", 1.0}};
       },
       at + ".tensors", "census's"},
      {"a complete run above its limit",
       [&](json& j) { j["config"]["memory_limit_mib"] = allocated / 2; },
       "", "above config.memory_limit_mib"},
      {"a complete run with no samples", [&](json& j) { j["samples"] = json::array(); }, "$.samples",
       "a complete run has no samples"},
      {"split layers in a run that does not split them",
       [&](json& j) { j["model"]["split_parameter_bytes"] = j["model"]["parameter_bytes"].get<std::int64_t>() / 2; },
       "$.model.split_parameter_bytes", "only tensor parallelism splits them"},
      {"more split than the whole model",
       [&](json& j) {
         j["config"]["parallelism"] = {{"mode", "tensor"}, {"world_size", 2}, {"rank", 0}, {"local_rank", 0},
                                       {"backend", "gloo"}, {"rank_zero_extra_samples", 0}};
         j["model"]["split_parameter_bytes"] = j["model"]["parameter_bytes"].get<std::int64_t>() + 1;
       },
       "$.model.split_parameter_bytes", ""},
      {"rank 0's extra samples in a layer split",
       [&](json& j) {
         j["config"]["parallelism"] = {{"mode", "tensor"}, {"world_size", 2}, {"rank", 0}, {"local_rank", 0},
                                       {"backend", "gloo"}, {"rank_zero_extra_samples", 4}};
       },
       "$.config.parallelism.rank_zero_extra_samples", "every rank trains the same batch"},
      {"a layer split over one rank",
       [&](json& j) {
         j["config"]["parallelism"] = {{"mode", "tensor"}, {"world_size", 1}, {"rank", 0}, {"local_rank", 0},
                                       {"backend", "gloo"}, {"rank_zero_extra_samples", 0}};
       },
       "$.config.parallelism.world_size", "a layer split needs 2 or more ranks"},
      {"an oom's allocated above its reserved",
       [&](json& j) {
         j["status"] = "oom";
         j["events"].push_back({{"kind", "oom"}, {"phase", "forward"}, {"step", 3}, {"message", "out of memory"},
                                {"oom", {{"allocated_mib", 30.0}, {"reserved_mib", 20.0}}}});
       },
       "$.events[0].oom.allocated_mib", "is above reserved"},
  };
  for (const Case& c : cases) {
    json j = base;
    c.mutate(j);
    const InputError e = error_of(j);
    if (!c.path.empty()) {
      EXPECT_EQ(e.path(), c.path) << c.rule << ": " << e.what();
    }
    EXPECT_NE(e.message().find(c.says), std::string::npos) << c.rule << ": " << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << c.rule;
    EXPECT_EQ(std::string(e.what()).rfind("f.json: $.", 0), 0u) << c.rule << ": " << e.what();
  }
  // The limit's rule names the sample with the run's highest peak.
  json j = base;
  j["config"]["memory_limit_mib"] = allocated / 2;
  EXPECT_NE(error_of(j).path().find(".peak_allocated_mib"), std::string::npos);
  // Within the rules: exactly at the limit, census equal to allocated, and a
  // run that ran out above its limit (the failure is what it records).
  j = base;
  double peak = 0;
  for (const json& s : j["samples"]) peak = std::max(peak, s["peak_allocated_mib"].get<double>());
  j["config"]["memory_limit_mib"] = peak;
  j["samples"][bwd]["tensors"] = {{"parameters_mib", allocated}, {"gradients_mib", 0.0}, {"optimizer_state_mib", 0.0}};
  EXPECT_TRUE(parse_report_text(j.dump(), "f.json").report) << error_of(j).what();
  j["config"]["memory_limit_mib"] = peak / 2;
  j["status"] = "oom";
  EXPECT_TRUE(parse_report_text(j.dump(), "f.json").report);
  // A tensor-parallel run's split bytes, up to the whole model, are read.
  j = base;
  j["config"]["parallelism"] = {{"mode", "tensor"}, {"world_size", 2}, {"rank", 1}, {"local_rank", 1},
                                {"backend", "nccl"}, {"rank_zero_extra_samples", 0}};
  j["model"]["split_parameter_bytes"] = j["model"]["parameter_bytes"];
  const ReadResult tensor = parse_report_text(j.dump(), "f.json");
  ASSERT_TRUE(tensor.report) << error_of(j).what();
  EXPECT_EQ(tensor.report->model.split_parameter_bytes, tensor.report->model.parameter_bytes);
  // A run that stopped before its first sample is read: it says so by its status.
  j = base;
  j["samples"] = json::array();
  j["status"] = "failed";
  EXPECT_TRUE(parse_report_text(j.dump(), "f.json").report);
}

// Values the Python recorder once wrote and the reader refuses, each at its
// path: a variant not of printable ASCII ("é", a tab), a negative seed, a
// negative batch, a loss beyond 1e30. The recorder refuses them at
// construction (or leaves the loss out); the reader stays the judge.
TEST(ReportReader, ValuesARecorderMustNotWriteAreRefused) {
  const json base = good();
  const std::size_t step = sample_index(base, Phase::kStep, 0);
  const std::vector<std::tuple<std::string, json, std::string>> cases = {
      {"/config/variant", "\u00e9", "$.config.variant"},
      {"/config/variant", "a\tb", "$.config.variant"},
      {"/config/parallelism/launch", "", "$.config.parallelism.launch"},
      {"/config/parallelism/launch", "a b", "$.config.parallelism.launch"},
      {"/config/parallelism/launch", std::string(65, 'a'), "$.config.parallelism.launch"},
      {"/config/seed", -5, "$.config.seed"},
      {"/config/batch_size_per_device", -3, "$.config.batch_size_per_device"},
      {"/samples/" + std::to_string(step) + "/loss", 1e31, "$.samples[" + std::to_string(step) + "].loss"},
      {"/samples/" + std::to_string(step) + "/loss", -1e31, "$.samples[" + std::to_string(step) + "].loss"},
  };
  for (const auto& [pointer, value, path] : cases) {
    json j = base;
    j[json::json_pointer(pointer)] = value;
    const InputError e = error_of(j);
    EXPECT_EQ(e.path(), path) << pointer << " = " << value.dump() << ": " << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
  // Just within: a loss of 1e30, seed 0, batch 1, a variant of 80 '~'.
  json j = base;
  j["samples"][step]["loss"] = 1e30;
  j["config"]["seed"] = 0;
  j["config"]["batch_size_per_device"] = 1;
  j["config"]["variant"] = std::string(80, '~');
  j["config"]["parallelism"]["launch"] = std::string(64, 'f');
  EXPECT_TRUE(parse_report_text(j.dump(), "f.json").report) << error_of(j).what();
}

// The recorder's backward profile: read back as written; three arrays of
// one length, gradients not negative (a rise may be), a batch of one or
// more.
TEST(ReportReader, ABackwardProfileIsReadAndItsArraysChecked) {
  json j = good();
  j["model"]["backward_profile"] = {{"step", 1},          {"samples", 16}, {"start_mib", 120.5},
                                    {"names", {"A", "B"}}, {"rise_mib", {40.0, -3.5}}, {"gradients_mib", {40.0, 45.0}}};
  ReadResult r = parse_report_text(j.dump(), "r.json");
  ASSERT_TRUE(r.report) << r.error->what();
  ASSERT_TRUE(r.report->model.backward_profile);
  EXPECT_EQ(r.report->model.backward_profile->samples, 16);
  EXPECT_EQ(r.report->model.backward_profile->rise_mib, (std::vector<double>{40.0, -3.5}));
  EXPECT_EQ(json::parse(dump_report(*r.report))["model"]["backward_profile"], j["model"]["backward_profile"]);
  json bad = j;
  bad["model"]["backward_profile"]["rise_mib"] = {40.0};
  EXPECT_NE(std::string(error_of(bad).what()).find("differ in length"), std::string::npos);
  bad = j;
  bad["model"]["backward_profile"]["gradients_mib"] = {40.0, -1.0};
  EXPECT_EQ(error_of(bad).path(), "$.model.backward_profile.gradients_mib[1]");
  bad = j;
  bad["model"]["backward_profile"]["samples"] = 0;
  EXPECT_EQ(error_of(bad).path(), "$.model.backward_profile.samples");
}

// The forward's spans: held and operands required, no gradients.
TEST(ReportReader, AForwardProfileIsReadWithoutGradients) {
  json j = good();
  j["model"]["forward_profile"] = {{"step", 1},          {"samples", 16},        {"start_mib", 120.5},
                                   {"names", {"Conv2d", "Net"}}, {"rise_mib", {20.0, 10.0}},
                                   {"held_mib", {11.0, 10.0}},  {"operands_mib", {0.25, 0.5}}};
  ReadResult r = parse_report_text(j.dump(), "r.json");
  ASSERT_TRUE(r.report) << r.error->what();
  ASSERT_TRUE(r.report->model.forward_profile);
  EXPECT_EQ(r.report->model.forward_profile->gradients_mib, (std::vector<double>{0.0, 0.0}));
  EXPECT_EQ(json::parse(dump_report(*r.report))["model"]["forward_profile"], j["model"]["forward_profile"]);
  json bad = j;
  bad["model"]["forward_profile"].erase("held_mib");
  EXPECT_EQ(error_of(bad).path(), "$.model.forward_profile.held_mib");
  bad = j;
  bad["model"]["forward_profile"]["gradients_mib"] = {0.0, 0.0};
  EXPECT_EQ(error_of(bad).path(), "$.model.forward_profile.gradients_mib");
  bad = j;
  bad["model"]["forward_profile"]["rise_mib"] = {20.0};
  EXPECT_NE(std::string(error_of(bad).what()).find("differ in length"), std::string::npos);
}

// What each node held when done and the gradients it took and gave: both
// or neither, of the names' length, held never above the node's peak.
TEST(ReportReader, ABackwardProfilesHeldAndOperandsAreReadTogether) {
  json j = good();
  j["model"]["backward_profile"] = {{"step", 1},           {"samples", 16},         {"start_mib", 120.5},
                                    {"names", {"A", "B"}},  {"rise_mib", {40.0, -3.5}}, {"gradients_mib", {40.0, 45.0}},
                                    {"held_mib", {31.0, -3.5}}, {"operands_mib", {0.5, 0.0}}};
  ReadResult r = parse_report_text(j.dump(), "r.json");
  ASSERT_TRUE(r.report) << r.error->what();
  EXPECT_EQ(r.report->model.backward_profile->held_mib, (std::vector<double>{31.0, -3.5}));
  EXPECT_EQ(r.report->model.backward_profile->operands_mib, (std::vector<double>{0.5, 0.0}));
  EXPECT_EQ(json::parse(dump_report(*r.report))["model"]["backward_profile"], j["model"]["backward_profile"]);
  json bad = j;
  bad["model"]["backward_profile"].erase("operands_mib");
  EXPECT_NE(std::string(error_of(bad).what()).find("come together"), std::string::npos);
  bad = j;
  bad["model"]["backward_profile"]["held_mib"] = {31.0};
  EXPECT_NE(std::string(error_of(bad).what()).find("differ in length"), std::string::npos);
  bad = j;
  bad["model"]["backward_profile"]["held_mib"] = {41.0, -3.5};
  EXPECT_NE(std::string(error_of(bad).what()).find("no more when done than at its peak"), std::string::npos);
  bad = j;
  bad["model"]["backward_profile"]["operands_mib"] = {0.5, -1.0};
  EXPECT_EQ(error_of(bad).path(), "$.model.backward_profile.operands_mib[1]");
}
