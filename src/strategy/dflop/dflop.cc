#include "weft/strategy/dflop/dflop.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "weft/planning/iteration.h"
#include "weft/sched/generators.h"
#include "weft/strategy/common.h"

namespace weft::strategy::dflop {
namespace {

StatusOr<cost::ThroughputTable> TablesOf(const Job& job) {
  return cost::ThroughputTable::Analytical(job.model, *job.cost_model);
}

// The scheduler's balancing options: deterministic (a node limit bounds the MILP; the time limit
// is only a safety net far above it).
algo::BucketBalanceOptions BalanceOptions(int buckets) {
  algo::BucketBalanceOptions o;
  o.num_buckets = buckets;
  o.milp_time_limit_s = 10;
  o.milp_max_nodes = 200;
  return o;
}

// Balances `durations` over `buckets` with the scheduler `kind` (not kRandom); `result`, if
// given, receives the balancer's result.
StatusOr<std::vector<int>> BalanceWith(SchedulerKind kind,
                                       const std::vector<algo::TwoResourceItem>& durations,
                                       int buckets, algo::BucketBalanceResult* result) {
  const algo::BucketBalanceOptions options = BalanceOptions(buckets);
  auto r = kind == SchedulerKind::kPaper ? algo::TwoResourceLpt(durations, options)
                                         : algo::BalanceBuckets(durations, options);
  WEFT_RETURN_IF_ERROR(r.status());
  if (result) *result = *r;
  return r->bucket_of_item;
}

}  // namespace

StatusOr<Config> ConfigOfPlan(const Job& job, const planning::StaticPlan& plan) {
  WEFT_ASSIGN_OR_RETURN(Roles roles, FindRoles(job.model));
  const auto& parallel = plan.placement.parallel;
  if (static_cast<int>(parallel.size()) <= std::max(roles.encoder, roles.llm)) {
    return FailedPreconditionError("dflop: the static plan has no parallel sizes per module");
  }
  Config c;
  c.encoder = {.tp = parallel[roles.encoder].tp,
               .pp = static_cast<int>(plan.placement.ChunksOf(roles.encoder).size()),
               .dp = plan.placement.NumReplicas(roles.encoder)};
  c.llm = {.tp = parallel[roles.llm].tp,
           .pp = static_cast<int>(plan.placement.ChunksOf(roles.llm).size()),
           .dp = plan.placement.NumReplicas(roles.llm)};
  c.num_microbatches =
      plan.num_microbatches > 0 ? plan.num_microbatches : job.parallel.num_microbatches;
  return c;
}

StatusOr<planning::Assignment> ScheduleBatch(const Job& job,
                                             const Config& config,
                                             const cost::ThroughputTable& tables,
                                             const spec::Batch& batch,
                                             SchedulerKind kind,
                                             algo::BucketBalanceResult* balance,
                                             const CorrectionState* correction,
                                             const CorrectionOptions& correction_options) {
  WEFT_ASSIGN_OR_RETURN(Roles roles, FindRoles(job.model));
  WEFT_ASSIGN_OR_RETURN(auto items, ItemShapes(job.model, roles, tables, batch, job.workload));
  const int n = static_cast<int>(items.size());
  const int dp = config.llm.dp;
  if (n < dp) {
    return FailedPreconditionError(
        fmt::format("dflop: {} items in the batch; the LLM's {} replicas need one each", n, dp));
  }
  const int mb = std::max(1, std::min(config.num_microbatches, n / dp));
  const int buckets = mb * dp;
  planning::Assignment out;
  if (mb < config.num_microbatches) {
    out.notes = fmt::format("asked {} microbatches, used {} ({} items over {} replicas)",
                            config.num_microbatches, mb, n, dp);
  }
  std::vector<int> bucket_of(n);
  if (kind == SchedulerKind::kRandom) {
    // The paper's baseline: items dealt to buckets in a random order (every bucket non-empty).
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 rng(job.seed * 1000003ULL + static_cast<uint64_t>(batch.iteration));
    std::shuffle(order.begin(), order.end(), rng);
    for (int k = 0; k < n; ++k) bucket_of[order[k]] = k % buckets;
    out.policy = "dflop-random";
  } else {
    Config used = config;
    used.num_microbatches = mb;
    // Per-item durations, with the adaptive correction's penalties where it applies them.
    WEFT_ASSIGN_OR_RETURN(ItemDurations d, DurationsOf(job, used, tables, batch, correction,
                                                       correction_options));
    std::vector<algo::TwoResourceItem> durations(n);
    int penalised = 0;
    for (int i = 0; i < n; ++i) {
      durations[i] = {.first_s = d.durations[i].encoder_s,
                      .second_s = d.durations[i].llm_s + d.penalty_s[i]};
      penalised += d.penalty_s[i] != 0 ? 1 : 0;
    }
    algo::BucketBalanceResult result;
    WEFT_ASSIGN_OR_RETURN(std::vector<int> assigned,
                          BalanceWith(kind, durations, buckets, &result));
    bucket_of = std::move(assigned);
    out.policy = kind == SchedulerKind::kPaper ? "dflop-lpt" : "dflop-balanced";
    out.notes += fmt::format("{}C_max {:.4g} s, lower bound {:.4g} s ({})",
                             out.notes.empty() ? "" : "; ", result.makespan_s,
                             result.lower_bound_s, result.method);
    if (balance) *balance = result;
    if (correction != nullptr && correction_options.enabled) {
      out.notes += fmt::format("{}{}; {} items penalised", out.notes.empty() ? "" : "; ",
                               correction->Describe(correction_options), penalised);
    }
  }
  out.replicas.assign(dp, planning::Microbatches(mb));
  for (int i = 0; i < n; ++i) {
    const int b = bucket_of[i];
    out.replicas[b / mb][b % mb].push_back(i);
  }
  return out;
}

namespace {

class DflopStrategy final : public planning::Strategy {
 public:
  DflopStrategy(Variant variant, CorrectionOptions correction)
      : variant_(variant), correction_(correction) {
    // The random baseline balances nothing, so it has nothing to correct.
    if (variant_ == Variant::kOptimizerOnly) correction_.enabled = false;
  }

  std::string_view Name() const override {
    switch (variant_) {
      case Variant::kDflop:
        return "dflop";
      case Variant::kPaper:
        return "dflop-paper";
      case Variant::kOptimizerOnly:
        return "dflop-optimizer-only";
    }
    return "dflop";
  }
  std::string_view Description() const override {
    switch (variant_) {
      case Variant::kDflop:
        return "DFLOP: encoder and LLM on own groups with own TP/PP/DP from the data-aware "
               "optimizer (expected makespan, simulator re-rank), per-batch two-resource bucket "
               "balancing, 1F1B";
      case Variant::kPaper:
        return "DFLOP as published: Algorithm 1's mean-item objective, LPT bucket scheduling, 1F1B";
      case Variant::kOptimizerOnly:
        return "DFLOP's optimizer only: its config with random bucket assignment, 1F1B";
    }
    return "";
  }

  StatusOr<planning::StaticPlan> Prepare(const Job& job) const override {
    WEFT_RETURN_IF_ERROR(job.Validate());
    WEFT_ASSIGN_OR_RETURN(cost::ThroughputTable tables, TablesOf(job));
    OptimizerOptions options;
    if (variant_ == Variant::kPaper) {
      options.objective = Objective::kPaper;
      options.rerank_top_k = 0;
    }
    const SchedulerKind kind = Scheduler();
    AssignFn assign = [&](const Job& j, const planning::StaticPlan&, const Config& c,
                          const spec::Batch& b) { return ScheduleBatch(j, c, tables, b, kind); };
    WEFT_ASSIGN_OR_RETURN(OptimizerResult result, Optimize(job, tables, options, assign));
    WEFT_ASSIGN_OR_RETURN(Roles roles, FindRoles(job.model));
    WEFT_ASSIGN_OR_RETURN(planning::PlacementSpec spec, PlacementOf(result.best, job.model, roles));
    WEFT_ASSIGN_OR_RETURN(planning::Placement placement,
                          planning::BuildPlacement(spec, job.model, job.cluster, *job.cost_model));
    const Candidate& best = result.top.front();
    planning::StaticPlan plan = MakeStaticPlan(
        std::move(placement),
        fmt::format(
            "{}: {} ({} objective {:.4g} s{}; {} configs priced)", Name(), result.best.Describe(),
            ObjectiveName(options.objective),
            options.objective == Objective::kPaper ? best.paper_s : best.expected_s,
            best.simulated_s >= 0 ? fmt::format(", simulated {:.4g} s", best.simulated_s) : "",
            result.evaluated),
        job.model);
    plan.num_microbatches = result.best.num_microbatches;
    return plan;
  }

  StatusOr<planning::Assignment> Assign(const Job& job,
                                        const planning::StaticPlan& plan,
                                        const spec::Batch& batch,
                                        const planning::PlanState& state) const override {
    WEFT_ASSIGN_OR_RETURN(Config config, ConfigOfPlan(job, plan));
    WEFT_ASSIGN_OR_RETURN(cost::ThroughputTable tables, TablesOf(job));
    return ScheduleBatch(job, config, tables, batch, Scheduler(), nullptr, CorrectionOf(state),
                         correction_);
  }

  StatusOr<std::shared_ptr<const planning::StrategyFeedback>> Observe(
      const Job& job,
      const planning::StaticPlan& plan,
      const planning::PlanState& state,
      const planning::IterationPlan& planned,
      const std::vector<planning::MeasuredStage>& measured) const override {
    if (!correction_.enabled) return state.feedback;
    WEFT_ASSIGN_OR_RETURN(Config config, ConfigOfPlan(job, plan));
    WEFT_ASSIGN_OR_RETURN(cost::ThroughputTable tables, TablesOf(job));
    const SchedulerKind kind = Scheduler();
    BalanceFn balance = [kind](const std::vector<algo::TwoResourceItem>& durations, int buckets) {
      return BalanceWith(kind, durations, buckets, nullptr);
    };
    WEFT_ASSIGN_OR_RETURN(
        std::shared_ptr<const CorrectionState> next,
        ObserveCorrection(job, config, tables, correction_, state, planned, measured, balance));
    return std::shared_ptr<const planning::StrategyFeedback>(std::move(next));
  }

  StatusOr<planning::IterationPlan> PlanIteration(
      const Job& job,
      const planning::StaticPlan& plan,
      const planning::IterationInput& input) const override {
    return planning::PlanReplicas(job, plan, input, [](const graph::StageGraph& g) {
      return sched::MakeSchedule(sched::ScheduleKind::kOneFOneB, g);
    });
  }

 private:
  SchedulerKind Scheduler() const {
    switch (variant_) {
      case Variant::kDflop:
        return SchedulerKind::kHybrid;
      case Variant::kPaper:
        return SchedulerKind::kPaper;
      case Variant::kOptimizerOnly:
        return SchedulerKind::kRandom;
    }
    return SchedulerKind::kHybrid;
  }

  Variant variant_;
  CorrectionOptions correction_;
};

}  // namespace

std::unique_ptr<planning::Strategy> MakeDflopStrategy(Variant variant,
                                                      CorrectionOptions correction) {
  return std::make_unique<DflopStrategy>(variant, correction);
}

}  // namespace weft::strategy::dflop
