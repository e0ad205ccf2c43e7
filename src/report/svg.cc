#include "weft/report/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "internal.h"

namespace weft::report {
namespace {

using internal::FormatNumber;
using internal::XmlEscape;

constexpr std::string_view kFont = "font-family=\"sans-serif\"";

// A time unit resolved for one figure: its scale and name.
struct Unit {
  double per_s;
  std::string_view name;
};
Unit ResolveUnit(TimeUnit unit, double span_s) {
  if (unit == TimeUnit::kAuto) unit = TimeUnitFor(span_s);
  return {TimeUnitPerSecond(unit), TimeUnitName(unit)};
}

std::string Px(double v) { return fmt::format("{:.2f}", v); }

std::string SvgOpen(int width_px, int height_px) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" {2} font-size=\"11\">\n",
      width_px, height_px, kFont);
}

// Ticks from `lo` to `hi` (inclusive, within rounding) at a nice step.
std::vector<double> Ticks(double lo, double hi, int target, double min_step = 0) {
  std::vector<double> ticks;
  const double step = std::max(min_step, internal::NiceStep(hi - lo, target));
  const double first = std::ceil(lo / step - 1e-9) * step;
  for (int i = 0; i < 1000; ++i) {
    const double t = first + i * step;
    if (t > hi + step * 1e-6) break;
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  }
  return ticks;
}

// The lower-bound line's legend: what the bound is and that it holds for this placement only.
std::string LowerBoundLegend(const sim::Timeline& timeline, const Unit& unit) {
  std::string_view what = "its busiest GPU group's work or its critical path";
  if (timeline.busiest_group_work_s > 0 || timeline.critical_path_s > 0) {
    what = timeline.busiest_group_work_s >= timeline.critical_path_s
               ? "its busiest GPU group's work"
               : "its critical path";
  }
  return fmt::format(
      "lower bound {} {}: {} \u2014 no schedule of this placement is faster; another placement "
      "may be",
      FormatNumber(timeline.lower_bound_s * unit.per_s), unit.name, what);
}

// Relative luminance test for label contrast on a "#rrggbb" fill.
bool IsDark(const std::string& hex) {
  const int r = std::stoi(hex.substr(1, 2), nullptr, 16);
  const int g = std::stoi(hex.substr(3, 2), nullptr, 16);
  const int b = std::stoi(hex.substr(5, 2), nullptr, 16);
  return 0.299 * r + 0.587 * g + 0.114 * b < 140;
}

}  // namespace

TimeUnit TimeUnitFor(double span_s) {
  if (span_s >= 1) return TimeUnit::kSeconds;
  if (span_s >= 1e-3) return TimeUnit::kMilliseconds;
  return TimeUnit::kMicroseconds;
}

double TimeUnitPerSecond(TimeUnit unit) {
  switch (unit) {
    case TimeUnit::kMilliseconds:
      return 1e3;
    case TimeUnit::kMicroseconds:
      return 1e6;
    case TimeUnit::kAuto:
    case TimeUnit::kSeconds:
      break;
  }
  return 1;
}

std::string_view TimeUnitName(TimeUnit unit) {
  switch (unit) {
    case TimeUnit::kMilliseconds:
      return "ms";
    case TimeUnit::kMicroseconds:
      return "us";
    case TimeUnit::kAuto:
    case TimeUnit::kSeconds:
      break;
  }
  return "s";
}

StatusOr<std::string> TimelineSvg(const graph::StageGraph& graph,
                                  const sim::Timeline& timeline,
                                  const TimelineSvgOptions& options) {
  WEFT_RETURN_IF_ERROR(internal::CheckTimelineMatchesGraph(graph, timeline));
  if (options.width_px < options.label_width_px + 100) {
    return InvalidArgumentError(fmt::format("width_px = {}; must be >= label_width_px + 100 ({})",
                                            options.width_px, options.label_width_px + 100));
  }
  if (options.row_height_px < 8) {
    return InvalidArgumentError(
        fmt::format("row_height_px = {}; must be >= 8", options.row_height_px));
  }
  double end_s = options.time_end_s;
  if (!(end_s > 0)) {
    end_s = timeline.iteration_time_s;
    for (const sim::StageTiming& t : timeline.stages) end_s = std::max(end_s, t.end_s);
  }
  if (!(end_s > 0)) end_s = 1e-3;  // an empty timeline still gets an axis
  const Unit unit = ResolveUnit(options.time_unit, end_s);

  const int num_rows = graph.num_groups();
  const double row_h = options.row_height_px;
  const double left = options.label_width_px;
  const double right_margin = 16;
  const double plot_w = options.width_px - left - right_margin;
  const double top = options.title.empty() ? 8 : 28;
  const double rows_bottom = top + num_rows * row_h;
  const double axis_bottom = rows_bottom + 34;
  const auto x_of = [&](double t_s) { return left + std::clamp(t_s / end_s, 0.0, 1.0) * plot_w; };

  // Legend entries: modules in index order, passes that occur.
  std::map<int, std::set<spec::Pass>> module_passes;
  for (const graph::Stage& s : graph.stages()) module_passes[s.module].insert(s.pass);
  bool has_tail = false;
  if (options.show_group_tail) {
    for (const sim::GroupTimeline& g : timeline.groups) {
      has_tail = has_tail || g.grad_sync_s > 0 || g.optimizer_s > 0;
    }
  }
  const bool draw_lower_bound =
      options.show_lower_bound && timeline.lower_bound_s > 0 && timeline.lower_bound_s <= end_s;
  const int legend_rows = options.show_legend ? static_cast<int>(module_passes.size()) +
                                                    (has_tail ? 1 : 0) + (draw_lower_bound ? 1 : 0)
                                              : 0;
  const double height = axis_bottom + (legend_rows > 0 ? 8 + legend_rows * 16 : 0) + 6;

  std::string svg = SvgOpen(options.width_px, static_cast<int>(std::ceil(height)));
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  if (!options.title.empty()) {
    svg += fmt::format("<text x=\"{}\" y=\"18\" font-size=\"13\" font-weight=\"bold\">{}</text>\n",
                       Px(left), XmlEscape(options.title));
  }
  // Rows.
  for (int g = 0; g < num_rows; ++g) {
    const double y = top + g * row_h;
    svg += fmt::format(
        "<rect class=\"row\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"/>\n",
        Px(left), Px(y), Px(plot_w), Px(row_h), g % 2 == 0 ? "#f4f4f4" : "#fafafa");
    svg += fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" dominant-baseline=\"middle\">{}</text>\n",
        Px(left - 6), Px(y + row_h / 2), XmlEscape(internal::GroupLabel(graph, g)));
  }
  // Stage boxes.
  const double font_px = std::min(11.0, row_h * 0.5);
  for (graph::StageId id = 0; id < graph.num_stages(); ++id) {
    const graph::Stage& s = graph.stage(id);
    const sim::StageTiming& t = timeline.stages[id];
    const double x0 = x_of(t.start_s);
    const double w = std::max(0.5, x_of(t.end_s) - x0);
    const double y = top + s.group * row_h + 2;
    const std::string fill = internal::StageColor(s.module, s.pass);
    svg += fmt::format(
        "<g><rect class=\"stage\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" "
        "stroke=\"white\" stroke-width=\"0.5\"><title>{}: {}\u2013{} {}</title></rect>",
        Px(x0), Px(y), Px(w), Px(row_h - 4), fill, XmlEscape(graph.StageName(id)),
        FormatNumber(t.start_s * unit.per_s), FormatNumber(t.end_s * unit.per_s), unit.name);
    const std::string label = internal::MicrobatchLabel(s);
    if (w >= font_px * 0.62 * label.size() + 2) {
      svg += fmt::format(
          "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" dominant-baseline=\"middle\" "
          "font-size=\"{}\" fill=\"{}\" pointer-events=\"none\">{}</text>",
          Px(x0 + w / 2), Px(y + (row_h - 4) / 2), Px(font_px), IsDark(fill) ? "white" : "#222",
          XmlEscape(label));
    }
    svg += "</g>\n";
  }
  // Group tails: gradient all-reduce and optimizer step.
  if (options.show_group_tail) {
    for (int g = 0; g < num_rows; ++g) {
      const sim::GroupTimeline& gt = timeline.groups[g];
      const double y = top + g * row_h + 2;
      double t = gt.last_end_s;
      const std::pair<double, std::pair<std::string_view, std::string_view>> parts[] = {
          {gt.grad_sync_s, {"grad-sync", "#9e9e9e"}}, {gt.optimizer_s, {"optimizer", "#616161"}}};
      for (const auto& [dur_s, kind] : parts) {
        if (!(dur_s > 0)) continue;
        const double x0 = x_of(t);
        const double w = std::max(0.5, x_of(t + dur_s) - x0);
        svg += fmt::format(
            "<rect class=\"tail\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\">"
            "<title>{} {}: {}\u2013{} {}</title></rect>\n",
            Px(x0), Px(y), Px(w), Px(row_h - 4), kind.second,
            XmlEscape(internal::GroupLabel(graph, g)), kind.first, FormatNumber(t * unit.per_s),
            FormatNumber((t + dur_s) * unit.per_s), unit.name);
        t += dur_s;
      }
    }
  }
  // Time axis.
  svg += fmt::format(
      "<line class=\"time-axis\" data-end-s=\"{3}\" x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" "
      "y2=\"{1}\" stroke=\"#333\"/>\n",
      Px(left), Px(rows_bottom), Px(left + plot_w), FormatNumber(end_s, 6));
  for (double tick : Ticks(0, end_s * unit.per_s, 8)) {
    const double x = x_of(tick / unit.per_s);
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#333\"/>"
        "<text x=\"{0}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        Px(x), Px(rows_bottom), Px(rows_bottom + 4), Px(rows_bottom + 15), FormatNumber(tick));
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">time ({})</text>\n",
                     Px(left + plot_w / 2), Px(rows_bottom + 29), unit.name);
  if (draw_lower_bound) {
    const double x = x_of(timeline.lower_bound_s);
    svg += fmt::format(
        "<line class=\"lower-bound\" x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" "
        "stroke=\"#c62828\" "
        "stroke-dasharray=\"4 3\"><title>lower bound {3} {4}</title></line>\n",
        Px(x), Px(top - 4), Px(rows_bottom), FormatNumber(timeline.lower_bound_s * unit.per_s),
        unit.name);
  }
  // Legend.
  if (options.show_legend) {
    double y = axis_bottom + 8;
    const auto swatch = [&](double x, const std::string& fill, std::string_view text) {
      return fmt::format(
          "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>"
          "<text x=\"{}\" y=\"{}\" dominant-baseline=\"middle\">{}</text>",
          Px(x), Px(y), fill, Px(x + 16), Px(y + 6), XmlEscape(text));
    };
    for (const auto& [module, passes] : module_passes) {
      svg += "<g class=\"legend\">";
      svg += fmt::format(
          "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" dominant-baseline=\"middle\">"
          "{}</text>",
          Px(left - 6), Px(y + 6), XmlEscape(internal::ModuleName(graph, module)));
      double x = left;
      for (spec::Pass pass : passes) {
        std::string_view text = pass == spec::Pass::kForward         ? "forward"
                                : pass == spec::Pass::kBackward      ? "backward"
                                : pass == spec::Pass::kBackwardInput ? "backward (input)"
                                                                     : "backward (weight)";
        svg += swatch(x, internal::StageColor(module, pass), text);
        x += 140;
      }
      svg += "</g>\n";
      y += 16;
    }
    if (has_tail) {
      svg += "<g class=\"legend\">" + swatch(left, "#9e9e9e", "grad-sync (DP all-reduce)") +
             swatch(left + 200, "#616161", "optimizer step") + "</g>\n";
      y += 16;
    }
    if (draw_lower_bound) {
      svg += fmt::format(
          "<g class=\"legend lower-bound-legend\"><line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" "
          "y2=\"{2}\" stroke=\"#c62828\" stroke-dasharray=\"4 3\"/><text x=\"{3}\" y=\"{4}\" "
          "dominant-baseline=\"middle\">{5}</text></g>\n",
          Px(left + 6), Px(y), Px(y + 12), Px(left + 16), Px(y + 6),
          XmlEscape(LowerBoundLegend(timeline, unit)));
    }
  }
  svg += "</svg>\n";
  return svg;
}

StatusOr<std::string> LineChartSvg(std::span<const ChartSeries> series,
                                   const LineChartOptions& options) {
  if (options.width_px < 200 || options.height_px < 120) {
    return InvalidArgumentError(fmt::format("chart size = {}x{} px; must be at least 200x120",
                                            options.width_px, options.height_px));
  }
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (size_t i = 0; i < series.size(); ++i) {
    const ChartSeries& s = series[i];
    if (s.x.size() != s.y.size()) {
      return InvalidArgumentError(
          fmt::format("series[{}] (\"{}\").x has {} values; must match "
                      "y ({})",
                      i, s.name, s.x.size(), s.y.size()));
    }
    for (size_t k = 0; k < s.x.size(); ++k) {
      if (!std::isfinite(s.x[k]) || !std::isfinite(s.y[k])) {
        return InvalidArgumentError(
            fmt::format("series[{}] (\"{}\") point {} = ({}, {}); must "
                        "be finite",
                        i, s.name, k, s.x[k], s.y[k]));
      }
      x_lo = std::min(x_lo, s.x[k]);
      x_hi = std::max(x_hi, s.x[k]);
      y_lo = std::min(y_lo, s.y[k]);
      y_hi = std::max(y_hi, s.y[k]);
    }
  }
  if (!(x_lo <= x_hi)) x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;  // no points at all
  if (options.reference_y > 0) y_hi = std::max(y_hi, options.reference_y);
  if (options.y_from_zero) y_lo = std::min(0.0, y_lo);
  if (x_hi - x_lo <= 0) x_lo -= 0.5, x_hi += 0.5;
  if (y_hi - y_lo <= 0) {
    const double pad = y_hi != 0 ? std::fabs(y_hi) * 0.1 : 1.0;
    y_hi += pad;
    if (!options.y_from_zero) y_lo -= pad;
  } else {
    const double pad = (y_hi - y_lo) * 0.08;
    y_hi += pad;
    if (!options.y_from_zero) y_lo -= pad;
  }
  const std::vector<double> y_ticks = Ticks(y_lo, y_hi, 5);
  // Nice steps >= 1 are whole numbers (1, 2, 5, 10, ...), so integer ticks need only a floor.
  const std::vector<double> x_ticks = Ticks(x_lo, x_hi, 8, options.x_integer_ticks ? 1.0 : 0.0);

  const double left = 64, right = 16;
  const double top = options.title.empty() ? 12 : 30;
  const double legend_h = 16.0 * ((series.size() + 3) / 4);
  const double bottom = 40 + legend_h;
  const double plot_w = options.width_px - left - right;
  const double plot_h = options.height_px - top - bottom;
  if (plot_h < 40) {
    return InvalidArgumentError(
        fmt::format("height_px = {}; too small for {} series (plot height {:.0f} px < 40)",
                    options.height_px, series.size(), plot_h));
  }
  const auto x_of = [&](double x) { return left + (x - x_lo) / (x_hi - x_lo) * plot_w; };
  const auto y_of = [&](double y) { return top + plot_h - (y - y_lo) / (y_hi - y_lo) * plot_h; };

  std::string svg = SvgOpen(options.width_px, options.height_px);
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  if (!options.title.empty()) {
    svg += fmt::format("<text x=\"{}\" y=\"18\" font-size=\"13\" font-weight=\"bold\">{}</text>\n",
                       Px(left), XmlEscape(options.title));
  }
  for (double t : y_ticks) {
    const double y = y_of(t);
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#e0e0e0\"/>"
        "<text x=\"{3}\" y=\"{1}\" text-anchor=\"end\" dominant-baseline=\"middle\">{4}</text>\n",
        Px(left), Px(y), Px(left + plot_w), Px(left - 5), FormatNumber(t));
  }
  for (double t : x_ticks) {
    const double x = x_of(t);
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#333\"/>"
        "<text x=\"{0}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        Px(x), Px(top + plot_h), Px(top + plot_h + 4), Px(top + plot_h + 15), FormatNumber(t));
  }
  svg += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n",
      Px(left), Px(top), Px(plot_w), Px(plot_h));
  if (!options.x_label.empty()) {
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                       Px(left + plot_w / 2), Px(top + plot_h + 29), XmlEscape(options.x_label));
  }
  if (!options.y_label.empty()) {
    svg += fmt::format(
        "<text transform=\"translate(14 {}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
        Px(top + plot_h / 2), XmlEscape(options.y_label));
  }
  if (options.reference_y > 0) {
    const double y = y_of(options.reference_y);
    svg += fmt::format(
        "<line class=\"reference\" x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#c62828\" "
        "stroke-dasharray=\"5 3\"/><text x=\"{3}\" y=\"{4}\" text-anchor=\"end\" "
        "fill=\"#c62828\">{5}</text>\n",
        Px(left), Px(y), Px(left + plot_w), Px(left + plot_w - 4), Px(y - 4),
        XmlEscape(options.reference_label));
  }
  for (size_t i = 0; i < series.size(); ++i) {
    const ChartSeries& s = series[i];
    const std::string color = internal::SeriesColor(static_cast<int>(i));
    const std::string dash = internal::SeriesDash(static_cast<int>(i));
    const std::string dash_attr = dash.empty() ? "" : " stroke-dasharray=\"" + dash + "\"";
    std::string points;
    for (size_t k = 0; k < s.x.size(); ++k) {
      if (options.step && k > 0) {
        points += fmt::format("{},{} ", Px(x_of(s.x[k])), Px(y_of(s.y[k - 1])));
      }
      points += fmt::format("{},{} ", Px(x_of(s.x[k])), Px(y_of(s.y[k])));
    }
    if (!points.empty()) points.pop_back();
    svg += fmt::format(
        "<polyline class=\"series\" fill=\"none\" stroke=\"{}\"{} stroke-width=\"1.8\" "
        "points=\"{}\"><title>{}</title></polyline>\n",
        color, dash_attr, points, XmlEscape(s.name));
    if (options.markers && s.x.size() <= 60) {
      for (size_t k = 0; k < s.x.size(); ++k) {
        svg += fmt::format(
            "<circle cx=\"{}\" cy=\"{}\" r=\"2.5\" fill=\"{}\"><title>{}: ({}, {})</title>"
            "</circle>\n",
            Px(x_of(s.x[k])), Px(y_of(s.y[k])), color, XmlEscape(s.name), FormatNumber(s.x[k]),
            FormatNumber(s.y[k]));
      }
    }
    const double lx = left + (i % 4) * (plot_w / 4);
    const double ly = options.height_px - legend_h + 16.0 * (i / 4) - 2;
    svg += fmt::format(
        "<g class=\"legend\"><line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"{3}\"{6} "
        "stroke-width=\"3\"/><text x=\"{4}\" y=\"{1}\" dominant-baseline=\"middle\">{5}</text>"
        "</g>\n",
        Px(lx), Px(ly), Px(lx + 18), color, Px(lx + 22), XmlEscape(s.name), dash_attr);
  }
  svg += "</svg>\n";
  return svg;
}

StatusOr<std::string> MemoryCurveSvg(const graph::StageGraph& graph,
                                     const sim::Timeline& timeline,
                                     graph::GroupId group,
                                     const LineChartOptions& options,
                                     TimeUnit time_unit) {
  WEFT_RETURN_IF_ERROR(internal::CheckTimelineMatchesGraph(graph, timeline));
  if (group < 0 || group >= graph.num_groups()) {
    return InvalidArgumentError(
        fmt::format("group = {}; must be in [0, {})", group, graph.num_groups()));
  }
  const sim::GroupTimeline& gt = timeline.groups[group];
  if (gt.memory.empty()) {
    return FailedPreconditionError(
        fmt::format("group {} ({}) has no memory curve; simulate with record_memory_curves = true",
                    group, internal::GroupLabel(graph, group)));
  }
  double end_s = std::max({timeline.iteration_time_s, gt.end_s, gt.memory.back().time_s});
  const Unit unit = ResolveUnit(time_unit, end_s);
  ChartSeries s{.name = internal::GroupLabel(graph, group) + " memory (peak " +
                        fmt::format("{:.2f}", gt.peak_bytes / internal::kBytesPerGiB) + " GiB"};
  for (const sim::MemoryPoint& p : gt.memory) {
    s.x.push_back(p.time_s * unit.per_s);
    s.y.push_back(p.bytes / internal::kBytesPerGiB);
  }
  if (end_s > gt.memory.back().time_s) {  // hold the last value to the end of the iteration
    s.x.push_back(end_s * unit.per_s);
    s.y.push_back(s.y.back());
  }
  LineChartOptions o = options;
  o.step = true;
  o.markers = false;
  if (o.x_label.empty()) o.x_label = fmt::format("time ({})", unit.name);
  if (o.y_label.empty()) o.y_label = "memory per GPU (GiB)";
  if (o.reference_y <= 0 && timeline.capacity_bytes > 0) {
    const double capacity_gib = timeline.capacity_bytes / internal::kBytesPerGiB;
    const std::string label = fmt::format("capacity {} GiB", FormatNumber(capacity_gib, 3));
    if (2 * gt.peak_bytes >= timeline.capacity_bytes) {
      o.reference_y = capacity_gib;
      if (o.reference_label.empty()) o.reference_label = label;
    } else {
      s.name += ", " + label;
    }
  }
  s.name += ")";
  return LineChartSvg(std::span<const ChartSeries>(&s, 1), o);
}

}  // namespace weft::report
