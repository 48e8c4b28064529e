// Bad input never crashes the reader and never passes silently: each case
// gives one error naming the source and the JSON path.
#include "memdiag/report_json.hpp"
#include "memdiag/report_reader.hpp"

#include "synthetic.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

using namespace memdiag;
using nlohmann::json;

namespace {

json good() { return to_json(testkit::synth({})); }

ReadError error_of(const std::string& text) {
  ReadResult r = parse_report_text(text, "f.json");
  EXPECT_FALSE(r.report);
  EXPECT_TRUE(r.error);
  return r.error.value_or(ReadError{});
}

ReadError error_of(const json& j) { return error_of(j.dump()); }

}  // namespace

TEST(ReportReader, AcceptsAGoodReport) {
  ReadResult r = parse_report_text(good().dump(), "f.json");
  ASSERT_TRUE(r.report) << r.error->to_string();
}

TEST(ReportReader, EmptyTruncatedBinaryAndNonJson) {
  EXPECT_EQ(error_of(std::string()).message, "empty file");
  const std::string text = good().dump();
  EXPECT_NE(error_of(text.substr(0, text.size() / 2)).message.find("not valid JSON"), std::string::npos);
  EXPECT_EQ(error_of(std::string("\x7f" "ELF\0\0\x01", 7)).message, "binary data, not JSON");
  EXPECT_NE(error_of(std::string("hello")).message.find("not valid JSON"), std::string::npos);
  EXPECT_EQ(error_of(std::string("[1,2]")).path, "$");
}

TEST(ReportReader, NaNIsNotJson) {
  std::string text = good().dump();
  const auto at = text.find("\"allocated_mib\":") + 16;
  const auto end = text.find(',', at);
  text.replace(at, end - at, "NaN");
  EXPECT_NE(error_of(text).message.find("not valid JSON"), std::string::npos);
}

TEST(ReportReader, SchemaVersions) {
  json j = good();
  j["schema_version"] = 2;
  ReadError e = error_of(j);
  EXPECT_EQ(e.path, "$.schema_version");
  EXPECT_NE(e.message.find("newer"), std::string::npos);
  j["schema_version"] = 0;
  EXPECT_NE(error_of(j).message.find("older"), std::string::npos);
  j.erase("schema_version");
  EXPECT_NE(error_of(j).message.find("not a memdiag report"), std::string::npos);
}

TEST(ReportReader, MissingFieldsAndWrongTypesNameThePath) {
  json j = good();
  j["samples"][2].erase("allocated_mib");
  EXPECT_EQ(error_of(j).path, "$.samples[2].allocated_mib");
  j = good();
  j["samples"][1]["reserved_mib"] = "12";
  ReadError e = error_of(j);
  EXPECT_EQ(e.path, "$.samples[1].reserved_mib");
  EXPECT_NE(e.message.find("expected a number, got string"), std::string::npos);
  j = good();
  j["config"]["batch_size_per_device"] = 2.5;
  EXPECT_EQ(error_of(j).path, "$.config.batch_size_per_device");
  j = good();
  j["case"].erase("name");
  EXPECT_EQ(error_of(j).path, "$.case.name");
  j = good();
  j["status"] = "finished";
  EXPECT_EQ(error_of(j).path, "$.status");
}

TEST(ReportReader, NegativeAndAbsurdMiB) {
  json j = good();
  j["samples"][3]["allocated_mib"] = -4.0;
  EXPECT_NE(error_of(j).message.find("negative"), std::string::npos);
  j = good();
  j["samples"][3]["peak_allocated_mib"] = 1e15;
  EXPECT_NE(error_of(j).message.find("absurd"), std::string::npos);
  j = good();
  j["samples"][3]["peak_allocated_mib"] = 0.0;
  EXPECT_NE(error_of(j).message.find("peak is below allocated"), std::string::npos);
}

TEST(ReportReader, StepsOutOfOrder) {
  json j = good();
  std::swap(j["samples"][2], j["samples"][7]);  // a step-1 sample before step 0's
  ReadError e = error_of(j);
  EXPECT_NE(e.message.find("out of order"), std::string::npos) << e.to_string();
}

TEST(ReportReader, FilesAndDirectories) {
  const auto dir = std::filesystem::temp_directory_path() / "memdiag_reader_dirs";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "empty");
  std::ofstream(dir / "b.json") << good().dump();
  std::ofstream(dir / "a.json") << good().dump();
  std::ofstream(dir / "notes.txt") << "x";
  InputList in = expand_inputs({(dir / "empty").string(), dir.string(), "x.json"});
  ASSERT_EQ(in.errors.size(), 1u);
  EXPECT_NE(in.errors[0].message.find("no *.json"), std::string::npos);
  ASSERT_EQ(in.files.size(), 3u);
  EXPECT_EQ(std::filesystem::path(in.files[0]).filename(), "a.json");
  EXPECT_EQ(in.files[2], "x.json");
  EXPECT_EQ(read_report_file((dir / "nope.json").string()).error->message, "cannot open");
  EXPECT_EQ(read_report_file(dir.string()).error->message, "is a directory");
  std::filesystem::remove_all(dir);
}
