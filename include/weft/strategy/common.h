#pragma once
// Pieces shared by the rule-based strategies: layer-chain placements and per-replica planning.
// Thread-safety: pure functions.
#include <functional>
#include <vector>

#include "weft/common/status.h"
#include "weft/sched/schedule.h"
#include "weft/sim/simulator.h"
#include "weft/sim/timeline.h"
#include "weft/planning/graph_builder.h"
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

}  // namespace weft::strategy
