// CLI11's parse-error handling, shared by both executables: --help and
// --version print and exit 0; any other parse error is one line on stderr
// naming the program, and exit 2.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <ostream>
#include <string>

namespace memdiag::cli {

// nullopt: parsed, carry on. Otherwise the exit code to return now.
std::optional<int> parse(CLI::App& app, int argc, char** argv, const std::string& program, std::ostream& out,
                         std::ostream& err);

}  // namespace memdiag::cli
