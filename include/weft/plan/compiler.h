#pragma once
// CompilePlan: turns a simulated iteration (StageGraph + Schedule + Timeline) into an
// ExecutionPlan (DynaPipe / PipeWeaver §7.3 / DIP §6.3 style).
//
// Buffers. Every edge of the graph with bytes > 0 between stages of one group becomes a local
// buffer (output of the producer, input of the consumer). Every cross-group edge becomes a send
// buffer on the producer's rank and a receive buffer on the consumer's rank (also for 0 bytes:
// it is the synchronization). Same-group edges with 0 bytes are pure ordering, already implied by
// the schedule order. Shapes: elements = ceil(bytes / dtype size); with a hidden size for the
// producer's module, [elements / hidden, hidden] (tokens × hidden) when it divides, else
// [elements]. Every buffer names its producer and consumer (the edge's stages, ranks = their
// groups) and carries the edge's samples and rows; every compute carries its stage's samples
// and instances (the data assignment of the graph; docs/plan_schema.md).
//
// Placement rules, per rank, around its compute actions in schedule order (slot j = just before
// compute j; the last slot is the end of the list):
//  - isend: right after the producing compute (the data exists then), in out-edge order.
//  - irecv: posted early — in the first slot j whose compute ends, in the timeline, after the
//    sender posts (t_post = end of the producer); i.e. before the compute during which the data
//    starts to flow, so the transfer overlaps it. Per sender the irecvs keep the sender's isend
//    order (NCCL matches in order): slots are made non-decreasing along that order (a receive
//    moves earlier, never later). Within a slot they are ordered by t_post, then sender rank.
//  - wait_recv: just before the first (only) compute that reads the buffer.
//  - wait_send: in the first slot after the producer whose compute starts, in the timeline, at or
//    after the transfer ends (or at the end of the list); the send buffer is freed right after.
//  - free: a received or local buffer is freed in the slot after its last reader.
//  - Order inside a slot: irecvs, frees, wait_sends (+ frees), wait_recvs. Maximal runs of
//    consecutive isend/irecv posts (typically the isends of compute j and the irecvs of slot j+1)
//    share a batch group id when batch_p2p is set (batch_isend_irecv).
//  - all_reduce_grads: one per module with a weight-gradient compute (kBackward /
//    kBackwardWeight) on the rank, at the end of the rank's list in ascending module order (the
//    simulator's tail: gradients are reduced after the group's last stage; one global order of
//    collectives, so members of different sets can never wait on each other in a cycle). For a
//    module in a graph::GradSync of the group: ranks = the set's groups, dp = their count,
//    bytes = the set's bytes. Otherwise dp = the group's dp (emitted for dp = 1 too, then with
//    ranks = {the rank}; with dp > 1 ranks stays empty: the other members are the same rank of
//    the other replicas' plans). Bytes: grad_sync_bytes_by_rank_module when given, else the
//    group's grad_sync_bytes split over those modules in proportion to their backward FLOPs on
//    the rank (latency when no FLOPs are known, evenly when neither), largest remainder rounding
//    so the shares add up exactly.
// The result passes ValidatePlan for any graph/schedule the simulator accepted (tested on 1F1B,
// interleaved 1F1B, ZB-H1 and fan-in graphs).
// Thread-safety: pure function.
#include <cstdint>
#include <string>
#include <vector>

#include "weft/common/status.h"
#include "weft/graph/stage_graph.h"
#include "weft/plan/plan.h"
#include "weft/sched/schedule.h"
#include "weft/sim/timeline.h"

namespace weft::plan {

struct CompileOptions {
  std::string model = {};     // copied into ExecutionPlan::model
  std::string strategy = {};  // copied into ExecutionPlan::strategy; empty = the schedule's name
  int64_t iteration = 0;
  DType dtype = DType::kBf16;  // dtype of every boundary tensor (activations and gradients)
  // Hidden size per module index (graph.module_names order); 0 or missing = shapes are 1-D.
  std::vector<int64_t> hidden_size_by_module = {};
  bool batch_p2p = true;  // give runs of consecutive isend/irecv one batch group id
  // Per GPU; 0 = use timeline.capacity_bytes (0 there too = memory not checked).
  int64_t memory_capacity_bytes = 0;
  int replica = 0;       // the DP replica the plan is for (ExecutionPlan::replica)
  int num_replicas = 1;  // DP replicas of the iteration (ExecutionPlan::num_replicas)
  // Gradient bytes per GPU of each module on each rank, [group][module] (the cost model's
  // gradient bytes of the module's chunks on the group); exact bytes of the all_reduce_grads
  // actions. Empty = split each group's grad_sync_bytes (see above); a short row = 0 bytes.
  std::vector<std::vector<int64_t>> grad_sync_bytes_by_rank_module = {};

  // iteration >= 0, dtype one of DType, hidden_size_by_module, memory_capacity_bytes and
  // grad_sync_bytes_by_rank_module entries >= 0, 0 <= replica < num_replicas; else
  // InvalidArgument "options.<field> = <value>; <rule>". CompilePlan checks it first (and the
  // table's rows against the graph).
  Status Validate() const;
};

StatusOr<ExecutionPlan> CompilePlan(const graph::StageGraph& graph,
                                    const sched::Schedule& schedule,
                                    const sim::Timeline& timeline,
                                    const CompileOptions& options = {});

}  // namespace weft::plan
