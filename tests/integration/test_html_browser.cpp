// The HTML report in a real browser: headless Chromium (Debian's chromium,
// installed by scripts/setup.sh) opens the page compare_memory_reports
// writes for the committed fixtures. Label "browser": ctest -L browser.
#include "memdiag/exit_code.hpp"
#include "process.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace memdiag;
using namespace memdiag::testkit;
namespace fs = std::filesystem;

namespace {

std::string chromium() {
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"}) {
    if (fs::exists(p)) return p;
  }
  return "";
}

// Counts, in the page as the browser laid it out, each group's plots and
// those with at least one drawn shape of non-zero size; the answer goes in
// the title, which --dump-dom prints.
constexpr const char* kProbe = R"(<script>
const res=[...document.querySelectorAll('section.group')].map(g=>{const s=[...g.querySelectorAll('svg.plot')];
return s.length+':'+s.filter(v=>{const p=[...v.querySelectorAll('path.series,path.band,rect.bar')];
return p.length>0&&p.every(x=>{const b=x.getBBox();return b.width>0||b.height>0})}).length});
document.title='CHECK '+res.join(',')+' HEIGHT '+document.documentElement.scrollHeight;</script>)";

}  // namespace

TEST(HtmlInBrowser, EveryGroupsPlotsAreDrawnWithoutAConsoleMessage) {
  const std::string browser = chromium();
  if (browser.empty()) GTEST_SKIP() << "no chromium: install Debian's chromium (scripts/setup.sh does)";
  TempDir d;
  for (const std::string fixture : {"h200", "cpu-remedies", "h200-2rank"}) {
    const std::string page = d.file(fixture + ".html");
    const Proc cmp = run_in(MEMDIAG_SOURCE_DIR, {MEMDIAG_COMPARE_EXE, "tests/fixtures/" + fixture, "--format", "html",
                                                 "-o", page});
    ASSERT_EQ(cmp.exit_code, to_int(ExitCode::kOk)) << cmp.err;
    const std::string html = read_text(page);
    if (fixture == "h200") {
      // The committed page is the one the fixtures make (README links it).
      EXPECT_EQ(html, read_text(std::string(MEMDIAG_SOURCE_DIR) + "/docs/html-report-h200.html"))
          << "docs/html-report-h200.html is stale: build/bin/compare_memory_reports tests/fixtures/h200 --format html "
             "-o docs/html-report-h200.html";
    }
    EXPECT_EQ(html.find("<script"), std::string::npos) << "no script in the page";
    EXPECT_EQ(html.find("src=\"http"), std::string::npos) << "nothing from the network";
    const std::string profile = d.file("profile-" + fixture);
    // The page as written: any console message (a parse or resource error)
    // fails the test.
    const Proc open = run({browser, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + profile,
                           "--enable-logging=stderr", "--v=0", "--dump-dom", "file://" + page});
    ASSERT_EQ(open.exit_code, 0) << open.err;
    EXPECT_EQ(open.err.find("CONSOLE"), std::string::npos) << open.err;
    // The same page with the probe: every group has plots, all drawn.
    const std::string probed = d.file(fixture + "-probe.html");
    std::ofstream(probed) << html << kProbe;
    const Proc check = run({browser, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + profile,
                            "--dump-dom", "file://" + probed});
    ASSERT_EQ(check.exit_code, 0) << check.err;
    const auto t = check.out.find("<title>CHECK ");
    ASSERT_NE(t, std::string::npos) << check.out.substr(0, 400);
    const std::string title = check.out.substr(t + 13, check.out.find('<', t + 7) - t - 13);
    const auto h = title.find(" HEIGHT ");
    ASSERT_NE(h, std::string::npos) << title;
    const std::string counts = title.substr(0, h);
    const int height = std::stoi(title.substr(h + 8));
    EXPECT_GT(height, 600) << fixture;
    std::size_t groups = 0;
    std::istringstream in(counts);
    for (std::string g; std::getline(in, g, ',');) {
      ++groups;
      const int plots = std::stoi(g.substr(0, g.find(':'))), drawn = std::stoi(g.substr(g.find(':') + 1));
      EXPECT_GT(plots, 0) << fixture << " group " << groups;
      EXPECT_EQ(plots, drawn) << fixture << " group " << groups << ": a plot with nothing drawn";
    }
    EXPECT_GE(groups, 3u) << fixture << ": " << counts;
    // A screenshot of the whole page for people to look at, kept in the
    // build tree (docs/html-report-h200.png is the h200 one): the window as
    // tall as the page laid out.
    const std::string shot = std::string(MEMDIAG_BINARY_DIR) + "/html-" + fixture + ".png";
    const Proc png = run({browser, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + profile,
                          "--hide-scrollbars", "--window-size=1280," + std::to_string(std::min(height, 32000)),
                          "--screenshot=" + shot, "file://" + page});
    EXPECT_EQ(png.exit_code, 0) << png.err;
    EXPECT_GT(fs::exists(shot) ? fs::file_size(shot) : 0, 20000u) << shot;
  }
}
