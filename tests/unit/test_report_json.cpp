#include "memdiag/report_json.hpp"
#include "memdiag/report_reader.hpp"

#include "json_schema.hpp"
#include "synthetic.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

using namespace memdiag;
using nlohmann::json;

namespace {
json schema() { return testkit::load_json(MEMDIAG_SCHEMA_FILE); }

Report full_report() {
  Report r = testkit::synth({});
  r.config.memory_limit_mib = 1024;
  r.events.push_back({"warmup", "setup", std::nullopt, "cuBLAS", 64.0});
  r.events.push_back({"oom", "backward", 2, "CUDA out of memory", 900.5});
  r.samples[3].tensors = TensorCensus{10, 10, 0};
  r.samples[4].process_device_mib = 700;
  r.environment.cuda_runtime_version = "13.0";
  r.status = RunStatus::kOom;
  return r;
}
}  // namespace

TEST(ReportJson, RoundTripKeepsEveryField) {
  const Report r = full_report();
  const json j = to_json(r);
  ReadResult back = parse_report(j, "mem");
  ASSERT_FALSE(back.error) << back.error->to_string();
  EXPECT_EQ(to_json(*back.report), j);
  EXPECT_EQ(back.report->status, RunStatus::kOom);
  ASSERT_TRUE(back.report->samples[3].tensors);
  EXPECT_DOUBLE_EQ(back.report->samples[3].tensors->gradients_mib, 10);
  EXPECT_EQ(back.report->events[1].step, 2);
}

TEST(ReportJson, ProducedReportsValidateAgainstTheShippedSchema) {
  const auto errors = testkit::validate(schema(), to_json(full_report()));
  EXPECT_TRUE(errors.empty()) << errors.front();
}

TEST(ReportJson, SchemaValidatorRejectsWhatTheSchemaForbids) {
  json j = to_json(full_report());
  j["samples"][0]["allocated_mib"] = -1;
  j["status"] = "done";
  j["config"]["surprise"] = 1;
  j["samples"][1].erase("peak_allocated_mib");
  const auto errors = testkit::validate(schema(), j);
  ASSERT_EQ(errors.size(), 4u);
}

TEST(ReportJson, WriteIsAtomicAndLeavesNoTemporary) {
  const auto dir = std::filesystem::temp_directory_path() / "memdiag_write_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "r.json").string();
  write_report(path, full_report());
  ReadResult back = read_report_file(path);
  ASSERT_FALSE(back.error);
  int files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir)) files += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 1);
  EXPECT_THROW(write_report((dir / "missing" / "r.json").string(), full_report()), std::runtime_error);
  std::filesystem::remove_all(dir);
}
