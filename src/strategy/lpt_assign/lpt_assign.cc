#include "weft/strategy/lpt_assign/lpt_assign.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "weft/data/workload.h"
#include "weft/strategy/baselines.h"

namespace weft::strategy::lpt_assign {

StatusOr<Assignment> LptAssignment(const std::vector<int64_t>& loads, int dp, int m) {
  const int n = static_cast<int>(loads.size());
  if (dp <= 0 || m <= 0) return InvalidArgumentError("lpt: dp and microbatches must be > 0");
  if (n < dp) {
    return FailedPreconditionError("lpt: " + std::to_string(n) +
                                   " sequences; needs at least dp = " + std::to_string(dp));
  }
  Assignment out;
  out.policy = "lpt-llm-tokens";
  const int used = std::min(m, n / dp);
  if (used < m) {
    out.notes = "asked " + std::to_string(m) + " microbatches, used " + std::to_string(used) +
                " (" + std::to_string(n) + " sequences over " + std::to_string(dp) + " replicas)";
  }
  const int buckets = dp * used;
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return loads[a] > loads[b]; });
  std::vector<int64_t> load(buckets, 0);
  std::vector<std::vector<int>> members(buckets);
  for (int s : order) {
    // The least loaded bucket; an empty one first, so every microbatch gets a sequence.
    int best = 0;
    for (int k = 1; k < buckets; ++k) {
      const bool empty_k = members[k].empty(), empty_best = members[best].empty();
      if (empty_k != empty_best ? empty_k : load[k] < load[best]) best = k;
    }
    load[best] += loads[s];
    members[best].push_back(s);
  }
  out.replicas.assign(dp, {});
  for (int k = 0; k < buckets; ++k) {
    std::sort(members[k].begin(), members[k].end());
    out.replicas[k % dp].push_back(std::move(members[k]));
  }
  return out;
}

namespace {

class LptAssignStrategy final : public Strategy {
 public:
  LptAssignStrategy()
      : inner_(MakeMegatronStrategy("megatron-1f1b", sched::ScheduleKind::kOneFOneB, 1)) {}
  std::string_view Name() const override { return "megatron-1f1b-lpt"; }
  std::string_view Description() const override {
    return "megatron-1f1b with microbatches balanced by LLM tokens (LPT over DP x microbatch "
           "buckets): the assignment seam's example";
  }
  StatusOr<StaticPlan> Prepare(const Job& job) const override { return inner_->Prepare(job); }

  StatusOr<Assignment> Assign(const Job& job, const StaticPlan& plan, const spec::Batch& batch,
                              const PlanState&) const override {
    const int llm = data::FirstLlmModule(job.model);
    std::vector<int64_t> loads(NumSequences(batch), 1);
    for (int s = 0; llm >= 0 && s < static_cast<int>(loads.size()); ++s) {
      const int one[] = {s};
      WEFT_ASSIGN_OR_RETURN(auto w,
                            data::DeriveModuleWorkload(job.model, llm, batch, one, job.workload));
      loads[s] = w.TotalTokens();
    }
    return LptAssignment(loads, AnchorReplicas(job, plan),
                         plan.num_microbatches > 0 ? plan.num_microbatches
                                                   : job.parallel.num_microbatches);
  }

  StatusOr<IterationPlan> PlanIteration(const Job& job, const StaticPlan& plan,
                                        const IterationInput& input) const override {
    return inner_->PlanIteration(job, plan, input);
  }

 private:
  std::unique_ptr<Strategy> inner_;
};

}  // namespace

std::unique_ptr<Strategy> MakeLptAssignStrategy() { return std::make_unique<LptAssignStrategy>(); }

}  // namespace weft::strategy::lpt_assign
