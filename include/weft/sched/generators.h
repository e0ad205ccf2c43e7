#pragma once
// Baseline schedules by rule (GPipe, 1F1B, interleaved 1F1B, ZB-H1) and a builder of linear
// pipeline graphs for tests and baselines.
//
// The rules work on any finalized StageGraph whose stages carry (group, chunk, microbatch, pass):
//  - a *slot* is all stages of one (group, microbatch, chunk, pass-kind) — e.g. an encoder chunk
//    and an LLM chunk on the same group with the same chunk index, or several sub-microbatches —
//    run back to back in topological order. Pass kinds: F; B (kBackward or kBackwardInput, with
//    the slot's kBackwardWeight stages appended unless the rule defers W);
//  - the *rank* r of a group is the largest number of cross-group forward hops from a graph
//    source to a chunk-0 forward stage of the group; P = 1 + max rank (a linear pipeline gives
//    r = group index, P = number of groups; two encoders feeding one LLM share rank 0);
//  - each rule emits the Megatron sequence of (microbatch, chunk) slots for rank r and skips
//    slots the group does not have. Details and the exact warmup rules: docs/simulator.md.
// Thread-safety: pure functions.
#include <cstdint>
#include <string_view>
#include <vector>

#include "weft/common/status.h"
#include "weft/graph/stage_graph.h"
#include "weft/sched/schedule.h"

namespace weft::sched {

enum class ScheduleKind {
  kGPipe,               // all forwards, then all backwards (both in microbatch order)
  kOneFOneB,            // Megatron 1F1B: min(P−r−1, m) warmup forwards, then alternate
  kInterleavedOneFOneB, // Megatron interleaved: v chunks per group, microbatches in groups of P
  kZeroBubbleH1,        // ZB-H1: 1F1B on F and B(input); W deferred into the cool-down bubbles
};
std::string_view ScheduleKindName(ScheduleKind kind);  // "gpipe", "1f1b", "interleaved-1f1b", "zb-h1"
StatusOr<ScheduleKind> ParseScheduleKind(std::string_view name);

// GPipe, 1F1B and ZB-H1 accept several chunks per group (a microbatch's chunks on a group run as
// consecutive slots: F in chunk order, B in reverse). Fails with FailedPrecondition when a rule
// does not apply: interleaved with m % P != 0 ("interleaved 1F1B needs num_microbatches (6)
// divisible by the pipeline size P (4)"), ZB-H1 on a graph without kBackwardInput stages.
StatusOr<Schedule> MakeSchedule(ScheduleKind kind, const graph::StageGraph& graph);

// Costs of one virtual stage (one chunk on one group) of a linear pipeline.
struct VirtualStageCost {
  double forward_s = 1e-3;
  double backward_input_s = 1e-3;   // B; with split_backward = false, B+W run as one kBackward
  double backward_weight_s = 1e-3;  // W
  double forward_flops = 0;         // backward counted as 2× forward for MFU
  int64_t activation_bytes = 0;     // allocated by F, freed by B (or B and W)
  int64_t weight_grad_activation_bytes = 0;  // part of activation_bytes held until W
  int64_t send_bytes = 0;           // F output to the next virtual stage (and its gradient back)
};

struct PipelineShape {
  int num_groups = 1;               // P
  int chunks_per_group = 1;         // v; virtual stage k lives on group k % P as chunk k / P
  int num_microbatches = 1;         // m
  bool split_backward = false;      // emit B (kBackwardInput) and W (kBackwardWeight) stages
  // Size 1 (every virtual stage the same) or P·v (indexed by virtual stage k).
  std::vector<VirtualStageCost> costs = {VirtualStageCost{}};
  int gpus_per_group = 1;           // TP × CP of each group; group g starts at GPU g·gpus_per_group
  int dp = 1;                       // DP replicas folded into each group
  int64_t static_bytes_per_group = 0;
  int64_t grad_sync_bytes_per_group = 0;
  int64_t optimizer_bytes_per_group = 0;

  Status Validate() const;
};

// Stage ids are deterministic: for each microbatch, for each virtual stage k: F; then for each k
// descending: B (or Bi, W). Edges: F(k)→F(k+1) and B(k+1)→B(k) carry send_bytes; F(k)→B(k) and
// Bi(k)→W(k) are same-group; the last F feeds the last B.
StatusOr<graph::StageGraph> BuildPipelineGraph(const PipelineShape& shape);

}  // namespace weft::sched
