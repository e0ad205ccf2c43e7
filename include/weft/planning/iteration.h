#pragma once
// Planning one iteration on a static plan: every DP replica's stage graph built from its data
// assignment and ordered by a schedule rule or search (PlanReplicas), and the simulation of every
// replica (EvaluateIteration). What every strategy's PlanIteration is made of.
// Thread-safety: pure functions.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"
#include "weft/planning/graph_builder.h"
#include "weft/planning/strategy.h"
#include "weft/sched/schedule.h"
#include "weft/sim/simulator.h"
#include "weft/sim/timeline.h"

namespace weft::planning {

using ScheduleFn = std::function<StatusOr<sched::Schedule>(const graph::StageGraph&)>;
// Same with the index of the replica whose graph it orders.
using ReplicaScheduleFn =
    std::function<StatusOr<sched::Schedule>(int replica, const graph::StageGraph&)>;

// DP replicas of the anchor module (the first LLM) that an assignment of this static plan has:
// the placement's replicas when unfolded, else the job's DP.
int AnchorReplicas(const Job& job, const StaticPlan& plan);

// The default assignment of `batch` under this static plan (Strategy::Assign's default):
// DefaultAssignment over AnchorReplicas and the static plan's (else the job's) microbatches.
// Strategies that profile candidates on a representative batch at Prepare time use it too.
StatusOr<Assignment> DefaultAssignmentFor(const Job& job, const StaticPlan& plan,
                                          const spec::Batch& batch);

// Builds one graph per replica of the input's assignment (its microbatches; unfolded placements:
// one graph for the whole iteration, the anchor replicas' microbatches interleaved) with the
// static plan's options and orders it with `schedule`.
StatusOr<IterationPlan> PlanReplicas(const Job& job, const StaticPlan& plan,
                                     const IterationInput& input, const ScheduleFn& schedule);
// Same, replicas built and ordered on up to `threads` threads (common/parallel.h: the plan does
// not depend on the thread count; `schedule` runs concurrently for different replicas).
StatusOr<IterationPlan> PlanReplicas(const Job& job, const StaticPlan& plan,
                                     const IterationInput& input,
                                     const ReplicaScheduleFn& schedule, int threads);
// Same, each replica graph built once per recompute assignment (BuildStageGraphVariants: the
// workloads and chunk costs derived once): variants[0] with the static plan's recompute (the
// graph `schedule` orders and the replica keeps), variants[v] with extra_recompute[v - 1].
// `schedule` may move the extra variants out, and may replace variants[0] by the graph its
// returned schedule orders (the replica keeps variants[0]).
using ReplicaVariantsScheduleFn = std::function<StatusOr<sched::Schedule>(
    int replica, std::vector<graph::StageGraph>& variants)>;
StatusOr<IterationPlan> PlanReplicaVariants(
    const Job& job,
    const StaticPlan& plan,
    const IterationInput& input,
    const std::vector<std::vector<spec::Recompute>>& extra_recompute,
    const ReplicaVariantsScheduleFn& schedule,
    int threads);

// Simulates every replica of an iteration plan. The iteration time is the slowest replica's.
struct IterationEvaluation {
  std::vector<sim::Timeline> timelines;  // per replica
  int slowest_replica = 0;
  double iteration_time_s = 0;
  double lower_bound_s = 0;       // max over replicas
  double bubble_ratio = 0;        // of the slowest replica
  double mfu = 0;                 // all replicas' model FLOPs over gpus_charged
  double samples_per_s = 0;
  double tokens_per_s = 0;
  int64_t peak_memory_bytes = 0;  // max over replicas and groups
  bool oom = false;
  int gpus_used = 0;     // GPUs of the placement's groups (all replicas)
  int gpus_idle = 0;     // GPUs of the cluster no module uses
  int gpus_charged = 0;  // MFU's denominator: used + idle unless Job::charge_idle_gpus is false
};
StatusOr<IterationEvaluation> EvaluateIteration(const Job& job, const IterationPlan& plan,
                                                const sim::SimOptions& options = {});

// A planned iteration with its simulation and the uniform recomputation the memory policy
// chose (kNone when the strategy or the static plan chose; see planning::Planner).
// How a planned iteration came to be: typed, so that callers branch on an enum, never on
// prose. Set by the Planner (kPlanned / kFallback with kRequested / kOutOfMemory) and refined by
// PlannerService (why it served the fallback).
enum class PlanOutcomeKind : uint8_t {
  kPlanned,      // the strategy's plan (its search or its rule); it fits GPU memory
  kFallback,     // the safe rule plan (Planner::Fallback); it fits GPU memory
  kOutOfMemory,  // the plan kept does not fit GPU memory (evaluation.peak_memory_bytes): no
                 // plan the memory policy tried fits; `fallback` says whether it is a fallback
};
// Why a fallback plan was made or served.
enum class FallbackReason : uint8_t {
  kNone,          // not a fallback
  kRequested,     // the caller asked for it (Planner::Fallback)
  kNotStarted,    // PlannerService: the search had not started by the deadline
  kStillRunning,  // PlannerService: the search was running at the deadline (it is cancelled)
  kSearchFailed,  // PlannerService: the search returned an error
};
std::string_view PlanOutcomeKindName(
    PlanOutcomeKind kind);  // "planned", "fallback", "out_of_memory"
std::string_view FallbackReasonName(FallbackReason reason);  // "none", "requested", "not_started",
                                                             // "still_running", "search_failed"
struct PlanOutcome {
  PlanOutcomeKind kind = PlanOutcomeKind::kPlanned;
  FallbackReason fallback = FallbackReason::kNone;
  // One sentence for people (PlannerService: why this plan was served, its budget and timing);
  // empty when there is nothing to add to the kind.
  std::string detail;
  bool is_fallback() const { return fallback != FallbackReason::kNone; }
  bool fits_memory() const { return kind != PlanOutcomeKind::kOutOfMemory; }
};
// kOutOfMemory when `oom`, else kFallback when `fallback` != kNone, else kPlanned.
PlanOutcome MakePlanOutcome(bool oom, FallbackReason fallback, std::string detail = {});

struct PlannedIteration {
  IterationPlan plan;
  IterationEvaluation evaluation;
  spec::Recompute recompute_used = spec::Recompute::kNone;
  PlanOutcome outcome = {};
};

}  // namespace weft::planning
