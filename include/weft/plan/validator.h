#pragma once
// PlanValidator: proves that an ExecutionPlan can run.
//  1. Structure: peers and buffers exist, compute kinds match their stage pass, batch groups are
//     contiguous runs of isend/irecv.
//     Data tables (plan_data.h), when the plan has them: one entry per rank; sequence, sample and
//     microbatch ids in range; microbatches sorted by (replica, microbatch), numbered without
//     gaps, one instance list per module whose samples belong to the microbatch; every compute
//     action's (replica, mb) in the table, its instances within the module's list, its samples
//     in the microbatch and its (module, chunk) among the rank's chunks, its per-layer recompute
//     mix covering the chunk's layers; every transfer, wait and free's (replica, mb) in the table
//     and its (module, chunk) among the rank's chunks.
//     Stages, per rank: every stage runs exactly once and whole (per module, chunk, microbatch and
//     sub-microbatch at most one forward, one backward or backward_input, one backward_weight; a
//     backward after its forward, a backward_weight after its backward_input; per (module, chunk)
//     every forward has its backward or none does, every backward_input its backward_weight or
//     none does: a frozen chunk); a buffer whose consumer (producer) is a stage of the rank is
//     among that compute's inputs (outputs); a transfer, wait or free names its buffer's end on
//     the rank; a buffer with rows > 0 has a non-empty shape.
//  2. Matching: per ordered rank pair (a → b), the k-th isend on a to b and the k-th irecv on b
//     from a carry buffers of equal shape and dtype, and the counts are equal (NCCL semantics).
//  3. Data flow, per rank in order: a compute action reads only buffers that are ready (produced
//     by an earlier local compute, or received and waited for), never a freed buffer; irecv
//     fills a fresh buffer; wait_send / wait_recv follow their isend / irecv; a buffer is not
//     freed while a send from it is in flight; at the end nothing is left in flight and (by
//     default) every buffer is freed.
//  4. Progress: the actions are replayed with the blocking semantics of the waits (isend and
//     irecv return at once; wait_send blocks until the receiver has posted the matching irecv,
//     wait_recv until the sender has posted the matching isend; compute never blocks). If some
//     ranks can no longer move, the plan deadlocks and the stuck ranks are reported with the
//     action each is blocked on.
//  5. Memory: static_bytes + live stashed activations + live buffers stays <= capacity after
//     every action (ranks with memory_capacity_bytes = 0 are not checked).
// Errors stop at the first problem and name rank, action index and reason, e.g.
//   "rank 2 action 17 (irecv buf 41 from rank 1): never sent (rank 1 posts 3 isends to rank 2;
//    this is receive #4)".
// Thread-safety: pure function.
#include <cstdint>
#include <string>
#include <vector>

#include "weft/common/status.h"
#include "weft/plan/plan.h"

namespace weft::plan {

struct ValidateOptions {
  bool check_memory = true;        // check step 5 (ranks with capacity 0 are skipped anyway)
  bool require_all_freed = true;   // a buffer still live at the end of a rank is an error
};

struct RankValidation {
  int num_actions = 0;
  int num_compute = 0;
  int num_isend = 0;
  int num_irecv = 0;
  int64_t peak_bytes = 0;       // static + activations + buffers, max over the actions
  int peak_action = -1;         // index of the action after which the peak is reached
  int64_t peak_buffer_bytes = 0;
};

struct ValidationReport {
  std::vector<RankValidation> ranks;
  int num_transfers = 0;
  int64_t p2p_bytes = 0;
  int replay_rounds = 0;  // rounds of the progress replay until every rank finished
  // "valid plan: 4 ranks, 412 actions (128 compute, 96 transfers, 1.5 GB), peak memory 61.2 GB
  // (rank 0)"
  std::string BriefReport() const;
};

// OK with a report, or InvalidArgument (structure, matching, data flow, deadlock) /
// ResourceExhausted (memory) naming the first problem.
StatusOr<ValidationReport> ValidatePlan(const ExecutionPlan& plan,
                                        const ValidateOptions& options = {});

}  // namespace weft::plan
