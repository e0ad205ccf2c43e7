#pragma once
// Pieces shared by the rule-based strategies: layer-chain placements and per-replica planning.
// Thread-safety: pure functions.
#include <functional>
#include <vector>

#include "weft/common/status.h"
#include "weft/sched/schedule.h"
#include "weft/sim/simulator.h"
#include "weft/sim/timeline.h"
#include "weft/strategy/graph_builder.h"
#include "weft/strategy/strategy.h"

namespace weft::strategy {

// Weight of a layer unit for partitioning.
enum class UnitWeight {
  kParameters,      // Megatron users: balance parameter counts
  kForwardLatency,  // Cornstarch's colocated baseline: forward time (backward assumed 2×)
  kStepLatency,     // fwd + bwd latency under the frozen-status rule (nnScaler, Cornstarch)
};

// Per-unit weights of `units` for a representative microbatch shape of each module (the mean
// microbatch of `job.profile_batches`; parameters need no data).
StatusOr<std::vector<double>> UnitWeights(const Job& job, const std::vector<LayerUnit>& units,
                                          UnitWeight weight);

// Partitions the chain of `modules` (topological order) into `parts` contiguous parts by
// min–max of the weights and maps part k to group k % P, slot k / P.
StatusOr<Placement> ChainPlacement(const Job& job, const std::vector<int>& modules, int parts,
                                   UnitWeight weight);

// A static plan with `placement`, described as "<description>: <placement>".
StaticPlan MakeStaticPlan(Placement placement, std::string_view description,
                          const spec::ModelSpec& model);

// Parallel sizes per module from the job (defaults where the job has none).
std::vector<spec::ModuleParallel> ModuleParallels(const Job& job);

using ScheduleFn = std::function<StatusOr<sched::Schedule>(const graph::StageGraph&)>;
// Same with the index of the replica whose graph it orders.
using ReplicaScheduleFn =
    std::function<StatusOr<sched::Schedule>(int replica, const graph::StageGraph&)>;

// Splits the batch over DP replicas and microbatches, builds one graph per replica with the
// static plan's options and orders it with `schedule`.
StatusOr<IterationPlan> PlanReplicas(const Job& job, const StaticPlan& plan,
                                     const spec::Batch& batch, const ScheduleFn& schedule);
// Same, replicas built and ordered on up to `threads` threads (common/parallel.h: the plan does
// not depend on the thread count; `schedule` runs concurrently for different replicas).
StatusOr<IterationPlan> PlanReplicas(const Job& job, const StaticPlan& plan,
                                     const spec::Batch& batch, const ReplicaScheduleFn& schedule,
                                     int threads);
// Same, each replica graph built once per recompute assignment (BuildStageGraphVariants: the
// workloads and chunk costs derived once): variants[0] with the static plan's recompute (the
// graph `schedule` orders and the replica keeps), variants[v] with extra_recompute[v - 1].
// `schedule` may move the extra variants out, and may replace variants[0] by the graph its
// returned schedule orders (the replica keeps variants[0]).
using ReplicaVariantsScheduleFn = std::function<StatusOr<sched::Schedule>(
    int replica, std::vector<graph::StageGraph>& variants)>;
StatusOr<IterationPlan> PlanReplicaVariants(
    const Job& job, const StaticPlan& plan, const spec::Batch& batch,
    const std::vector<std::vector<cost::Recompute>>& extra_recompute,
    const ReplicaVariantsScheduleFn& schedule, int threads);

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
// chose (kNone when the strategy or the static plan chose; see strategy::Planner).
struct PlannedIteration {
  IterationPlan plan;
  IterationEvaluation evaluation;
  cost::Recompute recompute_used = cost::Recompute::kNone;
  // The batch planned (Planner::Plan / Fallback): Compile ships its samples, sequences and the
  // microbatches' instances in the plan's data tables (plan::PlanData).
  spec::Batch batch;
};

}  // namespace weft::strategy
