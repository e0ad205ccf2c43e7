#pragma once
// FlowTrain (../shared/papers/flowtrain.txt) and its baseline DistTrain on the planning floor
// (docs/strategies_flowtrain.md). The model's frozen encoders (producers) run on device groups
// of their own with their own TP × DP; the LLM backbone (consumer) with its own TP × PP × DP,
// the trainable glue (projector) on the backbone's first stage. Once per job `Prepare` picks the
// split (the heterogeneous parallel allocator, strategy/flowtrain/allocator.h); per global batch
// `Assign` packs the post-encoding sequences into microbatches and dispatches them over the
// backbone's DP replicas (strategy/flowtrain/packer.h); `PlanIteration` orders every group 1F1B.
// With the pool (FlowTrain §3.2) the static plan carries a planning::PoolSpec and is evaluated
// over a window of iterations (planning/window.h): encoders stream their embeddings into the
// bounded pool and run ahead; the backbone's updates stay synchronous per global batch.
//
// Variants (registered names):
//   flowtrain               allocator + pool + packing scheduler
//   flowtrain-no-pool       allocator + packing scheduler, batch-synchronized (Table 1 "w/o Pool")
//   flowtrain-no-allocator  GPUs split by parameter share, pool, packing scheduler
//   flowtrain-no-scheduler  allocator + pool, first-fit packing with round-robin dispatch
//   disttrain               DistTrain: disaggregated groups sized to balance the slowest stage,
//                           batch-synchronized (every iteration ends with a global barrier),
//                           the default assignment
//
// Thread-safety: immutable; Prepare / Assign / PlanIteration are const.
#include <memory>
#include <string>
#include <vector>

#include "weft/planning/placement_file.h"
#include "weft/planning/strategy.h"

namespace weft::strategy::flowtrain {

enum class Variant { kFlowTrain, kNoPool, kNoAllocator, kNoScheduler, kDistTrain };

// The modules FlowTrain decouples: producers = frozen encoders with no trainable module upstream,
// backbone = the (one) LLM, glue = every other module (placed on the backbone's first stage).
struct Roles {
  std::vector<int> producers;
  int backbone = -1;
  std::vector<int> glue;
};
// FailedPrecondition naming the model when it has no frozen encoder or not exactly one LLM.
StatusOr<Roles> FindRoles(const spec::ModelSpec& model);

// One module's parallel layout in a split.
struct ModuleLayout {
  int module = -1;
  int tp = 1, pp = 1, dp = 1;
  int Gpus() const { return tp * pp * dp; }
};

// The per-module placement of a split: producers first (in model order) from GPU 0, then the
// backbone; each module's layers split evenly over its stages; glue `on` the backbone.
StatusOr<planning::PlacementSpec> PlacementOfLayouts(const spec::ModelSpec& model,
                                                     const Roles& roles,
                                                     const std::vector<ModuleLayout>& layouts);

// The pool of a placement (FlowTrain §3.2: HBM and DRAM of the producers' processes): per
// producer GPU half of what its HBM has left after the encoder's state (the other half for its
// activations), plus half of its host memory share (the other half for the data loader and
// pinned staging). An assumption — the paper sizes the pool per deployment — said in the
// description.
planning::PoolSpec PoolOf(const planning::Job& job,
                          const planning::Placement& placement,
                          const Roles& roles);

std::unique_ptr<planning::Strategy> MakeFlowTrainStrategy(Variant variant);

}  // namespace weft::strategy::flowtrain
