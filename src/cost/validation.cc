#include "weft/cost/validation.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>
#include <sstream>

#include <fmt/format.h>

#include "weft/cost/ops.h"

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
  bool pass_seen[3] = {false, false, false};  // a layer may hold the op twice (residual_add)
  for (Op& op : ops) {
    if (op.name != name || pass_seen[static_cast<int>(op.pass)]) continue;
    pass_seen[static_cast<int>(op.pass)] = true;
    if (op.kind == OpKind::kAttention && op.pass != Pass::kForward) {
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

StatusOr<std::vector<ValidationPoint>> ValidateVidurCompute(const std::string& csv_path,
                                                            const std::string& gpu,
                                                            const spec::ClusterSpec& cluster,
                                                            const CostOptions& options,
                                                            double min_tokens) {
  using internal::Number;
  WEFT_ASSIGN_OR_RETURN(internal::Table t, internal::ReadTable(csv_path, ','));
  if (t.rows.empty()) return InvalidArgumentError(fmt::format("{}: no rows", csv_path));
  // The profiled model, from the file's own columns (vidur writes them on every row).
  spec::ModuleSpec llama = Llama2_7bModule();
  {
    const auto& row = t.rows.front();
    WEFT_ASSIGN_OR_RETURN(double heads, Number(t, row, "n_head", csv_path));
    WEFT_ASSIGN_OR_RETURN(double kv_heads, Number(t, row, "n_kv_head", csv_path));
    WEFT_ASSIGN_OR_RETURN(double hidden, Number(t, row, "n_embd", csv_path));
    WEFT_ASSIGN_OR_RETURN(double ffn, Number(t, row, "n_expanded_embd", csv_path));
    WEFT_ASSIGN_OR_RETURN(double vocab, Number(t, row, "vocab_size", csv_path));
    const int c_gated = t.Column("use_gated_mlp");
    llama.num_attention_heads = static_cast<int>(heads);
    llama.num_kv_groups = static_cast<int>(kv_heads);
    llama.hidden_size = static_cast<int>(hidden);
    llama.ffn_hidden_size = static_cast<int>(ffn);
    llama.vocab_size = static_cast<int>(vocab);
    if (c_gated >= 0 && c_gated < static_cast<int>(row.size())) {
      llama.gated_mlp = row[c_gated] == "True" || row[c_gated] == "true" || row[c_gated] == "1";
    }
  }
  // compute_<gpu>_<org>_<model>_mlp.csv -> <model>
  std::string model = std::filesystem::path(csv_path).stem().string();
  if (model.size() > 4 && model.ends_with("_mlp")) model.resize(model.size() - 4);
  if (const size_t cut = model.rfind('_'); cut != std::string::npos) model = model.substr(cut + 1);
  // vidur column -> (weft op, layer holding it).
  const std::vector<std::pair<std::string, std::string>> ops = {
      {"attn_pre_proj", "qkv_proj"}, {"attn_post_proj", "out_proj"},
      {"mlp_up_proj", "mlp_up"},     {"mlp_down_proj", "mlp_down"},
      {"mlp_act", "mlp_act"},        {"input_layernorm", "input_norm"},
      {"post_attention_layernorm", "post_attn_norm"},
      {"add", "residual_add"},       {"attn_rope", "rope"},
      {"emb", "embedding"}};
  // Mean of repeated (tokens, tp) rows, as MeasuredOpTable does.
  std::map<std::tuple<std::string, int, double>, std::pair<double, int>> measured;
  for (const auto& row : t.rows) {
    WEFT_ASSIGN_OR_RETURN(double tokens, Number(t, row, "num_tokens", csv_path));
    WEFT_ASSIGN_OR_RETURN(double tp, Number(t, row, "num_tensor_parallel_workers", csv_path));
    if (tokens < min_tokens) continue;
    for (const auto& [vidur, weft] : ops) {
      WEFT_ASSIGN_OR_RETURN(double ms,
                            Number(t, row, "time_stats." + vidur + ".median", csv_path));
      auto& acc = measured[{weft, static_cast<int>(tp), tokens}];
      acc.first += ms * 1e-3;
      acc.second += 1;
    }
  }
  std::vector<ValidationPoint> points;
  for (const auto& [key, acc] : measured) {
    const auto& [op, tp, tokens] = key;
    const int layer = op == "embedding" ? 0 : 1;
    WEFT_ASSIGN_OR_RETURN(
        double predicted,
        internal::ForwardOpLatency(llama, layer, TokenShape::Uniform(static_cast<int64_t>(tokens)),
                                   tp, op, cluster, options));
    points.push_back({.source = "vidur",
                      .gpu = gpu,
                      .model = model,
                      .op = op,
                      .tp = tp,
                      .size = tokens,
                      .measured_s = acc.first / acc.second,
                      .predicted_s = predicted});
  }
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
                        .measured_s = us * 1e-6,
                        .predicted_s = CollectiveLatency(kind, bytes, static_cast<int>(n),
                                                         h100.intra_node, alpha, options)});
    }
  }
  return points;
}

StatusOr<std::vector<ValidationPoint>> ValidateAll(const std::string& dir,
                                                   const CostOptions& options, double min_tokens) {
  std::vector<ValidationPoint> all;
  const std::pair<const char*, spec::ClusterSpec> gpus[] = {{"h100", ReferenceH100Dgx()},
                                                            {"a100", ReferenceA100Dgx()}};
  for (const auto& [gpu, cluster] : gpus) {
    // Every model profiled on this GPU, in name order (Llama-2-7B is required: it is the fit set).
    std::vector<std::string> files;
    std::error_code ec;
    const std::string prefix = fmt::format("compute_{}_", gpu);
    for (const auto& entry : std::filesystem::directory_iterator(dir + "/vidur", ec)) {
      const std::string name = entry.path().filename().string();
      if (name.starts_with(prefix) && name.ends_with("_mlp.csv")) files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) {
      return NotFoundError(fmt::format("{}/vidur: no {}*_mlp.csv (vidur compute profiles)", dir,
                                       prefix));
    }
    for (const std::string& file : files) {
      WEFT_ASSIGN_OR_RETURN(auto points,
                            ValidateVidurCompute(file, gpu, cluster, options, min_tokens));
      all.insert(all.end(), points.begin(), points.end());
    }
  }
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
    while (i < out.size() && !(out[i].source == p.source && out[i].gpu == p.gpu &&
                               out[i].model == p.model && out[i].op == p.op)) {
      ++i;
    }
    if (i == out.size()) {
      out.push_back({.source = p.source, .gpu = p.gpu, .model = p.model, .op = p.op});
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
      "| source | gpu | model | op | points | median error | p90 error | max error | bias |\n";
  s += "|---|---|---|---|---:|---:|---:|---:|---:|\n";
  for (const ValidationSummary& v : summaries) {
    s += fmt::format("| {} | {} | {} | {} | {} | {:.1f}% | {:.1f}% | {:.1f}% | {:+.1f}% |\n",
                     v.source, v.gpu, v.model.empty() ? "-" : v.model, v.op, v.count,
                     100 * v.median_error, 100 * v.p90_error, 100 * v.max_error,
                     100 * v.median_signed_error);
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
      if (c.source == a.source && c.gpu == a.gpu && c.model == a.model && c.op == a.op) b = &c;
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
