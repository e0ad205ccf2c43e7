#pragma once
// Measured per-op latency tables (DFLOP's profiling engine builds on this): forward latency of
// named ops vs tokens, per TP size, interpolated piecewise-linearly in tokens. The cost model
// uses a table in place of its analytical estimate for every op whose name and TP are present.
// Value type; const methods are thread-safe.
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "weft/common/status.h"

namespace weft::cost {

class MeasuredOpTable {
 public:
  // Reads CSV text in one of two layouts (chosen by the header):
  //  - weft's:  op,tokens,tp,latency_ms          (one row per measurement)
  //  - vidur's: time_stats.<op>.median,...,num_tokens,num_tensor_parallel_workers
  //    (ops renamed to weft's: attn_pre_proj → qkv_proj, attn_post_proj → out_proj,
  //     mlp_up_proj → mlp_up, mlp_down_proj → mlp_down, mlp_act → mlp_act,
  //     input_layernorm → input_norm, post_attention_layernorm → post_attn_norm,
  //     add → residual_add, attn_rope → rope, emb → embedding).
  // `source` names the file in errors ("<source>:<line>: column latency_ms = 'x'; ...").
  static StatusOr<MeasuredOpTable> ParseCsv(std::string_view text, std::string_view source);
  static StatusOr<MeasuredOpTable> LoadCsv(const std::string& path);

  // Adds one measurement; a repeated (op, tp, tokens) keeps the mean of all values.
  void Add(std::string_view op, int tp, double tokens, double latency_s);

  // Latency of `op` at `tokens` for `tp`, or nullopt if (op, tp) was never measured.
  // Piecewise-linear between measured token counts; below the smallest count: the smallest
  // count's latency (launch-bound floor); above the largest: scaled proportionally to tokens
  // from the largest count (throughput-bound).
  std::optional<double> Lookup(std::string_view op, int tp, double tokens) const;

  bool empty() const { return points_.empty(); }
  // Distinct (op, tp) series and total measurements held.
  int NumSeries() const { return static_cast<int>(points_.size()); }
  int NumPoints() const;
  // (tokens, latency_s) of one series, sorted by tokens (empty if absent).
  std::vector<std::pair<double, double>> Series(std::string_view op, int tp) const;
  std::vector<std::pair<std::string, int>> SeriesKeys() const;

 private:
  struct Accum {
    double sum_s = 0;
    int count = 0;
  };
  // (op, tp) -> tokens -> accumulated latency.
  std::map<std::pair<std::string, int>, std::map<double, Accum>, std::less<>> points_;
};

// weft's name for a vidur op column ("attn_pre_proj" -> "qkv_proj"), or "" if unknown.
std::string_view OpNameFromVidur(std::string_view vidur_name);

}  // namespace weft::cost
