#include "weft/report/html.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "internal.h"
#include "weft/report/svg.h"

namespace weft::report {
namespace {

using internal::XmlEscape;

constexpr std::string_view kStyle = R"(
body { font-family: sans-serif; margin: 24px; color: #222; max-width: 1200px; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; } h3 { font-size: 15px; }
p.run { color: #444; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border-bottom: 1px solid #ddd; padding: 4px 8px; text-align: right; white-space: nowrap; }
th { background: #f0f0f0; cursor: pointer; user-select: none; }
td:first-child, th:first-child { text-align: left; }
tr.failed td { color: #999; }
tr.best td { font-weight: bold; }
tr.oom td { color: #b71c1c; }
td.config, th:last-child { text-align: left; font-family: monospace; }
.error { color: #b71c1c; }
figure { margin: 12px 0; overflow-x: auto; }
figcaption { font-size: 12px; color: #555; }
section.strategy { border-top: 1px solid #ccc; padding-top: 8px; }
)";

// Sorts the table on a header click (numbers numerically, "-" last) and marks the page rendered
// once every inline SVG has a non-empty layout box.
constexpr std::string_view kScript = R"(
(function () {
  var table = document.getElementById("summary");
  if (table && table.tHead) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, col) {
      th.addEventListener("click", function () {
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var asc = th.getAttribute("data-dir") !== "asc";
        th.setAttribute("data-dir", asc ? "asc" : "desc");
        rows.sort(function (a, b) {
          var x = a.cells[col].textContent, y = b.cells[col].textContent;
          var nx = parseFloat(x), ny = parseFloat(y);
          if (isNaN(nx) || isNaN(ny)) {
            if (isNaN(nx) !== isNaN(ny)) return isNaN(nx) ? 1 : -1;
            return asc ? x.localeCompare(y) : y.localeCompare(x);
          }
          return asc ? nx - ny : ny - nx;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  }
  var svgs = document.querySelectorAll("svg");
  var ok = svgs.length > 0;
  Array.prototype.forEach.call(svgs, function (svg) {
    var box = svg.getBoundingClientRect();
    if (!(box.width > 0 && box.height > 0)) ok = false;
  });
  document.body.setAttribute("data-svg-count", String(svgs.length));
  document.body.setAttribute("data-rendered", ok ? "ok" : "failed");
})();
)";

std::string Anchor(size_t index) { return fmt::format("strategy-{}", index); }

}  // namespace

StatusOr<std::string> HtmlReport(const Comparison& comparison,
                                 std::span<const StrategyTimeline> timelines,
                                 const HtmlOptions& options) {
  WEFT_RETURN_IF_ERROR(comparison.Validate().WithPrefix("comparison"));
  for (size_t i = 0; i < timelines.size(); ++i) {
    const StrategyTimeline& t = timelines[i];
    if (comparison.FindStrategy(t.strategy) < 0) {
      return InvalidArgumentError(fmt::format(
          "timelines[{}].strategy = \"{}\"; must name a strategy of the comparison", i,
          t.strategy));
    }
    if (t.graph == nullptr || t.timeline == nullptr) {
      return InvalidArgumentError(
          fmt::format("timelines[{}] (\"{}\"): graph and timeline must be non-null", i, t.strategy));
    }
    WEFT_RETURN_IF_ERROR(internal::CheckTimelineMatchesGraph(*t.graph, *t.timeline)
                             .WithPrefix(fmt::format("timelines[{}] (\"{}\")", i, t.strategy)));
  }

  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  html += "<meta name=\"generator\" content=\"weft\">\n";
  html += fmt::format("<title>{}</title>\n<style>{}</style>\n</head>\n<body>\n",
                      XmlEscape(options.title), kStyle);
  html += fmt::format("<h1>{}</h1>\n", XmlEscape(options.title));
  html += fmt::format(
      "<p class=\"run\">model <b>{}</b> &middot; cluster <b>{}</b> &middot; {} GPUs &middot; "
      "data <b>{}</b> &middot; {} iterations{}</p>\n",
      XmlEscape(comparison.model.empty() ? "-" : comparison.model),
      XmlEscape(comparison.cluster.empty() ? "-" : comparison.cluster), comparison.num_gpus,
      XmlEscape(comparison.data_profile.empty() ? "-" : comparison.data_profile),
      comparison.num_iterations,
      comparison.baseline.empty()
          ? std::string()
          : " &middot; speedups relative to <b>" + XmlEscape(comparison.baseline) + "</b>");

  // Summary table.
  const internal::SummaryCells cells = internal::MakeSummaryCells(comparison);
  html += "<h2>Summary</h2>\n<table id=\"summary\">\n<thead><tr>";
  for (const std::string& h : cells.header) html += "<th>" + XmlEscape(h) + "</th>";
  html += "</tr></thead>\n<tbody>\n";
  const int best = comparison.BestStrategy();
  for (size_t i = 0; i < cells.rows.size(); ++i) {
    const int index = cells.strategy[i];
    const StrategyResult& s = comparison.strategies[index];
    html += !s.ok()         ? "<tr class=\"failed\">"
            : index == best ? "<tr class=\"best\">"
            : !s.feasible() ? "<tr class=\"oom\">"
                            : "<tr>";
    for (size_t c = 0; c < cells.rows[i].size(); ++c) {
      if (c == 0) {
        html += fmt::format("<td><a href=\"#{}\">{}</a></td>", Anchor(index),
                            XmlEscape(cells.rows[i][c]));
      } else if (c + 1 == cells.rows[i].size()) {
        html += "<td class=\"config\">" + XmlEscape(cells.rows[i][c]) + "</td>";
      } else {
        html += "<td>" + XmlEscape(cells.rows[i][c]) + "</td>";
      }
    }
    html += "</tr>\n";
  }
  html += "</tbody>\n</table>\n";
  html +=
      "<p class=\"run\">Times are per iteration (mean, median, 90th percentile); throughput "
      "and MFU are total work over total time; gap LB = mean(time / lower bound &minus; 1); "
      "speedup = baseline mean time / strategy mean time. Rows: fastest mean time first, "
      "out-of-memory rows after the feasible ones, failed last; * = fastest feasible (no "
      "OOM); an out-of-memory row has no speedup (oom). Configuration: per module tp, cp "
      "(when &gt; 1), pipeline stages, DP replicas and [layers per stage], then microbatches "
      "per replica (mb) and recomputation.</p>\n";
  for (const auto& [name, message] : cells.errors) {
    html += fmt::format("<p class=\"error\">{}: {}</p>\n", XmlEscape(name), XmlEscape(message));
  }

  // Iteration time across iterations.
  std::vector<ChartSeries> series;
  double max_time_s = 0;
  for (const StrategyResult& s : comparison.strategies) {
    for (const IterationResult& it : s.iterations) {
      max_time_s = std::max(max_time_s, it.iteration_time_s);
    }
  }
  const bool in_ms = max_time_s < 1.0;
  for (const StrategyResult& s : comparison.strategies) {
    if (!s.ok()) continue;
    ChartSeries cs{.name = s.name};
    for (const IterationResult& it : s.iterations) {
      cs.x.push_back(it.iteration);
      cs.y.push_back(it.iteration_time_s * (in_ms ? 1e3 : 1.0));
    }
    series.push_back(std::move(cs));
  }
  html += "<h2>Iteration time across iterations</h2>\n<figure>\n";
  WEFT_ASSIGN_OR_RETURN(
      std::string chart,
      LineChartSvg(series, {.width_px = options.figure_width_px,
                            .height_px = 320 + 16 * static_cast<int>(series.size() / 4),
                            .x_label = "iteration",
                            .y_label = in_ms ? "iteration time (ms)" : "iteration time (s)",
                            .x_integer_ticks = true}));
  html += chart + "</figure>\n";

  // Per strategy: timeline and memory curve.
  double shared_end_s = 0;
  if (options.shared_time_axis) {
    for (const StrategyTimeline& t : timelines) {
      shared_end_s = std::max(shared_end_s, t.timeline->iteration_time_s);
      for (const sim::StageTiming& st : t.timeline->stages) {
        shared_end_s = std::max(shared_end_s, st.end_s);
      }
    }
  }
  html += "<h2>Strategies</h2>\n";
  for (int i : comparison.RankedOrder()) {
    const StrategyResult& s = comparison.strategies[i];
    html += fmt::format("<section class=\"strategy\" id=\"{}\">\n<h3>{}</h3>\n", Anchor(i),
                        XmlEscape(s.name));
    if (!s.description.empty()) html += "<p>" + XmlEscape(s.description) + "</p>\n";
    if (!s.configuration.empty()) {
      html += "<p class=\"config\">configuration: " + XmlEscape(s.configuration.Brief()) + "</p>\n";
    }
    if (s.error) html += "<p class=\"error\">" + XmlEscape(*s.error) + "</p>\n";
    bool drew = false;
    for (const StrategyTimeline& t : timelines) {
      if (t.strategy != s.name) continue;
      drew = true;
      WEFT_ASSIGN_OR_RETURN(std::string svg,
                            TimelineSvg(*t.graph, *t.timeline,
                                        {.width_px = options.figure_width_px,
                                         .time_end_s = shared_end_s}));
      html += fmt::format(
          "<figure>\n{}<figcaption>{} &middot; iteration {}: {} groups, {} stages, iteration "
          "time {} ms, lower bound {} ms, bubble {:.1f}%</figcaption>\n</figure>\n",
          svg, XmlEscape(s.name), t.iteration, t.graph->num_groups(), t.graph->num_stages(),
          internal::FormatNumber(t.timeline->iteration_time_s * 1e3),
          internal::FormatNumber(t.timeline->lower_bound_s * 1e3),
          t.timeline->bubble_ratio * 100.0);
      const graph::GroupId g = options.memory_group;
      if (g >= 0 && g < t.graph->num_groups() && !t.timeline->groups[g].memory.empty()) {
        WEFT_ASSIGN_OR_RETURN(
            std::string memory,
            MemoryCurveSvg(*t.graph, *t.timeline, g,
                           {.width_px = std::min(options.figure_width_px, 800),
                            .height_px = 260,
                            .title = "memory of " + internal::GroupLabel(*t.graph, g)}));
        html += "<figure>\n" + memory + "</figure>\n";
      }
    }
    if (!drew && s.ok()) html += "<p>No timeline recorded for this strategy.</p>\n";
    html += "</section>\n";
  }
  html += fmt::format("<script>{}</script>\n</body>\n</html>\n", kScript);
  return html;
}

}  // namespace weft::report
