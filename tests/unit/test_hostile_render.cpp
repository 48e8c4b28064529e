// Every renderer against what a hostile or broken report can carry: random
// bytes in every string a report holds, and degenerate figures (zeros,
// denormals, huge and equal values). Each output must still be what its
// format claims: JSON that parses, XML that an XML parser accepts, HTML
// whose tags are only the renderer's own, markdown tables whose rows have
// their header's column count, text with no control character, and all of
// it well-formed UTF-8; every loop must end (ctest's timeout holds it).
#include "memdiag/format.hpp"
#include "memdiag/regression.hpp"
#include "memdiag/render.hpp"

#include "process.hpp"
#include "synthetic.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <random>
#include <regex>
#include <set>

using namespace memdiag;
using testkit::Synth;
using testkit::synth;

namespace {

// Random bytes, biased towards what breaks formats: metacharacters of each
// format, controls, U+FFFE/U+FFFF, invalid UTF-8, newlines.
std::string hostile_bytes(std::mt19937& rng) {
  static const std::vector<std::string> pieces = {
      "|", "<", ">", "&", "\"", "'", "`", "```", "\n", "\r", "\t", "\x1b[31m", "\x7f", "\xc2\x9b", "\xef\xbf\xbe",
      "\xef\xbf\xbf", "\xff", "\xc0\xaf", "\xed\xa0\x80", "<script>alert(1)</script>", "]]>", "-->", "&amp;",
      "&#0;", "\\", "$(rm -rf x)", "#", "*", "_", "/../", "\xe2\x80\xae", "\x00"};
  std::string out;
  const int n = std::uniform_int_distribution<int>(0, 8)(rng);
  for (int i = 0; i < n; ++i) {
    if (std::uniform_int_distribution<int>(0, 2)(rng) == 0) {
      out += static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
    } else {
      out += pieces[std::uniform_int_distribution<std::size_t>(0, pieces.size() - 1)(rng)];
    }
  }
  return out.empty() ? "x" : out;
}

bool valid_utf8(const std::string& s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// No C0 control but newline (and tab, which tables do not use), no DEL or C1.
std::string first_control(const std::string& s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_sequence_length(s, i);
    if (n == 0) return "invalid UTF-8 at byte " + std::to_string(i);
    const char32_t cp = utf8_code_point(s, i, n);
    if ((cp < 0x20 && cp != '\n') || (cp >= 0x7F && cp <= 0x9F)) return "control U+" + std::to_string(cp) + " at byte " + std::to_string(i);
    i += n;
  }
  return {};
}

// Unescaped '|' in a markdown table line.
std::size_t bars(const std::string& line) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\\') {
      ++i;
      continue;
    }
    n += line[i] == '|' ? 1 : 0;
  }
  return n;
}

// Every table in the markdown: each row has its header's column count.
std::string markdown_tables_problem(const std::string& md) {
  std::istringstream in(md);
  std::string line;
  std::size_t header = 0;
  int at = 0;
  while (std::getline(in, line)) {
    ++at;
    if (line.empty() || line[0] != '|') {
      header = 0;
      continue;
    }
    if (header == 0) {
      header = bars(line);
    } else if (bars(line) != header) {
      return "line " + std::to_string(at) + " has " + std::to_string(bars(line)) + " bars, its header " +
             std::to_string(header) + ": " + line;
    }
  }
  return {};
}

struct Rendered {
  std::string text, markdown, json, junit, html;
};

Rendered render_all(const std::vector<std::pair<std::string, Report>>& reports, const std::string& expect_case) {
  Analysis a = analyse(reports, {}, {100.0, 1e-300, 1e9});
  a.unreadable.push_back(reports.front().first + ": $.case.name: " + expect_case);
  GateCheck g;
  g.case_name = expect_case;
  g.cause = Cause::kActivations;
  const RegressionReport reg = compare_to_baseline(reports, reports, RegressionThresholds{});
  const std::vector<GateCheck> gates{g};
  const Comparison c{a, reports, {}, gates, &reg, 0.5};
  Rendered r;
  r.text = render_text(c);
  r.markdown = render_markdown(c);
  r.json = render_json(c);
  r.junit = render_junit(c);
  r.html = render_html(c);
  return r;
}

// Python's XML parser (expat) over every JUnit file, and its HTML parser
// collecting every tag name the pages open: the real parsers, once for all.
std::string python_checks(const std::string& dir, int n, std::set<std::string>& tags) {
  const std::string script = dir + "/check.py";
  testkit::write_text(script, R"(import sys, xml.etree.ElementTree as ET
from html.parser import HTMLParser
d, n = sys.argv[1], int(sys.argv[2])
class Tags(HTMLParser):
    def __init__(self):
        super().__init__(); self.tags = set()
    def handle_starttag(self, tag, attrs): self.tags.add(tag)
tags = set()
for i in range(n):
    try:
        ET.parse(f"{d}/{i}.xml")
    except ET.ParseError as e:
        print(f"junit {i}: {e}"); sys.exit(1)
    p = Tags(); p.feed(open(f"{d}/{i}.html", encoding="utf-8").read()); tags |= p.tags
print(" ".join(sorted(tags)))
)");
  const testkit::Proc p = testkit::run({"/usr/bin/env", "python3", script, dir, std::to_string(n)});
  if (p.exit_code != 0) return p.out + p.err;
  std::istringstream words(p.out);
  for (std::string w; words >> w;) tags.insert(w);
  return {};
}

bool have_python3() { return testkit::run({"/usr/bin/env", "python3", "-c", "pass"}).exit_code == 0; }

}  // namespace

TEST(HostileRender, RandomBytesInEveryStringStayInsideEveryFormat) {
  if (!have_python3()) GTEST_SKIP() << "python3 not found: its XML and HTML parsers check the output";
  testkit::TempDir d;
  std::set<std::string> clean_tags;
  {
    std::vector<std::pair<std::string, Report>> reports;
    Synth s;
    s.activations_mib = 50;
    reports.emplace_back("plain.json", synth(s));
    const Rendered r = render_all(reports, "plain");
    testkit::write_text(d.file("0.xml"), r.junit);
    testkit::write_text(d.file("0.html"), r.html);
    ASSERT_EQ(python_checks(d.path(), 1, clean_tags), "");
  }
  std::mt19937 rng(20261201);
  constexpr int kCases = 150;
  for (int i = 0; i < kCases; ++i) {
    std::vector<std::pair<std::string, Report>> reports;
    for (int k = 0; k < 3; ++k) {
      Synth s;
      s.case_name = hostile_bytes(rng);
      s.preset = hostile_bytes(rng);
      s.activations_mib = 10.0 * (k + 1);
      s.batch = 1 << k;
      Report r = synth(s);
      r.case_info.description = hostile_bytes(rng);
      r.case_info.source = hostile_bytes(rng);
      r.producer.name = k == 2 ? hostile_bytes(rng) : r.producer.name;
      r.producer.version = hostile_bytes(rng);
      for (Event& e : r.events) e.message = hostile_bytes(rng);
      reports.emplace_back(hostile_bytes(rng) + ".json", r);
    }
    const std::string expect_case = hostile_bytes(rng);
    const Rendered r = render_all(reports, expect_case);
    SCOPED_TRACE("case " + std::to_string(i));
    EXPECT_EQ(first_control(r.text), "");
    EXPECT_TRUE(valid_utf8(r.markdown));
    EXPECT_EQ(first_control(r.markdown), "");
    EXPECT_EQ(markdown_tables_problem(r.markdown), "");
    EXPECT_NO_THROW({ const auto parsed = nlohmann::json::parse(r.json); (void)parsed; });
    EXPECT_TRUE(valid_utf8(r.json));
    EXPECT_TRUE(valid_utf8(r.html));
    EXPECT_TRUE(valid_utf8(r.junit));
    testkit::write_text(d.file(std::to_string(i) + ".xml"), r.junit);
    testkit::write_text(d.file(std::to_string(i) + ".html"), r.html);
  }
  std::set<std::string> tags;
  ASSERT_EQ(python_checks(d.path(), kCases, tags), "");
  for (const std::string& t : tags) EXPECT_TRUE(clean_tags.count(t)) << "a report's bytes opened a <" << t << "> tag";
}

TEST(HostileRender, DegenerateFiguresEndInBoundedOutput) {
  for (const double v : {0.0, 4.9e-324, 2.2e-308, 1e-12, 1.0, 1e9, 1e15}) {
    SCOPED_TRACE("figure " + std::to_string(v));
    std::vector<std::pair<std::string, Report>> reports;
    for (int k = 0; k < 2; ++k) {
      Synth s;
      s.params_mib = v;
      s.activations_mib = v;  // equal figures everywhere
      s.optimizer_state_mib = v;
      s.batch = 1 << (2 * k);
      reports.emplace_back("r" + std::to_string(k) + ".json", synth(s));
    }
    const Rendered r = render_all(reports, "synthetic");
    for (const std::string* out : {&r.text, &r.markdown, &r.json, &r.junit, &r.html}) {
      EXPECT_LT(out->size(), 4u << 20);
      EXPECT_TRUE(valid_utf8(*out));
    }
    EXPECT_NO_THROW({ const auto parsed = nlohmann::json::parse(r.json); (void)parsed; });
    // No figure printed as nan or inf (as a word: "dominant" has "nan" in it).
    for (const std::string* out : {&r.text, &r.markdown, &r.html}) {
      EXPECT_FALSE(std::regex_search(*out, std::regex("\\b-?(nan|inf)\\b"))) << *out;
    }
  }
}
