// Renders an HTML report in headless Chromium (one launch) and checks that the page loads
// without script errors, its inline JS ran (<body data-rendered="ok">) and every strategy shows.
// Skips when Chromium is not installed (the Makefile installs it for CI).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_util.h"
#include "weft/report/html.h"

namespace weft::report {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

std::string FindChromium() {
  if (const char* env = std::getenv("WEFT_CHROMIUM"); env != nullptr && *env != '\0') return env;
  for (const char* path : {"/usr/bin/chromium", "/usr/bin/chromium-browser",
                           "/usr/bin/google-chrome"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "";
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Quote(const std::string& s) {  // single-quoted for sh
  std::string out = "'";
  for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

TEST(HtmlRender, HeadlessChromiumLoadsTheReportWithoutErrors) {
  const std::string chromium = FindChromium();
  if (chromium.empty()) {
    GTEST_SKIP() << "chromium not found (looked at $WEFT_CHROMIUM, /usr/bin/chromium, "
                    "/usr/bin/chromium-browser, /usr/bin/google-chrome); `make` installs it";
  }
  // A report with two simulated strategies (ZB-H1 needs split backward passes) and a failed one.
  Comparison comparison{.model = "toy", .cluster = "test", .num_gpus = 4,
                        .data_profile = "synthetic", .num_iterations = 2, .baseline = "1f1b"};
  std::vector<testing::SimulatedCase> cases;
  const std::pair<std::string, sched::ScheduleKind> rules[] = {
      {"1f1b", sched::ScheduleKind::kOneFOneB}, {"zb-h1", sched::ScheduleKind::kZeroBubbleH1}};
  for (const auto& [name, kind] : rules) {
    StrategyResult s{.name = name};
    for (int it = 0; it < 2; ++it) {
      testing::SimulatedCase c =
          testing::SimulatePipeline(4, 4 + 4 * it, kind, /*split_backward=*/true);
      s.iterations.push_back(IterationResultFromTimeline(it, c.timeline));
      if (it == 1) cases.push_back(std::move(c));
    }
    comparison.strategies.push_back(std::move(s));
  }
  comparison.strategies.push_back({.name = "cornstarch-failed", .error = "needs >= 2 encoders"});
  std::vector<StrategyTimeline> timelines;
  for (size_t i = 0; i < cases.size(); ++i) {
    timelines.push_back({.strategy = comparison.strategies[i].name, .iteration = 1,
                         .graph = &cases[i].graph, .timeline = &cases[i].timeline});
  }
  auto html = HtmlReport(comparison, timelines);
  ASSERT_TRUE(html.ok()) << html.status().ToString();

  char dir_template[] = "/tmp/weft_html_render_XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const fs::path dir = dir_template;
  const fs::path page = dir / "report.html";
  {
    std::ofstream out(page, std::ios::binary);
    out << *html;
  }
  const fs::path dom_path = dir / "dom.html";
  const fs::path log_path = dir / "chromium.log";
  const std::string command = fmt::format(
      "timeout 120 {} --headless=new --no-sandbox --disable-gpu --no-first-run "
      "--user-data-dir={} --enable-logging=stderr --v=0 --dump-dom {} > {} 2> {}",
      Quote(chromium), Quote((dir / "profile").string()), Quote("file://" + page.string()),
      Quote(dom_path.string()), Quote(log_path.string()));
  const int status = std::system(command.c_str());
  const std::string dom = ReadFile(dom_path);
  const std::string log = ReadFile(log_path);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "chromium failed (status " << status << "): " << command << "\n" << log;

  EXPECT_THAT(dom, HasSubstr("data-rendered=\"ok\"")) << dom.substr(0, 2000);
  EXPECT_THAT(dom, HasSubstr("data-svg-count=\"5\""));  // chart + 2 × (timeline + memory)
  for (const StrategyResult& s : comparison.strategies) EXPECT_THAT(dom, HasSubstr(s.name));
  // The page logs nothing: any console line (console.error, an uncaught exception) is a bug.
  EXPECT_THAT(log, Not(HasSubstr("Uncaught")));
  EXPECT_THAT(log, Not(HasSubstr(":CONSOLE")));

  std::error_code ignored;
  fs::remove_all(dir, ignored);
}

}  // namespace
}  // namespace weft::report
