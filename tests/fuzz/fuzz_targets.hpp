// What each fuzz target does with one input, shared by the libFuzzer
// entry points (fuzz_*.cpp, clang's -fsanitize=fuzzer) and the regression
// test that replays every input a fuzzer ever crashed on (test_fuzz_regressions.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace memdiag::fuzz {

// The report reader, then, for a report it accepts, the analysis, every
// renderer, the gates and the baseline comparison against itself.
void report_pipeline(const std::uint8_t* data, std::size_t size);
// The case-file reader.
void case_reader(const std::uint8_t* data, std::size_t size);
// The plan-file reader, then, for a plan it accepts, the namer over its
// runs (default names, --output templates, ranks): every name made stays
// one safe file name inside its directory.
void plan_reader(const std::uint8_t* data, std::size_t size);
// The flag parsers: compare_memory_reports' whole command line (the input
// split into arguments at NUL and newline bytes), and every value parser
// memory_diagnostics' flags use, on each argument; what is accepted is in
// range and finite.
void flag_parser(const std::uint8_t* data, std::size_t size);

}  // namespace memdiag::fuzz
