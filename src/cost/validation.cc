#include "weft/cost/validation.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "weft/cost/calibration.h"
#include "weft/cost/fit.h"
#include "weft/cost/ops.h"
#include "weft/spec/preset.h"

namespace weft::cost {
namespace internal {
namespace {

// A delimited text table read whole: header names -> column, rows of cells.
struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  int Column(std::string_view name) const {
    for (size_t i = 0; i < header.size(); ++i) {
      if (header[i] == name) return static_cast<int>(i);
    }
    return -1;
  }
};

std::vector<std::string> Split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, sep)) {
    while (!cell.empty() && (cell.back() == '\r' || cell.back() == ' ')) cell.pop_back();
    out.push_back(cell);
  }
  if (!line.empty() && line.back() == sep) out.emplace_back();
  return out;
}

StatusOr<Table> ReadTable(const std::string& path, char sep) {
  std::ifstream in(path);
  if (!in) return NotFoundError(fmt::format("{}: cannot open", path));
  Table t;
  std::string line;
  if (!std::getline(in, line)) return InvalidArgumentError(fmt::format("{}: empty file", path));
  t.header = Split(line, sep);
  while (std::getline(in, line)) {
    if (line.empty() || line == "\r") continue;
    t.rows.push_back(Split(line, sep));
  }
  return t;
}

StatusOr<double> Number(const Table& t, const std::vector<std::string>& row, std::string_view col,
                        const std::string& path) {
  const int c = t.Column(col);
  if (c < 0 || c >= static_cast<int>(row.size())) {
    return InvalidArgumentError(fmt::format("{}: column {} missing", path, col));
  }
  double v = 0;
  const std::string& s = row[c];
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) {
    return InvalidArgumentError(fmt::format("{}: column {} = '{}'; must be a number", path, col, s));
  }
  return v;
}

// Forward latency of op `name` in layer `layer` of `module` for `tokens` uniform tokens.
StatusOr<double> ForwardOpLatency(const spec::ModuleSpec& module, int layer, TokenShape shape,
                                  int tp, const std::string& name,
                                  const spec::ClusterSpec& cluster, const CostOptions& options,
                                  bool with_backward = false) {
  OpBuildContext ctx{.shape = shape,
                     .parallel = {.module = module.name, .tp = tp, .sequence_parallel = false},
                     .backward = with_backward ? BackwardMode::kFull : BackwardMode::kNone,
                     .gpus_per_node = cluster.gpus_per_node};
  WEFT_ASSIGN_OR_RETURN(std::vector<Op> ops, BuildLayerOps(module, layer, ctx));
  double latency_s = 0;
  bool found = false;
  bool pass_seen[spec::kNumPass] = {};  // a layer may hold the op twice (residual_add)
  for (Op& op : ops) {
    if (op.name != name || pass_seen[static_cast<int>(op.pass)]) continue;
    pass_seen[static_cast<int>(op.pass)] = true;
    if (op.kind == OpKind::kAttention && op.pass != spec::Pass::kForward) {
      op.hardware_flops_factor = options.attention_backward_hardware_factor;
    }
    latency_s += OpLatency(op, cluster, options);
    found = true;
  }
  if (!found) return NotFoundError(fmt::format("op '{}' not in layer {}", name, layer));
  return latency_s;
}

}  // namespace
}  // namespace internal

double ValidationPoint::RelativeError() const {
  return measured_s > 0 ? std::abs(predicted_s - measured_s) / measured_s : 0.0;
}

double ValidationPoint::SignedError() const {
  return measured_s > 0 ? (predicted_s - measured_s) / measured_s : 0.0;
}


spec::ClusterSpec ReferenceH100Dgx() {
  spec::ClusterSpec c;
  c.name = "h100-dgx-reference";
  c.num_nodes = 1;
  c.gpus_per_node = 8;
  c.gpu = {.name = "H100-SXM",
           .peak_bf16_flops_per_s = 989.4e12,
           .hbm_bandwidth_bytes_per_s = 3.35e12,
           .memory_capacity_bytes = 80LL << 30};
  c.intra_node = {.bandwidth_bytes_per_s = 450e9, .latency_s = 2.5e-6};
  c.inter_node = {.bandwidth_bytes_per_s = 50e9, .latency_s = 5e-6};  // 400 Gb/s NDR per GPU
  c.host_link_bandwidth_bytes_per_s = 55e9;                             // PCIe 5 x16, achieved
  c.host_memory_bytes_per_gpu = 256LL << 30;
  return c;
}

spec::ClusterSpec ReferenceA100Dgx() {
  spec::ClusterSpec c;
  c.name = "a100-dgx-reference";
  c.num_nodes = 1;
  c.gpus_per_node = 8;
  c.gpu = {.name = "A100-SXM-80GB",
           .peak_bf16_flops_per_s = 312e12,
           .hbm_bandwidth_bytes_per_s = 2.039e12,
           .memory_capacity_bytes = 80LL << 30};
  c.intra_node = {.bandwidth_bytes_per_s = 300e9, .latency_s = 2.5e-6};
  c.inter_node = {.bandwidth_bytes_per_s = 25e9, .latency_s = 5e-6};  // 200 Gb/s HDR per GPU
  c.host_link_bandwidth_bytes_per_s = 25e9;                             // PCIe 4 x16, achieved
  c.host_memory_bytes_per_gpu = 128LL << 30;
  return c;
}

spec::ModuleSpec Llama2_7bModule() {
  spec::ModuleSpec m;
  m.name = "llm";
  m.kind = spec::ModuleKind::kLlm;
  m.num_layers = 32;
  m.hidden_size = 4096;
  m.ffn_hidden_size = 11008;
  m.num_attention_heads = 32;
  m.num_kv_groups = 32;
  m.gated_mlp = true;
  m.activation = spec::Activation::kSilu;
  m.causal_attention = true;
  m.rms_norm = true;
  m.vocab_size = 32000;
  return m;
}

StatusOr<LoadedProfile> LoadVidurProfile(const VidurProfile& profile) {
  using internal::Number;
  const std::string& csv_path = profile.path;
  WEFT_ASSIGN_OR_RETURN(internal::Table t, internal::ReadTable(csv_path, ','));
  if (t.rows.empty()) return InvalidArgumentError(fmt::format("{}: no rows", csv_path));
  LoadedProfile out;
  out.profile = profile;
  out.module = Llama2_7bModule();
  // The profiled model, from the file's own columns (vidur writes them on every row).
  spec::ModuleSpec& module = out.module;
  {
    const auto& row = t.rows.front();
    WEFT_ASSIGN_OR_RETURN(double heads, Number(t, row, "n_head", csv_path));
    WEFT_ASSIGN_OR_RETURN(double kv_heads, Number(t, row, "n_kv_head", csv_path));
    WEFT_ASSIGN_OR_RETURN(double hidden, Number(t, row, "n_embd", csv_path));
    WEFT_ASSIGN_OR_RETURN(double ffn, Number(t, row, "n_expanded_embd", csv_path));
    WEFT_ASSIGN_OR_RETURN(double vocab, Number(t, row, "vocab_size", csv_path));
    const int c_gated = t.Column("use_gated_mlp");
    module.num_attention_heads = static_cast<int>(heads);
    module.num_kv_groups = static_cast<int>(kv_heads);
    module.hidden_size = static_cast<int>(hidden);
    module.ffn_hidden_size = static_cast<int>(ffn);
    module.vocab_size = static_cast<int>(vocab);
    if (c_gated >= 0 && c_gated < static_cast<int>(row.size())) {
      module.gated_mlp = row[c_gated] == "True" || row[c_gated] == "true" || row[c_gated] == "1";
    }
  }
  // vidur column -> weft op, for the columns this file has (phi-2 lacks some).
  std::vector<std::pair<std::string, std::string>> ops;
  for (const std::string vidur :
       {"attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj", "mlp_act",
        "input_layernorm", "post_attention_layernorm", "add", "attn_rope", "emb"}) {
    if (t.Column("time_stats." + vidur + ".median") >= 0) {
      ops.emplace_back(vidur, std::string(OpNameFromVidur(vidur)));
    }
  }
  if (ops.empty()) {
    return InvalidArgumentError(
        fmt::format("{}: header; no time_stats.<op>.median column of a known op", csv_path));
  }
  // Mean of repeated (tokens, tp) rows, as MeasuredOpTable does: (tp, tokens) -> op -> (sum, n).
  std::map<std::pair<int, double>, std::map<std::string, std::pair<double, int>>> measured;
  for (const auto& row : t.rows) {
    WEFT_ASSIGN_OR_RETURN(double tokens, Number(t, row, "num_tokens", csv_path));
    WEFT_ASSIGN_OR_RETURN(double tp, Number(t, row, "num_tensor_parallel_workers", csv_path));
    if (tokens < 1 || tp < 1 || tp != static_cast<int>(tp)) {
      return InvalidArgumentError(fmt::format(
          "{}: num_tokens = {}, num_tensor_parallel_workers = {}; need tokens >= 1 and an "
          "integer tp >= 1",
          csv_path, tokens, tp));
    }
    for (const auto& [vidur, weft] : ops) {
      WEFT_ASSIGN_OR_RETURN(double ms,
                            Number(t, row, "time_stats." + vidur + ".median", csv_path));
      auto& acc = measured[{static_cast<int>(tp), tokens}][weft];
      acc.first += ms * 1e-3;
      acc.second += 1;
    }
  }
  for (const auto& [key, by_op] : measured) {
    const auto& [tp, tokens] = key;
    const OpBuildContext ctx{
        .shape = TokenShape::Uniform(static_cast<int64_t>(tokens)),
        .parallel = {.module = module.name, .tp = tp, .sequence_parallel = false},
        .backward = BackwardMode::kNone};
    WEFT_ASSIGN_OR_RETURN(std::vector<Op> layer0, BuildLayerOps(module, 0, ctx));
    WEFT_ASSIGN_OR_RETURN(std::vector<Op> layer1, BuildLayerOps(module, 1, ctx));
    ProfilePoint layer{.op = "layer", .tp = tp, .tokens = tokens, .measured_s = 0, .ops = {}};
    for (const auto& [op, acc] : by_op) {
      // The op's first forward instance (a layer holds residual_add twice; vidur times one).
      const std::vector<Op>& source = op == "embedding" ? layer0 : layer1;
      const std::string& op_name = op;  // a lambda may not capture a structured binding (clang)
      auto it = std::find_if(source.begin(), source.end(),
                             [&](const Op& o) { return o.name == op_name; });
      if (it == source.end()) {
        return InternalError(
            fmt::format("{}: op '{}' not built for {}", csv_path, op, module.name));
      }
      const double measured_s = acc.first / acc.second;
      out.points.push_back(
          {.op = op, .tp = tp, .tokens = tokens, .measured_s = measured_s, .ops = {*it}});
      if (op != "embedding") {
        layer.measured_s += measured_s;
        layer.ops.push_back(*it);
      }
    }
    if (!layer.ops.empty()) out.points.push_back(std::move(layer));
  }
  return out;
}

std::vector<ValidationPoint> PredictProfile(const LoadedProfile& profile,
                                            const spec::ClusterSpec& cluster,
                                            const CostOptions& options,
                                            std::string_view source,
                                            double split_tokens) {
  std::vector<ValidationPoint> points;
  points.reserve(profile.points.size());
  const std::string below = fmt::format("< {}", split_tokens);
  const std::string above = fmt::format(">= {}", split_tokens);
  for (const ProfilePoint& p : profile.points) {
    double predicted_s = 0;
    for (const Op& op : p.ops) predicted_s += OpLatency(op, cluster, options);
    points.push_back({.source = std::string(source),
                      .gpu = profile.profile.gpu,
                      .model = profile.profile.model,
                      .op = p.op,
                      .tp = p.tp,
                      .size = p.tokens,
                      .range = p.tokens < split_tokens ? below : above,
                      .measured_s = p.measured_s,
                      .predicted_s = predicted_s});
  }
  return points;
}

StatusOr<std::vector<ValidationPoint>> ValidateVidurCompute(const std::string& csv_path,
                                                            const std::string& gpu,
                                                            const spec::ClusterSpec& cluster,
                                                            const CostOptions& options,
                                                            double min_tokens) {
  WEFT_ASSIGN_OR_RETURN(
      const LoadedProfile profile,
      LoadVidurProfile({.gpu = gpu, .model = VidurModelName(csv_path), .path = csv_path}));
  std::vector<ValidationPoint> points = PredictProfile(profile, cluster, options, "vidur");
  std::erase_if(points, [&](const ValidationPoint& p) { return p.size < min_tokens; });
  return points;
}

StatusOr<std::vector<ValidationPoint>> ValidateDistcaAttention(const std::string& dir,
                                                               const CostOptions& options) {
  using internal::Number;
  const spec::ClusterSpec h100 = ReferenceH100Dgx();
  // The measured kernel: 64 query heads, 4 KV heads, head dim 128, causal.
  spec::ModuleSpec m = Llama2_7bModule();
  m.hidden_size = 64 * 128;
  m.num_attention_heads = 64;
  m.num_kv_groups = 4;
  m.ffn_hidden_size = 4 * m.hidden_size;
  std::vector<ValidationPoint> points;
  {
    const std::string path = dir + "/distca/compute-attn-megatron.csv";
    WEFT_ASSIGN_OR_RETURN(internal::Table t, internal::ReadTable(path, ','));
    for (const auto& row : t.rows) {
      WEFT_ASSIGN_OR_RETURN(double s, Number(t, row, "seq_len", path));
      WEFT_ASSIGN_OR_RETURN(double ms, Number(t, row, "latency(ms)", path));
      WEFT_ASSIGN_OR_RETURN(double tp, Number(t, row, "tp", path));
      WEFT_ASSIGN_OR_RETURN(double predicted,
                            internal::ForwardOpLatency(
                                m, 1, TokenShape::Uniform(static_cast<int64_t>(s)),
                                static_cast<int>(tp), "attention", h100, options, true));
      points.push_back({.source = "distca",
                        .gpu = "h100",
                        .model = "",
                        .op = "attention fwd+bwd (Megatron, 1 seq)",
                        .tp = static_cast<int>(tp),
                        .size = s,
                        .range = "",
                        .measured_s = ms * 1e-3,
                        .predicted_s = predicted});
    }
  }
  {
    const std::string path = dir + "/distca/compute-attn-H100.psv";
    WEFT_ASSIGN_OR_RETURN(internal::Table t, internal::ReadTable(path, '|'));
    for (const auto& row : t.rows) {
      WEFT_ASSIGN_OR_RETURN(double total, Number(t, row, "total_len", path));
      WEFT_ASSIGN_OR_RETURN(double docs, Number(t, row, "batch_size", path));
      WEFT_ASSIGN_OR_RETURN(double tp, Number(t, row, "tp", path));
      WEFT_ASSIGN_OR_RETURN(double cp, Number(t, row, "cp", path));
      WEFT_ASSIGN_OR_RETURN(double ms, Number(t, row, "total_latency(ms)", path));
      if (cp != 1 || docs < 1) continue;
      const int64_t per_doc = static_cast<int64_t>(total / docs);
      WEFT_ASSIGN_OR_RETURN(
          double predicted,
          internal::ForwardOpLatency(m, 1, TokenShape::Uniform(per_doc, static_cast<int>(docs)),
                                     static_cast<int>(tp), "attention", h100, options));
      points.push_back({.source = "distca",
                        .gpu = "h100",
                        .model = "",
                        .op = "attention fwd (varlen, 32K packed)",
                        .tp = static_cast<int>(tp),
                        .size = static_cast<double>(per_doc),
                        .range = "",
                        .measured_s = ms * 1e-3,
                        .predicted_s = predicted});
    }
  }
  return points;
}

StatusOr<std::vector<ValidationPoint>> ValidateCollectives(const std::string& dir,
                                                           const CostOptions& options) {
  using internal::Number;
  const spec::ClusterSpec h100 = ReferenceH100Dgx();
  const double alpha = h100.efficiency.network;
  std::vector<ValidationPoint> points;
  for (const std::string kind : {"all_reduce", "send_recv"}) {
    const std::string path = dir + "/vidur/network_h100_dgx_" + kind + ".csv";
    WEFT_ASSIGN_OR_RETURN(internal::Table t, internal::ReadTable(path, ','));
    for (const auto& row : t.rows) {
      WEFT_ASSIGN_OR_RETURN(double bytes, Number(t, row, "size", path));
      WEFT_ASSIGN_OR_RETURN(double n, Number(t, row, "num_workers", path));
      WEFT_ASSIGN_OR_RETURN(double per_node, Number(t, row, "devices_per_node", path));
      WEFT_ASSIGN_OR_RETURN(double ms, Number(t, row, "time_stats." + kind + ".median", path));
      double predicted = 0;
      std::string op = kind;
      if (kind == "all_reduce") {
        predicted = CollectiveLatency(CollectiveKind::kAllReduce, bytes, static_cast<int>(n),
                                      h100.intra_node, alpha, options);
      } else {
        const bool inter = per_node < n;
        op = inter ? "send_recv (inter-node)" : "send_recv (NVLink)";
        predicted = P2PLatency(bytes, inter ? h100.inter_node : h100.intra_node, alpha, options);
      }
      points.push_back({.source = "vidur",
                        .gpu = "h100",
                        .model = "",
                        .op = op,
                        .tp = static_cast<int>(n),
                        .size = bytes,
                        .range = "",
                        .measured_s = ms * 1e-3,
                        .predicted_s = predicted});
    }
  }
  {
    const std::string path = dir + "/distca/nccl_perf.csv";
    WEFT_ASSIGN_OR_RETURN(internal::Table t, internal::ReadTable(path, ','));
    const int c_op = t.Column("op");
    for (const auto& row : t.rows) {
      if (c_op < 0 || c_op >= static_cast<int>(row.size())) continue;
      WEFT_ASSIGN_OR_RETURN(double bytes, Number(t, row, "size_bytes", path));
      WEFT_ASSIGN_OR_RETURN(double n, Number(t, row, "ngpu", path));
      WEFT_ASSIGN_OR_RETURN(double us, Number(t, row, "t_us_out", path));
      const std::string& name = row[c_op];
      CollectiveKind kind = CollectiveKind::kAllReduce;
      if (name == "all_gather") kind = CollectiveKind::kAllGather;
      else if (name == "reduce_scatter") kind = CollectiveKind::kReduceScatter;
      else if (name != "all_reduce") continue;
      points.push_back({.source = "nccl-tests",
                        .gpu = "h100",
                        .model = "",
                        .op = name,
                        .tp = static_cast<int>(n),
                        .size = bytes,
                        .range = "",
                        .measured_s = us * 1e-6,
                        .predicted_s = CollectiveLatency(kind, bytes, static_cast<int>(n),
                                                         h100.intra_node, alpha, options)});
    }
  }
  return points;
}

StatusOr<std::vector<ValidationPoint>> ValidateAll(const std::string& dir,
                                                   const CostOptions& options,
                                                   double split_tokens) {
  WEFT_ASSIGN_OR_RETURN(
      std::vector<ValidationPoint> all,
      ValidateVidurGpus(
          dir, [](std::string_view gpu) { return spec::LoadCluster(gpu); }, options, split_tokens));
  WEFT_ASSIGN_OR_RETURN(auto attention, ValidateDistcaAttention(dir, options));
  all.insert(all.end(), attention.begin(), attention.end());
  WEFT_ASSIGN_OR_RETURN(auto collectives, ValidateCollectives(dir, options));
  all.insert(all.end(), collectives.begin(), collectives.end());
  return all;
}

StatusOr<std::vector<ValidationPoint>> ValidateHarnessTable(const std::string& csv_path,
                                                            const spec::ClusterSpec& cluster,
                                                            const CostOptions& options) {
  using internal::Number;
  WEFT_ASSIGN_OR_RETURN(internal::Table t, internal::ReadTable(csv_path, ','));
  const int c_kind = t.Column("kind");
  const int c_op = t.Column("op");
  if (c_kind < 0 || c_op < 0) {
    return InvalidArgumentError(fmt::format("{}: columns op and kind are required", csv_path));
  }
  std::vector<ValidationPoint> points;
  for (const auto& row : t.rows) {
    if (c_kind >= static_cast<int>(row.size()) || c_op >= static_cast<int>(row.size())) {
      return InvalidArgumentError(fmt::format("{}: short row", csv_path));
    }
    const std::string& kind = row[c_kind];
    WEFT_ASSIGN_OR_RETURN(double ms, Number(t, row, "latency_ms", csv_path));
    WEFT_ASSIGN_OR_RETURN(double bytes, Number(t, row, "bytes", csv_path));
    WEFT_ASSIGN_OR_RETURN(double tokens, Number(t, row, "tokens", csv_path));
    Op op;
    double size = tokens;
    double predicted_s = 0;
    if (kind == "gemm") {
      WEFT_ASSIGN_OR_RETURN(double m, Number(t, row, "m", csv_path));
      WEFT_ASSIGN_OR_RETURN(double n, Number(t, row, "n", csv_path));
      WEFT_ASSIGN_OR_RETURN(double k, Number(t, row, "k", csv_path));
      op.kind = OpKind::kGemm;
      op.gemm_m = m;
      op.gemm_n = n;
      op.gemm_k = k;
      op.flops = 2 * m * n * k;
      op.hbm_bytes = 2 * (m * k + k * n + m * n);
      predicted_s = OpLatency(op, cluster, options);
      size = m;
    } else if (kind == "attention") {
      WEFT_ASSIGN_OR_RETURN(double heads, Number(t, row, "heads", csv_path));
      WEFT_ASSIGN_OR_RETURN(double head_dim, Number(t, row, "head_dim", csv_path));
      WEFT_ASSIGN_OR_RETURN(double causal, Number(t, row, "causal", csv_path));
      op.kind = OpKind::kAttention;
      op.flops = 4 * tokens * tokens * head_dim * heads * (causal != 0 ? 0.5 : 1.0);
      op.hbm_bytes = bytes;
      op.attention_mean_tokens = tokens;
      op.attention_segment_heads = heads;
      predicted_s = OpLatency(op, cluster, options);
    } else if (kind == "norm") {
      op.kind = OpKind::kMemory;
      op.memory_class = MemoryClass::kNorm;
      op.hbm_bytes = bytes;
      predicted_s = OpLatency(op, cluster, options);
    } else if (kind == "h2d" || kind == "d2h") {
      if (cluster.host_link_bandwidth_bytes_per_s <= 0) {
        return InvalidArgumentError(fmt::format(
            "cluster {}: host_link_bandwidth_bytes_per_s = {}; needed for {} rows", cluster.name,
            cluster.host_link_bandwidth_bytes_per_s, kind));
      }
      predicted_s = bytes / cluster.host_link_bandwidth_bytes_per_s;
      size = bytes;
    } else {
      return InvalidArgumentError(fmt::format(
          "{}: kind = '{}'; must be gemm, attention, norm, h2d or d2h", csv_path, kind));
    }
    points.push_back({.source = "harness",
                      .gpu = cluster.gpu.name,
                      .model = "",
                      .op = row[c_op],
                      .tp = 1,
                      .size = size,
                      .range = "",
                      .measured_s = ms * 1e-3,
                      .predicted_s = predicted_s});
  }
  return points;
}

std::vector<ValidationSummary> Summarize(const std::vector<ValidationPoint>& points) {
  std::vector<ValidationSummary> out;
  std::vector<std::vector<double>> errors, signed_errors;
  for (const ValidationPoint& p : points) {
    size_t i = 0;
    while (i < out.size() &&
           !(out[i].source == p.source && out[i].gpu == p.gpu && out[i].model == p.model &&
             out[i].op == p.op && out[i].range == p.range)) {
      ++i;
    }
    if (i == out.size()) {
      out.push_back(
          {.source = p.source, .gpu = p.gpu, .model = p.model, .op = p.op, .range = p.range});
      errors.emplace_back();
      signed_errors.emplace_back();
    }
    errors[i].push_back(p.RelativeError());
    signed_errors[i].push_back(p.SignedError());
  }
  auto median = [](std::vector<double>& e) {
    std::sort(e.begin(), e.end());
    const size_t n = e.size();
    return n % 2 == 1 ? e[n / 2] : 0.5 * (e[n / 2 - 1] + e[n / 2]);
  };
  for (size_t i = 0; i < out.size(); ++i) {
    std::vector<double>& e = errors[i];
    out[i].count = static_cast<int>(e.size());
    out[i].median_error = median(e);
    // Nearest rank: the smallest error at or above 90% of the points.
    const size_t rank = static_cast<size_t>(std::ceil(0.9 * static_cast<double>(e.size())));
    out[i].p90_error = e[std::max<size_t>(rank, 1) - 1];
    out[i].max_error = e.back();
    out[i].median_signed_error = median(signed_errors[i]);
  }
  return out;
}

std::string SummaryMarkdown(const std::vector<ValidationSummary>& summaries) {
  std::string s =
      "| source | gpu | model | op | tokens | points | median error | p90 error | max error | "
      "bias |\n";
  s += "|---|---|---|---|---|---:|---:|---:|---:|---:|\n";
  for (const ValidationSummary& v : summaries) {
    s += fmt::format("| {} | {} | {} | {} | {} | {} | {:.1f}% | {:.1f}% | {:.1f}% | {:+.1f}% |\n",
                     v.source, v.gpu, v.model.empty() ? "-" : v.model, v.op,
                     v.range.empty() ? "-" : v.range, v.count, 100 * v.median_error,
                     100 * v.p90_error, 100 * v.max_error, 100 * v.median_signed_error);
  }
  return s;
}

std::string CompareMarkdown(const std::vector<ValidationSummary>& before,
                            const std::vector<ValidationSummary>& after) {
  std::string s = "| op | model | gpu | source | points | median error | p90 error | bias |\n";
  s += "|---|---|---|---|---:|---:|---:|---:|\n";
  for (const ValidationSummary& a : after) {
    const ValidationSummary* b = nullptr;
    for (const ValidationSummary& c : before) {
      if (c.source == a.source && c.gpu == a.gpu && c.model == a.model && c.op == a.op &&
          c.range == a.range) {
        b = &c;
      }
    }
    if (b == nullptr) continue;
    auto arrow = [](double x, double y, const char* fmt_spec) {
      return fmt::format(fmt::runtime(fmt_spec), 100 * x, 100 * y);
    };
    s += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", a.op,
                     a.model.empty() ? "-" : a.model, a.gpu, a.source, a.count,
                     arrow(b->median_error, a.median_error, "{:.1f}% → {:.1f}%"),
                     arrow(b->p90_error, a.p90_error, "{:.1f}% → {:.1f}%"),
                     arrow(b->median_signed_error, a.median_signed_error, "{:+.1f}% → {:+.1f}%"));
  }
  return s;
}

}  // namespace weft::cost
