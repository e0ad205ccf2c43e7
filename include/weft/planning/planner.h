#pragma once
// Planner: the one object between a job and a deployable plan. Built once from the job (model,
// cluster, parallel configuration, data source), a strategy and options; owns the cost model,
// the strategy, its static plan and the one memory policy. Every front end (CLI compare /
// simulate / plan / bench, the Python API, PlannerService, the paper experiments) plans through
// it, so a plan that leaves the library was made, memory-checked, evaluated and compiled the
// same way wherever it came from.
//
//   auto planner = strategy::MakePlanner({.model = "vlm-s"}, "dip");  // strategy/compare.h
//   auto batches = (*planner)->Batches(0, 10);
//   auto planned = (*planner)->Plan((*batches)[0]);          // IterationPlan + evaluation
//   auto plan = (*planner)->Compile(*planned, /*replica=*/0); // validated ExecutionPlan
//
// The memory policy (MemoryPolicy below) is applied to every plan: rule-based, searched, served
// by PlannerService, or the fallback. A strategy that chooses recomputation itself says so once:
// StrategyTraits::manages_memory.
//
// Thread-safety: after Create, every const method may run concurrently (the strategy and the
// cost model are thread-safe); the Planner must outlive the calls.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"
#include "weft/plan/measured.h"
#include "weft/plan/plan.h"
#include "weft/plan/validator.h"
#include "weft/sim/simulator.h"
#include "weft/planning/iteration.h"
#include "weft/planning/job_setup.h"
#include "weft/planning/strategy.h"

namespace weft::planning {

// How a plan is made to fit GPU memory.
enum class MemoryPolicy {
  // The strategy decides per stage or per layer (StrategyTraits::manages_memory); its plan is kept.
  kStrategy,
  // The static plan fixes recomputation per module; the plan is kept (it may not fit: the
  // evaluation says oom).
  kFixed,
  // What a user of a rule-based system does: no recomputation, else uniform selective, else
  // uniform full recomputation of every module; the first level whose simulation fits is kept.
  kFirstUniformLevelThatFits,
};
std::string_view MemoryPolicyName(MemoryPolicy policy);

struct PlannerOptions {
  PlanBudget budget = {};    // default search budget of Plan()
  sim::SimOptions sim = {};  // options of every evaluation
  // kFixed: take the static plan's recompute as it is, also when it is all kNone (studies that
  // compare strategies on the same graphs). Unset: kStrategy for a strategy that manages memory,
  // kFixed when the static plan sets a recompute level, else kFirstUniformLevelThatFits.
  std::optional<MemoryPolicy> memory_policy = std::nullopt;

  // budget (PlanBudget::Validate), sim (SimOptions::Validate, prefixed "sim: ") and
  // memory_policy unset or kFixed; else InvalidArgument naming the field and the rule.
  // Planner::Create checks it first.
  Status Validate() const;
};

// MeasuredStage (one measured graph stage) is declared in planning/strategy.h.

// One planned iteration and the state the next one starts from.
struct PlannedStep {
  PlannedIteration planned;
  PlanState next;
};

class Planner {
 public:
  // From a job set up by the caller (e.g. a modified JobSetup, or one shared by the planners of
  // a comparison so that all plan the same batches) and a strategy object.
  static StatusOr<std::unique_ptr<Planner>> Create(std::shared_ptr<const JobSetup> setup,
                                                   std::unique_ptr<Strategy> strategy,
                                                   PlannerOptions options = {});
  // Same with a static plan the caller chose (the paper experiments vary it).
  static StatusOr<std::unique_ptr<Planner>> Create(std::shared_ptr<const JobSetup> setup,
                                                   std::unique_ptr<Strategy> strategy,
                                                   StaticPlan static_plan,
                                                   PlannerOptions options = {});

  const Job& job() const { return setup_->job; }
  const JobSetup& setup() const { return *setup_; }
  const Strategy& strategy() const { return *strategy_; }
  const StaticPlan& static_plan() const { return static_plan_; }
  const PlannerOptions& options() const { return options_; }
  MemoryPolicy memory_policy() const { return memory_policy_; }

  // Global batches of iterations [first, first + count) (MakeIterationBatches).
  // `warning`: MakeIterationBatches' given-vs-used line when data was not all used.
  StatusOr<std::vector<spec::Batch>> Batches(int64_t first, int count,
                                             std::string* warning = nullptr) const;

  // Plans one batch with the strategy and the memory policy and evaluates it.
  StatusOr<PlannedIteration> Plan(const spec::Batch& batch) const;
  StatusOr<PlannedIteration> Plan(const spec::Batch& batch, const PlanBudget& budget) const;
  // Same with evaluation options of this call (e.g. record transfers for a trace).
  StatusOr<PlannedIteration> Plan(const spec::Batch& batch, const PlanBudget& budget,
                                  const sim::SimOptions& sim) const;
  // Plans one batch with a state carried from the previous iteration (the strategy's
  // assignment sees it) and returns the next state with the plan.
  StatusOr<PlannedStep> Plan(const spec::Batch& batch, const PlanState& state) const;
  StatusOr<PlannedStep> Plan(const spec::Batch& batch, const PlanState& state,
                             const PlanBudget& budget) const;
  // The safe rule plan of a batch: the static plan's placement ordered by 1F1B where the graph
  // allows it, else GPipe; memory policy kFirstUniformLevelThatFits unless the static plan fixes
  // recomputation. PlannerService serves it when a search misses its deadline.
  StatusOr<PlannedIteration> Fallback(const spec::Batch& batch) const;
  StatusOr<PlannedIteration> Fallback(const spec::Batch& batch, const PlanState& state) const;
  // The state after planning one iteration in `state`.
  PlanState NextState(const PlanState& state) const;
  // Measured feedback: folds the measured stage times of `planned` (planned in `state`) into the
  // state's cost correction (cost::UpdateCorrection under `rule`) and returns the new state.
  // Each measured stage is one observation of its (module, pass, shape bucket): predicted
  // uncorrected = the stage's planned latency / the factor it was planned with; a backward
  // stage that runs input and weight gradients together observes both passes with its ratio.
  // Stages not measured keep their factors, so their predictions do not move. The strategy's
  // own feedback state is then updated by Strategy::Observe with the same stages.
  StatusOr<PlanState> Observe(const PlanState& state, const PlannedIteration& planned,
                              std::span<const MeasuredStage> measured,
                              const cost::CorrectionRule& rule = {}) const;
  // Same from what a runtime measured executing the compiled plan of `planned`
  // (plan::MeasuredIteration, weft.measured/v1): each measured compute action is matched to its
  // stage of the replica's graph by (replica, group, module, chunk, microbatch, sub-microbatch,
  // pass); InvalidArgument naming the first record that matches no stage.
  StatusOr<PlanState> Observe(const PlanState& state, const PlannedIteration& planned,
                              const plan::MeasuredIteration& measured,
                              const cost::CorrectionRule& rule = {}) const;
  // Same when `planned` was made in an earlier state than `current`, the one the observation
  // folds into (PlannerService plans ahead: iteration i is planned before the measurements of
  // i - 1 arrive). The factors of `planned_in` un-correct the planned latencies; `current`'s
  // correction and feedback are updated (the strategy's Observe sees `current` with
  // `planned_in`'s correction). Observe(state, ...) is Observe(state, state, ...).
  StatusOr<PlanState> Observe(const PlanState& current,
                              const PlanState& planned_in,
                              const PlannedIteration& planned,
                              std::span<const MeasuredStage> measured,
                              const cost::CorrectionRule& rule = {}) const;
  StatusOr<PlanState> Observe(const PlanState& current,
                              const PlanState& planned_in,
                              const PlannedIteration& planned,
                              const plan::MeasuredIteration& measured,
                              const cost::CorrectionRule& rule = {}) const;
  // The graph stages of `planned` that the records of `measured` name (Observe's matching).
  static StatusOr<std::vector<MeasuredStage>> MatchMeasured(const PlannedIteration& planned,
                                                            const plan::MeasuredIteration& measured);
  // Simulates every replica of a plan (the evaluation Plan() returns).
  StatusOr<IterationEvaluation> Evaluate(const IterationPlan& plan) const;
  StatusOr<IterationEvaluation> Evaluate(const IterationPlan& plan,
                                         const sim::SimOptions& sim) const;

  // The deployable plan of one DP replica of `planned` (validated: a plan the validator
  // rejects is an error, never returned). `report`, if given, receives the validator's report.
  StatusOr<plan::ExecutionPlan> Compile(const PlannedIteration& planned, int replica,
                                        int64_t iteration = 0,
                                        plan::ValidationReport* report = nullptr) const;
  // The world plan of `planned`: every rank of every replica in one plan (replica q's rank p is
  // rank q·P + p when the replicas are folded pipelines of P ranks; a plan with one unfolded
  // replica keeps its ranks), each all_reduce_grads naming the ranks it reduces with. What a
  // runtime with data parallelism executes (one worker per rank). Validated like Compile.
  StatusOr<plan::ExecutionPlan> CompileWorld(const PlannedIteration& planned,
                                             int64_t iteration = 0,
                                             plan::ValidationReport* report = nullptr) const;

 private:
  Planner() = default;
  StatusOr<plan::ExecutionPlan> CompileUnvalidated(const PlannedIteration& planned, int replica,
                                                   int64_t iteration) const;
  StatusOr<PlannedIteration> ApplyMemoryPolicy(const spec::Batch& batch, const PlanBudget& budget,
                                               const sim::SimOptions& sim, bool fallback,
                                               const PlanState& state) const;

  std::shared_ptr<const JobSetup> setup_;
  std::unique_ptr<Strategy> strategy_;
  StaticPlan static_plan_;
  PlannerOptions options_;
  MemoryPolicy memory_policy_ = MemoryPolicy::kFirstUniformLevelThatFits;
  // Per group (pipeline rank) and module: gradient bytes per GPU its DP all-reduce carries (the
  // plan's all_reduce_grads actions).
  std::vector<std::vector<int64_t>> grad_sync_bytes_by_group_module_;
};

}  // namespace weft::planning
