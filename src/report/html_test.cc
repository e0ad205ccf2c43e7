#include "weft/report/html.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "internal.h"
#include "test_util.h"

namespace weft::report {
namespace {

using testing::CountOccurrences;
using ::testing::HasSubstr;
using ::testing::Not;

// Two simulated strategies (1F1B and GPipe) over three "iterations" of growing size, plus one
// that failed. The timelines shown are those of the last iteration.
struct Fixture {
  Comparison comparison;
  std::vector<testing::SimulatedCase> cases;  // one per drawn strategy
  std::vector<StrategyTimeline> timelines;
};

Fixture MakeFixture(const std::string& odd_name = "gpipe") {
  Fixture f;
  f.comparison = {.model = "toy",
                  .cluster = "test",
                  .num_gpus = 4,
                  .data_profile = "synthetic",
                  .num_iterations = 3,
                  .baseline = "1f1b"};
  const std::pair<std::string, sched::ScheduleKind> rules[] = {
      {"1f1b", sched::ScheduleKind::kOneFOneB}, {odd_name, sched::ScheduleKind::kGPipe}};
  for (const auto& [name, kind] : rules) {
    StrategyResult s{.name = name,
                     .description = "rule " + std::string(sched::ScheduleKindName(kind))};
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
  // Each timeline and memory chart is captioned.
  EXPECT_EQ(CountOccurrences(*html, "<figure class=\"timeline\">"), 2);
  EXPECT_EQ(CountOccurrences(*html, "<figure class=\"memory\">"), 2);
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

// The times of every axis label ("time (ms)", "iteration time (s)") of a page.
std::vector<std::string> AxisUnits(const std::string& html) {
  std::vector<std::string> units;
  for (size_t pos = html.find("time ("); pos != std::string::npos;
       pos = html.find("time (", pos + 1)) {
    const size_t open = pos + 6;
    units.push_back(html.substr(open, html.find(')', open) - open));
  }
  return units;
}

TEST(HtmlReport, EveryTimeAxisAndCaptionUsesOneUnit) {
  Fixture f = MakeFixture();  // ~10 ms iterations: milliseconds everywhere
  auto html = HtmlReport(f.comparison, f.timelines);
  ASSERT_TRUE(html.ok()) << html.status().ToString();
  // The iteration chart, two timelines and two memory charts.
  EXPECT_THAT(AxisUnits(*html), ::testing::ElementsAre("ms", "ms", "ms", "ms", "ms"));
  EXPECT_THAT(*html, HasSubstr("Every time in this report is in ms."));
  // A strategy of 2 s iterations (no timeline kept) makes the report's unit seconds: the
  // millisecond timelines are then drawn and captioned in seconds too.
  f.comparison.strategies.push_back(
      {.name = "slow", .iterations = {{.iteration = 0, .iteration_time_s = 2.0}}});
  html = HtmlReport(f.comparison, f.timelines);
  ASSERT_TRUE(html.ok()) << html.status().ToString();
  EXPECT_THAT(AxisUnits(*html), ::testing::ElementsAre("s", "s", "s", "s", "s"));
  EXPECT_THAT(*html, Not(HasSubstr(" ms")));
  EXPECT_THAT(*html,
              HasSubstr(fmt::format("iteration time {} s,",
                                    internal::FormatNumber(f.cases[0].timeline.iteration_time_s))));
}

// The data-end-s of every timeline axis of a page, in order.
std::vector<std::string> AxisEnds(const std::string& html) {
  std::vector<std::string> ends;
  const std::string key = "class=\"time-axis\" data-end-s=\"";
  for (size_t pos = html.find(key); pos != std::string::npos; pos = html.find(key, pos + 1)) {
    const size_t open = pos + key.size();
    ends.push_back(html.substr(open, html.find('"', open) - open));
  }
  return ends;
}

TEST(HtmlReport, EachTimelineHasItsOwnAxisUnlessShared) {
  // A 7.75 ms hand-made timeline and a ~22 ms simulated pipeline.
  const testing::SmallCase small = testing::MakeSmallCase();
  const testing::SimulatedCase pipeline =
      testing::SimulatePipeline(4, 8, sched::ScheduleKind::kOneFOneB);
  Comparison comparison{.model = "toy", .num_gpus = 4, .num_iterations = 1};
  comparison.strategies = {
      {.name = "short", .iterations = {IterationResultFromTimeline(0, small.timeline)}},
      {.name = "long", .iterations = {IterationResultFromTimeline(0, pipeline.timeline)}}};
  const std::vector<StrategyTimeline> timelines = {
      {.strategy = "short", .graph = &small.graph, .timeline = &small.timeline},
      {.strategy = "long", .graph = &pipeline.graph, .timeline = &pipeline.timeline}};
  const std::string long_end = internal::FormatNumber(pipeline.timeline.iteration_time_s, 6);
  ASSERT_GT(pipeline.timeline.iteration_time_s, 2 * small.timeline.iteration_time_s);

  auto own = HtmlReport(comparison, timelines);
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  // Ranked order: the short one first, each axis ending at its own iteration.
  EXPECT_THAT(AxisEnds(*own), ::testing::ElementsAre("0.00775", long_end));
  EXPECT_THAT(*own, HasSubstr("Each timeline has its own time axis"));
  EXPECT_THAT(*own,
              HasSubstr(fmt::format("its axis ends at 7.75 ms, {:.0f}% of the longest timeline",
                                    100 * 7.75e-3 / pipeline.timeline.iteration_time_s)));

  auto shared = HtmlReport(comparison, timelines, {.shared_time_axis = true});
  ASSERT_TRUE(shared.ok()) << shared.status().ToString();
  EXPECT_THAT(AxisEnds(*shared), ::testing::ElementsAre(long_end, long_end));
  EXPECT_THAT(*shared, HasSubstr("All timelines share one time axis"));
}

TEST(HtmlReport, ExplainsTheLowerBoundLineInVisibleText) {
  const Fixture f = MakeFixture();
  auto html = HtmlReport(f.comparison, f.timelines);
  ASSERT_TRUE(html.ok()) << html.status().ToString();
  // Under every timeline (its legend) and once for the page, outside any tooltip.
  EXPECT_EQ(CountOccurrences(*html, "class=\"legend lower-bound-legend\""), 2);
  EXPECT_THAT(*html, HasSubstr("no schedule of this placement is faster; another placement may "
                               "be</text>"));
  const size_t note = html->find("id=\"figure-notes\"");
  ASSERT_NE(note, std::string::npos);
  const std::string text = html->substr(note, html->find("</p>", note) - note);
  EXPECT_THAT(text, HasSubstr("lower bound of that strategy's own placement"));
  EXPECT_THAT(text, HasSubstr("busiest GPU group's work"));
  EXPECT_THAT(text, HasSubstr("critical path"));
  EXPECT_THAT(text, HasSubstr("it is not a bound over all placements"));
}

// One strategy over two iterations of the hand-made case, whose second group (llm/pp1, 5 GiB)
// has the peak; enc/pp0 peaks at 4 GiB.
struct MemoryFixture {
  testing::SmallCase kept = testing::MakeSmallCase();
  Comparison comparison{.model = "toy", .num_gpus = 2, .num_iterations = 2};
  std::vector<StrategyTimeline> timelines;
  MemoryFixture() {
    comparison.strategies = {{.name = "s",
                              .iterations = {IterationResultFromTimeline(0, kept.timeline),
                                             IterationResultFromTimeline(1, kept.timeline)}}};
    timelines = {
        {.strategy = "s", .iteration = 1, .graph = &kept.graph, .timeline = &kept.timeline}};
  }
};

std::string MemoryFigureOf(const std::string& html) {
  const size_t at = html.find("<figure class=\"memory\">");
  EXPECT_NE(at, std::string::npos);
  return at == std::string::npos ? "" : html.substr(at, html.find("</figure>", at) - at);
}

TEST(HtmlReport, MemoryChartShowsTheGroupWithThePeakNotTheFirst) {
  const MemoryFixture m;
  auto html = HtmlReport(m.comparison, m.timelines);
  ASSERT_TRUE(html.ok()) << html.status().ToString();
  const std::string figure = MemoryFigureOf(*html);
  EXPECT_THAT(figure, HasSubstr(">memory per GPU of llm/pp1 (peak group, 2 of 2), iteration "
                                "1</text>"));
  EXPECT_THAT(figure, HasSubstr("llm/pp1 memory (peak 5.00 GiB"));
  EXPECT_THAT(figure, HasSubstr("<figcaption>llm/pp1 holds the strategy&#39;s peak: 5.00 GiB "
                                "per GPU (the table&#39;s peak GiB), in iteration 1. Peaks of "
                                "the other groups: enc/pp0 4.00 GiB.</figcaption>"));
  EXPECT_THAT(figure, Not(HasSubstr("memory per GPU of enc/pp0")));
  EXPECT_THAT(*html, HasSubstr("<td>5.00</td>"));  // the table's peak GiB, same number
}

TEST(HtmlReport, MemoryChartSaysWhereAPeakThatWasNotKeptCameFrom) {
  MemoryFixture m;
  m.comparison.strategies[0].iterations[0].peak_memory_bytes = 6 * testing::kGiB;
  auto html = HtmlReport(m.comparison, m.timelines);
  ASSERT_TRUE(html.ok()) << html.status().ToString();
  EXPECT_THAT(MemoryFigureOf(*html),
              HasSubstr("<figcaption>llm/pp1 has the highest peak of iteration 1: 5.00 GiB per "
                        "GPU. The table&#39;s peak GiB (6.00) is from iteration 0, whose "
                        "timeline was not kept."));
  // The peak in another DP replica of the kept iteration.
  m.comparison.strategies[0].iterations[0].peak_memory_bytes = 5 * testing::kGiB;
  m.comparison.strategies[0].iterations[1].peak_memory_bytes = 6 * testing::kGiB;
  m.timelines[0].num_replicas = 2;
  html = HtmlReport(m.comparison, m.timelines);
  ASSERT_TRUE(html.ok()) << html.status().ToString();
  EXPECT_THAT(MemoryFigureOf(*html),
              HasSubstr("has the highest peak of iteration 1, DP replica 0 of 2: 5.00 GiB per "
                        "GPU. The table&#39;s peak GiB (6.00) is from another DP replica of this "
                        "iteration"));
}

TEST(HtmlReport, MemoryChartDrawsTheKeptPeakTimelineWhenGiven) {
  MemoryFixture m;
  // Iteration 0 peaked higher, on enc/pp0 (6 GiB): its timeline is given as the peak one.
  testing::SmallCase peak = testing::MakeSmallCase();
  peak.timeline.groups[0].peak_bytes = 6 * testing::kGiB;
  peak.timeline.groups[0].memory[2].bytes = 6 * testing::kGiB;
  m.comparison.strategies[0].iterations[0] = IterationResultFromTimeline(0, peak.timeline);
  m.timelines[0].peak_graph = &peak.graph;
  m.timelines[0].peak_timeline = &peak.timeline;
  m.timelines[0].peak_iteration = 0;
  auto html = HtmlReport(m.comparison, m.timelines);
  ASSERT_TRUE(html.ok()) << html.status().ToString();
  const std::string figure = MemoryFigureOf(*html);
  EXPECT_THAT(figure, HasSubstr(">memory per GPU of enc/pp0 (peak group, 1 of 2), iteration "
                                "0</text>"));
  EXPECT_THAT(figure, HasSubstr("enc/pp0 holds the strategy&#39;s peak: 6.00 GiB per GPU (the "
                                "table&#39;s peak GiB), in iteration 0. Peaks of the other "
                                "groups: llm/pp1 5.00 GiB."));
  // The timeline drawn above it is still the kept iteration's.
  EXPECT_THAT(*html, HasSubstr("s &middot; iteration 1: 2 groups"));

  m.timelines[0].peak_graph = nullptr;
  EXPECT_THAT(HtmlReport(m.comparison, m.timelines).status().message(),
              HasSubstr("timelines[0] (\"s\"): peak_graph and peak_timeline must both be set"));
}

TEST(HtmlReport, AChosenMemoryGroupNamesThePeakGroupToo) {
  const MemoryFixture m;
  auto html = HtmlReport(m.comparison, m.timelines, {.memory_group = 0});
  ASSERT_TRUE(html.ok()) << html.status().ToString();
  const std::string figure = MemoryFigureOf(*html);
  EXPECT_THAT(figure, HasSubstr(">memory per GPU of enc/pp0 (group 1 of 2), iteration 1</text>"));
  EXPECT_THAT(figure, HasSubstr("enc/pp0 (chosen), peak 4.00 GiB per GPU; the group with the "
                                "highest peak of iteration 1 is llm/pp1 at 5.00 GiB."));
}

// A streaming strategy's pool: its occupancy over the window as a step chart under the memory
// curve, the capacity as the reference line, the caption with peak, puts / gets, stall and
// starvation; more changes than kPoolPoints are reduced to the maximum per slice (the peak kept).
TEST(HtmlReport, DrawsAStreamingStrategysPoolOverItsWindow) {
  Fixture f = MakeFixture();
  sim::BufferTimeline pool{.name = "pool", .capacity_bytes = int64_t{4} << 30};
  pool.occupancy.push_back({.time_s = 0, .bytes = 0});
  for (int i = 1; i <= 3 * kPoolPoints; ++i) {
    const int64_t bytes = (i % 2 == 1 ? int64_t{3} << 30 : int64_t{1} << 30) + (i == 1501 ? 1 : 0);
    pool.occupancy.push_back({.time_s = 1e-3 * i, .bytes = bytes});
  }
  pool.peak_bytes = (int64_t{3} << 30) + 1;
  pool.puts = pool.gets = 1500;
  pool.producer_stall_s = 0.25;
  pool.consumer_starvation_s = 0.125;
  f.timelines[0].pool = &pool;
  f.timelines[0].pool_iterations = 8;
  auto html = HtmlReport(f.comparison, f.timelines);
  ASSERT_TRUE(html.ok()) << html.status().ToString();
  EXPECT_EQ(CountOccurrences(*html, "<figure class=\"pool\">"), 1);
  EXPECT_THAT(*html, HasSubstr("pool over the window of 8 iterations: peak 3.00 of 4.00 GiB, "
                               "1500 puts / 1500 gets"));
  EXPECT_THAT(*html, HasSubstr("capacity 4.00 GiB"));
  EXPECT_THAT(*html, HasSubstr("the maximum per 1/1000 of the window"));
  // Without a pool nothing is drawn.
  f.timelines[0].pool = nullptr;
  auto plain = HtmlReport(f.comparison, f.timelines);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(CountOccurrences(*plain, "<figure class=\"pool\">"), 0);
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
