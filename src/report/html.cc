#include "weft/report/html.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

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

std::string GiB(int64_t bytes) { return fmt::format("{:.2f}", bytes / internal::kBytesPerGiB); }

// Right end of a timeline's own axis: its iteration time or its last stage end.
double TimelineEnd(const sim::Timeline& timeline) {
  double end_s = timeline.iteration_time_s;
  for (const sim::StageTiming& st : timeline.stages) end_s = std::max(end_s, st.end_s);
  return end_s;
}

std::string Replica(int replica, int num_replicas) {
  return num_replicas > 1 ? fmt::format(", DP replica {} of {}", replica, num_replicas) : "";
}

// The memory figure of one strategy: the curve of the group with the peak (or of `forced`, a
// group chosen by HtmlOptions::memory_group) of the timeline holding the strategy's peak, and a
// caption naming the group, its peak against the table's, and the other groups' peaks.
StatusOr<std::string> MemoryFigure(const StrategyResult& strategy,
                                   const StrategyTimeline& t,
                                   graph::GroupId forced,
                                   int width_px,
                                   TimeUnit unit) {
  const bool other = t.peak_timeline != nullptr;
  const graph::StageGraph& graph = other ? *t.peak_graph : *t.graph;
  const sim::Timeline& timeline = other ? *t.peak_timeline : *t.timeline;
  const int iteration = other ? t.peak_iteration : t.iteration;
  const int replica = other ? t.peak_replica : t.replica;
  const int num_replicas = other ? t.peak_num_replicas : t.num_replicas;
  const int num_groups = graph.num_groups();
  if (num_groups == 0) return std::string();
  graph::GroupId peak_group = 0;
  for (graph::GroupId g = 1; g < num_groups; ++g) {
    if (timeline.groups[g].peak_bytes > timeline.groups[peak_group].peak_bytes) peak_group = g;
  }
  const graph::GroupId group = forced >= 0 && forced < num_groups ? forced : peak_group;
  const std::string label = internal::GroupLabel(graph, group);
  const std::string where =
      fmt::format("iteration {}{}", iteration, Replica(replica, num_replicas));
  if (timeline.groups[group].memory.empty()) {
    return fmt::format("<p>No memory curve recorded for {} ({}).</p>\n", XmlEscape(label),
                       XmlEscape(where));
  }
  const bool is_peak_group = group == peak_group || timeline.groups[group].peak_bytes ==
                                                        timeline.groups[peak_group].peak_bytes;
  WEFT_ASSIGN_OR_RETURN(
      std::string svg,
      MemoryCurveSvg(graph, timeline, group,
                     {.width_px = width_px,
                      .height_px = 260,
                      .title = fmt::format("memory per GPU of {} ({} {} of {}), {}", label,
                                           is_peak_group ? "peak group," : "group", group + 1,
                                           num_groups, where)},
                     unit));
  // Caption: the drawn group's peak against the strategy's (the table's peak GiB).
  const int64_t table_peak = strategy.Summary().peak_memory_bytes;
  const int64_t timeline_peak = timeline.groups[peak_group].peak_bytes;
  const std::string peak_label = internal::GroupLabel(graph, peak_group);
  std::string caption;
  if (!is_peak_group) {
    caption = fmt::format(
        "{} (chosen), peak {} GiB per GPU; the group with the highest peak of {} is {} at {} GiB.",
        label, GiB(timeline.groups[group].peak_bytes), where, peak_label, GiB(timeline_peak));
  } else if (timeline_peak == table_peak) {
    caption =
        fmt::format("{} holds the strategy's peak: {} GiB per GPU (the table's peak GiB), in {}.",
                    label, GiB(timeline_peak), where);
  } else {
    caption = fmt::format("{} has the highest peak of {}: {} GiB per GPU.", label, where,
                          GiB(timeline_peak));
    if (timeline_peak < table_peak) {
      // Where the table's peak came from: the iteration with the highest peak.
      int peak_iteration = -1;
      int64_t best = -1;
      for (const IterationResult& it : strategy.iterations) {
        if (it.peak_memory_bytes > best) {
          best = it.peak_memory_bytes;
          peak_iteration = it.iteration;
        }
      }
      caption += fmt::format(
          " The table's peak GiB ({}{}) is from {}, whose timeline was not kept.", GiB(table_peak),
          GiB(table_peak) == GiB(timeline_peak) ? ", higher by under 0.01 GiB" : "",
          peak_iteration == iteration ? std::string("another DP replica of this iteration")
                                      : fmt::format("iteration {}", peak_iteration));
    }
  }
  if (num_groups > 1) {
    std::vector<std::string> others;
    int64_t others_max = 0;
    for (graph::GroupId g = 0; g < num_groups; ++g) {
      if (g == group) continue;
      others_max = std::max(others_max, timeline.groups[g].peak_bytes);
      others.push_back(internal::GroupLabel(graph, g) + " " + GiB(timeline.groups[g].peak_bytes));
    }
    if (others.size() <= 7) {
      caption += " Peaks of the other groups: ";
      for (size_t k = 0; k < others.size(); ++k) caption += (k > 0 ? ", " : "") + others[k];
      caption += " GiB.";
    } else {
      caption +=
          fmt::format(" The other {} groups peak at up to {} GiB.", others.size(), GiB(others_max));
    }
  }
  return fmt::format("<figure class=\"memory\">\n{}<figcaption>{}</figcaption>\n</figure>\n", svg,
                     XmlEscape(caption));
}

}  // namespace

// The pool's occupancy over the window as a step chart (GiB), its capacity as the reference
// line; more than kPoolPoints changes are reduced to the maximum per equal slice of the window.
StatusOr<std::string> PoolFigure(const StrategyTimeline& t, int width_px, TimeUnit unit) {
  const sim::BufferTimeline& pool = *t.pool;
  if (pool.occupancy.empty()) return std::string();
  const double per_s = TimeUnitPerSecond(unit);
  const std::string unit_name(TimeUnitName(unit));
  ChartSeries series{.name = fmt::format("{} occupancy (peak {} GiB)", pool.name,
                                         GiB(pool.peak_bytes))};
  const auto& points = pool.occupancy;
  const double begin_s = points.front().time_s, end_s = points.back().time_s;
  bool reduced = false;
  if (static_cast<int>(points.size()) <= kPoolPoints || !(end_s > begin_s)) {
    for (const sim::BufferPoint& p : points) {
      series.x.push_back(p.time_s * per_s);
      series.y.push_back(static_cast<double>(p.bytes) / internal::kBytesPerGiB);
    }
  } else {
    reduced = true;
    const double slice_s = (end_s - begin_s) / kPoolPoints;
    size_t i = 0;
    int64_t last = points.front().bytes;
    for (int k = 0; k < kPoolPoints; ++k) {
      const double slice_end_s = k + 1 == kPoolPoints ? end_s : begin_s + (k + 1) * slice_s;
      int64_t most = last;
      while (i < points.size() && points[i].time_s <= slice_end_s) {
        most = std::max(most, points[i].bytes);
        last = points[i].bytes;
        ++i;
      }
      series.x.push_back((begin_s + k * slice_s) * per_s);
      series.y.push_back(static_cast<double>(most) / internal::kBytesPerGiB);
    }
  }
  std::vector<ChartSeries> all{std::move(series)};
  WEFT_ASSIGN_OR_RETURN(
      std::string chart,
      LineChartSvg(all, {.width_px = width_px,
                         .height_px = 240,
                         .x_label = "window time (" + unit_name + ")",
                         .y_label = "pool (GiB)",
                         .step = true,
                         .markers = false,
                         .reference_y = static_cast<double>(pool.capacity_bytes) /
                                        internal::kBytesPerGiB,
                         .reference_label = "capacity " + GiB(pool.capacity_bytes) + " GiB"}));
  return fmt::format(
      "<figure class=\"pool\">\n{}<figcaption>{} over the window of {} iterations: peak {} of {} "
      "GiB, {} puts / {} gets, producer stall {} {} (pool full), consumer starvation {} {} "
      "(pool empty){}</figcaption>\n</figure>\n",
      chart, XmlEscape(pool.name), t.pool_iterations, GiB(pool.peak_bytes),
      GiB(pool.capacity_bytes), pool.puts, pool.gets,
      internal::FormatNumber(pool.producer_stall_s * per_s), unit_name,
      internal::FormatNumber(pool.consumer_starvation_s * per_s), unit_name,
      reduced ? fmt::format("; the maximum per 1/{} of the window", kPoolPoints) : "");
}

StatusOr<std::string> HtmlReport(const Comparison& comparison,
                                 std::span<const StrategyTimeline> timelines,
                                 const HtmlOptions& options) {
  WEFT_RETURN_IF_ERROR(comparison.Validate().WithPrefix("comparison"));
  for (size_t i = 0; i < timelines.size(); ++i) {
    const StrategyTimeline& t = timelines[i];
    if (comparison.FindStrategy(t.strategy) < 0) {
      return InvalidArgumentError(
          fmt::format("timelines[{}].strategy = \"{}\"; must name a strategy of the comparison", i,
                      t.strategy));
    }
    if (t.graph == nullptr || t.timeline == nullptr) {
      return InvalidArgumentError(fmt::format(
          "timelines[{}] (\"{}\"): graph and timeline must be non-null", i, t.strategy));
    }
    WEFT_RETURN_IF_ERROR(internal::CheckTimelineMatchesGraph(*t.graph, *t.timeline)
                             .WithPrefix(fmt::format("timelines[{}] (\"{}\")", i, t.strategy)));
    if ((t.peak_graph == nullptr) != (t.peak_timeline == nullptr)) {
      return InvalidArgumentError(fmt::format(
          "timelines[{}] (\"{}\"): peak_graph and peak_timeline must both be set or both null", i,
          t.strategy));
    }
    if (t.peak_graph != nullptr) {
      WEFT_RETURN_IF_ERROR(
          internal::CheckTimelineMatchesGraph(*t.peak_graph, *t.peak_timeline)
              .WithPrefix(fmt::format("timelines[{}] (\"{}\") peak", i, t.strategy)));
    }
  }
  // One time unit for the whole report, from its longest time.
  double longest_s = 0;
  for (const StrategyResult& s : comparison.strategies) {
    for (const IterationResult& it : s.iterations) {
      longest_s = std::max(longest_s, it.iteration_time_s);
    }
  }
  double longest_timeline_s = 0;
  for (const StrategyTimeline& t : timelines) {
    longest_timeline_s = std::max(longest_timeline_s, TimelineEnd(*t.timeline));
    if (t.peak_timeline != nullptr) longest_s = std::max(longest_s, TimelineEnd(*t.peak_timeline));
  }
  longest_s = std::max(longest_s, longest_timeline_s);
  const TimeUnit unit = longest_s > 0 ? TimeUnitFor(longest_s) : TimeUnit::kSeconds;
  const double per_s = TimeUnitPerSecond(unit);
  const std::string unit_name(TimeUnitName(unit));
  const auto in_unit = [&](double t_s) { return internal::FormatNumber(t_s * per_s); };

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
      "and MFU are total work over total time; gap LB = mean(time / lower bound &minus; 1), the "
      "lower "
      "bound of the row's own placement (its busiest GPU group or critical path; another "
      "placement may be faster); "
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
  for (const StrategyResult& s : comparison.strategies) {
    if (!s.ok()) continue;
    ChartSeries cs{.name = s.name};
    for (const IterationResult& it : s.iterations) {
      cs.x.push_back(it.iteration);
      cs.y.push_back(it.iteration_time_s * per_s);
    }
    series.push_back(std::move(cs));
  }
  html += "<h2>Iteration time across iterations</h2>\n<figure>\n";
  WEFT_ASSIGN_OR_RETURN(
      std::string chart,
      LineChartSvg(series, {.width_px = options.figure_width_px,
                            .height_px = 320 + 16 * static_cast<int>(series.size() / 4),
                            .x_label = "iteration",
                            .y_label = "iteration time (" + unit_name + ")",
                            .x_integer_ticks = true}));
  html += chart + "</figure>\n";

  // Per strategy: timeline and memory curve.
  const double shared_end_s = options.shared_time_axis ? longest_timeline_s : 0;
  html += "<h2>Strategies</h2>\n";
  if (!timelines.empty()) {
    html += fmt::format(
        "<p class=\"run\" id=\"figure-notes\">Every time in this report is in {0}. {1} The "
        "dashed red line in a timeline is the <b>lower bound of that strategy's own "
        "placement</b>: its busiest GPU group's work (compute, gradient sync and optimizer "
        "step) or its critical path, whichever is longer. No schedule of that placement can be "
        "faster; it is not a bound over all placements (another placement may be faster). The "
        "memory chart of a strategy shows the device group with its peak (the table's peak "
        "GiB), per GPU.</p>\n",
        unit_name,
        options.shared_time_axis
            ? fmt::format("All timelines share one time axis, 0&ndash;{} {}.",
                          in_unit(longest_timeline_s), unit_name)
            : fmt::format("Each timeline has its own time axis, scaled to its own iteration, "
                          "so the axes differ between strategies (the longest timeline is {} "
                          "{}): compare the numbers, not the bar lengths.",
                          in_unit(longest_timeline_s), unit_name));
  }
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
      WEFT_ASSIGN_OR_RETURN(std::string svg, TimelineSvg(*t.graph, *t.timeline,
                                                         {.width_px = options.figure_width_px,
                                                          .time_end_s = shared_end_s,
                                                          .time_unit = unit}));
      const double end_s = TimelineEnd(*t.timeline);
      const std::string share =
          !options.shared_time_axis && timelines.size() > 1 && longest_timeline_s > 0
              ? fmt::format("; its axis ends at {} {}, {:.0f}% of the longest timeline",
                            in_unit(end_s), unit_name, 100.0 * end_s / longest_timeline_s)
              : std::string();
      html += fmt::format(
          "<figure class=\"timeline\">\n{}<figcaption>{} &middot; iteration {}{}: {} groups, {} "
          "stages, iteration time {} {}, lower bound of this placement {} {}, bubble "
          "{:.1f}%{}</figcaption>\n</figure>\n",
          svg, XmlEscape(s.name), t.iteration, Replica(t.replica, t.num_replicas),
          t.graph->num_groups(), t.graph->num_stages(), in_unit(t.timeline->iteration_time_s),
          unit_name, in_unit(t.timeline->lower_bound_s), unit_name,
          t.timeline->bubble_ratio * 100.0, share);
      WEFT_ASSIGN_OR_RETURN(
          std::string memory,
          MemoryFigure(s, t, options.memory_group, std::min(options.figure_width_px, 800), unit));
      html += memory;
      if (t.pool != nullptr) {
        WEFT_ASSIGN_OR_RETURN(std::string pool,
                              PoolFigure(t, std::min(options.figure_width_px, 800), unit));
        html += pool;
      }
    }
    if (!drew && s.ok()) html += "<p>No timeline recorded for this strategy.</p>\n";
    html += "</section>\n";
  }
  html += fmt::format("<script>{}</script>\n</body>\n</html>\n", kScript);
  return html;
}

}  // namespace weft::report
