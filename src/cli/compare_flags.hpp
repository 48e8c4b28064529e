// compare_memory_reports' command line as a library call, so that the
// executable stays flags in, run_compare out, and the flag parser can be
// fuzzed (tests/fuzz/fuzz_flags.cpp) without starting a process.
#pragma once

#include "compare.hpp"

#include <optional>
#include <ostream>

namespace memdiag {

// Parses argv into opts. nullopt: parsed, run it; otherwise the exit code
// to return now (--help and --version printed: 0; a usage error, one line
// on err naming the flag: 2).
std::optional<int> parse_compare_flags(int argc, char** argv, CompareOptions& opts, std::ostream& out,
                                       std::ostream& err);

}  // namespace memdiag
