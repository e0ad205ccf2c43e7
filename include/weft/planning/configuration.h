#pragma once
// The parallel configuration a strategy ran, for reports: per module TP / CP / pipeline stages /
// DP, the layers of each stage, interleaved chunks, recomputation, and the microbatches per
// replica (report::StrategyConfiguration), derived from the static plan and what the planned
// iterations actually used.
//
//   ConfigurationUsage usage;
//   for (...) usage.Add(planned.plan);                 // every planned iteration
//   result.configuration = DescribeConfiguration(job, static_plan, &usage);
//
// Thread-safety: pure functions; ConfigurationUsage is a value type.
#include <vector>

#include "weft/planning/strategy.h"
#include "weft/report/comparison.h"

namespace weft::planning {

// What planned iterations used, accumulated over iterations.
struct ConfigurationUsage {
  // Per model module: bit (1 << spec::Recompute) for each level some stage (or, with per-layer
  // options, some layer) of the module used.
  std::vector<unsigned> recompute_levels;
  // Microbatches per backbone DP replica (the plan's assignment), fewest and most seen; 0 = none.
  int microbatches_min = 0;
  int microbatches_max = 0;

  // Adds the stages and the assignment of one planned iteration.
  void Add(const IterationPlan& plan);
};

// The configuration of `plan` for `job`. Modules in model order; per module: tp and cp from
// placement.parallel, pp = device groups replica 0's chunks lie on, dp = the groups' folded DP
// (unfolded placements: the module's replicas), layers per chunk in layer order, the most chunks
// of the module on one group (> 1: interleaved), copies (a replicated module: one full copy per
// group, pp 1).
// Recompute and microbatches come from `usage` when it saw them, else from the static plan
// (recompute per module, "none" when it sets none) and its (else the job's) microbatch count.
report::StrategyConfiguration DescribeConfiguration(const Job& job,
                                                    const StaticPlan& plan,
                                                    const ConfigurationUsage* usage = nullptr);

// Layers of `module` on each device group of the placement (replica 0), in group order; 0 where
// the module has none (Megatron's first / last pipeline-stage layer counts read it).
std::vector<int> ModuleLayersPerGroup(const Placement& placement, int module);

}  // namespace weft::planning
