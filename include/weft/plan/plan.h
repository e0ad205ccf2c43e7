#pragma once
// ExecutionPlan: the deployable form of one training iteration. For each pipeline rank (device
// group) an ordered list of actions that a worker executes one after the other: compute a stage
// (forward / backward / backward_input / backward_weight), post an asynchronous point-to-point
// send or receive (isend / irecv), block until one completes (wait_send / wait_recv), release
// a buffer (free), or all-reduce a module's gradients over the data-parallel replicas
// (all_reduce_grads). It follows the action sets of DynaPipe, PipeWeaver (Table 2) and DIP (§6.3).
// One plan is one DP replica's iteration (`replica` of `num_replicas`), or a world plan of every
// replica's ranks (Planner::CompileWorld). `data` (plan_data.h) carries what the actions compute
// on: the batch's samples and sequences, the microbatch table with each module's instances, and
// per rank its replica, group and chunks.
//
// Buffers are the tensors that cross stage boundaries (one per data edge of the stage graph):
// the producer's output, and on the consumer's rank the receive buffer. They are declared per
// rank with their shape, dtype, the stages at both ends and the samples/rows they carry; compute
// actions name the samples they process. Names are for humans only: a runtime reads structure.
// Activations stashed inside a stage for its backward are not buffers; compute actions carry
// their bytes (activation_alloc_bytes / activation_free_bytes) so memory can be checked. All
// byte counts are per GPU of the rank's device group.
//
// Thread-safety: plain value types, no shared state.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"
#include "weft/graph/stage_graph.h"
#include "weft/plan/plan_data.h"

namespace weft::plan {

// The schema identifier written to and required from JSON plans (docs/plan_schema.md).
inline constexpr std::string_view kPlanSchemaVersion = "weft.plan/v3";
// Earlier schemas, refused with a message that says how to regenerate the file (v2 had no data
// tables: a runtime got the batch and microbatches on the side).
inline constexpr std::string_view kPlanSchemaVersionV1 = "weft.plan/v1";
inline constexpr std::string_view kPlanSchemaVersionV2 = "weft.plan/v2";

using BufferId = int64_t;

enum class ActionKind : uint8_t {
  kForward,         // compute the forward pass of `stage`
  kBackward,        // compute the full backward (input + weight gradients) of `stage`
  kBackwardInput,   // compute the input gradient only (zero-bubble "B")
  kBackwardWeight,  // compute the weight gradient only (zero-bubble "W")
  kIsend,           // post an asynchronous send of `buffer` to `peer` (returns at once)
  kIrecv,           // post an asynchronous receive into `buffer` from `peer` (returns at once)
  kWaitSend,        // block until the isend of `buffer` completed; the buffer may then be freed
  kWaitRecv,        // block until the irecv into `buffer` completed; the buffer is then readable
  kFree,            // release `buffer` (its bytes leave the rank's live memory)
  kAllReduceGrads,  // all-reduce the rank's gradients of module `stage.module` (`bytes` per GPU)
                    // over `dp` data-parallel replicas (`ranks`); a no-op when dp = 1
};
// "forward", "backward", "backward_input", "backward_weight", "isend", "irecv", "wait_send",
// "wait_recv", "free", "all_reduce_grads" (the JSON "op" names).
std::string_view ActionKindName(ActionKind kind);
StatusOr<ActionKind> ParseActionKind(std::string_view name);
bool IsCompute(ActionKind kind);
bool IsP2pPost(ActionKind kind);  // kIsend or kIrecv
// kBackward or kBackwardWeight: the computes after which a module's gradients are complete.
bool IsWeightGradient(ActionKind kind);
// The compute action kind of a pass (kForward for Pass::kForward, ...), and back.
ActionKind ComputeKindOf(spec::Pass pass);
spec::Pass PassOf(ActionKind compute_kind);

enum class DType : uint8_t { kBf16, kFp32 };
std::string_view DTypeName(DType dtype);  // "bf16", "fp32"
StatusOr<DType> ParseDType(std::string_view name);
int64_t DTypeBytes(DType dtype);  // 2, 4

struct TensorSpec {
  std::vector<int64_t> shape;  // e.g. {tokens, hidden}; {} is a scalar, {0} is empty
  DType dtype = DType::kBf16;

  int64_t NumElements() const;  // saturates at INT64_MAX instead of overflowing
  int64_t Bytes() const;        // NumElements() * DTypeBytes(dtype), saturating
  // "[4096,4096] bf16"
  std::string ToString() const;
  friend bool operator==(const TensorSpec&, const TensorSpec&) = default;
};

// The stage an action belongs to. For compute actions the stage computed; for isend the local
// stage that produced the data; for irecv / wait_recv the local stage that consumes it; for
// wait_send / free the stage that produced (or consumed) the buffer; for all_reduce_grads only
// `module` is meaningful (the rest stays at its defaults).
struct StageRef {
  int module = 0;          // index into ExecutionPlan::module_names
  int chunk = 0;           // local chunk index on the rank (0 = earliest in the model)
  int microbatch = 0;
  int sub_microbatch = 0;  // 0 if the strategy has no sub-microbatches
  spec::Pass pass = spec::Pass::kForward;  // for compute actions it equals the action's pass
  friend bool operator==(const StageRef&, const StageRef&) = default;
};

struct Action {
  ActionKind kind = ActionKind::kForward;
  StageRef stage;
  // Compute actions only.
  std::vector<BufferId> inputs;   // buffers read; must be ready (produced here or waited for)
  std::vector<BufferId> outputs;  // buffers written; allocated by this action
  spec::Recompute recompute = spec::Recompute::kNone;
  std::array<int16_t, 4> recompute_layers{};  // per-layer mix (graph::Stage); all 0 = uniform
  int64_t activation_alloc_bytes = 0;  // stashed activation bytes allocated by this stage
  int64_t activation_free_bytes = 0;   // stashed activation bytes released by this stage
  double latency_s = 0;                // expected compute time (from the timeline); informative
  // The data assignment: sample ids (indices into the iteration's spec::Batch::samples,
  // strictly ascending; empty = unknown) and the module's workload instances
  // [instance_begin, instance_end) of this (sub-)microbatch (graph::Stage).
  std::vector<int32_t> samples;
  int32_t instance_begin = 0;
  int32_t instance_end = 0;
  // P2P, wait and free actions.
  BufferId buffer = -1;
  int peer = -1;   // isend / irecv / wait_send / wait_recv: the other rank
  int group = -1;  // isend / irecv: consecutive posts with the same id are issued as one batch
                   // (batch_isend_irecv); -1 = not batched
  // all_reduce_grads only (the module is stage.module).
  int64_t bytes = 0;  // gradient bytes per GPU of the module on this rank
  int dp = 0;         // data-parallel replicas reduced over (>= 1)
  // The ranks of this plan that reduce the module's gradients together (ascending, this rank
  // included, size dp): a collective every one of them must join. Empty in a one-replica plan
  // of a folded iteration (the other dp − 1 members are this rank in the other replicas' plans).
  std::vector<int> ranks;
  friend bool operator==(const Action&, const Action&) = default;
};

// One end of a buffer: the stage that produces or consumes it, and the rank it runs on.
struct BufferEnd {
  int rank = -1;  // pipeline rank (index into ExecutionPlan::ranks)
  StageRef stage = {};
  friend bool operator==(const BufferEnd&, const BufferEnd&) = default;
};

struct Buffer {
  BufferId id = 0;
  TensorSpec tensor;
  std::string name = {};  // optional, e.g. "g0 F mb3.0 c0 llm -> g1 F mb3.0 c0 llm"; for humans
  BufferEnd producer = {};  // the stage whose output it is
  BufferEnd consumer = {};  // the stage that reads it
  std::vector<int32_t> samples = {};  // samples whose tokens it carries (ascending); empty = unknown
  int64_t rows = -1;             // token rows of the producer's output it carries; -1 = unknown
  friend bool operator==(const Buffer&, const Buffer&) = default;
};

// One pipeline rank = one device group (its TP×CP GPUs act together, replicated DP times).
struct RankPlan {
  std::string label;                  // e.g. "pp0"
  int64_t memory_capacity_bytes = 0;  // per GPU; 0 = unknown (memory is not checked)
  int64_t static_bytes = 0;           // per GPU: parameters, gradients, optimizer state
  std::vector<Buffer> buffers;        // every buffer the actions name, each id once
  std::vector<Action> actions;        // executed in order
  friend bool operator==(const RankPlan&, const RankPlan&) = default;
};

struct ExecutionPlan {
  std::string version = std::string(kPlanSchemaVersion);
  std::string model;     // model name, e.g. "vlm-s"
  std::string strategy;  // e.g. "1f1b"
  int64_t iteration = 0;
  int replica = 0;       // the data-parallel replica this plan is for
  int num_replicas = 1;  // data-parallel replicas of the iteration
  std::vector<std::string> module_names;  // every action's module indexes it
  std::vector<RankPlan> ranks;  // index = rank
  // The data tables (plan_data.h); empty for a plan compiled from a bare stage graph.
  PlanData data;

  int num_ranks() const { return static_cast<int>(ranks.size()); }
  // The buffer `id` on `rank`, or nullptr.
  const Buffer* FindBuffer(int rank, BufferId id) const;
  friend bool operator==(const ExecutionPlan&, const ExecutionPlan&) = default;
};

// "forward m0 c1 mb3", "forward m0 c1 mb3.2" (with a sub-microbatch), "isend buf 4 to rank 1",
// "irecv buf 7 from rank 0", "wait_send buf 4 to rank 1", "free buf 4", "all_reduce_grads m0".
std::string DescribeAction(const Action& action);
// "rank 2 action 17 (wait_recv buf 41 from rank 1)": the prefix of every plan error.
std::string ActionLocation(const ExecutionPlan& plan, int rank, int index);
// "rank 1 forward m0 c0 mb3" / "rank 1 backward m2 c0 mb3.1": a buffer end in messages.
std::string DescribeBufferEnd(const BufferEnd& end);

// Counts for reports.
struct PlanStats {
  int num_actions = 0;
  int num_compute = 0;
  int num_transfers = 0;  // isend actions
  int64_t p2p_bytes = 0;  // bytes of all isend buffers
  int num_buffers = 0;
};
PlanStats ComputePlanStats(const ExecutionPlan& plan);

}  // namespace weft::plan
