#pragma once
// The systems (strategy/<system>/) and their registry. A system implements the planning floor's
// `planning::Strategy` interface (planning/strategy.h); the floor's types are visible here by
// their short names, so a system's code reads `Job`, `StaticPlan`, `PlanReplicas`.
//
//   auto strategy = strategy::MakeStrategy("megatron-1f1b");
//   auto planner = strategy::MakePlanner({.model = "vlm-s"}, "dip");  // strategy/compare.h
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"
#include "weft/planning/graph_builder.h"
#include "weft/planning/iteration.h"
#include "weft/planning/job_setup.h"
#include "weft/planning/strategy.h"

namespace weft::strategy {

using planning::BatchSplit;
using planning::BuildStageGraph;
using planning::BuildStageGraphVariants;
using planning::ChainUnits;
using planning::AnchorReplicas;
using planning::Assignment;
using planning::Chunk;
using planning::ChunksFromPartition;
using planning::DefaultAssignment;
using planning::DefaultAssignmentFor;
using planning::DescribeBudget;
using planning::EvaluateIteration;
using planning::FillGroupStateBytes;
using planning::GraphBuildOptions;
using planning::IterationEvaluation;
using planning::IterationInput;
using planning::IterationPlan;
using planning::Job;
using planning::JobOptions;
using planning::JobSetup;
using planning::LayerUnit;
using planning::MakeIterationBatches;
using planning::MakeJobSetup;
using planning::MakePipelineGroups;
using planning::Microbatches;
using planning::NumSequences;
using planning::Placement;
using planning::PlanBudget;
using planning::PlanState;
using planning::PlannedIteration;
using planning::PlanReplicas;
using planning::PlanReplicaVariants;
using planning::ReplicaPlan;
using planning::ReplicaScheduleFn;
using planning::ReplicaVariantsScheduleFn;
using planning::ScheduleFn;
using planning::SplitBatch;
using planning::StaticPlan;
using planning::Strategy;
using planning::StrategyTraits;

// Names of all strategies, in the order `weft compare` lists them.
std::vector<std::string> StrategyNames();
// NotFound naming the known strategies for an unknown name.
StatusOr<std::unique_ptr<Strategy>> MakeStrategy(std::string_view name);

}  // namespace weft::strategy
