#pragma once
// The Strategy interface every system implements (strategy/<system>/), the Job it plans for,
// and the Placement / IterationPlan types it produces.
//
//   auto strategy = strategy::MakeStrategy("megatron-1f1b");
//   auto fixed = (*strategy)->Prepare(job);                    // once per job
//   auto plan = (*strategy)->PlanIteration(job, *fixed, batch); // per global batch
//
// Thread-safety: strategies are immutable after construction; Prepare and PlanIteration are
// const and may run concurrently for different batches (the CostModel is thread-safe).
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"
#include "weft/cost/correction.h"
#include "weft/cost/cost_model.h"
#include "weft/data/workload.h"
#include "weft/graph/stage_graph.h"
#include "weft/sched/schedule.h"
#include "weft/spec/cluster.h"
#include "weft/spec/model.h"
#include "weft/spec/parallel.h"
#include "weft/spec/workload.h"

namespace weft::planning {

// What is planned: model, cluster (already sized to the GPUs used), parallel sizes, data knobs.
// Owned by the caller; strategies keep no pointer to it beyond a call.
struct Job {
  spec::ModelSpec model;
  spec::ClusterSpec cluster;
  // tp/dp/cp per module and the pipeline size: the LLM backbone's `pp` is the number of pipeline
  // ranks P every chain strategy uses; num_microbatches per DP replica.
  spec::ParallelConfig parallel;
  data::WorkloadOptions workload;
  // Batches a static strategy may look at before training (nnscaler's representative batch).
  std::vector<spec::Batch> profile_batches;
  const cost::CostModel* cost_model = nullptr;  // required; must outlive the calls
  uint64_t seed = 1;
  // Tokens per packed sequence the batches were packed to (the setup's context; 0 = unknown):
  // strategies that re-pack (FlowTrain) use it as their microbatch capacity.
  int64_t context_tokens = 0;
  // GPUs of the cluster that no module uses count in MFU and per-GPU figures (they are paid
  // for); false = only the GPUs the placement uses.
  bool charge_idle_gpus = true;
  // > 0: a streaming plan's pool (PoolSpec) holds this many bytes, whatever the strategy's own
  // sizing rule would give (`--pool-bytes`; e.g. to set a simulation beside a runtime's pool).
  int64_t pool_capacity_bytes = 0;

  // P: pipeline ranks (the first kLlm module's pp, else the largest pp).
  int PipelineSize() const;
  // DP replicas of the pipeline (the first kLlm module's dp).
  int DataParallelSize() const;
  Status Validate() const;
};

// Consecutive layers of one module on one device group.
struct Chunk {
  int module = 0;
  int first_layer = 0;
  int num_layers = 0;
  graph::GroupId group = 0;
  int chunk = 0;    // slot index on the group in data-flow order (graph::Stage::chunk)
  int replica = 0;  // the module's data-parallel replica (unfolded placements; else 0)
};

// Where the model lives: device groups (pipeline ranks) and chunks. For each module its chunks
// are listed in layer order. A module marked `replicated` has one full copy per group, each
// feeding the consumer's chunk on the same group (Cornstarch's encoders-replicated baseline).
//
// Folded (the default): groups carry the data-parallel degree (DeviceGroup::dp) and every module
// shares the backbone's DP; one stage graph per DP replica. Unfolded (`unfolded`): every
// module's replicas are explicit (Chunk::replica, groups of dp 1, parallel[m].dp replicas each),
// modules may have different DP and sit on groups of their own; the whole iteration is one stage
// graph, the gradient sync of module m runs over `grad_syncs` (the groups holding the same
// layers in each replica).
struct Placement {
  std::vector<graph::DeviceGroup> groups;
  std::vector<Chunk> chunks;
  std::vector<spec::ModuleParallel> parallel;  // indexed by module
  std::vector<bool> replicated;                // indexed by module (empty = none)
  bool unfolded = false;
  std::vector<graph::GradSync> grad_syncs;  // unfolded: filled by FillGroupStateBytes

  std::vector<int> ChunksOf(int module) const;  // replica 0's, indices into `chunks`, layer order
  std::vector<int> ChunksOf(int module, int replica) const;
  int NumReplicas(int module) const;  // 1 + the largest Chunk::replica of the module
  int NumGpus() const;                // Σ over groups of num_gpus · dp
  bool IsReplicated(int module) const {
    return module < static_cast<int>(replicated.size()) && replicated[module];
  }
  // "g0: vision[0,32) | g1: vision[32,63) llm[0,4) | ..." for reports.
  std::string Describe(const spec::ModelSpec& model) const;
  Status Validate(const spec::ModelSpec& model) const;
};

// Choices fixed once per job.
// A pool between producer and consumer modules (FlowTrain §3.2): the forward outputs of
// `producer_modules` (frozen modules on device groups of their own: encoders) go into one
// bounded buffer instead of straight to the stages that consume them; producers run ahead of
// the consumers across iterations until the pool is full, consumers wait only when it is empty.
// A static plan with a pool is evaluated over a window of iterations (planning/window.h); its
// iteration plans keep the ordinary coupled graphs, which compile and run in lockstep.
struct PoolSpec {
  std::vector<int> producer_modules;  // model module indices, ascending
  int64_t capacity_bytes = 0;         // > 0: the embeddings it can hold (both tiers)
  std::string description;            // one line: tiers and where the capacity comes from
};

struct StaticPlan {
  Placement placement;
  std::string description;  // one line: partition and schedule rule
  // Per module: sub-microbatch size in instances (0 = whole microbatch), recompute strategy.
  std::vector<int> sub_microbatch_size;
  std::vector<spec::Recompute> recompute;
  bool split_backward = false;     // B and W as separate stages (zero-bubble)
  bool keep_empty_stages = false;  // see GraphBuildOptions::keep_empty_stages
  int num_microbatches = 0;  // per anchor (LLM) replica; 0 = the job's (a user placement sets it)
  std::optional<PoolSpec> pool;  // set: a streaming plan (planning/window.h)
};

// The microbatches of one DP replica: indices into batch.sequences (or batch.samples when the
// batch is not packed), one list per microbatch.
using Microbatches = std::vector<std::vector<int>>;

// The data assignment of one iteration: which samples each microbatch of each DP replica trains
// on. It is the seam where a system decides how data meets the pipeline (DFLOP's N_mb × L_dp
// buckets, FlowTrain's packer with zig-zag dispatch): the planner asks the strategy for it
// (Strategy::Assign), the plan records it (IterationPlan::assignment), the planner's fallback
// keeps it, and nothing downstream re-splits the batch.
struct Assignment {
  // Per DP replica of the anchor module (the first LLM; all modules when the placement is
  // folded): its microbatches as indices into the sequences (`sequences` when set, else
  // batch.sequences; batch.samples when the batch is not packed).
  std::vector<Microbatches> replicas;
  // The strategy's own packing of the batch's samples into sequences (empty = the batch's own):
  // a strategy that re-packs (FlowTrain) puts its sequences here and indexes them above.
  std::vector<spec::PackedSequence> sequences;
  // Unfolded placements, modules whose DP differs from the anchor's: producers[m][a][j] = the
  // replicas of module m that serve microbatch j of anchor replica a, each taking a contiguous
  // share of the microbatch's instances, in this order. Empty (for the whole table or one module)
  // = the default rule (GraphBuildOptions::producer_replicas, planning/graph_builder.h).
  std::vector<std::vector<std::vector<std::vector<int>>>> producers;
  std::string policy = "round-robin";  // who made it (for reports and the plan)
  std::string notes;                   // given vs used (e.g. fewer microbatches than asked)

  // Every replica has at least one microbatch, every index lies in the batch, no sequence is
  // assigned twice; packed `sequences` name valid, distinct samples; producer tables name
  // existing replicas. InvalidArgument naming the replica, microbatch and rule otherwise.
  Status Validate(const spec::Batch& batch) const;
  // The batch this assignment plans: `batch` with `sequences` in place of its own when set.
  spec::Batch Apply(const spec::Batch& batch) const;
};

// One DP replica's data assignment, stage graph and schedule. `microbatches` is the replica's
// share of the batch as planned; the graph's stages and edges name the samples they hold
// (graph::Stage::samples, graph::Edge::samples). Compile, the service fallback and the runtime
// read these; nothing re-splits the batch.
struct ReplicaPlan {
  Microbatches microbatches;
  graph::StageGraph graph;
  sched::Schedule schedule;
  double samples = 0;  // samples and LLM tokens this replica trains on
  double tokens = 0;
};

struct IterationPlan {
  std::vector<ReplicaPlan> replicas;  // one per DP replica with its own data
  // The batch as planned (the strategy's packing applied) and its assignment (set by the
  // planner: the strategy's Assign; replicas[r].microbatches are its microbatches as graphed).
  std::shared_ptr<const spec::Batch> batch;
  Assignment assignment;
  double model_flops = 0;  // all replicas, per iteration
  double plan_time_s = 0;  // wall time spent planning this iteration
  std::string notes;       // given vs used (e.g. microbatches reduced)
};

// Limits for per-iteration search (rule-based strategies ignore them).
struct PlanBudget {
  double time_budget_s = 1.0;
  int64_t work_budget = 0;  // deterministic work units (0 = unlimited)
  // Planning threads (dip: DP replicas in parallel; each search on one thread under a work
  // budget, so the plan does not depend on the count).
  int threads = 1;
  uint64_t seed = 0;  // search seed; 0 = the job's seed
  // Set by the caller (e.g. PlannerService's destructor) to stop a search early; the strategy
  // returns its best plan so far. May be null.
  const std::atomic<bool>* interrupt = nullptr;

  static constexpr double kMaxTimeBudgetS = 3600;     // one hour per iteration
  static constexpr int64_t kMaxWorkBudget = 100'000;  // dip: ~6 to 22 min per iteration
  static constexpr int kMaxThreads = 256;             // algo::MctsOptions::kMaxThreads
  // time_budget_s finite, >= 0 and (without a work budget) <= kMaxTimeBudgetS, work_budget in [0,
  // kMaxWorkBudget], threads in [1, kMaxThreads]; else InvalidArgument naming the field, value and
  // range.
  Status Validate() const;
};

// "work 100 units (deterministic)" or "wall clock 1000 ms", for headers and JSON.
std::string DescribeBudget(const PlanBudget& budget);

// The default assignment (the rule every system used before the seam): sequences dealt
// round-robin to the `dp` anchor replicas, each replica's list cut into `num_microbatches`
// contiguous microbatches of near-equal size (SplitBatch; fewer when a replica has fewer
// sequences, said in notes).
StatusOr<Assignment> DefaultAssignment(const spec::Batch& batch, int dp, int num_microbatches);

// A strategy's own state learned from measured feedback (DFLOP's per-shape penalties and its
// tracking toggle, strategy/dflop/correction.h): opaque to the planner, immutable once made,
// carried in PlanState and replaced by Strategy::Observe.
struct StrategyFeedback {
  virtual ~StrategyFeedback() = default;
};

// The measured time of one executed stage of a planned iteration: replica r's graph stage
// `stage` (graph::StageId; the runtime's measured record names it through the plan) took
// `measured_s` seconds.
struct MeasuredStage {
  int replica = 0;
  graph::StageId stage = 0;
  double measured_s = 0;
};

// What one iteration's planning hands to the next: Planner::Plan(batch, state) returns the next
// state with the plan. Strategies read it (const) through IterationInput.
struct PlanState {
  int64_t iterations_planned = 0;  // plans made before this one with this chain of states
  // The measured correction of the cost model's predictions (Planner::Observe; null = none):
  // the planner plans with job.cost_model->WithCorrection(correction) — the layer cache is
  // shared, nothing is rebuilt, and results under two corrections never mix (the cache holds
  // uncorrected values; CostCorrection::version tells corrections apart).
  std::shared_ptr<const cost::CostCorrection> correction;
  // The strategy's own feedback state (Strategy::Observe; null = none learned).
  std::shared_ptr<const StrategyFeedback> feedback;
};

// Everything PlanIteration plans one global batch from. `batch` is the batch as assigned (the
// strategy's packing applied, Assignment::Apply).
struct IterationInput {
  const spec::Batch& batch;
  const Assignment& assignment;
  PlanBudget budget = {};
  const PlanState* state = nullptr;  // null = a fresh state
};

// What the planner needs to know of a strategy.
struct StrategyTraits {
  // PlanIteration chooses recomputation / offload itself (per stage or per layer); the planner
  // then does not retry it with uniform recompute levels (MemoryPolicy::kStrategy).
  bool manages_memory = false;
  // PlanIteration is a fixed rule without search (milliseconds) whose layout the job's own
  // pipeline cannot express (fsdp): the planner's deadline fallback then runs PlanIteration
  // instead of re-planning the job's placement with 1F1B.
  bool is_own_fallback = false;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string_view Name() const = 0;
  virtual std::string_view Description() const = 0;
  // Once per job, before training.
  virtual StatusOr<StaticPlan> Prepare(const Job& job) const = 0;
  // Per iteration, first: the data assignment of one global batch (the seam: DFLOP's buckets,
  // FlowTrain's packer). Default: DefaultAssignment over the job's DP and the static plan's (else
  // the job's) microbatch count. The planner validates it and records it in the plan.
  virtual StatusOr<Assignment> Assign(const Job& job,
                                      const StaticPlan& plan,
                                      const spec::Batch& batch,
                                      const PlanState& state) const;
  // Per iteration, then: stage graphs and schedules for the assigned batch.
  virtual StatusOr<IterationPlan> PlanIteration(const Job& job,
                                                const StaticPlan& plan,
                                                const IterationInput& input) const = 0;
  // Measured feedback for the strategy's own state (Planner::Observe calls it after the cost
  // correction, with the same measured stages of `planned`; `state` holds the current feedback
  // and the cost correction `planned` was priced with; `job` is uncorrected). Default:
  // state.feedback unchanged.
  virtual StatusOr<std::shared_ptr<const StrategyFeedback>> Observe(
      const Job& job,
      const StaticPlan& plan,
      const PlanState& state,
      const IterationPlan& planned,
      const std::vector<MeasuredStage>& measured) const;
  // What the planner needs to know of the strategy, declared once.
  virtual StrategyTraits Traits() const { return {}; }
  // Whether the system applies to the job's model at all (FlowTrain needs frozen encoders):
  // FailedPrecondition with the reason otherwise. A comparison over every registered strategy
  // leaves inapplicable ones out with that reason; asked for by name, Prepare fails with it.
  virtual Status Applies(const Job&) const { return OkStatus(); }

  // Assign + PlanIteration with a fresh state (tests, tools that plan without a Planner).
  StatusOr<IterationPlan> PlanBatch(const Job& job,
                                    const StaticPlan& plan,
                                    const spec::Batch& batch,
                                    const PlanBudget& budget = {}) const;
};

}  // namespace weft::planning
