// Megatron-LM baselines: uniform-by-parameters split of the whole module chain, rule schedules.
#include <string>

#include "weft/strategy/baselines.h"
#include "weft/strategy/common.h"

namespace weft::strategy {
namespace {

class MegatronStrategy final : public Strategy {
 public:
  MegatronStrategy(std::string name, sched::ScheduleKind kind, int virtual_chunks)
      : name_(std::move(name)), kind_(kind), v_(virtual_chunks) {
    description_ = std::string("Megatron-LM: encoder+LLM chain split over P") +
                   (v_ > 1 ? "·" + std::to_string(v_) : "") +
                   " stages balanced by parameters, " +
                   std::string(sched::ScheduleKindName(kind_)) + " schedule";
  }
  std::string_view Name() const override { return name_; }
  std::string_view Description() const override { return description_; }

  StatusOr<StaticPlan> Prepare(const Job& job) const override {
    WEFT_RETURN_IF_ERROR(job.Validate());
    const int p = job.PipelineSize();
    WEFT_ASSIGN_OR_RETURN(Placement placement,
                          ChainPlacement(job, job.model.TopologicalOrder(), p * v_,
                                         UnitWeight::kParameters));
    StaticPlan plan = MakeStaticPlan(std::move(placement), description_, job.model);
    plan.split_backward = kind_ == sched::ScheduleKind::kZeroBubbleH1;
    plan.keep_empty_stages = true;  // Megatron's pipeline passes every microbatch through every stage
    return plan;
  }

  StatusOr<IterationPlan> PlanIteration(const Job& job, const StaticPlan& plan,
                                        const IterationInput& input) const override {
    const auto kind = kind_;
    return PlanReplicas(job, plan, input, [kind](const graph::StageGraph& g) {
      return sched::MakeSchedule(kind, g);
    });
  }

 private:
  std::string name_;
  std::string description_;
  sched::ScheduleKind kind_;
  int v_;
};

}  // namespace

std::unique_ptr<Strategy> MakeMegatronStrategy(std::string name, sched::ScheduleKind kind,
                                               int virtual_chunks) {
  return std::make_unique<MegatronStrategy>(std::move(name), kind, virtual_chunks);
}

}  // namespace weft::strategy
