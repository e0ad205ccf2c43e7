#include "internal.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace weft::report::internal {
namespace {

// Length of the valid UTF-8 sequence at text[i], or 0 if it is invalid.
size_t Utf8SequenceLength(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t len = 0;
  uint32_t min_code = 0;
  uint32_t code = 0;
  if ((c & 0xE0) == 0xC0) {
    len = 2, min_code = 0x80, code = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3, min_code = 0x800, code = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4, min_code = 0x10000, code = c & 0x07;
  } else {
    return 0;
  }
  if (i + len > text.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i + k) & 0x3F);
  }
  if (code < min_code || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return len;
}

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

std::string HslToHex(double hue_deg, double saturation, double lightness) {
  const double c = (1 - std::fabs(2 * lightness - 1)) * saturation;
  const double h = std::fmod(hue_deg, 360.0) / 60.0;
  const double x = c * (1 - std::fabs(std::fmod(h, 2.0) - 1));
  double r = 0, g = 0, b = 0;
  if (h < 1) {
    r = c, g = x;
  } else if (h < 2) {
    r = x, g = c;
  } else if (h < 3) {
    g = c, b = x;
  } else if (h < 4) {
    g = x, b = c;
  } else if (h < 5) {
    r = x, b = c;
  } else {
    r = c, b = x;
  }
  const double m = lightness - c / 2;
  const auto to_byte = [&](double v) {
    return static_cast<int>(std::lround(std::clamp(v + m, 0.0, 1.0) * 255.0));
  };
  return fmt::format("#{:02x}{:02x}{:02x}", to_byte(r), to_byte(g), to_byte(b));
}

double ModuleHue(int module) {
  // Distinct hues for the first modules (blue, orange, green, red, purple, teal, pink, olive),
  // then golden-angle steps.
  static constexpr double kHues[] = {210, 30, 125, 0, 275, 180, 320, 60};
  constexpr int kNumHues = static_cast<int>(sizeof(kHues) / sizeof(kHues[0]));
  if (module >= 0 && module < kNumHues) return kHues[module];
  const int m = module < 0 ? -module : module;
  return std::fmod(kHues[m % kNumHues] + 137.508 * (m / kNumHues), 360.0);
}

}  // namespace

std::string SanitizeUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t len = Utf8SequenceLength(text, i);
    if (len == 0) {
      out += kReplacement;
      ++i;
    } else {
      out.append(text.substr(i, len));
      i += len;
    }
  }
  return out;
}

std::string XmlEscape(std::string_view text) {
  const std::string clean = SanitizeUtf8(text);
  std::string out;
  out.reserve(clean.size() + 16);
  for (char ch : clean) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') {
          out += kReplacement;
        } else {
          out += ch;
        }
    }
  }
  return out;
}

std::string OneLine(std::string_view text) {
  std::string out(text);
  for (char& ch : out) {
    if (ch == '\n' || ch == '\r' || ch == '\t') ch = ' ';
  }
  return out;
}

std::string CsvField(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (char ch : text) {
    if (ch == '"') out += '"';
    out += ch;
  }
  out += '"';
  return out;
}

std::string FormatNumber(double value, int significant) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == 0) return "0";
  const double magnitude = std::floor(std::log10(std::fabs(value)));
  if (magnitude >= 15 || magnitude < -6) return fmt::format("{:.{}g}", value, significant);
  const int decimals = std::max(0, significant - 1 - static_cast<int>(magnitude));
  std::string s = fmt::format("{:.{}f}", value, decimals);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

std::string ModuleColor(int module) { return HslToHex(ModuleHue(module), 0.62, 0.55); }

std::string StageColor(int module, spec::Pass pass) {
  double lightness = 0.74;  // forward: light
  if (pass == spec::Pass::kBackward || pass == spec::Pass::kBackwardInput) lightness = 0.46;
  if (pass == spec::Pass::kBackwardWeight) lightness = 0.32;
  return HslToHex(ModuleHue(module), 0.62, lightness);
}

std::string SeriesColor(int index) {
  // Tableau 10, then navy, maroon, gold, near-black and teal: 15 colours that stay apart on a
  // white background (hue steps alone put gpipe and dip both in green).
  static constexpr const char* kColors[kSeriesColors] = {
      "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
      "#bcbd22", "#17becf", "#000075", "#800000", "#e6b800", "#222222", "#469990"};
  const int i = index < 0 ? -index : index;
  return kColors[i % kSeriesColors];
}

std::string SeriesDash(int index) {
  static constexpr const char* kDashes[] = {"", "6 3", "2 2", "8 3 2 3"};
  const int i = index < 0 ? -index : index;
  return kDashes[(i / kSeriesColors) % 4];
}

std::string ModuleName(const graph::StageGraph& graph, int module) {
  const auto& names = graph.module_names();
  if (module >= 0 && module < static_cast<int>(names.size()) && !names[module].empty()) {
    return names[module];
  }
  return fmt::format("m{}", module);
}

std::string MicrobatchLabel(const graph::Stage& stage) {
  return stage.sub_microbatch > 0 ? fmt::format("{}.{}", stage.microbatch, stage.sub_microbatch)
                                  : fmt::format("{}", stage.microbatch);
}

std::string GroupLabel(const graph::StageGraph& graph, graph::GroupId group) {
  const std::string& label = graph.group(group).label;
  return label.empty() ? fmt::format("g{}", group) : label;
}

double NiceStep(double range, int target_ticks) {
  if (!(range > 0) || target_ticks <= 0) return 1.0;
  const double raw = range / target_ticks;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / power;
  const double nice = f < 1.5 ? 1.0 : (f < 3.5 ? 2.0 : (f < 7.5 ? 5.0 : 10.0));
  return nice * power;
}

}  // namespace weft::report::internal

namespace weft::report::internal {

Status CheckTimelineMatchesGraph(const graph::StageGraph& graph, const sim::Timeline& timeline) {
  if (static_cast<int>(timeline.stages.size()) != graph.num_stages()) {
    return InvalidArgumentError(
        fmt::format("timeline.stages.size() = {}; must equal the graph's stage count ({})",
                    timeline.stages.size(), graph.num_stages()));
  }
  if (static_cast<int>(timeline.groups.size()) != graph.num_groups()) {
    return InvalidArgumentError(
        fmt::format("timeline.groups.size() = {}; must equal the graph's group count ({})",
                    timeline.groups.size(), graph.num_groups()));
  }
  for (size_t i = 0; i < timeline.stages.size(); ++i) {
    const sim::StageTiming& t = timeline.stages[i];
    if (!std::isfinite(t.start_s) || !std::isfinite(t.end_s) || t.end_s < t.start_s) {
      return InvalidArgumentError(
          fmt::format("timeline.stages[{}] = [{}, {}] s; must be finite with end >= start", i,
                      t.start_s, t.end_s));
    }
  }
  for (size_t i = 0; i < timeline.transfers.size(); ++i) {
    const sim::Transfer& t = timeline.transfers[i];
    const auto bad_stage = [&](graph::StageId s) { return s < 0 || s >= graph.num_stages(); };
    const auto bad_group = [&](graph::GroupId g) { return g < 0 || g >= graph.num_groups(); };
    if (bad_stage(t.from) || bad_stage(t.to) || bad_group(t.src_group) ||
        bad_group(t.dst_group)) {
      return InvalidArgumentError(fmt::format(
          "timeline.transfers[{}] = stage {} (group {}) -> stage {} (group {}); must name "
          "stages < {} and groups < {}",
          i, t.from, t.src_group, t.to, t.dst_group, graph.num_stages(), graph.num_groups()));
    }
    if (!std::isfinite(t.start_s) || !std::isfinite(t.end_s) || t.end_s < t.start_s) {
      return InvalidArgumentError(
          fmt::format("timeline.transfers[{}] = [{}, {}] s; must be finite with end >= start", i,
                      t.start_s, t.end_s));
    }
  }
  return OkStatus();
}

}  // namespace weft::report::internal
