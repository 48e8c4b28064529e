// JSON spelling of the report model (schema/report.schema.json), writing side.
#pragma once

#include "memdiag/report.hpp"

#include <string>

namespace memdiag {

// Pretty-printed, newline-terminated.
std::string dump_report(const Report& report);

// Writes through a temporary file in the same directory and a rename, so a
// reader never sees half a report. Throws IoError naming the path.
void write_report(const std::string& path, const Report& report);

}  // namespace memdiag
