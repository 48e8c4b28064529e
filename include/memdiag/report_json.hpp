// JSON spelling of the report model (schema/report.schema.json), writing side.
#pragma once

#include "memdiag/report.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace memdiag {

nlohmann::json to_json(const Report& report);
nlohmann::json to_json(const Sample& sample);

// Pretty-printed, newline-terminated.
std::string dump_report(const Report& report);

// Writes through a temporary file in the same directory and a rename, so a
// reader never sees half a report. Throws std::runtime_error naming the path.
void write_report(const std::string& path, const Report& report);

}  // namespace memdiag
