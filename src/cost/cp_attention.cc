#include "weft/cost/cp_attention.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

namespace weft::cost {

double CpAttentionImbalance(const TokenShape& shape, int cp, bool causal,
                            std::optional<cp::Method> method) {
  if (cp <= 1 || !method.has_value() || shape.tokens <= 0 || shape.sum_squared_tokens <= 0) {
    return 1.0;
  }
  const int64_t t = shape.tokens;
  const int64_t blocks = (t + cp::kDefaultBlockTokens - 1) / cp::kDefaultBlockTokens;
  if (blocks < cp) return 1.0;
  const double docs_estimate = static_cast<double>(t) * static_cast<double>(t) /
                               shape.sum_squared_tokens;
  const int64_t docs = std::clamp<int64_t>(std::llround(docs_estimate), 1, t);
  cp::Layout layout;
  layout.segments.reserve(docs);
  for (int64_t d = 0; d < docs; ++d) {
    layout.segments.push_back({.kind = causal ? 0 : 1,
                               .tokens = t / docs + (d < t % docs ? 1 : 0),
                               .document = static_cast<int>(d)});
  }
  auto workloads = cp::ComputeBlockWorkloads(layout);
  if (!workloads.ok()) return 1.0;
  auto distribution = cp::Distribute(workloads->key_blocks, {.ranks = cp, .method = *method});
  if (!distribution.ok()) return 1.0;
  return distribution->Imbalance();
}

StatusOr<CpAttentionTimes> CpAttentionForward(const spec::ModuleSpec& module,
                                              const cp::BlockWorkloads& w,
                                              const cp::Distribution& distribution, int tp,
                                              const spec::ClusterSpec& cluster,
                                              const CostOptions& options) {
  if (module.num_attention_heads <= 0 || module.HeadDim() <= 0) {
    return InvalidArgumentError(fmt::format(
        "module '{}': num_attention_heads = {}; CP attention needs attention heads", module.name,
        module.num_attention_heads));
  }
  if (tp < 1 || module.num_attention_heads % tp != 0) {
    return InvalidArgumentError(fmt::format("tp = {}; must be >= 1 and divide the {} heads", tp,
                                            module.num_attention_heads));
  }
  if (distribution.rank_of_block.size() != w.key_blocks.size()) {
    return InvalidArgumentError(fmt::format(
        "distribution has {} blocks; the workloads have {}", distribution.rank_of_block.size(),
        w.key_blocks.size()));
  }
  const double head_dim = module.HeadDim();
  const double heads = static_cast<double>(module.num_attention_heads) / tp;
  const int kv_groups = module.num_kv_groups > 0 ? module.num_kv_groups : module.num_attention_heads;
  const double kv_width = std::ceil(static_cast<double>(kv_groups) / tp) * head_dim;
  const double bt = w.block_tokens;
  const int64_t tiles = std::accumulate(w.key_blocks.begin(), w.key_blocks.end(), int64_t{0});
  const int64_t tokens = std::accumulate(w.tokens.begin(), w.tokens.end(), int64_t{0});
  const int64_t attended = std::accumulate(w.attended_keys.begin(), w.attended_keys.end(), int64_t{0});
  constexpr double kBf16Bytes = 2;
  Op op;
  op.name = "attention";
  op.kind = OpKind::kAttention;
  op.flops = 4.0 * static_cast<double>(tiles) * bt * bt * head_dim * heads;
  op.hbm_bytes = kBf16Bytes * static_cast<double>(tokens) * (2 * heads * head_dim + 2 * kv_width);
  op.attention_mean_tokens = tokens > 0 ? static_cast<double>(attended) / tokens : 0;
  // The fixed kernel cost is paid by every rank; only the work part is split.
  const double whole_s = OpLatency(op, cluster, options) - options.kernel_launch_s;
  const int ranks = static_cast<int>(distribution.load_of_rank.size());
  CpAttentionTimes out;
  for (int r = 0; r < ranks; ++r) {
    int64_t rank_tiles = 0;
    for (int64_t b : distribution.blocks_of_rank[r]) rank_tiles += w.key_blocks[b];
    out.rank_forward_s.push_back(
        (tiles > 0 ? whole_s * static_cast<double>(rank_tiles) / tiles : 0) +
        options.kernel_launch_s);
  }
  out.balanced_forward_s = whole_s / std::max(1, ranks) + options.kernel_launch_s;
  const bool inter_node = tp * ranks > cluster.gpus_per_node;
  out.kv_all_gather_s = CollectiveLatency(
      CollectiveKind::kAllGather, kBf16Bytes * static_cast<double>(tokens) * 2 * kv_width, ranks,
      inter_node ? cluster.inter_node : cluster.intra_node, cluster.efficiency.network, options);
  return out;
}

}  // namespace weft::cost
