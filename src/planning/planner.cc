#include "weft/planning/planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <tuple>

#include "weft/data/workload.h"
#include "weft/plan/compiler.h"
#include "weft/plan/validator.h"
#include "weft/planning/configuration.h"
#include "weft/sched/generators.h"

namespace weft::planning {

std::string_view MemoryPolicyName(MemoryPolicy policy) {
  switch (policy) {
    case MemoryPolicy::kStrategy:
      return "chosen by the strategy";
    case MemoryPolicy::kFixed:
      return "fixed by the static plan";
    case MemoryPolicy::kFirstUniformLevelThatFits:
      return "first uniform recompute level that fits (none, selective, full)";
  }
  return "?";
}

Status PlannerOptions::Validate() const {
  WEFT_RETURN_IF_ERROR(budget.Validate());
  WEFT_RETURN_IF_ERROR(sim.Validate().WithPrefix("sim"));
  if (memory_policy.has_value() && *memory_policy != MemoryPolicy::kFixed) {
    return InvalidArgumentError(fmt::format(
        "memory_policy = {}; must be unset or kFixed (the others follow from the strategy and "
        "the static plan)",
        *memory_policy == MemoryPolicy::kStrategy ? "kStrategy" : "kFirstUniformLevelThatFits"));
  }
  return OkStatus();
}

StatusOr<std::unique_ptr<Planner>> Planner::Create(std::shared_ptr<const JobSetup> setup,
                                                   std::unique_ptr<Strategy> strategy,
                                                   PlannerOptions options) {
  if (setup == nullptr || strategy == nullptr) {
    return InvalidArgumentError("Planner::Create: setup and strategy are required");
  }
  WEFT_RETURN_IF_ERROR(options.Validate());
  WEFT_ASSIGN_OR_RETURN(StaticPlan fixed, strategy->Prepare(setup->job));
  return Create(std::move(setup), std::move(strategy), std::move(fixed), std::move(options));
}

StatusOr<std::unique_ptr<Planner>> Planner::Create(std::shared_ptr<const JobSetup> setup,
                                                   std::unique_ptr<Strategy> strategy,
                                                   StaticPlan static_plan,
                                                   PlannerOptions options) {
  if (setup == nullptr || strategy == nullptr || setup->job.cost_model == nullptr) {
    return InvalidArgumentError("Planner::Create: a job with a cost model and a strategy are "
                                "required");
  }
  WEFT_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<Planner> p(new Planner());
  p->setup_ = std::move(setup);
  p->strategy_ = std::move(strategy);
  p->static_plan_ = std::move(static_plan);
  p->options_ = std::move(options);
  const bool fixed = std::any_of(p->static_plan_.recompute.begin(), p->static_plan_.recompute.end(),
                                 [](spec::Recompute r) { return r != spec::Recompute::kNone; });
  p->memory_policy_ = p->strategy_->Traits().manages_memory ? MemoryPolicy::kStrategy
                      : fixed                       ? MemoryPolicy::kFixed
                                                    : MemoryPolicy::kFirstUniformLevelThatFits;
  const auto& placement = p->static_plan_.placement;
  p->grad_sync_bytes_by_group_module_.assign(
      placement.groups.size(), std::vector<int64_t>(p->setup_->job.model.modules.size(), 0));
  for (const Chunk& chunk : placement.chunks) {
    if (chunk.group < 0 || chunk.group >= static_cast<int>(placement.groups.size()) ||
        chunk.module < 0 || chunk.module >= static_cast<int>(placement.parallel.size())) {
      return InvalidArgumentError("static plan: chunk of module " + std::to_string(chunk.module) +
                                  " on group " + std::to_string(chunk.group) + " out of range");
    }
    WEFT_ASSIGN_OR_RETURN(cost::ChunkCost c,
                          p->setup_->job.cost_model->Chunk(
                              p->setup_->job.model, chunk.module, chunk.first_layer,
                              chunk.num_layers, cost::TokenShape::Uniform(1),
                              placement.parallel[chunk.module]));
    p->grad_sync_bytes_by_group_module_[chunk.group][chunk.module] +=
        static_cast<int64_t>(c.gradient_bytes);
  }
  if (p->options_.memory_policy.has_value()) {  // kFixed (PlannerOptions::Validate)
    p->memory_policy_ = MemoryPolicy::kFixed;
    if (p->static_plan_.recompute.empty()) {
      p->static_plan_.recompute.assign(p->setup_->job.model.modules.size(), spec::Recompute::kNone);
    }
  }
  if (p->setup_->first_stage_llm_layers > 0 || p->setup_->last_stage_llm_layers > 0) {
    // Megatron's --decoder-first/last-pipeline-num-layers: checked, not applied (the strategy
    // chooses the split; an emitted configuration must re-read to the same plan).
    const auto& job = p->setup_->job;
    const int llm = data::FirstLlmModule(job.model);
    const std::vector<int> layers = ModuleLayersPerGroup(placement, llm);
    for (auto [flag, want, got] :
         {std::tuple{"--decoder-first-pipeline-num-layers", p->setup_->first_stage_llm_layers,
                     layers.empty() ? 0 : layers.front()},
          std::tuple{"--decoder-last-pipeline-num-layers", p->setup_->last_stage_llm_layers,
                     layers.empty() ? 0 : layers.back()}}) {
      if (want > 0 && want != got) {
        return FailedPreconditionError(fmt::format(
            "{} {}: strategy '{}' puts {} layers of '{}' there (weft's strategies choose the "
            "layer split; the flag checks it)",
            flag, want, p->strategy_->Name(), got, job.model.modules[llm].name));
      }
    }
  }
  if (p->setup_->recompute_floor != spec::Recompute::kNone &&
      p->memory_policy_ != MemoryPolicy::kFirstUniformLevelThatFits) {
    return InvalidArgumentError(fmt::format(
        "--recompute-granularity {}: strategy '{}' chooses recomputation itself ({}); the flag "
        "sets the uniform level of rule-based strategies",
        spec::RecomputeName(p->setup_->recompute_floor), p->strategy_->Name(),
        MemoryPolicyName(p->memory_policy_)));
  }
  return p;
}

StatusOr<std::vector<spec::Batch>> Planner::Batches(int64_t first, int count,
                                                    std::string* warning) const {
  return MakeIterationBatches(*setup_, first, count, warning);
}

StatusOr<PlannedIteration> Planner::Plan(const spec::Batch& batch) const {
  return Plan(batch, options_.budget);
}

StatusOr<PlannedIteration> Planner::Plan(const spec::Batch& batch,
                                         const PlanBudget& budget) const {
  return ApplyMemoryPolicy(batch, budget, options_.sim, /*fallback=*/false, PlanState{});
}

StatusOr<PlannedIteration> Planner::Plan(const spec::Batch& batch, const PlanBudget& budget,
                                         const sim::SimOptions& sim) const {
  return ApplyMemoryPolicy(batch, budget, sim, /*fallback=*/false, PlanState{});
}

StatusOr<PlannedStep> Planner::Plan(const spec::Batch& batch, const PlanState& state) const {
  return Plan(batch, state, options_.budget);
}

StatusOr<PlannedStep> Planner::Plan(const spec::Batch& batch, const PlanState& state,
                                    const PlanBudget& budget) const {
  PlannedStep step;
  WEFT_ASSIGN_OR_RETURN(step.planned,
                        ApplyMemoryPolicy(batch, budget, options_.sim, /*fallback=*/false, state));
  step.next = NextState(state);
  return step;
}

StatusOr<PlannedIteration> Planner::Fallback(const spec::Batch& batch) const {
  return ApplyMemoryPolicy(batch, options_.budget, options_.sim, /*fallback=*/true, PlanState{});
}

StatusOr<PlannedIteration> Planner::Fallback(const spec::Batch& batch,
                                             const PlanState& state) const {
  return ApplyMemoryPolicy(batch, options_.budget, options_.sim, /*fallback=*/true, state);
}

PlanState Planner::NextState(const PlanState& state) const {
  PlanState next = state;
  ++next.iterations_planned;
  return next;
}

StatusOr<PlanState> Planner::Observe(const PlanState& state, const PlannedIteration& planned,
                                     std::span<const MeasuredStage> measured,
                                     const cost::CorrectionRule& rule) const {
  return Observe(state, state, planned, measured, rule);
}

StatusOr<PlanState> Planner::Observe(const PlanState& current,
                                     const PlanState& planned_in,
                                     const PlannedIteration& planned,
                                     const plan::MeasuredIteration& measured,
                                     const cost::CorrectionRule& rule) const {
  WEFT_ASSIGN_OR_RETURN(std::vector<MeasuredStage> stages, MatchMeasured(planned, measured));
  return Observe(current, planned_in, planned, stages, rule);
}

StatusOr<PlanState> Planner::Observe(const PlanState& current,
                                     const PlanState& planned_in,
                                     const PlannedIteration& planned,
                                     std::span<const MeasuredStage> measured,
                                     const cost::CorrectionRule& rule) const {
  WEFT_RETURN_IF_ERROR(rule.Validate());
  if (planned.plan.batch == nullptr) {
    return InvalidArgumentError("Observe: the planned iteration carries no batch (plan it with "
                                "Planner::Plan)");
  }
  const Job& job = setup_->job;
  const cost::CostCorrection empty;
  // The factors `planned` was priced with un-correct its latencies; the current correction is
  // the one updated.
  const cost::CostCorrection& priced =
      planned_in.correction != nullptr ? *planned_in.correction : empty;
  const cost::CostCorrection& before = current.correction != nullptr ? *current.correction : empty;
  std::vector<cost::StageObservation> observations;
  for (const MeasuredStage& m : measured) {
    const int n = static_cast<int>(planned.plan.replicas.size());
    if (m.replica < 0 || m.replica >= n) {
      return InvalidArgumentError("measured stage: replica " + std::to_string(m.replica) +
                                  " out of range [0, " + std::to_string(n) + ")");
    }
    const ReplicaPlan& replica = planned.plan.replicas[m.replica];
    if (m.stage < 0 || m.stage >= replica.graph.num_stages()) {
      return InvalidArgumentError("measured stage: stage " + std::to_string(m.stage) +
                                  " of replica " + std::to_string(m.replica) + " out of range [0, " +
                                  std::to_string(replica.graph.num_stages()) + ")");
    }
    if (!std::isfinite(m.measured_s) || m.measured_s < 0) {
      return InvalidArgumentError("measured stage " + std::to_string(m.stage) + " of replica " +
                                  std::to_string(m.replica) + ": measured_s = " +
                                  std::to_string(m.measured_s) + "; must be finite and >= 0");
    }
    const graph::Stage& st = replica.graph.stage(m.stage);
    if (st.latency_s <= 0 || m.measured_s == 0) continue;  // nothing was predicted (an empty stage): nothing to learn
    WEFT_ASSIGN_OR_RETURN(cost::TokenShape shape,
                          StageTokenShape(job.model, *planned.plan.batch, replica.microbatches,
                                          job.workload, st));
    // One observation per pass the cost model prices (a kBackward stage: its input and weight
    // gradients, each with the whole stage's ratio).
    for (spec::Pass pass : spec::PassParts(st.pass)) {
      const double factor = priced.Factor(st.module, pass, shape);
      observations.push_back({.module = st.module,
                              .pass = pass,
                              .shape = shape,
                              .predicted_uncorrected_s = st.latency_s / factor,
                              .measured_s = m.measured_s});
    }
  }
  WEFT_ASSIGN_OR_RETURN(std::shared_ptr<const cost::CostCorrection> after,
                        cost::UpdateCorrection(before, observations, rule));
  // The strategy's own feedback (DFLOP's per-shape penalties) from the same stages.
  // It sees the current feedback with the correction `planned` was priced with.
  const std::vector<MeasuredStage> stages(measured.begin(), measured.end());
  PlanState seen = current;
  seen.correction = planned_in.correction;
  WEFT_ASSIGN_OR_RETURN(std::shared_ptr<const StrategyFeedback> feedback,
                        strategy_->Observe(job, static_plan_, seen, planned.plan, stages));
  PlanState next = current;
  next.correction = std::move(after);
  next.feedback = std::move(feedback);
  return next;
}

StatusOr<IterationEvaluation> Planner::Evaluate(const IterationPlan& plan) const {
  return EvaluateIteration(setup_->job, plan, options_.sim);
}

StatusOr<IterationEvaluation> Planner::Evaluate(const IterationPlan& plan,
                                                const sim::SimOptions& sim) const {
  return EvaluateIteration(setup_->job, plan, sim);
}

StatusOr<PlannedIteration> Planner::ApplyMemoryPolicy(const spec::Batch& batch,
                                                      const PlanBudget& budget,
                                                      const sim::SimOptions& sim,
                                                      bool fallback,
                                                      const PlanState& state) const {
  // A measured correction: the same job priced through a corrected view of the cost model
  // (shared layer cache; nothing rebuilt).
  std::optional<cost::CostModel> corrected;
  std::optional<Job> corrected_job;
  if (state.correction != nullptr && !state.correction->empty()) {
    corrected.emplace(setup_->job.cost_model->WithCorrection(state.correction));
    corrected_job.emplace(setup_->job);
    corrected_job->cost_model = &*corrected;
  }
  const Job& job = corrected_job.has_value() ? *corrected_job : setup_->job;
  // The data assignment: the strategy's, checked; the fallback keeps it.
  WEFT_ASSIGN_OR_RETURN(Assignment assignment,
                        strategy_->Assign(job, static_plan_, batch, state));
  WEFT_RETURN_IF_ERROR(assignment.Validate(batch));
  std::shared_ptr<const spec::Batch> assigned =
      assignment.sequences.empty()
          ? std::make_shared<const spec::Batch>(batch)
          : std::make_shared<const spec::Batch>(assignment.Apply(batch));
  // The fallback orders the static plan's placement by a rule and so never inherits a
  // strategy's own memory choices: it follows the uniform-level policy unless the static plan
  // fixes recomputation.
  const MemoryPolicy policy =
      fallback && memory_policy_ == MemoryPolicy::kStrategy
          ? MemoryPolicy::kFirstUniformLevelThatFits
          : memory_policy_;
  std::vector<spec::Recompute> levels{spec::Recompute::kNone};
  if (policy == MemoryPolicy::kFirstUniformLevelThatFits) {
    // From the job's floor (JobOptions::recompute) up: none, selective, full.
    levels.clear();
    for (spec::Recompute r :
         {spec::Recompute::kNone, spec::Recompute::kSelective, spec::Recompute::kFull}) {
      if (static_cast<int>(r) >= static_cast<int>(setup_->recompute_floor)) levels.push_back(r);
    }
  }
  PlanBudget b = budget;
  if (b.seed == 0) b.seed = job.seed;
  PlannedIteration out;
  double plan_time_s = 0;
  for (spec::Recompute level : levels) {
    StaticPlan variant = static_plan_;
    if (policy == MemoryPolicy::kFirstUniformLevelThatFits) {
      variant.recompute.assign(job.model.modules.size(), level);
    }
    const IterationInput input{
        .batch = *assigned, .assignment = assignment, .budget = b, .state = &state};
    if (fallback && !strategy_->Traits().is_own_fallback) {
      WEFT_ASSIGN_OR_RETURN(
          out.plan,
          PlanReplicas(job, variant, input,
                       [](const graph::StageGraph& g) -> StatusOr<sched::Schedule> {
                         auto s = sched::MakeSchedule(sched::ScheduleKind::kOneFOneB, g);
                         if (s.ok()) return s;
                         return sched::MakeSchedule(sched::ScheduleKind::kGPipe, g);
                       }));
    } else {
      WEFT_ASSIGN_OR_RETURN(out.plan, strategy_->PlanIteration(job, variant, input));
    }
    out.plan.batch = assigned;
    out.plan.assignment = assignment;
    plan_time_s += out.plan.plan_time_s;
    WEFT_ASSIGN_OR_RETURN(out.evaluation, Evaluate(out.plan, sim));
    out.recompute_used =
        policy == MemoryPolicy::kFirstUniformLevelThatFits ? level : spec::Recompute::kNone;
    if (!out.evaluation.oom) break;
  }
  out.plan.plan_time_s = plan_time_s;
  out.outcome = MakePlanOutcome(out.evaluation.oom,
                                fallback ? FallbackReason::kRequested : FallbackReason::kNone);
  if (policy == MemoryPolicy::kFirstUniformLevelThatFits &&
      out.recompute_used != spec::Recompute::kNone) {
    out.plan.notes += std::string(out.plan.notes.empty() ? "" : "; ") + "recompute " +
                      std::string(spec::RecomputeName(out.recompute_used)) +
                      (out.evaluation.oom ? " (still out of memory)" : " to fit memory");
  }
  return out;
}

StatusOr<std::vector<MeasuredStage>> Planner::MatchMeasured(
    const PlannedIteration& planned, const plan::MeasuredIteration& measured) {
  std::vector<MeasuredStage> out;
  out.reserve(measured.stages.size());
  for (const plan::MeasuredStage& m : measured.stages) {
    const int n = static_cast<int>(planned.plan.replicas.size());
    if (m.replica < 0 || m.replica >= n) {
      return InvalidArgumentError("measured rank " + std::to_string(m.rank) + " action " +
                                  std::to_string(m.action) + ": replica " +
                                  std::to_string(m.replica) + " out of range [0, " +
                                  std::to_string(n) + ")");
    }
    const graph::StageGraph& g = planned.plan.replicas[m.replica].graph;
    graph::StageId found = -1;
    for (graph::StageId s = 0; s < g.num_stages(); ++s) {
      const graph::Stage& st = g.stage(s);
      if (st.group == m.group && st.module == m.stage.module && st.chunk == m.stage.chunk &&
          st.microbatch == m.stage.microbatch && st.sub_microbatch == m.stage.sub_microbatch &&
          st.pass == m.stage.pass) {
        found = s;
        break;
      }
    }
    if (found < 0) {
      return InvalidArgumentError(
          "measured rank " + std::to_string(m.rank) + " action " + std::to_string(m.action) +
          ": no stage of replica " + std::to_string(m.replica) + " group " +
          std::to_string(m.group) + " is module " + std::to_string(m.stage.module) + " chunk " +
          std::to_string(m.stage.chunk) + " microbatch " + std::to_string(m.stage.microbatch) +
          " sub-microbatch " + std::to_string(m.stage.sub_microbatch) + " pass " +
          std::string(spec::PassShortName(m.stage.pass)) + " (a record of another plan?)");
    }
    out.push_back({.replica = m.replica, .stage = found, .measured_s = m.measured_s});
  }
  return out;
}

StatusOr<PlanState> Planner::Observe(const PlanState& state, const PlannedIteration& planned,
                                     const plan::MeasuredIteration& measured,
                                     const cost::CorrectionRule& rule) const {
  WEFT_ASSIGN_OR_RETURN(std::vector<MeasuredStage> stages, MatchMeasured(planned, measured));
  return Observe(state, planned, stages, rule);
}

StatusOr<plan::ExecutionPlan> Planner::CompileUnvalidated(const PlannedIteration& planned,
                                                          int replica, int64_t iteration) const {
  const int n = static_cast<int>(planned.plan.replicas.size());
  if (replica < 0 || replica >= n) {
    return InvalidArgumentError("replica " + std::to_string(replica) + " out of range [0, " +
                                std::to_string(n) + ")");
  }
  if (static_cast<int>(planned.evaluation.timelines.size()) != n) {
    return InvalidArgumentError("the plan's evaluation has " +
                                std::to_string(planned.evaluation.timelines.size()) +
                                " timelines for " + std::to_string(n) + " replicas");
  }
  const ReplicaPlan& r = planned.plan.replicas[replica];
  plan::CompileOptions c;
  c.model = setup_->model_name;
  c.strategy = std::string(strategy_->Name());
  c.iteration = iteration;
  c.replica = replica;
  c.num_replicas = n;
  for (const auto& m : setup_->job.model.modules) c.hidden_size_by_module.push_back(m.hidden_size);
  if (static_cast<int>(grad_sync_bytes_by_group_module_.size()) == r.graph.num_groups()) {
    c.grad_sync_bytes_by_rank_module = grad_sync_bytes_by_group_module_;
  }
  return plan::CompilePlan(r.graph, r.schedule, planned.evaluation.timelines[replica], c);
}

namespace {

// ---- plan-v3: the plan's data tables (plan::PlanData), what a runtime reads ----
// Rank r of `compiled` runs group r % ranks_per_replica of replica first_replica + r /
// ranks_per_replica, holding that group's chunks of the static placement.
Status AttachPlanData(const Job& job, const Placement& placement, const PlannedIteration& planned,
                      int first_replica, int ranks_per_replica, plan::ExecutionPlan& compiled) {
  if (ranks_per_replica != static_cast<int>(placement.groups.size())) {
    return InternalError("a plan of " + std::to_string(ranks_per_replica) +
                         " ranks per replica for a placement of " +
                         std::to_string(placement.groups.size()) + " groups");
  }
  std::vector<std::vector<plan::ChunkData>> by_group(placement.groups.size());
  for (const Chunk& c : placement.chunks) {
    by_group[c.group].push_back({.module = c.module, .chunk = c.chunk,
                                    .first_layer = c.first_layer, .num_layers = c.num_layers,
                                    .module_replica = c.replica});
  }
  std::vector<std::vector<std::vector<int>>> microbatches;
  for (const ReplicaPlan& r : planned.plan.replicas) microbatches.push_back(r.microbatches);
  std::vector<plan::RankData> ranks(compiled.num_ranks());
  for (int r = 0; r < compiled.num_ranks(); ++r) {
    ranks[r] = {.replica = first_replica + r / ranks_per_replica,
                .group = r % ranks_per_replica,
                .chunks = by_group[r % ranks_per_replica]};
  }
  if (planned.plan.batch == nullptr) {
    return InvalidArgumentError("the planned iteration carries no batch (plan it with "
                                "Planner::Plan)");
  }
  WEFT_ASSIGN_OR_RETURN(compiled.data, plan::MakePlanData(job.model, *planned.plan.batch,
                                                          microbatches,
                                                          std::move(ranks), job.workload));
  return OkStatus();
}

StatusOr<plan::ValidationReport> ValidateCompiled(const plan::ExecutionPlan& compiled,
                                                  const PlannedIteration& planned,
                                                  int64_t iteration, const std::string& what) {
  auto validated = plan::ValidatePlan(compiled);
  if (!validated.ok() && validated.status().code() == StatusCode::kResourceExhausted) {
    // Memory: the job does not fit (a user error naming the rank, bytes and capacity).
    return ResourceExhaustedError(
        "iteration " + std::to_string(iteration) + " " + what + ": the plan does not fit memory: " +
        validated.status().message() +
        (planned.plan.notes.empty() ? "" : " [" + planned.plan.notes + "]") +
        "; give more pipeline ranks (--pp) or GPUs, or a smaller model");
  }
  if (!validated.ok()) {
    return InternalError("iteration " + std::to_string(iteration) + " " + what +
                         ": compiled plan does not validate: " + validated.status().message() +
                         (planned.plan.notes.empty() ? "" : " [" + planned.plan.notes + "]"));
  }
  return validated;
}

}  // namespace

StatusOr<plan::ExecutionPlan> Planner::Compile(const PlannedIteration& planned, int replica,
                                               int64_t iteration,
                                               plan::ValidationReport* report) const {
  WEFT_ASSIGN_OR_RETURN(plan::ExecutionPlan compiled,
                        CompileUnvalidated(planned, replica, iteration));
  WEFT_RETURN_IF_ERROR(AttachPlanData(setup_->job, static_plan_.placement, planned, replica,
                                      compiled.num_ranks(), compiled));
  WEFT_ASSIGN_OR_RETURN(plan::ValidationReport validated,
                        ValidateCompiled(compiled, planned, iteration,
                                         "replica " + std::to_string(replica)));
  if (report != nullptr) *report = std::move(validated);
  return compiled;
}

StatusOr<plan::ExecutionPlan> Planner::CompileWorld(const PlannedIteration& planned,
                                                    int64_t iteration,
                                                    plan::ValidationReport* report) const {
  const int n = static_cast<int>(planned.plan.replicas.size());
  if (n == 0) return InvalidArgumentError("the plan has no replicas");
  WEFT_ASSIGN_OR_RETURN(plan::ExecutionPlan world, CompileUnvalidated(planned, 0, iteration));
  const int ranks_per_replica = world.num_ranks();
  world.replica = 0;
  world.num_replicas = 1;
  for (int q = 1; q < n; ++q) {
    WEFT_ASSIGN_OR_RETURN(plan::ExecutionPlan part, CompileUnvalidated(planned, q, iteration));
    if (part.num_ranks() != ranks_per_replica) {
      return InternalError("replica " + std::to_string(q) + " has " +
                           std::to_string(part.num_ranks()) + " ranks; replica 0 has " +
                           std::to_string(ranks_per_replica));
    }
    const int offset = q * ranks_per_replica;
    for (plan::RankPlan& rank : part.ranks) {
      for (plan::Buffer& b : rank.buffers) {
        b.producer.rank += offset;
        b.consumer.rank += offset;
      }
      for (plan::Action& a : rank.actions) {
        if (a.peer >= 0) a.peer += offset;
        for (int& r : a.ranks) r += offset;
      }
      world.ranks.push_back(std::move(rank));
    }
  }
  // Folded replicas: the same rank of every replica reduces together.
  for (int r = 0; r < world.num_ranks(); ++r) {
    const int p = r % ranks_per_replica;
    for (plan::Action& a : world.ranks[r].actions) {
      if (a.kind != plan::ActionKind::kAllReduceGrads || !a.ranks.empty()) continue;
      if (a.dp != n) {
        return InternalError("rank " + std::to_string(r) + " all-reduces module " +
                             std::to_string(a.stage.module) + " over dp " +
                             std::to_string(a.dp) + " but the plan has " + std::to_string(n) +
                             " replicas");
      }
      for (int q = 0; q < n; ++q) a.ranks.push_back(q * ranks_per_replica + p);
    }
  }
  if (n > 1) {
    for (int r = 0; r < world.num_ranks(); ++r) {
      world.ranks[r].label =
          "r" + std::to_string(r / ranks_per_replica) + "/" + world.ranks[r].label;
    }
  }
  WEFT_RETURN_IF_ERROR(AttachPlanData(setup_->job, static_plan_.placement, planned, 0,
                                      ranks_per_replica, world));
  WEFT_ASSIGN_OR_RETURN(plan::ValidationReport validated,
                        ValidateCompiled(world, planned, iteration, "world plan"));
  if (report != nullptr) *report = std::move(validated);
  return world;
}

}  // namespace weft::planning
