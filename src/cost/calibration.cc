#include "weft/cost/calibration.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <iterator>
#include <sstream>

#include <fmt/format.h>

namespace weft::cost {
namespace internal {
namespace {

std::vector<std::string_view> SplitCsvLine(std::string_view line) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    std::string_view cell = line.substr(start, comma == std::string_view::npos ? line.npos : comma - start);
    while (!cell.empty() && (cell.back() == '\r' || cell.back() == ' ')) cell.remove_suffix(1);
    while (!cell.empty() && cell.front() == ' ') cell.remove_prefix(1);
    out.push_back(cell);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

bool ParseDouble(std::string_view text, double& value) {
  if (text.empty()) return false;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && ptr == text.data() + text.size();
}

int ColumnIndex(const std::vector<std::string_view>& header, std::string_view name) {
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace
}  // namespace internal

std::string_view OpNameFromVidur(std::string_view vidur_name) {
  static constexpr std::pair<std::string_view, std::string_view> kNames[] = {
      {"attn_pre_proj", "qkv_proj"},      {"attn_post_proj", "out_proj"},
      {"mlp_up_proj", "mlp_up"},          {"mlp_down_proj", "mlp_down"},
      {"mlp_act", "mlp_act"},             {"input_layernorm", "input_norm"},
      {"post_attention_layernorm", "post_attn_norm"},
      {"add", "residual_add"},            {"attn_rope", "rope"},
      {"emb", "embedding"},
  };
  for (const auto& [vidur, weft] : kNames) {
    if (vidur == vidur_name) return weft;
  }
  return {};
}

void MeasuredOpTable::Add(std::string_view op, int tp, double tokens, double latency_s) {
  auto key = std::make_pair(std::string(op), tp);
  Accum& a = points_[key][tokens];
  a.sum_s += latency_s;
  a.count += 1;
}

int MeasuredOpTable::NumPoints() const {
  int n = 0;
  for (const auto& [key, series] : points_) n += static_cast<int>(series.size());
  return n;
}

std::vector<std::pair<double, double>> MeasuredOpTable::Series(std::string_view op, int tp) const {
  std::vector<std::pair<double, double>> out;
  auto it = points_.find(std::make_pair(std::string(op), tp));
  if (it == points_.end()) return out;
  for (const auto& [tokens, a] : it->second) out.emplace_back(tokens, a.sum_s / a.count);
  return out;
}

std::vector<std::pair<std::string, int>> MeasuredOpTable::SeriesKeys() const {
  std::vector<std::pair<std::string, int>> out;
  for (const auto& [key, series] : points_) out.push_back(key);
  return out;
}

std::optional<double> MeasuredOpTable::Lookup(std::string_view op, int tp, double tokens) const {
  auto it = points_.find(std::make_pair(std::string(op), tp));
  if (it == points_.end() || it->second.empty()) return std::nullopt;
  const auto& series = it->second;
  auto mean = [](const Accum& a) { return a.sum_s / a.count; };
  const auto& [first_tokens, first] = *series.begin();
  const auto& [last_tokens, last] = *series.rbegin();
  if (tokens <= first_tokens) return mean(first);
  if (tokens >= last_tokens) {
    return last_tokens > 0 ? mean(last) * tokens / last_tokens : mean(last);
  }
  auto upper = series.lower_bound(tokens);
  if (upper->first == tokens) return mean(upper->second);
  auto lower = std::prev(upper);
  const double x0 = lower->first, x1 = upper->first;
  const double y0 = mean(lower->second), y1 = mean(upper->second);
  return y0 + (y1 - y0) * (tokens - x0) / (x1 - x0);
}

StatusOr<MeasuredOpTable> MeasuredOpTable::ParseCsv(std::string_view text,
                                                    std::string_view source) {
  using internal::ColumnIndex;
  using internal::ParseDouble;
  using internal::SplitCsvLine;
  MeasuredOpTable table;
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  if (lines.empty()) return InvalidArgumentError(fmt::format("{}: empty CSV", source));
  const std::vector<std::string_view> header = SplitCsvLine(lines[0]);
  const int c_op = ColumnIndex(header, "op");
  const int c_tokens = ColumnIndex(header, "tokens");
  const int c_tp = ColumnIndex(header, "tp");
  const int c_latency = ColumnIndex(header, "latency_ms");
  const int v_tokens = ColumnIndex(header, "num_tokens");
  const int v_tp = ColumnIndex(header, "num_tensor_parallel_workers");
  const bool weft_layout = c_op >= 0 && c_tokens >= 0 && c_tp >= 0 && c_latency >= 0;
  // vidur: one column time_stats.<op>.median per op.
  std::vector<std::pair<int, std::string>> vidur_ops;
  if (!weft_layout) {
    for (size_t i = 0; i < header.size(); ++i) {
      std::string_view h = header[i];
      constexpr std::string_view kPrefix = "time_stats.", kSuffix = ".median";
      if (h.starts_with(kPrefix) && h.ends_with(kSuffix)) {
        std::string_view name = h.substr(kPrefix.size(), h.size() - kPrefix.size() - kSuffix.size());
        std::string_view weft = OpNameFromVidur(name);
        vidur_ops.emplace_back(static_cast<int>(i), std::string(weft.empty() ? name : weft));
      }
    }
    if (vidur_ops.empty() || v_tokens < 0 || v_tp < 0) {
      return InvalidArgumentError(fmt::format(
          "{}:1: header; must have columns op,tokens,tp,latency_ms (weft) or "
          "time_stats.<op>.median,num_tokens,num_tensor_parallel_workers (vidur)",
          source));
    }
  }
  for (size_t row = 1; row < lines.size(); ++row) {
    if (lines[row].find_first_not_of(" \r\t") == std::string_view::npos) continue;
    const std::vector<std::string_view> cells = SplitCsvLine(lines[row]);
    auto cell = [&](int col, std::string_view name, double& value) -> Status {
      if (col >= static_cast<int>(cells.size()) || !ParseDouble(cells[col], value)) {
        return InvalidArgumentError(fmt::format(
            "{}:{}: column {} = '{}'; must be a number", source, row + 1, name,
            col < static_cast<int>(cells.size()) ? cells[col] : std::string_view("<missing>")));
      }
      return OkStatus();
    };
    double tokens = 0, tp = 0;
    WEFT_RETURN_IF_ERROR(cell(weft_layout ? c_tokens : v_tokens, "tokens", tokens));
    WEFT_RETURN_IF_ERROR(cell(weft_layout ? c_tp : v_tp, "tp", tp));
    if (tokens < 0 || tp < 1 || tp != static_cast<int>(tp)) {
      return InvalidArgumentError(fmt::format(
          "{}:{}: tokens = {}, tp = {}; need tokens >= 0 and an integer tp >= 1", source, row + 1,
          tokens, tp));
    }
    if (weft_layout) {
      double latency_ms = 0;
      WEFT_RETURN_IF_ERROR(cell(c_latency, "latency_ms", latency_ms));
      if (c_op >= static_cast<int>(cells.size()) || cells[c_op].empty()) {
        return InvalidArgumentError(
            fmt::format("{}:{}: column op is empty; must name an op", source, row + 1));
      }
      if (latency_ms < 0) {
        return InvalidArgumentError(fmt::format("{}:{}: column latency_ms = {}; must be >= 0",
                                                source, row + 1, latency_ms));
      }
      table.Add(cells[c_op], static_cast<int>(tp), tokens, latency_ms * 1e-3);
    } else {
      for (const auto& [col, name] : vidur_ops) {
        double latency_ms = 0;
        WEFT_RETURN_IF_ERROR(cell(col, header[col], latency_ms));
        table.Add(name, static_cast<int>(tp), tokens, latency_ms * 1e-3);
      }
    }
  }
  return table;
}

StatusOr<MeasuredOpTable> MeasuredOpTable::LoadCsv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(fmt::format("{}: cannot open measured op table", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return ParseCsv(buffer.str(), path);
}

}  // namespace weft::cost
