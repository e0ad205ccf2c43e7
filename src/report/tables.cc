#include "weft/report/tables.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "internal.h"

namespace weft::report {
namespace {

using internal::FormatNumber;
using internal::kBytesPerGiB;
using internal::OneLine;
using internal::SummaryCells;

// Display width of UTF-8 text: one column per code point.
size_t DisplayWidth(std::string_view text) {
  size_t width = 0;
  for (char ch : text) {
    if ((static_cast<unsigned char>(ch) & 0xC0) != 0x80) ++width;
  }
  return width;
}

std::string Percent(double fraction) { return fmt::format("{:.1f}", fraction * 100.0); }

// A JSON number, or null when it does not apply.
nlohmann::json NumberOrNull(bool applies, double value) {
  if (!applies || !std::isfinite(value)) return nullptr;
  return value;
}

nlohmann::json ConfigurationJson(const StrategyConfiguration& config) {
  using nlohmann::json;
  if (config.empty()) return nullptr;
  json modules = json::array();
  for (const ModuleConfiguration& m : config.modules) {
    modules.push_back({{"module", internal::SanitizeUtf8(m.module)},
                       {"tp", m.tp},
                       {"cp", m.cp},
                       {"pp", m.pp},
                       {"dp", m.dp},
                       {"layers_per_stage", m.layers_per_stage},
                       {"chunks_per_rank", m.chunks_per_rank},
                       {"copies", m.copies},
                       {"recompute", internal::SanitizeUtf8(m.recompute)}});
  }
  return {{"modules", std::move(modules)},
          {"microbatches_min", config.microbatches_min},
          {"microbatches_max", config.microbatches_max},
          {"brief", internal::SanitizeUtf8(config.Brief())}};
}

}  // namespace

SummaryCells internal::MakeSummaryCells(const Comparison& comparison) {
  SummaryCells cells;
  cells.header = {"strategy", "time mean s", "p50 s",        "p90 s",    "samples/s",
                  "tokens/s", "MFU %",       "bubble %",     "peak GiB", "gap LB %",
                  "OOM",      "speedup",     "configuration"};
  const int best = comparison.BestStrategy();
  for (int index : comparison.RankedOrder()) {
    const StrategyResult& s = comparison.strategies[index];
    const std::string config = s.configuration.empty() ? "-" : OneLine(s.configuration.Brief());
    std::vector<std::string> row = {OneLine(s.name) +
                                    (index == best ? std::string(internal::kBestMark) : "")};
    if (!s.ok()) {
      row.resize(cells.header.size() - 1, "-");
      cells.errors.push_back({OneLine(s.name), OneLine(s.error.value_or("no iterations"))});
    } else {
      const StrategySummary m = s.Summary();
      const std::optional<double> speedup = comparison.SpeedupVsBaseline(s);
      row.push_back(FormatNumber(m.iteration_time_mean_s));
      row.push_back(FormatNumber(m.iteration_time_p50_s));
      row.push_back(FormatNumber(m.iteration_time_p90_s));
      row.push_back(m.samples_per_s > 0 ? FormatNumber(m.samples_per_s) : "-");
      row.push_back(m.tokens_per_s > 0 ? fmt::format("{:.0f}", m.tokens_per_s) : "-");
      row.push_back(m.mfu > 0 ? Percent(m.mfu) : "-");
      row.push_back(Percent(m.bubble_ratio));
      row.push_back(fmt::format("{:.2f}", m.peak_memory_bytes / kBytesPerGiB));
      row.push_back(m.lower_bound_mean_s > 0 ? Percent(m.gap_to_lower_bound) : "-");
      row.push_back(m.any_oom ? "yes" : "no");
      row.push_back(m.any_oom ? "oom" : speedup ? fmt::format("{:.2f}x", *speedup) : "-");
    }
    row.push_back(config);
    cells.rows.push_back(std::move(row));
    cells.strategy.push_back(index);
  }
  return cells;
}

std::string TextTable(const Comparison& comparison) {
  const internal::SummaryCells cells = internal::MakeSummaryCells(comparison);
  const std::vector<std::string>& header = cells.header;
  const std::vector<std::vector<std::string>>& rows = cells.rows;
  std::vector<size_t> widths(header.size());
  for (size_t c = 0; c < header.size(); ++c) {
    widths[c] = DisplayWidth(header[c]);
    for (const auto& row : rows) widths[c] = std::max(widths[c], DisplayWidth(row[c]));
  }
  const auto format_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string pad(widths[c] - DisplayWidth(row[c]), ' ');
      if (c > 0) line += "  ";
      // Names and the configuration left, numbers right.
      line += c == 0 || c + 1 == row.size() ? row[c] + pad : pad + row[c];
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    return line + "\n";
  };

  std::string out = fmt::format(
      "model {} | cluster {} | {} GPUs | data {} | {} iterations{}\n",
      comparison.model.empty() ? "-" : OneLine(comparison.model),
      comparison.cluster.empty() ? "-" : OneLine(comparison.cluster), comparison.num_gpus,
      comparison.data_profile.empty() ? "-" : OneLine(comparison.data_profile),
      comparison.num_iterations,
      comparison.baseline.empty() ? "" : " | baseline " + OneLine(comparison.baseline));
  const std::string header_line = format_row(header);
  out += header_line;
  // The rule ends with the header (the configuration column may run far beyond it).
  out += std::string(header_line.size() - 1, '-') + "\n";
  for (const auto& row : rows) out += format_row(row);
  out += std::string(kGapLegend) + "\n";
  out += std::string(kRankLegend) + "\n";
  for (const auto& [name, message] : cells.errors) out += "error: " + name + ": " + message + "\n";
  return out;
}

std::string SummaryCsv(const Comparison& comparison) {
  std::string out =
      "strategy,iteration_time_mean_s,iteration_time_p50_s,iteration_time_p90_s,"
      "throughput_samples_per_s,throughput_tokens_per_s,mfu,bubble_ratio,peak_memory_bytes,"
      "lower_bound_mean_s,gap_to_lower_bound,oom,plan_time_mean_s,speedup_vs_baseline,"
      "num_iterations,best,configuration,error\n";
  const int best = comparison.BestStrategy();
  for (int index : comparison.RankedOrder()) {
    const StrategyResult& s = comparison.strategies[index];
    out += internal::CsvField(s.name);
    if (s.ok()) {
      const StrategySummary m = s.Summary();
      const std::optional<double> speedup = comparison.SpeedupVsBaseline(s);
      out += fmt::format(",{},{},{},{},{},{},{},{},{},{},{},{},{},{},", m.iteration_time_mean_s,
                         m.iteration_time_p50_s, m.iteration_time_p90_s, m.samples_per_s,
                         m.tokens_per_s, m.mfu, m.bubble_ratio, m.peak_memory_bytes,
                         m.lower_bound_mean_s, m.gap_to_lower_bound, m.any_oom ? 1 : 0,
                         m.plan_time_mean_s,
                         m.any_oom ? "oom"
                         : speedup ? fmt::format("{}", *speedup)
                                   : "",
                         m.num_iterations);
    } else {
      out += fmt::format(",,,,,,,,,,,,,,{},", s.iterations.size());
    }
    out += fmt::format("{},", index == best ? 1 : 0);
    out += internal::CsvField(s.configuration.Brief()) + ",";
    out += internal::CsvField(s.ok() ? "" : s.error.value_or("no iterations"));
    out += "\n";
  }
  return out;
}

std::string IterationsCsv(const Comparison& comparison) {
  std::string out =
      "strategy,iteration,iteration_time_s,throughput_samples_per_s,throughput_tokens_per_s,mfu,"
      "bubble_ratio,peak_memory_bytes,lower_bound_s,gap_to_lower_bound,oom,plan_time_s\n";
  for (int index : comparison.RankedOrder()) {
    const StrategyResult& s = comparison.strategies[index];
    const std::string name = internal::CsvField(s.name);
    for (const IterationResult& it : s.iterations) {
      out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{}\n", name, it.iteration,
                         it.iteration_time_s, it.samples_per_s, it.tokens_per_s, it.mfu,
                         it.bubble_ratio, it.peak_memory_bytes, it.lower_bound_s,
                         it.GapToLowerBound(), it.oom ? 1 : 0, it.plan_time_s);
    }
  }
  return out;
}

nlohmann::json ComparisonJson(const Comparison& comparison) {
  using nlohmann::json;
  const int best = comparison.BestStrategy();
  json root = {
      {"schema", kComparisonSchema},
      {"model", internal::SanitizeUtf8(comparison.model)},
      {"cluster", internal::SanitizeUtf8(comparison.cluster)},
      {"num_gpus", comparison.num_gpus},
      {"data_profile", internal::SanitizeUtf8(comparison.data_profile)},
      {"planning_budget", internal::SanitizeUtf8(comparison.planning_budget)},
      {"num_iterations", comparison.num_iterations},
      {"baseline", comparison.baseline.empty() ? json(nullptr)
                                               : json(internal::SanitizeUtf8(comparison.baseline))},
      {"best",
       best < 0 ? json(nullptr) : json(internal::SanitizeUtf8(comparison.strategies[best].name))},
  };
  json strategies = json::array();
  int rank = 0;
  for (int index : comparison.RankedOrder()) {
    const StrategyResult& s = comparison.strategies[index];
    const bool ok = s.ok();
    const StrategySummary m = s.Summary();
    const std::optional<double> speedup = comparison.SpeedupVsBaseline(s);
    json j = {
        {"name", internal::SanitizeUtf8(s.name)},
        {"description", internal::SanitizeUtf8(s.description)},
        {"rank", ++rank},
        {"status", !ok         ? "error"
                   : m.any_oom ? "oom"
                               : "ok"},
        {"best", index == best},
        {"configuration", ConfigurationJson(s.configuration)},
        {"error", s.error ? json(internal::SanitizeUtf8(*s.error))
                          : (s.iterations.empty() ? json("no iterations") : json(nullptr))},
        {"num_iterations", m.num_iterations},
        {"iteration_time_s", NumberOrNull(ok, m.iteration_time_mean_s)},
        {"iteration_time_p50_s", NumberOrNull(ok, m.iteration_time_p50_s)},
        {"iteration_time_p90_s", NumberOrNull(ok, m.iteration_time_p90_s)},
        {"throughput_samples_per_s", NumberOrNull(ok, m.samples_per_s)},
        {"throughput_tokens_per_s", NumberOrNull(ok, m.tokens_per_s)},
        {"mfu", NumberOrNull(ok, m.mfu)},
        {"bubble_ratio", NumberOrNull(ok, m.bubble_ratio)},
        {"peak_memory_bytes", ok ? json(m.peak_memory_bytes) : json(nullptr)},
        {"lower_bound_s", NumberOrNull(ok && m.lower_bound_mean_s > 0, m.lower_bound_mean_s)},
        {"gap_to_lower_bound", NumberOrNull(ok && m.lower_bound_mean_s > 0, m.gap_to_lower_bound)},
        {"oom", ok ? json(m.any_oom) : json(nullptr)},
        {"plan_time_s", NumberOrNull(ok, m.plan_time_mean_s)},
        {"speedup_vs_baseline", speedup ? json(*speedup) : json(nullptr)},
    };
    json per = {{"iteration", json::array()},        {"iteration_time_s", json::array()},
                {"throughput_samples_per_s", json::array()},
                {"throughput_tokens_per_s", json::array()},
                {"mfu", json::array()},              {"bubble_ratio", json::array()},
                {"peak_memory_bytes", json::array()}, {"lower_bound_s", json::array()},
                {"oom", json::array()},              {"plan_time_s", json::array()}};
    for (const IterationResult& it : s.iterations) {
      per["iteration"].push_back(it.iteration);
      per["iteration_time_s"].push_back(it.iteration_time_s);
      per["throughput_samples_per_s"].push_back(it.samples_per_s);
      per["throughput_tokens_per_s"].push_back(it.tokens_per_s);
      per["mfu"].push_back(it.mfu);
      per["bubble_ratio"].push_back(it.bubble_ratio);
      per["peak_memory_bytes"].push_back(it.peak_memory_bytes);
      per["lower_bound_s"].push_back(it.lower_bound_s);
      per["oom"].push_back(it.oom);
      per["plan_time_s"].push_back(it.plan_time_s);
    }
    j["iterations"] = std::move(per);
    strategies.push_back(std::move(j));
  }
  root["strategies"] = std::move(strategies);
  return root;
}

std::string ComparisonJsonString(const Comparison& comparison) {
  return ComparisonJson(comparison).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) +
         "\n";
}

}  // namespace weft::report
