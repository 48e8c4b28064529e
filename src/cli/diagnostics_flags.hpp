// memory_diagnostics's flags, without LibTorch: parsed and checked by the
// front executable (which answers --help, --list-cases and usage errors
// itself, in milliseconds) and again by the runner it execs for a run.
#pragma once

#include "memdiag/harness_options.hpp"

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace memdiag {

struct DiagnosticsOptions {
  HarnessOptions harness;
  bool quiet = false;       // no table, progress lines or summary
  bool list_cases = false;  // --list-cases instead of a run
  // The runner's, for a search's prepared fresh processes (not in --help):
  // the batch comes as a line on stdin once the model is made.
  bool batch_from_stdin = false;
};

// Parses and checks argv into diag (harness.case_dirs holds --cases-dir's
// directories; the caller adds the defaults, and self_exe). Returns the exit
// code when there is nothing to run: --help or --version printed (0), a
// usage error said in one line on err (2).
std::optional<int> parse_diagnostics_flags(int argc, char** argv, DiagnosticsOptions& diag, std::ostream& out,
                                           std::ostream& err);

// What was printed must have arrived: a failed write to out (a full disk, a
// closed pipe) is said on err and turns success into failure (1); any other
// code stays. Returns the exit code.
int flush_output(std::ostream& out, std::ostream& err, int code);

// --list-cases: each case found in case_dirs with its presets; 2 when a
// case file cannot be read.
int print_case_list(const std::vector<std::string>& case_dirs, std::ostream& out, std::ostream& err);

}  // namespace memdiag
