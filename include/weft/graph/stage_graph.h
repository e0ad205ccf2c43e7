#pragma once
// StageGraph: the common intermediate form of every strategy. A stage is one computation of one
// model chunk on one device group (pipeline rank) for one (sub-)microbatch; edges are data
// dependencies (fan-in and fan-out are ordinary). Latencies and bytes are given by the caller
// (usually the cost model); the graph knows nothing about models.
//
// Units: every byte count on a stage, an edge or a group is *per GPU of the group* (a TP rank
// holds 1/tp of the parameters and sends its own slice); times in seconds; FLOPs are model FLOPs
// of one replica of the group (all its TP×CP GPUs together).
//
// Thread-safety: a finalized StageGraph is immutable and safe to read from many threads.
// Building (Add*, Finalize) is single-threaded. The graph owns its stages and groups; its edges,
// sample sets and adjacency are shared with its copies and re-priced graphs (WithStages) until
// one of them changes, so copies may be changed on different threads.
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"
#include "weft/spec/work.h"

namespace weft::graph {

using StageId = int32_t;
using GroupId = int32_t;
using EdgeId = int32_t;
// A set of batch samples (indices into the iteration's spec::Batch::samples, ascending) in the
// graph's table (StageGraph::sample_set). -1 = unknown (a graph built without a batch).
using SampleSetId = int32_t;

// A device group = the TP×CP GPUs that act as one pipeline rank, replicated `dp` times (the
// replicas are folded: simulated once, counted `dp` times for GPUs and FLOPs).
struct DeviceGroup {
  int first_gpu = 0;         // global id of the group's first GPU (replica 0); with
                             // ClusterSpec::gpus_per_node it decides NVLink vs network
  int num_gpus = 1;          // GPUs of one replica (tp × cp)
  int dp = 1;                // data-parallel replicas folded into this group
  int dp_stride_gpus = 0;    // GPU-id distance between consecutive DP replicas; 0 = num_gpus
                             // (replicas adjacent). Decides the link of the DP all-reduce.
  int64_t static_bytes = 0;  // per GPU: parameters + gradients + optimizer state + buffers
  int64_t grad_sync_bytes = 0;   // per GPU: gradient bytes all-reduced over the dp replicas
  int64_t optimizer_bytes = 0;   // per GPU: bytes the optimizer step reads + writes (HBM bound)
  std::string label = {};    // e.g. "pp3" or "vit/pp0"; for reports

  int TotalGpus() const { return num_gpus * dp; }
  // The GPU ids of replica `r` start at first_gpu + r * stride.
  int DpStrideGpus() const { return dp_stride_gpus > 0 ? dp_stride_gpus : num_gpus; }
};

// The gradient all-reduce of one module over explicitly unfolded data-parallel replicas: the
// groups holding the same layers of `module`, one per replica. A graph whose groups fold their
// replicas (DeviceGroup::dp > 1) needs none; a group in a GradSync is not folded (dp = 1) and
// its own grad_sync_bytes are not used. Runs after the last stage of every member group.
struct GradSync {
  int module = 0;
  std::vector<GroupId> groups;  // strictly ascending
  int64_t bytes = 0;            // gradient bytes per GPU of each member group
};

struct Stage {
  GroupId group = 0;         // device group that runs it
  int module = 0;            // caller's module index (names via StageGraph::module_names())
  int chunk = 0;             // local chunk index on its group, in data-flow order (0 = the
                             // chunk earliest in the model); schedule generators interleave by it
  int microbatch = 0;
  int sub_microbatch = 0;    // modality-specific slice of the microbatch (DIP); 0 if unused
  spec::Pass pass = spec::Pass::kForward;
  double latency_s = 0;      // compute time on the group
  double flops = 0;          // model FLOPs of one replica (for MFU); 0 if unknown
  int64_t activation_alloc_bytes = 0;  // per GPU, allocated when the stage starts
  int64_t activation_free_bytes = 0;   // per GPU, freed when the stage ends
  // Offloaded activations, per GPU: copied to host after this forward (D2H) or back before this
  // backward (H2D prefetch) on the group's copy stream; the simulator prices the copies
  // (docs/simulator.md "Offload"). Not in activation_*_bytes. 0 = nothing offloaded.
  int64_t offload_bytes = 0;
  spec::Recompute recompute = spec::Recompute::kNone;
  // Per-layer memory options (DIP §5.3): how many of the chunk's layers use none / selective /
  // full / offload (index = Recompute), layers in that order; all zero = every layer `recompute`.
  std::array<int16_t, 4> recompute_layers{};
  // The data assignment: the module's workload instances [instance_begin, instance_end) of this
  // (sub-)microbatch (data::ModuleWorkload order) and the samples they belong to.
  int32_t instance_begin = 0;
  int32_t instance_end = 0;
  SampleSetId samples = -1;
};

struct Edge {
  StageId from = 0;
  StageId to = 0;
  int64_t bytes = 0;  // per GPU sent from `from`'s group to `to`'s group; free on the same group
  // What the edge carries: the samples whose tokens cross it and the token rows (of the
  // producer's output) that belong to them. -1 = unknown; rows = 0 for control edges (F -> B).
  SampleSetId samples = -1;
  int64_t rows = -1;
};

class StageGraph {
 public:
  StageGraph() = default;

  // Building. Ids are dense and returned in insertion order. Adding after Finalize() un-finalizes.
  GroupId AddGroup(DeviceGroup group);
  StageId AddStage(const Stage& stage);
  void AddEdge(StageId from, StageId to, int64_t bytes = 0);
  void AddEdge(const Edge& edge);
  // Adds a sample set (sorted and deduplicated here); equal consecutive sets share one id.
  SampleSetId AddSampleSet(std::vector<int32_t> samples);
  void SetModuleNames(std::vector<std::string> names) { module_names_ = std::move(names); }
  void AddGradSync(GradSync sync) {
    finalized_ = false;
    grad_syncs_.push_back(std::move(sync));
  }
  void SetGradSyncs(std::vector<GradSync> syncs) {
    finalized_ = false;
    grad_syncs_ = std::move(syncs);
  }
  void Reserve(int num_stages, int num_edges);

  // Checks ids (groups exist, edge ends exist, no self edges, latencies/bytes >= 0), builds the
  // CSR adjacency and a topological order, and fails if there is a cycle (naming a stage on it).
  Status Finalize();
  // This graph with `stages` in place of its stages (one per stage id, in id order): groups,
  // edges, sample sets, module names and gradient syncs are kept. Finalized; InvalidArgument when
  // the count differs or a stage breaks a Finalize rule. For graphs re-priced from another one.
  // On a finalized graph only the new stages are checked: the adjacency and the topological
  // order depend on the edges alone and are copied.
  StatusOr<StageGraph> WithStages(std::vector<Stage> stages) const;
  // This graph with `stages` in place of its stages (as WithStages) and the edges `removed` (ids,
  // any order, duplicates allowed) taken out; the other edges keep their order (their ids shift
  // down). Finalized; InvalidArgument for an edge id out of range or a stage breaking a rule.
  // For a graph whose producers hand their outputs over through a buffer instead of edges
  // (planning/window.h).
  StatusOr<StageGraph> WithoutEdges(std::span<const EdgeId> removed,
                                    std::vector<Stage> stages) const;
  bool finalized() const { return finalized_; }

  int num_stages() const { return static_cast<int>(stages_.size()); }
  int num_edges() const { return static_cast<int>(topology_->edges.size()); }
  int num_groups() const { return static_cast<int>(groups_.size()); }
  const Stage& stage(StageId id) const { return stages_[id]; }
  const DeviceGroup& group(GroupId id) const { return groups_[id]; }
  const Edge& edge(EdgeId id) const { return topology_->edges[id]; }
  std::span<const Stage> stages() const { return stages_; }
  std::span<const DeviceGroup> groups() const { return groups_; }
  std::span<const Edge> edges() const { return topology_->edges; }
  const std::vector<std::string>& module_names() const { return module_names_; }
  const std::vector<GradSync>& grad_syncs() const { return grad_syncs_; }
  int num_sample_sets() const { return static_cast<int>(topology_->sample_sets.size()); }
  // Empty for -1 or an id out of range.
  std::span<const int32_t> sample_set(SampleSetId id) const {
    if (id < 0 || id >= num_sample_sets()) return {};
    return topology_->sample_sets[id];
  }

  // After Finalize(): edge ids leaving / entering a stage (in insertion order), and a
  // topological order of all stages (deterministic: Kahn's algorithm, smallest id first).
  std::span<const EdgeId> out_edges(StageId id) const {
    const Topology& t = *topology_;
    return {t.out_ids.data() + t.out_begin[id], t.out_ids.data() + t.out_begin[id + 1]};
  }
  std::span<const EdgeId> in_edges(StageId id) const {
    const Topology& t = *topology_;
    return {t.in_ids.data() + t.in_begin[id], t.in_ids.data() + t.in_begin[id + 1]};
  }
  std::span<const StageId> topological_order() const { return topology_->topo; }

  // "g2 F mb3.1 c1 vit" — group, pass, microbatch.sub, chunk, module name (or m<index>).
  std::string StageName(StageId id) const;

 private:
  // The edges, sample sets, adjacency and topological order: what graphs re-priced from one
  // another (WithStages) or copied have in common. Shared between them (copying a graph copies
  // no edges) and copied on the first change to one (MutableTopology).
  struct Topology {
    std::vector<Edge> edges;
    std::vector<std::vector<int32_t>> sample_sets;
    std::vector<int32_t> out_begin, in_begin;  // CSR offsets, size num_stages + 1
    std::vector<EdgeId> out_ids, in_ids;
    std::vector<StageId> topo;
  };
  // This graph's own topology, copied first when another graph shares it.
  Topology& MutableTopology();
  // Finalize's checks of every stage (ids, latencies, bytes, sample sets), in stage order.
  Status CheckStages() const;

  std::vector<DeviceGroup> groups_;
  std::vector<Stage> stages_;
  std::vector<std::string> module_names_;
  std::vector<GradSync> grad_syncs_;
  bool finalized_ = false;
  // Never null (an empty graph shares one empty topology).
  std::shared_ptr<Topology> topology_ = EmptyTopology();
  static std::shared_ptr<Topology> EmptyTopology();
};

}  // namespace weft::graph
