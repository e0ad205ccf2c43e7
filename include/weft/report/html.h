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

namespace weft::report {

// One timeline to draw for a strategy. Non-owning: graph and timeline must outlive the call.
struct StrategyTimeline {
  std::string strategy = {};                 // name of a StrategyResult in the comparison
  int iteration = 0;                         // which iteration it shows (for the caption)
  const graph::StageGraph* graph = nullptr;
  const sim::Timeline* timeline = nullptr;
};

struct HtmlOptions {
  std::string title = "weft compare";  // <title> and heading
  int figure_width_px = 1100;          // width of timelines and charts
  bool shared_time_axis = true;        // all timelines on one time scale (the longest)
  graph::GroupId memory_group = 0;     // group whose memory curve is drawn per strategy
};

// Sections: the run (model, cluster, GPUs, data, iterations, baseline); the summary table (the
// columns of TextTable); iteration time across iterations for every strategy (a line chart);
// per strategy: its description, its error if it failed, else the timeline of the chosen
// iteration and the memory curve of `memory_group`. Fails with InvalidArgument if the comparison
// does not validate, a StrategyTimeline names no strategy, has null pointers, or its timeline
// does not match its graph.
StatusOr<std::string> HtmlReport(const Comparison& comparison,
                                 std::span<const StrategyTimeline> timelines,
                                 const HtmlOptions& options = {});

}  // namespace weft::report
