#pragma once
// Context-parallel attention in the cost model (Cornstarch §4.3, §5.3): all-gather-based CP, where
// every rank gathers the K/V of all tokens and computes the attention rows of its own blocks, so
// the attention of a CP group takes as long as its most loaded rank under the token distribution.
// Free functions; thread-safe.
#include <optional>
#include <vector>

#include "weft/common/status.h"
#include "weft/cost/latency.h"
#include "weft/cost/ops.h"
#include "weft/cp/distribution.h"
#include "weft/cp/mask.h"
#include "weft/spec/cluster.h"
#include "weft/spec/model.h"

namespace weft::cost {

// max / mean of the per-rank attention work (key-block tiles) when the blocks of a sequence with
// `shape` are distributed over `cp` ranks by `method` (nullopt: perfectly balanced, 1).
// The cost model only knows tokens and Σs², so the mask is derived from them: round(T²/Σs²)
// equal documents of T/n tokens (the segment estimate the attention op already uses), each
// causal text when `causal`, else one bidirectional segment. Returns 1 when cp <= 1, the shape
// is empty, or there are fewer 128-token blocks than ranks (nothing to distribute).
double CpAttentionImbalance(const TokenShape& shape, int cp, bool causal,
                            std::optional<cp::Method> method);

// The attention of one layer of `module` under a given block distribution (`weft cp`).
struct CpAttentionTimes {
  std::vector<double> rank_forward_s;  // forward attention time of each rank
  double kv_all_gather_s = 0;          // gathering K and V of all tokens over the CP group
  double balanced_forward_s = 0;       // the same work split perfectly evenly
};
// Forward time of the whole layout's attention on one GPU by the cost model's attention pricing
// (flops = 4 · tiles · block² · head_dim · heads / tp, efficiency at the layout's mean attended
// keys per query), split over the ranks in proportion to their key-block tiles; plus the K/V
// all-gather (bf16, kv heads / tp) over the group. Fails on a module without attention heads,
// a tp that does not divide the heads, or a distribution that does not match the workloads.
StatusOr<CpAttentionTimes> CpAttentionForward(const spec::ModuleSpec& module,
                                              const cp::BlockWorkloads& workloads,
                                              const cp::Distribution& distribution, int tp,
                                              const spec::ClusterSpec& cluster,
                                              const CostOptions& options = {});

}  // namespace weft::cost
