#pragma once
// DIP (dynamic interleaved pipelines for multimodal training, /work/shared/papers/dip.txt §4–§5):
//  - modality-aware partitioner (§4): per module a sub-microbatch size B_i (the smallest size that
//    keeps >= 95% of the best compute efficiency), a segment count K_i = ⌊T_i/T_1⌋ and P·K_i
//    chunks per module (chunk k on group k % P), separated partitioning (no chunk mixes modules);
//  - dual-queue stage interleaving (§5.2): per group forward/backward priority queues, 1F1B
//    alternation when both have stages ready before the group's last end time, otherwise the
//    earliest-ready stage; the forward queue is disabled while the group is at its memory cap;
//  - MCTS segment reordering (§5.1): priorities per (microbatch, module) segment group, scored
//    by the simulated iteration time of the dual-queue schedule;
//  - per-layer memory optimization (§5.3, memory.h): per (F, B) stage pair up to S candidates of
//    per-layer none / selective / full / offload options; per rank one candidate per pair within
//    the memory cap at every stage start (greedy inside the search, CBC on the final schedule).
// Registered variants: dip-partition-only, dip-interleave, dip-reorder, dip (docs/strategies_dip.md).
// Thread-safety: pure functions; strategies are immutable.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "weft/algo/mcts.h"
#include "weft/common/status.h"
#include "weft/graph/stage_graph.h"
#include "weft/sched/schedule.h"
#include "weft/spec/cluster.h"
#include "weft/strategy/strategy.h"

namespace weft::strategy::dip {

// §4: index into `sizes` of the smallest size whose efficiency is >= threshold × the best
// efficiency over all sizes. `sizes` ascending, same length as `efficiency`, non-empty.
StatusOr<int> SmallestEfficientSize(std::span<const int> sizes, std::span<const double> efficiency,
                                    double threshold = 0.95);

// §4: K_i = ⌊T_i / T_min⌋ (T_min = smallest positive latency), at least 1 and at most
// max_segments[i] (when given, > 0). Modules with latency <= 0 get 1.
std::vector<int> SegmentCounts(std::span<const double> latency_s,
                               std::span<const int> max_segments = {});

// Options of the dual-queue interleaver (§5.2).
struct DualQueueOptions {
  // Per stage: a priority key, lower runs first among ready stages of the same pass kind
  // (ties: smaller stage id). Empty = microbatch order (microbatch, sub-microbatch, stage id).
  std::vector<double> priority_key;
  // Per group: activation bytes the group may hold (capacity minus static bytes); while a
  // group's held activations exceed its cap its forward queue is disabled (unless nothing else
  // can run anywhere). Empty = unlimited.
  std::vector<int64_t> activation_cap_bytes;
  // Cluster used to estimate cross-group transfer times (nullptr = transfers are free).
  const spec::ClusterSpec* cluster = nullptr;
};

// Orders the stages of every group of a finalized graph by the dual-queue rules. The result is
// deadlock-free by construction (a stage is queued only after all its predecessors are placed).
StatusOr<sched::Schedule> DualQueueSchedule(const graph::StageGraph& graph,
                                            const DualQueueOptions& options = {});

// Tunables of the DIP strategies.
struct DipOptions {
  double efficiency_threshold = 0.95;  // §4: fraction of the best efficiency B_i must keep
  int max_sub_microbatch_size = 64;    // largest B_i tried (instances)
  int max_segments = 4;                // cap on K_i (keeps stage counts and search tractable)
  double mcts_alpha = 1.0;             // UCB exponent on the normalized score
  double mcts_beta = 0.5;              // UCB exploration weight
  int mcts_rollouts = 4;               // random rollouts per expansion
  // Beyond the paper: probability that a rollout step follows the best order found so far
  // (algo::MctsOptions::incumbent_rollout_probability); 0 = the paper's uniformly random
  // rollouts. 0.5 reached better orders sooner on VLM-L (docs/results_dip.md, Fig. 11).
  double mcts_incumbent_rollouts = 0.5;
  int memory_candidates = 8;           // §5.3 S: memory candidates per (F, B) stage pair
  bool memory_offload = true;         // §5.3: offer offload as a per-layer option (host link)
  bool polish = true;  // adjacent-swap polish of the searched order (dip-reorder, dip)
  // Per module (indexed like ModelSpec::modules): a fixed sub-microbatch size B_i in instances
  // instead of the §4 choice; 0 or missing = let the partitioner choose (Fig. 9 sweeps use this).
  std::vector<int> sub_microbatch_size_override;

  // efficiency_threshold in (0, 1], max_sub_microbatch_size, max_segments, mcts_rollouts and
  // memory_candidates >= 1, mcts_alpha finite and > 0, mcts_beta finite and >= 0,
  // mcts_incumbent_rollouts in [0, 1], sub_microbatch_size_override entries >= 0; else
  // InvalidArgument "<field> = <value>; <rule>". MakeDipStrategy checks it.
  Status Validate() const;
};

enum class DipVariant { kPartitionOnly, kInterleave, kReorder, kFull };

// InvalidArgument when `options` are invalid (DipOptions::Validate).
StatusOr<std::unique_ptr<Strategy>> MakeDipStrategy(DipVariant variant, DipOptions options = {});

// The §5.1 segment-priority search space of one finalized graph, exposed for benchmarks: an
// assignment is an order of the (microbatch, module) segment groups that keeps each microbatch's
// segments in flow order; its cost is the simulated iteration time in seconds (×10 when the
// schedule runs out of memory) of the dual-queue schedule with those priorities. This is the
// problem SearchSchedule hands to algo::MctsSearch.
struct SegmentOrderSearch {
  algo::MctsProblem problem;  // safe to call concurrently
  double default_cost_s = 0;  // cost of the dual-queue schedule without priorities
  bool default_oom = false;   // whether that schedule runs out of memory (cost is then ×10)
  int num_segments = 0;       // length of a complete assignment
};
// `job` and `graph` must outlive the returned problem's callbacks.
StatusOr<SegmentOrderSearch> MakeSegmentOrderSearch(const Job& job, const graph::StageGraph& graph);

}  // namespace weft::strategy::dip
