// Golden files with placeholders, in the manner of google/benchmark's output
// tests: each line of the golden file must match the same line of the output
// whole, where %float stands for a decimal number, %int for an integer and
// %any for any run of characters. The words and layout are checked exactly;
// the figures are checked by the analysis tests.
#pragma once

#include <string>
#include <vector>

namespace memdiag::testkit {

// One message per differing line ("line 3: expected ..., got ..."); empty
// when the output matches.
std::vector<std::string> golden_mismatches(const std::string& golden, const std::string& actual);
// Reads tests/golden/NAME.
std::string golden_file(const std::string& name);
// Fails the test with the differing lines when actual does not match
// tests/golden/NAME. With MEMDIAG_UPDATE_GOLDEN=1 in the environment it
// rewrites the file instead: lines that still match keep their
// placeholders, the others become what was printed (figures that change
// from run to run then need their placeholder back by hand).
void expect_golden(const std::string& name, const std::string& actual);

}  // namespace memdiag::testkit
