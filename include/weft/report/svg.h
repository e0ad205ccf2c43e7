#pragma once
// Standalone SVG figures (no scripts, no external fonts): a pipeline timeline like the papers'
// figures, a memory curve, and a generic line chart. All text is XML-escaped.
// Thread-safety: pure functions.
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"
#include "weft/graph/stage_graph.h"
#include "weft/sim/timeline.h"

namespace weft::report {

// The unit of a time axis (and of the times in tooltips). kAuto picks from the axis' span with
// TimeUnitFor; a report that draws several figures passes one unit to all of them.
enum class TimeUnit { kAuto, kSeconds, kMilliseconds, kMicroseconds };
// Seconds from 1 s, milliseconds from 1 ms, microseconds below (never kAuto).
TimeUnit TimeUnitFor(double span_s);
double TimeUnitPerSecond(TimeUnit unit);       // 1, 1e3 or 1e6 (kAuto: 1)
std::string_view TimeUnitName(TimeUnit unit);  // "s", "ms" or "us" (kAuto: "s")

struct TimelineSvgOptions {
  int width_px = 1000;      // whole figure
  int row_height_px = 26;   // one row per device group
  int label_width_px = 90;  // left margin for the group labels
  std::string title = {};   // drawn above the rows when non-empty
  double time_end_s = 0;    // right end of the time axis; 0 = the timeline's iteration time
                            // (set the same value for several figures to compare them)
  TimeUnit time_unit = TimeUnit::kAuto;  // of the axis and tooltips; kAuto = TimeUnitFor(end)
  bool show_group_tail = true;   // grad-sync / optimizer boxes after each group's last stage
  bool show_lower_bound = true;  // dashed vertical line at lower_bound_s
  bool show_legend = true;       // module × direction swatches (and the lower-bound line, when
                                 // drawn, with what it bounds) under the axis
};

// One row per device group, a box per stage (class "stage") labelled with its microbatch
// ("3" or "3.1") when wide enough, coloured by module: light = forward, darker = backward,
// darkest = weight gradient (W); each box has a <title> tooltip with the stage name and times.
// The axis line (class "time-axis") carries data-end-s, the right end of the axis in seconds.
// The legend names the lower-bound line: the bound of this timeline's own placement (its
// busiest GPU group's work or its critical path, whichever is longer), not over all placements.
StatusOr<std::string> TimelineSvg(const graph::StageGraph& graph,
                                  const sim::Timeline& timeline,
                                  const TimelineSvgOptions& options = {});

struct ChartSeries {
  std::string name = {};
  std::vector<double> x = {};  // same length as y; units given by the chart's axis labels
  std::vector<double> y = {};
};

struct LineChartOptions {
  int width_px = 800;
  int height_px = 300;
  std::string title = {};
  std::string x_label = {};      // with its unit, e.g. "iteration" or "time (ms)"
  std::string y_label = {};      // with its unit, e.g. "iteration time (s)"
  bool step = false;             // staircase (a value holds until the next point), e.g. memory
  bool y_from_zero = true;       // y axis starts at 0; false = fit to the data with a margin
  bool markers = true;           // a dot per point (dropped above 60 points per series)
  bool x_integer_ticks = false;  // x ticks on whole numbers only (e.g. iteration indices)
  double reference_y = 0;        // horizontal dashed line when > 0 (e.g. GPU capacity)
  std::string reference_label = {};
};

// Polylines with axes, nice ticks and a legend (class "series" per polyline). Fails with
// InvalidArgument when x and y lengths differ or a value is not finite.
StatusOr<std::string> LineChartSvg(std::span<const ChartSeries> series,
                                   const LineChartOptions& options = {});

// The memory curve (GiB per GPU over time) of one group as a step chart from 0 GiB, its peak
// named in the legend ("pp3 memory (peak 40.26 GiB)"). The GPU capacity (when the timeline
// knows it and options.reference_y is 0) is drawn as a reference line if the peak reaches half
// of it; below that it is only named in the legend, so the curve's shape stays visible. The x
// axis is "time (<unit>)" (kAuto: TimeUnitFor the iteration time) unless options.x_label is
// set. Fails when the group does not exist or has no recorded curve.
StatusOr<std::string> MemoryCurveSvg(const graph::StageGraph& graph,
                                     const sim::Timeline& timeline,
                                     graph::GroupId group,
                                     const LineChartOptions& options = {},
                                     TimeUnit time_unit = TimeUnit::kAuto);

}  // namespace weft::report
