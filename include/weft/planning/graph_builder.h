#pragma once
// Building the StageGraph of one DP replica from a Placement, the microbatches of a batch and the
// cost model — the step every strategy shares. Also the helpers that turn a Job into device
// groups, split a batch over DP replicas and microbatches, and partition layer chains.
//
// Graph rules (per microbatch):
//  - module i gets its workload from data::DeriveModuleWorkload; a module with no work in the
//    microbatch (no images) has no stages;
//  - with a sub-microbatch size B_i > 0 its instances are split into ⌈N_i/B_i⌉ sub-microbatches
//    of near-equal instance counts (DIP §4);
//  - forward stages follow each module's chunks in layer order; the last chunk of a producer
//    feeds the first chunk of each consumer (fan-in and fan-out by the model's edges). Between
//    sub-microbatches the tokens are routed: an encoder instance goes to the projector
//    sub-microbatch holding the same (sample, item), anything else to the consumer
//    sub-microbatches holding its sample; an edge carries exactly those tokens and exists only
//    where it carries some (workloads without provenance: all pairs, bytes split evenly);
//  - backward stages exist per the frozen-status rule (cost::BackwardModeOf): kNone modules
//    have none; gradients flow along the reversed forward edges between modules that have them;
//    each sink module's last forward feeds its own last backward (the loss);
//  - split_backward emits kBackwardInput + kBackwardWeight (no W for frozen modules).
// Thread-safety: pure functions.
#include <vector>

#include "weft/common/status.h"
#include "weft/cost/cost_model.h"
#include "weft/graph/stage_graph.h"
#include "weft/spec/workload.h"
#include "weft/planning/strategy.h"

namespace weft::planning {

struct GraphBuildOptions {
  std::vector<int> sub_microbatch_size;        // per module; empty / 0 = whole microbatch
  std::vector<spec::Recompute> recompute;      // per module; empty = kNone
  bool split_backward = false;                 // B (input) and W (weight) as separate stages
  // A module with no work in a microbatch (no images) still gets zero-time stages on its chunks,
  // as a static pipeline (Megatron) passes the microbatch through every stage; keeps the rank
  // structure the interleaved rules rely on. false = such modules have no stages.
  bool keep_empty_stages = false;
  // Fraction of a stage's activations kept until W when split_backward (the inputs of the
  // linear layers that the weight gradient needs).
  double weight_grad_activation_fraction = 0.5;
  // Unfolded placements (Placement::unfolded): per microbatch, the replica of the anchor module
  // (the first LLM) that trains it; every other module's replicas take it by the rule of
  // DraftBuilder::TargetReplicas (graph_builder.cc). Empty = microbatch k on replica k mod R.
  std::vector<int> anchor_replica = {};
  // Unfolded placements: producer_replicas[m][k] = the replicas of module m that serve
  // microbatch k (Assignment::producers in the graph's microbatch order), each a contiguous share
  // of its instances in this order. Empty (for the table or a module) = the default rule:
  // module m with R_m replicas, anchor with R_a: R_m = R_a: the anchor's replica a;
  // R_m = f·R_a: replicas [a·f, (a+1)·f); R_a = f·R_m: replica a mod R_m; else every replica;
  // the microbatch's instances cut into shares balanced by cost and dispatched, microbatch by
  // microbatch, to the least-loaded serving replica (DraftBuilder::PlanDispatch,
  // docs/placements.md).
  std::vector<std::vector<std::vector<int>>> producer_replicas = {};
  // false: the default rule's serving replicas take even contiguous shares by instance count
  // (no cost balancing, no load carried between microbatches). PlanReplicas falls back to it
  // when the strategy's schedule rule cannot order the cost-balanced graph (a replica holding
  // microbatches out of the rule's warm-up pattern), and says so in the iteration's notes.
  bool balance_dispatch = true;

  // sub_microbatch_size and anchor_replica entries >= 0, recompute entries one of the four
  // levels, weight_grad_activation_fraction in [0, 1]; else InvalidArgument "<field> = <value>;
  // <rule>". producer_replicas is checked against the placement when the graph is built.
  // BuildStageGraph and BuildStageGraphVariants check it first.
  Status Validate() const;
};

struct BatchSplit {
  std::vector<Microbatches> replicas;  // [replica][microbatch] -> sequence indices
  int microbatches_used = 0;           // per replica (given vs used: may be fewer than asked)
  std::string notes;
};

// Deals sequences round-robin to `dp` replicas, then cuts each replica's list into `m`
// contiguous microbatches of near-equal size. Uses fewer microbatches when a replica has fewer
// sequences than `m` (and says so in notes). Fails if the batch has fewer sequences than dp.
StatusOr<BatchSplit> SplitBatch(const spec::Batch& batch, int dp, int num_microbatches);

// Sequences in a batch (packed sequences, or samples when not packed).
int NumSequences(const spec::Batch& batch);

// P pipeline groups of tp·cp GPUs each, dp replicas, Megatron rank order (TP fastest, then DP,
// then PP): group g replica r starts at GPU (g·dp + r)·tp·cp.
std::vector<graph::DeviceGroup> MakePipelineGroups(int num_groups, int tp, int cp, int dp);

// Fills static_bytes / grad_sync_bytes / optimizer_bytes of every group from the chunks it holds
// (parameters, gradients, optimizer state of trainable chunks; per GPU).
Status FillGroupStateBytes(const spec::ModelSpec& model,
                           const cost::CostModel& cost_model,
                           Placement& placement);

// The graph of one replica. Module names are set on the graph.
StatusOr<graph::StageGraph> BuildStageGraph(const spec::ModelSpec& model,
                                            const Placement& placement,
                                            const spec::Batch& batch,
                                            const Microbatches& microbatches,
                                            const cost::CostModel& cost_model,
                                            const data::WorkloadOptions& workload,
                                            const GraphBuildOptions& options = {});

// The same replica graph once per recompute assignment (recompute_by_variant[v] replaces
// options.recompute): the workloads, flows, edges and chunk costs are derived once, so each
// further variant costs a copy and a Finalize. Variant v equals BuildStageGraph with
// options.recompute = recompute_by_variant[v].
StatusOr<std::vector<graph::StageGraph>> BuildStageGraphVariants(
    const spec::ModelSpec& model,
    const Placement& placement,
    const spec::Batch& batch,
    const Microbatches& microbatches,
    const cost::CostModel& cost_model,
    const data::WorkloadOptions& workload,
    const GraphBuildOptions& options,
    const std::vector<std::vector<spec::Recompute>>& recompute_by_variant);

// The token shape the graph builder priced `stage` of a graph built from `microbatches` (its
// module's workload instances [instance_begin, instance_end) of its microbatch; context tokens
// not included): what cost::ShapeBucketOf keys a measured correction by.
StatusOr<cost::TokenShape> StageTokenShape(const spec::ModelSpec& model, const spec::Batch& batch,
                                           const Microbatches& microbatches,
                                           const data::WorkloadOptions& workload,
                                           const graph::Stage& stage);

// One layer unit of a module chain (a projector counts as one unit of all its linears).
struct LayerUnit {
  int module = 0;
  int first_layer = 0;
  int num_layers = 1;
};
// The modules' layers in topological order of the model, one unit per transformer layer.
std::vector<LayerUnit> ChainUnits(const spec::ModelSpec& model, const std::vector<int>& modules);

// Turns a contiguous partition of `units` (boundaries = first unit index of each part) into chunks:
// part k goes to group k % P as slot k / P; a part spanning several modules yields one chunk per
// module, all with the same slot index (they run back to back).
std::vector<Chunk> ChunksFromPartition(const std::vector<LayerUnit>& units,
                                       const std::vector<int>& part_begin,
                                       int num_groups);

}  // namespace weft::planning
