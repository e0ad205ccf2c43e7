#pragma once
// DIP §5.3 per-layer memory optimization.
//  Offline, per (F, B) stage pair: every layer of the pair's chunk may keep all activations,
//  recompute selectively, recompute fully, or offload them to the host (when the cluster has a
//  host link); the pair's candidates are at most S selections of per-layer options — the fastest,
//  the most memory-efficient, and the cheapest in each of S−2 memory buckets (multiple-choice
//  knapsack over the layers, algo::SelectMemoryBucketCandidates).
//  Per rank, for a fixed stage order: choose one candidate per pair minimizing the rank's extra
//  time subject to the memory cap at the start of every stage (algo::SolveLiveSelection: greedy,
//  then CBC warm-started by it with a relative gap).
// Per-layer costs are the chunk's (option − none) differences divided by its layer count (the
// layers of one chunk are identical). Offload's stages compute only (the simulator runs the
// copies, docs/simulator.md "Offload"); its per-layer price here is the copy time the layer's
// compute cannot hide when every GPU of the node copies at once (D2H under the forward, H2D
// under the backward, at ClusterSpec::SharedHostBandwidthBytesPerS), and at least
// kOffloadPriceFraction of the copy time (the copy stream and PCIe are shared with other
// copies and NIC traffic), so a pair that fits without options keeps none. The pair candidates
// are the knapsack's with offload and without it (so a host-memory limit still finds
// recompute-only candidates). Host memory: per rank, the offloaded bytes live at any stage
// start stay within HostMemoryBytesPerNode() / gpus_per_node per GPU; a selection that exceeds
// it drops the offload candidates over the share, then all of them.
// Thread-safety: a MemoryOptimizer is immutable after Create; Optimize may run concurrently.
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "weft/algo/live_selection.h"
#include "weft/common/status.h"
#include "weft/graph/stage_graph.h"
#include "weft/sched/schedule.h"
#include "weft/spec/cluster.h"

namespace weft::strategy::dip {

// The knapsack selections of a pair depend only on its per-layer option table, its layer count and
// the number of candidates; pairs of equal workload (other sub-microbatches, microbatches and DP
// replicas of the same shape) share them. A cache keyed by the exact option values (bit-equal
// doubles), so a hit returns what the computation would. Thread-safe.
class PairCandidateCache {
 public:
  using Key = std::tuple<std::vector<double>, int, int>;  // (cost, weight)s, layers, S
  // The cached selections (each a per-layer option list) or nullptr.
  std::shared_ptr<const std::vector<std::vector<int>>> Find(const Key& key) const;
  void Insert(const Key& key, std::vector<std::vector<int>> choices);

 private:
  mutable std::mutex mutex_;
  std::map<Key, std::shared_ptr<const std::vector<std::vector<int>>>> map_;
};

struct MemoryOptions {
  int num_candidates = 4;  // S >= 2
  algo::LiveSelectionOptions selection;
  // Optional: shared by the MemoryOptimizers of one planning call (nullptr = a private one).
  std::shared_ptr<PairCandidateCache> candidate_cache;
};

// The least price of an offloaded layer, as a fraction of its D2H + H2D copy time.
inline constexpr double kOffloadPriceFraction = 0.1;

struct PairCandidate {
  double forward_s = 0;
  double backward_s = 0;  // the pair's backward stage (or backward-input stage when split)
  double offload_price_s = 0;  // the offloaded layers' price (see above); 0 without offload
  int64_t activation_bytes = 0;
  int64_t offload_bytes = 0;   // per GPU, held on the host from forward to backward
  double CostS() const { return forward_s + backward_s + offload_price_s; }
  std::array<int16_t, 4> layers{};  // layers per option [none, selective, full, offload]
};

struct MemoryPair {
  int forward = -1;               // forward stage id
  int backward = -1;              // stage that frees the activations
  std::vector<PairCandidate> candidates;  // by increasing activation bytes
};

struct MemoryChoice {
  graph::StageGraph graph;     // the base graph with every pair at its chosen candidate
  bool feasible = false;       // every rank fits its cap at every stage start
  double extra_s = 0;          // Σ over ranks of the chosen candidates' extra time
  double lower_bound_extra_s = 0;  // Σ over ranks of the selection's proven lower bounds
  int milp_ranks = 0;          // ranks where CBC improved on the greedy choice
  double solve_time_s = 0;     // wall time of the per-rank selections
  std::array<int64_t, 4> layers_by_option{};  // layer-stages per option over all pairs
};

class MemoryOptimizer {
 public:
  // `variants[r]`: the same replica graph built with every module at Recompute r, in the order
  // none, selective, full, offload (offload may be omitted: 3 variants). `layers_per_stage[s]`:
  // the layer count of stage s's chunk. Stages without a same-group backward are left as they are.
  static StatusOr<MemoryOptimizer> Create(std::span<const graph::StageGraph> variants,
                                          const std::vector<int>& layers_per_stage,
                                          const spec::ClusterSpec& cluster,
                                          MemoryOptions options = {});

  // Every pair at its most memory-efficient / fastest candidate (built on each call).
  StatusOr<graph::StageGraph> Lightest() const;
  StatusOr<graph::StageGraph> Fastest() const;
  const std::vector<MemoryPair>& pairs() const { return pairs_; }

  // Per rank, the candidates that minimize extra time within the cap for `schedule`'s order.
  // `reserve_bytes` (per group, optional): bytes kept free besides the static ones (e.g. for the
  // plan's P2P buffers, which the simulator does not count).
  StatusOr<MemoryChoice> Optimize(const sched::Schedule& schedule,
                                  algo::LiveSelectionMethod method,
                                  std::span<const int64_t> reserve_bytes = {}) const;

 private:
  StatusOr<graph::StageGraph> Build(const std::vector<int>& choice) const;

  graph::StageGraph base_;  // the "none" variant (shape and edges)
  std::vector<MemoryPair> pairs_;
  std::vector<int> pair_of_stage_;  // pair index of a forward or freeing stage, else -1
  // Pairs of equal inputs have equal candidates: a shape per distinct input (Create).
  std::vector<int> shape_of_pair_;
  // Per shape, its candidates as selection options (time cost, bytes held), in candidate order:
  // shape h's at [options_begin_[h], options_begin_[h + 1]).
  std::vector<algo::LiveOption> live_options_;
  std::vector<int> options_begin_;
  std::vector<int64_t> max_offload_bytes_;  // per shape: the most any candidate offloads
  // Per candidate, flat as live_options_: the stages' Recompute (the option of most layers) and
  // whether its layers mix options (then the stages name the per-option layer counts).
  struct StageRecompute {
    spec::Recompute dominant = spec::Recompute::kNone;
    bool mixed = false;
  };
  std::vector<StageRecompute> stage_recompute_;
  std::vector<int64_t> cap_bytes_;  // per group: capacity − static bytes
  int64_t host_bytes_per_gpu_ = 0;  // host memory share of one GPU for offloaded bytes
  MemoryOptions options_;
  // The greedy selections of single ranks made so far, by (rank, reserve, the rank's order): a
  // selection is deterministic in these, and a replica's candidate schedules often give a rank
  // the same order (VLM-XL-16k: a fifth of the ranks' selections repeat one). Guarded: Optimize
  // may run on several search threads; copies of the optimizer share it.
  struct RankSelection {
    int group = 0;
    int64_t reserve_bytes = 0;
    std::vector<graph::StageId> order;
    std::vector<std::pair<int, int>> choice;  // (pair, candidate) of the rank's pairs
    bool feasible = true;
    double extra_s = 0, lower_bound_extra_s = 0;
  };
  struct RankMemo {
    std::mutex mu;
    std::vector<RankSelection> selections;
  };
  std::shared_ptr<RankMemo> rank_memo_ = std::make_shared<RankMemo>();
};

}  // namespace weft::strategy::dip
