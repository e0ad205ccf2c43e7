#pragma once
// Tests: plan one batch through a Planner over a caller-owned setup and static plan (the memory
// policy every front end applies).
#include <memory>

#include "weft/planning/planner.h"
#include "weft/strategy/compare.h"

namespace weft::strategy {

inline StatusOr<PlannedIteration> PlanThroughPlanner(const Strategy& strategy,
                                                     const JobSetup& setup,
                                                     const StaticPlan& fixed,
                                                     const spec::Batch& batch,
                                                     const PlanBudget& budget) {
  WEFT_ASSIGN_OR_RETURN(auto made, MakeStrategy(strategy.Name()));
  // Non-owning: the caller's setup outlives the planner.
  std::shared_ptr<const JobSetup> alias(std::shared_ptr<void>(), &setup);
  WEFT_ASSIGN_OR_RETURN(auto planner,
                        Planner::Create(alias, std::move(made), fixed, {.budget = budget}));
  return planner->Plan(batch);
}

}  // namespace weft::strategy
