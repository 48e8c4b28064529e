// Reading reports back, strictly: every problem is an InputError naming the
// source and the JSON path that caused it, so a user can fix the file rather
// than guess. Reading many files collects the errors instead of stopping at
// the first, so good reports beside a bad one are still analysed.
#pragma once

#include "memdiag/errors.hpp"
#include "memdiag/report.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace memdiag {

struct ReadResult {
  std::optional<Report> report;
  std::optional<InputError> error;
  std::size_t content_hash = 0;  // of the bytes read, to spot the same report given twice
};

ReadResult parse_report_text(const std::string& text, const std::string& source);
ReadResult read_report_file(const std::string& path);  // "-" reads standard input

// Expands directories (their *.json files, sorted) and keeps files and "-" as
// given. A directory with no *.json gives an error and nothing else.
struct InputList {
  std::vector<std::string> files;
  std::vector<InputError> errors;
};
InputList expand_inputs(const std::vector<std::string>& args);

// Reads every input once: the same path twice, or the same bytes under two
// names, is an error that names the first, not a second report.
struct ReportSet {
  std::vector<std::pair<std::string, Report>> reports;  // (source, report), in input order
  std::vector<InputError> errors;
};
ReportSet read_reports(const std::vector<std::string>& args);

}  // namespace memdiag
