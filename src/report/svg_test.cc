#include "weft/report/svg.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "internal.h"
#include "test_util.h"

namespace weft::report {
namespace {

using testing::CountOccurrences;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::XmlProblem;

TEST(XmlProblem, AcceptsWellFormedAndRejectsBrokenMarkup) {
  EXPECT_EQ(XmlProblem("<a x=\"1\"><b/>t &amp; u</a>"), "");
  EXPECT_NE(XmlProblem("<a><b></a>"), "");
  EXPECT_NE(XmlProblem("<a>x & y</a>"), "");
  EXPECT_NE(XmlProblem("<a x=1></a>"), "");
  EXPECT_NE(XmlProblem("<a>"), "");
}

TEST(TimelineSvg, IsWellFormedWithOneBoxPerStageAndARowPerGroup) {
  const testing::SmallCase c = testing::MakeSmallCase();
  auto svg = TimelineSvg(c.graph, c.timeline, {.title = "small"});
  ASSERT_TRUE(svg.ok()) << svg.status().ToString();
  EXPECT_EQ(XmlProblem(*svg), "");
  EXPECT_EQ(CountOccurrences(*svg, "class=\"stage\""), 4);
  EXPECT_EQ(CountOccurrences(*svg, "class=\"row\""), 2);
  EXPECT_EQ(CountOccurrences(*svg, "class=\"tail\""), 2);  // grad sync + optimizer of g0
  EXPECT_EQ(CountOccurrences(*svg, "<svg"), 1);
  EXPECT_THAT(*svg, HasSubstr(">enc/pp0</text>"));
  EXPECT_THAT(*svg, HasSubstr(">llm/pp1</text>"));
  EXPECT_THAT(*svg, HasSubstr("time (ms)"));
  EXPECT_THAT(*svg, HasSubstr("class=\"lower-bound\""));
  // Legend: both modules, forward and backward swatches.
  EXPECT_EQ(CountOccurrences(*svg, "class=\"legend\""), 3);  // vit, llm, tail
  EXPECT_THAT(*svg, HasSubstr(">vit</text>"));
  EXPECT_THAT(*svg, HasSubstr(">backward</text>"));
}

TEST(TimelineSvg, ForwardIsLighterThanBackwardOfTheSameModule) {
  const testing::SmallCase c = testing::MakeSmallCase();
  auto svg = TimelineSvg(c.graph, c.timeline, {.show_legend = false});
  ASSERT_TRUE(svg.ok());
  const auto fill_of_box = [&](int nth) {
    size_t pos = 0;
    for (int i = 0; i <= nth; ++i) pos = svg->find("class=\"stage\"", pos + 1);
    const size_t f = svg->find("fill=\"#", pos) + 6;
    return svg->substr(f, 7);
  };
  const auto luminance = [](const std::string& hex) {
    return 0.299 * std::stoi(hex.substr(1, 2), nullptr, 16) +
           0.587 * std::stoi(hex.substr(3, 2), nullptr, 16) +
           0.114 * std::stoi(hex.substr(5, 2), nullptr, 16);
  };
  // Boxes are emitted in stage-id order: vit F, llm F, llm B, vit B.
  EXPECT_GT(luminance(fill_of_box(0)), luminance(fill_of_box(3)));
  EXPECT_GT(luminance(fill_of_box(1)), luminance(fill_of_box(2)));
  EXPECT_NE(fill_of_box(0), fill_of_box(1));  // modules differ
}

TEST(TimelineSvg, EscapesLabelsAndModuleNames) {
  testing::SmallCase c = testing::MakeSmallCase();
  c.graph.SetModuleNames({"<vit & \"co\">", "llm"});
  ASSERT_TRUE(c.graph.Finalize().ok());
  auto svg = TimelineSvg(c.graph, c.timeline, {.title = "a<b>&c"});
  ASSERT_TRUE(svg.ok());
  EXPECT_EQ(XmlProblem(*svg), "");
  EXPECT_THAT(*svg, HasSubstr("&lt;vit &amp; &quot;co&quot;&gt;"));
  EXPECT_THAT(*svg, HasSubstr("a&lt;b&gt;&amp;c"));
  EXPECT_THAT(*svg, Not(HasSubstr("<vit")));
}

TEST(TimelineSvg, LabelsBoxesWithMicrobatchNumbersOnARealPipeline) {
  const testing::SimulatedCase c = testing::SimulatePipeline(4, 8, sched::ScheduleKind::kOneFOneB);
  auto svg = TimelineSvg(c.graph, c.timeline, {.width_px = 1400});
  ASSERT_TRUE(svg.ok()) << svg.status().ToString();
  EXPECT_EQ(XmlProblem(*svg), "");
  EXPECT_EQ(CountOccurrences(*svg, "class=\"stage\""), c.graph.num_stages());
  EXPECT_EQ(CountOccurrences(*svg, "class=\"row\""), 4);
  // 1 ms stages over a ~22 ms iteration on 1300 px are wide enough for their label.
  EXPECT_EQ(CountOccurrences(*svg, "pointer-events=\"none\">7</text>"), 8);  // mb 7: 4 F + 4 B
}

TEST(TimelineSvg, SharedTimeEndScalesBoxes) {
  const testing::SmallCase c = testing::MakeSmallCase();
  auto narrow = TimelineSvg(c.graph, c.timeline, {.time_end_s = 0.1});
  ASSERT_TRUE(narrow.ok());
  EXPECT_EQ(XmlProblem(*narrow), "");
  EXPECT_THAT(TimelineSvg(c.graph, c.timeline, {.width_px = 150}).status().message(),
              HasSubstr("width_px = 150; must be >= label_width_px + 100 (190)"));
}

TEST(TimeUnit, SecondsFromOneSecondMillisecondsFromOneMillisecond) {
  EXPECT_EQ(TimeUnitFor(24), TimeUnit::kSeconds);
  EXPECT_EQ(TimeUnitFor(1), TimeUnit::kSeconds);
  EXPECT_EQ(TimeUnitFor(0.999), TimeUnit::kMilliseconds);
  EXPECT_EQ(TimeUnitFor(1e-3), TimeUnit::kMilliseconds);
  EXPECT_EQ(TimeUnitFor(5e-4), TimeUnit::kMicroseconds);
  EXPECT_EQ(TimeUnitPerSecond(TimeUnit::kMilliseconds), 1e3);
  EXPECT_EQ(TimeUnitName(TimeUnit::kMicroseconds), "us");
}

TEST(TimelineSvg, AGivenUnitLabelsTheAxisAndTheTooltips) {
  const testing::SmallCase c = testing::MakeSmallCase();  // 7.75 ms: ms on its own
  auto svg = TimelineSvg(c.graph, c.timeline, {.time_unit = TimeUnit::kSeconds});
  ASSERT_TRUE(svg.ok()) << svg.status().ToString();
  EXPECT_EQ(XmlProblem(*svg), "");
  EXPECT_THAT(*svg, HasSubstr(">time (s)</text>"));
  EXPECT_THAT(*svg, Not(HasSubstr(" ms")));
  EXPECT_THAT(*svg, Not(HasSubstr("(ms)")));
  EXPECT_THAT(*svg, HasSubstr("0.0015\u20130.0025 s</title>"));  // llm F in seconds
  auto memory = MemoryCurveSvg(c.graph, c.timeline, 1, {}, TimeUnit::kSeconds);
  ASSERT_TRUE(memory.ok()) << memory.status().ToString();
  EXPECT_THAT(*memory, HasSubstr(">time (s)</text>"));
  EXPECT_THAT(*memory, Not(HasSubstr("(ms)")));
}

TEST(TimelineSvg, AxisEndsAtItsOwnTimelineUnlessGivenAnEnd) {
  const testing::SmallCase c = testing::MakeSmallCase();
  auto own = TimelineSvg(c.graph, c.timeline);
  ASSERT_TRUE(own.ok());
  EXPECT_THAT(*own, HasSubstr("class=\"time-axis\" data-end-s=\"0.00775\""));
  auto shared = TimelineSvg(c.graph, c.timeline, {.time_end_s = 0.1});
  ASSERT_TRUE(shared.ok());
  EXPECT_THAT(*shared, HasSubstr("class=\"time-axis\" data-end-s=\"0.1\""));
}

TEST(TimelineSvg, LegendExplainsTheLowerBoundLine) {
  testing::SmallCase c = testing::MakeSmallCase();
  auto svg = TimelineSvg(c.graph, c.timeline);
  ASSERT_TRUE(svg.ok());
  EXPECT_EQ(CountOccurrences(*svg, "class=\"legend lower-bound-legend\""), 1);
  // Neither bound recorded (a hand-made timeline): both named.
  EXPECT_THAT(*svg, HasSubstr("lower bound 7.25 ms: its busiest GPU group&#39;s work or its "
                              "critical path \u2014 no schedule of this placement is faster; "
                              "another placement may be</text>"));
  c.timeline.busiest_group_work_s = 6e-3;
  c.timeline.critical_path_s = 7.25e-3;
  svg = TimelineSvg(c.graph, c.timeline);
  ASSERT_TRUE(svg.ok());
  EXPECT_THAT(*svg, HasSubstr("lower bound 7.25 ms: its critical path \u2014"));
  c.timeline.busiest_group_work_s = 7.25e-3;
  c.timeline.critical_path_s = 6e-3;
  svg = TimelineSvg(c.graph, c.timeline);
  ASSERT_TRUE(svg.ok());
  EXPECT_THAT(*svg, HasSubstr("lower bound 7.25 ms: its busiest GPU group&#39;s work \u2014"));
  // No line, no legend entry.
  svg = TimelineSvg(c.graph, c.timeline, {.show_lower_bound = false});
  ASSERT_TRUE(svg.ok());
  EXPECT_THAT(*svg, Not(HasSubstr("lower-bound")));
  EXPECT_EQ(XmlProblem(*svg), "");
}

TEST(LineChartSvg, DrawsOnePolylinePerSeriesAndRejectsBadInput) {
  const std::vector<ChartSeries> series = {{.name = "a", .x = {0, 1, 2}, .y = {3, 2, 4}},
                                           {.name = "b<&>", .x = {0, 1, 2}, .y = {1, 1, 1}}};
  auto svg = LineChartSvg(series, {.title = "iteration time",
                                   .x_label = "iteration",
                                   .y_label = "time (s)",
                                   .reference_y = 5,
                                   .reference_label = "cap"});
  ASSERT_TRUE(svg.ok()) << svg.status().ToString();
  EXPECT_EQ(XmlProblem(*svg), "");
  EXPECT_EQ(CountOccurrences(*svg, "class=\"series\""), 2);
  EXPECT_EQ(CountOccurrences(*svg, "<circle"), 6);
  // Integer ticks only when asked.
  EXPECT_THAT(*svg, HasSubstr(">0.2</text>"));
  auto integer = LineChartSvg(series, {.x_integer_ticks = true});
  ASSERT_TRUE(integer.ok());
  EXPECT_THAT(*integer, Not(HasSubstr(">0.2</text>")));
  EXPECT_THAT(*integer, HasSubstr(">1</text>"));
  EXPECT_EQ(CountOccurrences(*svg, "class=\"reference\""), 1);
  EXPECT_THAT(*svg, HasSubstr("b&lt;&amp;&gt;"));

  const std::vector<ChartSeries> bad = {{.name = "a", .x = {0, 1}, .y = {1}}};
  EXPECT_THAT(LineChartSvg(bad).status().message(),
              HasSubstr("series[0] (\"a\").x has 2 values; must match y (1)"));
  const std::vector<ChartSeries> nan = {{.name = "a", .x = {0}, .y = {NAN}}};
  EXPECT_EQ(LineChartSvg(nan).status().code(), StatusCode::kInvalidArgument);
  // No series at all still draws empty axes.
  auto empty = LineChartSvg({});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(XmlProblem(*empty), "");
}

TEST(SeriesStyle, EveryStrategyOfACompareGetsItsOwnLook) {
  // 15 registered strategies + manual: no two series share colour and dash; the first 15 (every
  // strategy of `weft compare`) have 15 different colours (gpipe and dip used to share green).
  std::set<std::pair<std::string, std::string>> looks;
  std::set<std::string> colors;
  for (int i = 0; i < 32; ++i) {
    EXPECT_TRUE(looks.insert({internal::SeriesColor(i), internal::SeriesDash(i)}).second) << i;
    if (i < internal::kSeriesColors) {
      EXPECT_TRUE(colors.insert(internal::SeriesColor(i)).second) << i;
    }
  }
  EXPECT_EQ(internal::SeriesDash(0), "");
  EXPECT_NE(internal::SeriesDash(internal::kSeriesColors), "");
}

TEST(LineChartSvg, DashesSeriesBeyondThePalette) {
  std::vector<ChartSeries> series;
  for (int i = 0; i < internal::kSeriesColors + 1; ++i) {
    series.push_back({.name = "s" + std::to_string(i), .x = {0, 1}, .y = {1, 2}});
  }
  auto svg = LineChartSvg(series, {});
  ASSERT_TRUE(svg.ok()) << svg.status().ToString();
  EXPECT_EQ(XmlProblem(*svg), "");
  EXPECT_EQ(CountOccurrences(*svg, "stroke-dasharray=\"6 3\""), 2);  // the line and its legend
}

TEST(MemoryCurveSvg, StepChartWithCapacityLineWhenThePeakComesClose) {
  testing::SmallCase c = testing::MakeSmallCase();
  // Peak 5 GiB of 80: the capacity is only named, the axis fits the curve.
  auto far = MemoryCurveSvg(c.graph, c.timeline, 1);
  ASSERT_TRUE(far.ok()) << far.status().ToString();
  EXPECT_EQ(XmlProblem(*far), "");
  EXPECT_THAT(*far, HasSubstr("llm/pp1 memory (peak 5.00 GiB, capacity 80 GiB)"));
  EXPECT_EQ(CountOccurrences(*far, "class=\"reference\""), 0);
  // Peak 5 GiB of 8: a dashed capacity line.
  c.timeline.capacity_bytes = 8 * testing::kGiB;
  auto svg = MemoryCurveSvg(c.graph, c.timeline, 1);
  ASSERT_TRUE(svg.ok()) << svg.status().ToString();
  EXPECT_EQ(XmlProblem(*svg), "");
  EXPECT_EQ(CountOccurrences(*svg, "class=\"series\""), 1);
  EXPECT_EQ(CountOccurrences(*svg, "class=\"reference\""), 1);
  EXPECT_THAT(*svg, HasSubstr("capacity 8 GiB"));
  EXPECT_THAT(*svg, HasSubstr("llm/pp1 memory (peak 5.00 GiB)"));
  // Staircase: 4 points + hold to the end, each after the first doubled.
  const size_t points = svg->find("points=\"");
  const std::string list = svg->substr(points + 8, svg->find('"', points + 8) - points - 8);
  EXPECT_EQ(CountOccurrences(list, ","), 1 + 2 * 4);

  EXPECT_THAT(MemoryCurveSvg(c.graph, c.timeline, 2).status().message(),
              HasSubstr("group = 2; must be in [0, 2)"));
  testing::SmallCase no_curve = testing::MakeSmallCase();
  no_curve.timeline.groups[0].memory.clear();
  EXPECT_EQ(MemoryCurveSvg(no_curve.graph, no_curve.timeline, 0).status().code(),
            StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace weft::report
