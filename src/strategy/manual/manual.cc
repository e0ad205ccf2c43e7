#include "weft/strategy/manual/manual.h"

#include <fmt/format.h>

#include "weft/planning/iteration.h"
#include "weft/strategy/common.h"

namespace weft::strategy::manual {

using planning::BuildPlacement;
using planning::PlacementSpec;

namespace {

class ManualStrategy : public Strategy {
 public:
  explicit ManualStrategy(PlacementSpec spec) : spec_(std::move(spec)) {}
  std::string_view Name() const override { return "manual"; }
  std::string_view Description() const override {
    return "a user placement (--placement): per-module TP/CP/DP/PP on the given GPUs, one "
           "static schedule rule";
  }

  StatusOr<StaticPlan> Prepare(const Job& job) const override {
    WEFT_ASSIGN_OR_RETURN(Placement placement,
                          BuildPlacement(spec_, job.model, job.cluster, *job.cost_model));
    StaticPlan plan = MakeStaticPlan(
        std::move(placement),
        fmt::format("manual ({}, {})", spec_.source, sched::ScheduleKindName(spec_.schedule)),
        job.model);
    plan.split_backward = spec_.schedule == sched::ScheduleKind::kZeroBubbleH1;
    plan.num_microbatches = spec_.num_microbatches;
    return plan;
  }

  StatusOr<IterationPlan> PlanIteration(const Job& job, const StaticPlan& plan,
                                        const IterationInput& input) const override {
    const sched::ScheduleKind kind = spec_.schedule;
    return PlanReplicas(job, plan, input,
                        [kind](const graph::StageGraph& g) { return sched::MakeSchedule(kind, g); });
  }

 private:
  PlacementSpec spec_;
};

}  // namespace

std::unique_ptr<Strategy> MakeManualStrategy(PlacementSpec spec) {
  return std::make_unique<ManualStrategy>(std::move(spec));
}

}  // namespace weft::strategy::manual
