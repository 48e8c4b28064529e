// The run and torch layers speak through memdiag::RunObserver and read a
// memdiag::StopRequest: nothing under src/run, include/run, src/torch or
// include/torch writes to a stream or the terminal, or installs a signal
// handler. The executables
// (src/cli) do both, in one place each.
#include "process.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <sstream>

namespace fs = std::filesystem;

namespace {

// The file's code, comments and string literals dropped (a comment may say
// "std::cerr" without printing to it).
std::string code_of(const std::string& text) {
  std::string out;
  enum { kCode, kLine, kBlock, kString, kChar } state = kCode;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i], n = i + 1 < text.size() ? text[i + 1] : '\0';
    switch (state) {
      case kCode:
        if (c == '/' && n == '/') state = kLine;
        else if (c == '/' && n == '*') state = kBlock;
        else if (c == '"') state = kString;
        else if (c == '\'') state = kChar;
        else out += c;
        break;
      case kLine:
        if (c == '\n') {
          state = kCode;
          out += c;
        }
        break;
      case kBlock:
        if (c == '*' && n == '/') {
          state = kCode;
          ++i;
        }
        break;
      case kString:
      case kChar:
        if (c == '\\') ++i;
        else if ((state == kString && c == '"') || (state == kChar && c == '\'')) state = kCode;
        break;
    }
  }
  return out;
}

}  // namespace

TEST(QuietLayers, TheMeasuringHalfPrintsNothingAndInstallsNoSignalHandler) {
  const std::regex forbidden(
      R"(std::(cout|cerr|clog|ostream|printf|puts)\b|(^|[^>.\w])(std::)?(printf|fprintf|puts|perror|signal|sigaction)\s*\(|#include\s*<(iostream|ostream|iosfwd|cstdio)>)");
  int files = 0;
  for (const char* dir : {"src/run", "include/run", "src/torch", "include/torch"}) {
    for (const auto& e : fs::recursive_directory_iterator(fs::path(MEMDIAG_SOURCE_DIR) / dir)) {
      if (!e.is_regular_file()) continue;
      ++files;
      const std::string code = code_of(memdiag::testkit::read_text(e.path().string()));
      std::smatch m;
      EXPECT_FALSE(std::regex_search(code, m, forbidden)) << e.path() << " uses " << m.str();
    }
  }
  EXPECT_GT(files, 10);
  // The executables install the handlers, once, in one file.
  int installing = 0;
  for (const auto& e : fs::directory_iterator(fs::path(MEMDIAG_SOURCE_DIR) / "src/cli")) {
    const std::string code = code_of(memdiag::testkit::read_text(e.path().string()));
    if (std::regex_search(code, std::regex(R"((^|[^>.\w])(std::)?(signal|sigaction)\s*\()"))) {
      ++installing;
      EXPECT_EQ(e.path().filename(), "signals.cpp");
    }
  }
  EXPECT_EQ(installing, 1);
}
