// Reading reports back, strictly: every problem names the source and the JSON
// path that caused it, so a user can fix the file rather than guess.
#pragma once

#include "memdiag/report.hpp"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace memdiag {

struct ReadError {
  std::string source;  // file name, or "-" for standard input
  std::string path;    // JSON path such as $.samples[3].allocated_mib; "$" for the whole file
  std::string message;

  // "<source>: <path>: <message>", one line.
  std::string to_string() const;
};

struct ReadResult {
  std::optional<Report> report;
  std::optional<ReadError> error;
  std::size_t content_hash = 0;  // of the bytes read, to spot the same report given twice
};

// Largest MiB figure believed: about 1 PiB. Anything larger is a unit mistake
// or corruption, not a GPU.
inline constexpr double kAbsurdMiB = 1024.0 * 1024.0 * 1024.0;

ReadResult parse_report(const nlohmann::json& doc, const std::string& source);
ReadResult parse_report_text(const std::string& text, const std::string& source);
ReadResult read_report_file(const std::string& path);

// Expands directories (their *.json files, sorted) and keeps files and "-" as
// given. A directory with no *.json gives an error and nothing else.
struct InputList {
  std::vector<std::string> files;
  std::vector<ReadError> errors;
};
InputList expand_inputs(const std::vector<std::string>& args);

}  // namespace memdiag
