#include "golden.hpp"

#include "process.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>
#include <sstream>

namespace memdiag::testkit {
namespace {

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::regex pattern(const std::string& line) {
  static const std::string special = R"(\^$.|?*+()[]{})";
  std::string re;
  for (std::size_t i = 0; i < line.size();) {
    if (line.compare(i, 6, "%float") == 0) {
      re += R"(-?[0-9]+(\.[0-9]+)?)";
      i += 6;
    } else if (line.compare(i, 4, "%int") == 0) {
      re += "-?[0-9]+";
      i += 4;
    } else if (line.compare(i, 4, "%any") == 0) {
      re += ".*";
      i += 4;
    } else {
      if (special.find(line[i]) != std::string::npos) re += '\\';
      re += line[i++];
    }
  }
  return std::regex(re);
}

}  // namespace

std::vector<std::string> golden_mismatches(const std::string& golden, const std::string& actual) {
  const std::vector<std::string> want = lines(golden), got = lines(actual);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < std::max(want.size(), got.size()); ++i) {
    const std::string w = i < want.size() ? want[i] : "(nothing)";
    const std::string g = i < got.size() ? got[i] : "(nothing)";
    if (i >= want.size() || i >= got.size() || !std::regex_match(g, pattern(w))) {
      out.push_back("line " + std::to_string(i + 1) + ": expected\n  " + w + "\ngot\n  " + g);
    }
  }
  return out;
}

std::string golden_file(const std::string& name) { return read_text(std::string(MEMDIAG_GOLDEN_DIR) + "/" + name); }

void expect_golden(const std::string& name, const std::string& actual) {
  const std::string golden = golden_file(name);
  const std::vector<std::string> diff = golden_mismatches(golden, actual);
  if (diff.empty()) return;
  const char* update = std::getenv("MEMDIAG_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    const std::vector<std::string> want = lines(golden), got = lines(actual);
    std::string out;
    for (std::size_t i = 0; i < got.size(); ++i) {
      out += (i < want.size() && std::regex_match(got[i], pattern(want[i])) ? want[i] : got[i]) + "\n";
    }
    write_text(std::string(MEMDIAG_GOLDEN_DIR) + "/" + name, out);
    ADD_FAILURE() << "tests/golden/" << name << " rewritten (MEMDIAG_UPDATE_GOLDEN=1): review the change";
    return;
  }
  std::string all;
  for (const std::string& d : diff) all += d + "\n";
  ADD_FAILURE() << "tests/golden/" << name << " differs:\n" << all << "\nwhole output:\n" << actual;
}

}  // namespace memdiag::testkit
