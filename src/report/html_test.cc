#include "weft/report/html.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_util.h"

namespace weft::report {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::CountOccurrences;

// Two simulated strategies (1F1B and GPipe) over three "iterations" of growing size, plus one
// that failed. The timelines shown are those of the last iteration.
struct Fixture {
  Comparison comparison;
  std::vector<testing::SimulatedCase> cases;  // one per drawn strategy
  std::vector<StrategyTimeline> timelines;
};

Fixture MakeFixture(const std::string& odd_name = "gpipe") {
  Fixture f;
  f.comparison = {.model = "toy", .cluster = "test", .num_gpus = 4, .data_profile = "synthetic",
                  .num_iterations = 3, .baseline = "1f1b"};
  const std::pair<std::string, sched::ScheduleKind> rules[] = {
      {"1f1b", sched::ScheduleKind::kOneFOneB}, {odd_name, sched::ScheduleKind::kGPipe}};
  for (const auto& [name, kind] : rules) {
    StrategyResult s{.name = name, .description = "rule " + std::string(
                                                      sched::ScheduleKindName(kind))};
    for (int it = 0; it < 3; ++it) {
      testing::SimulatedCase c = testing::SimulatePipeline(4, 4 + 2 * it, kind);
      s.iterations.push_back(IterationResultFromTimeline(it, c.timeline));
      if (it == 2) f.cases.push_back(std::move(c));
    }
    f.comparison.strategies.push_back(std::move(s));
  }
  f.comparison.strategies.push_back({.name = "dip", .error = "MCTS budget <= 0"});
  for (size_t i = 0; i < f.cases.size(); ++i) {
    f.timelines.push_back({.strategy = f.comparison.strategies[i].name,
                           .iteration = 2,
                           .graph = &f.cases[i].graph,
                           .timeline = &f.cases[i].timeline});
  }
  return f;
}

TEST(HtmlReport, ContainsEveryStrategyTheTableTheChartsAndNoExternalResources) {
  const Fixture f = MakeFixture();
  auto html = HtmlReport(f.comparison, f.timelines);
  ASSERT_TRUE(html.ok()) << html.status().ToString();
  for (const StrategyResult& s : f.comparison.strategies) EXPECT_THAT(*html, HasSubstr(s.name));
  EXPECT_THAT(*html, HasSubstr("MCTS budget &lt;= 0"));
  EXPECT_THAT(*html, HasSubstr("<table id=\"summary\">"));
  EXPECT_EQ(CountOccurrences(*html, "<tr"), 1 + 3);
  // Iteration-time chart + per drawn strategy a timeline and a memory curve.
  EXPECT_EQ(CountOccurrences(*html, "<svg"), 1 + 2 * 2);
  EXPECT_EQ(CountOccurrences(*html, "class=\"stage\""),
            f.cases[0].graph.num_stages() + f.cases[1].graph.num_stages());
  EXPECT_THAT(*html, HasSubstr("iteration time (ms)"));
  // Self-contained: no external scripts, stylesheets, fonts or images.
  EXPECT_THAT(*html, Not(HasSubstr("<script src")));
  EXPECT_THAT(*html, Not(HasSubstr("<link")));
  EXPECT_THAT(*html, Not(HasSubstr("@import")));
  EXPECT_THAT(*html, Not(HasSubstr("url(")));
  EXPECT_THAT(*html, Not(HasSubstr("http://www.w3.org/1999")));
  EXPECT_EQ(CountOccurrences(*html, "http"), CountOccurrences(*html, "http://www.w3.org/2000/svg"));
  EXPECT_THAT(*html, HasSubstr("data-rendered"));
}

TEST(HtmlReport, RanksRowsMarksTheBestShowsTheConfigurationAndOomWithoutSpeedup) {
  Fixture f = MakeFixture();
  f.comparison.strategies[0].configuration = {.modules = {{.module = "llm",
                                                           .tp = 2,
                                                           .pp = 4,
                                                           .dp = 1,
                                                           .layers_per_stage = {2, 2, 2, 2},
                                                           .recompute = "none"}},
                                              .microbatches_min = 4,
                                              .microbatches_max = 4};
  // gpipe is slower than 1f1b (same work, more bubble): mark its last iteration OOM too.
  f.comparison.strategies[1].iterations.back().oom = true;
  auto html = HtmlReport(f.comparison, f.timelines);
  ASSERT_TRUE(html.ok()) << html.status().ToString();
  EXPECT_THAT(*html, HasSubstr("<th>configuration</th>"));
  EXPECT_THAT(*html, HasSubstr("<td class=\"config\">llm tp2 pp4 dp1 [2,2,2,2] | mb 4 | "
                               "recompute none</td>"));
  const size_t best = html->find("<tr class=\"best\"><td><a href=\"#strategy-0\">1f1b *</a>");
  const size_t oom = html->find("<tr class=\"oom\"><td><a href=\"#strategy-1\">gpipe</a>");
  const size_t failed = html->find("<tr class=\"failed\"><td><a href=\"#strategy-2\">dip</a>");
  ASSERT_NE(best, std::string::npos);
  ASSERT_NE(oom, std::string::npos);
  ASSERT_NE(failed, std::string::npos);
  EXPECT_LT(best, oom);
  EXPECT_LT(oom, failed);
  const std::string oom_row = html->substr(oom, html->find("</tr>", oom) - oom);
  EXPECT_THAT(oom_row, HasSubstr("<td>oom</td>"));
  EXPECT_THAT(oom_row, Not(HasSubstr("x</td>")));
  EXPECT_THAT(*html, HasSubstr("<p class=\"config\">configuration: llm tp2 pp4"));
}

TEST(HtmlReport, EscapesEveryUserString) {
  Fixture f = MakeFixture("<script>alert(1)</script>");
  f.comparison.model = "m&<b>";
  f.comparison.strategies[1].description = "\"quoted\" <i>";
  f.timelines[1].strategy = f.comparison.strategies[1].name;
  auto html = HtmlReport(f.comparison, f.timelines);
  ASSERT_TRUE(html.ok()) << html.status().ToString();
  EXPECT_THAT(*html, Not(HasSubstr("<script>alert")));
  EXPECT_THAT(*html, HasSubstr("&lt;script&gt;alert(1)&lt;/script&gt;"));
  EXPECT_THAT(*html, HasSubstr("m&amp;&lt;b&gt;"));
  EXPECT_THAT(*html, HasSubstr("&quot;quoted&quot; &lt;i&gt;"));
  EXPECT_EQ(CountOccurrences(*html, "<script>"), 1);  // only the page's own
}

TEST(HtmlReport, RejectsTimelinesThatNameNoStrategyOrAreMissing) {
  Fixture f = MakeFixture();
  f.timelines[0].strategy = "nope";
  EXPECT_THAT(HtmlReport(f.comparison, f.timelines).status().message(),
              HasSubstr("timelines[0].strategy = \"nope\"; must name a strategy"));
  f = MakeFixture();
  f.timelines[1].timeline = nullptr;
  EXPECT_THAT(HtmlReport(f.comparison, f.timelines).status().message(),
              HasSubstr("timelines[1] (\"gpipe\"): graph and timeline must be non-null"));
  f = MakeFixture();
  f.comparison.baseline = "missing";
  EXPECT_THAT(HtmlReport(f.comparison, f.timelines).status().message(),
              HasSubstr("comparison: baseline = \"missing\""));
}

TEST(HtmlReport, WorksWithoutTimelines) {
  const Fixture f = MakeFixture();
  auto html = HtmlReport(f.comparison, {});
  ASSERT_TRUE(html.ok());
  EXPECT_EQ(CountOccurrences(*html, "<svg"), 1);
  EXPECT_EQ(CountOccurrences(*html, "No timeline recorded"), 2);
}

}  // namespace
}  // namespace weft::report
