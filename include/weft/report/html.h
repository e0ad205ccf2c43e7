#pragma once
// A self-contained HTML report of a Comparison: no external scripts, stylesheets or fonts; every
// figure is inline SVG; all text is escaped. A few lines of inline JS sort the table on a header
// click and mark the page rendered (<body data-rendered="ok">) once every figure has laid out.
// Thread-safety: pure function.
#include <span>
#include <string>

#include "weft/graph/stage_graph.h"
#include "weft/report/comparison.h"
#include "weft/sim/timeline.h"
#include "weft/sim/window.h"

namespace weft::report {

// One timeline to draw for a strategy. Non-owning: graphs and timelines must outlive the call.
struct StrategyTimeline {
  std::string strategy = {};  // name of a StrategyResult in the comparison
  int iteration = 0;          // which iteration it shows (for the caption)
  const graph::StageGraph* graph = nullptr;
  const sim::Timeline* timeline = nullptr;
  // Which DP replica's pipeline it is, of how many (named in the caption when more than one).
  int replica = 0;
  int num_replicas = 1;
  // The iteration and DP replica holding the strategy's memory peak (the table's peak GiB),
  // when it is not the one above; its memory curve is then drawn instead. Both null = the
  // timeline above is the one to draw (it holds the peak, or no other was kept).
  const graph::StageGraph* peak_graph = nullptr;
  const sim::Timeline* peak_timeline = nullptr;
  int peak_iteration = 0;
  int peak_replica = 0;
  int peak_num_replicas = 1;
  // A streaming strategy's pool over its whole window (sim::SimulateWindow's buffer; window
  // clock): drawn as an occupancy chart under the memory curve. Null = not streaming.
  const sim::BufferTimeline* pool = nullptr;
  int pool_iterations = 0;  // the window's iterations (for the caption)
};

inline constexpr int kPoolPoints = 1000;

// memory_group: draw the group whose peak is the highest of its timeline.
inline constexpr graph::GroupId kPeakMemoryGroup = -1;

struct HtmlOptions {
  std::string title = "weft compare";  // <title> and heading
  int figure_width_px = 1100;          // width of timelines and charts
  // false: every timeline on its own time axis, scaled to its own iteration (the report says the
  // axes differ and gives each iteration's share of the longest); true: all on the longest's.
  bool shared_time_axis = false;
  // Group whose memory curve is drawn per strategy; kPeakMemoryGroup = the group with the peak.
  graph::GroupId memory_group = kPeakMemoryGroup;
};

// Sections: the run (model, cluster, GPUs, data, iterations, baseline); the summary table (the
// columns of TextTable); iteration time across iterations for every strategy (a line chart);
// per strategy: its description, its error if it failed, else the timeline of the chosen
// iteration and the memory curve of the group with the strategy's peak (named, with the other
// groups' peaks; when the peak is in an iteration or replica that was not kept, the caption says
// so), and for a streaming strategy its pool's occupancy over the window (at most kPoolPoints
// steps: the maximum per equal slice of the window when there are more puts and gets). Every time in the report (axes, captions, tooltips) is in one unit, TimeUnitFor the
// longest time in it. Fails with InvalidArgument if the comparison does not validate, a
// StrategyTimeline names no strategy, has null pointers (or only one of the peak pair), or a
// timeline does not match its graph.
StatusOr<std::string> HtmlReport(const Comparison& comparison,
                                 std::span<const StrategyTimeline> timelines,
                                 const HtmlOptions& options = {});

}  // namespace weft::report
