#include "weft/planning/graph_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string>

#include "weft/algo/balance.h"
#include "weft/algo/partition.h"
#include "weft/cost/ops.h"
#include "weft/data/workload.h"

namespace weft::planning {
namespace {

// Near-equal contiguous split of n items into k parts: [begin, end) of part i.
std::pair<int, int> EvenSlice(int n, int k, int i) {
  const int base = n / k, extra = n % k;
  const int begin = i * base + std::min(i, extra);
  return {begin, begin + base + (i < extra ? 1 : 0)};
}

cost::TokenShape ShapeOf(const data::ModuleWorkload& workload, int begin, int end,
                         int64_t context_tokens) {
  cost::TokenShape shape;
  shape.tokens = 0;
  shape.sum_squared_tokens = 0;
  shape.instances = std::max(1, end - begin);
  for (int i = begin; i < end; ++i) {
    for (int32_t s : workload.instances[i].segment_tokens) {
      shape.tokens += s;
      shape.sum_squared_tokens += static_cast<double>(s) * s;
    }
    shape.window_sum_squared_tokens += workload.instances[i].window_sum_squared;
  }
  shape.context_tokens = context_tokens;
  return shape;
}

// The stages of one (microbatch, module, sub-microbatch): forward and backward ids per chunk of
// the module (index = position in Placement::ChunksOf), -1 where absent.
struct FlowStages {
  std::vector<graph::StageId> forward;
  std::vector<graph::StageId> backward;  // kBackward or kBackwardInput
  std::vector<graph::StageId> weight;    // kBackwardWeight (split only)
  std::vector<graph::GroupId> group;     // group of each chunk
  double output_bytes = 0;               // what its last chunk sends downstream
  int instance_begin = 0, instance_end = 0;  // its instances of the module's workload
  graph::SampleSetId samples = -1;           // the samples of those instances
  int64_t rows = 0;                          // tokens of those instances (activation rows)
  std::vector<double> chunk_output_bytes;  // per chunk: bytes to the next chunk
};

// Producer tokens of instances [pb, pe) of `pw` that consumer instances [cb, ce) of `cw` take:
// an encoder's instance goes to the projector instance of the same (sample, item); otherwise a
// segment goes to the consumer instances holding its sample. nullopt when the workloads do not
// say where their tokens come from.
struct Routed {
  int64_t tokens = 0;
  std::vector<int32_t> samples;  // samples whose tokens are routed
};
// What consumer instances [cb, ce) of `cw` take: their (sample, item) keys, item = -1 when by
// sample, sorted and unique; nullopt when the workload has no provenance. Computed once per
// consumer flow and looked up for every producer flow.
std::optional<std::vector<std::pair<int32_t, int32_t>>> WantedKeys(const data::ModuleWorkload& cw,
                                                                    int cb, int ce, bool by_item) {
  std::vector<std::pair<int32_t, int32_t>> wanted;
  for (int j = cb; j < ce; ++j) {
    const auto& inst = cw.instances[j];
    if (inst.segment_samples.size() != inst.segment_tokens.size()) return std::nullopt;
    if (by_item && inst.item < 0) return std::nullopt;
    for (int32_t sample : inst.segment_samples) {
      wanted.push_back({sample, by_item ? inst.item : -1});
    }
  }
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  return wanted;
}
std::optional<Routed> RoutedTokens(
    const data::ModuleWorkload& pw, int pb, int pe,
    const std::optional<std::vector<std::pair<int32_t, int32_t>>>& wanted, bool by_item) {
  if (!wanted) return std::nullopt;
  Routed out;
  for (int i = pb; i < pe; ++i) {
    const auto& inst = pw.instances[i];
    if (inst.segment_samples.size() != inst.segment_tokens.size()) return std::nullopt;
    if (by_item && inst.item < 0) return std::nullopt;
    for (size_t k = 0; k < inst.segment_tokens.size(); ++k) {
      const std::pair<int32_t, int32_t> key{inst.segment_samples[k], by_item ? inst.item : -1};
      if (std::binary_search(wanted->begin(), wanted->end(), key)) {
        out.tokens += inst.segment_tokens[k];
        out.samples.push_back(inst.segment_samples[k]);
      }
    }
  }
  return out;
}

// The samples of instances [begin, end) of `w`; empty when the workload has no provenance.
std::vector<int32_t> InstanceSamples(const data::ModuleWorkload& w, int begin, int end,
                                     int64_t* tokens) {
  std::vector<int32_t> out;
  *tokens = 0;
  for (int j = begin; j < end; ++j) {
    const auto& inst = w.instances[j];
    for (int32_t t : inst.segment_tokens) *tokens += t;
    for (int32_t sample : inst.segment_samples) {
      if (sample >= 0) out.push_back(sample);
    }
  }
  return out;
}

// Edges inside one module's flow: F(k)→B(k) and B→W on each chunk, and the chain of chunks
// (activations forward, gradients back). Replicated modules have independent copies: no chain.
void LinkChunkChain(const FlowStages& flow, bool replicated, graph::StageGraph& g) {
  for (size_t k = 0; k < flow.forward.size(); ++k) {
    auto add = [&](graph::StageId from, graph::StageId to, int64_t bytes, int64_t rows) {
      g.AddEdge(graph::Edge{.from = from, .to = to, .bytes = bytes, .samples = flow.samples,
                            .rows = rows});
    };
    if (flow.backward[k] >= 0) add(flow.forward[k], flow.backward[k], 0, 0);
    if (flow.weight[k] >= 0) add(flow.backward[k], flow.weight[k], 0, 0);
    if (replicated || k == 0) continue;
    const auto bytes = static_cast<int64_t>(flow.chunk_output_bytes[k - 1]);
    add(flow.forward[k - 1], flow.forward[k], bytes, flow.rows);
    if (flow.backward[k] >= 0 && flow.backward[k - 1] >= 0) {
      add(flow.backward[k], flow.backward[k - 1], bytes, flow.rows);
    }
  }
}

}  // namespace

StatusOr<cost::TokenShape> StageTokenShape(const spec::ModelSpec& model, const spec::Batch& batch,
                                           const Microbatches& microbatches,
                                           const data::WorkloadOptions& workload,
                                           const graph::Stage& stage) {
  if (stage.microbatch < 0 || stage.microbatch >= static_cast<int>(microbatches.size())) {
    return InvalidArgumentError("stage of microbatch " + std::to_string(stage.microbatch) +
                                "; the graph has " + std::to_string(microbatches.size()));
  }
  WEFT_ASSIGN_OR_RETURN(data::ModuleWorkload w,
                        data::DeriveModuleWorkload(model, stage.module, batch,
                                                   microbatches[stage.microbatch], workload));
  if (stage.instance_begin < 0 || stage.instance_end > w.NumInstances() ||
      stage.instance_begin > stage.instance_end) {
    return InvalidArgumentError("stage instances [" + std::to_string(stage.instance_begin) + ", " +
                                std::to_string(stage.instance_end) + ") outside the module's " +
                                std::to_string(w.NumInstances()));
  }
  return ShapeOf(w, stage.instance_begin, stage.instance_end, 0);
}

int NumSequences(const spec::Batch& batch) {
  return batch.sequences.empty() ? static_cast<int>(batch.samples.size())
                                 : static_cast<int>(batch.sequences.size());
}

StatusOr<BatchSplit> SplitBatch(const spec::Batch& batch, int dp, int num_microbatches) {
  if (dp <= 0) return InvalidArgumentError("dp = " + std::to_string(dp) + "; must be > 0");
  if (num_microbatches <= 0) {
    return InvalidArgumentError("num_microbatches = " + std::to_string(num_microbatches) +
                                "; must be > 0");
  }
  const int n = NumSequences(batch);
  if (n < dp) {
    return FailedPreconditionError("batch " + std::to_string(batch.iteration) + " has " +
                                   std::to_string(n) + " sequences; needs at least dp = " +
                                   std::to_string(dp));
  }
  BatchSplit split;
  split.replicas.resize(dp);
  std::vector<std::vector<int>> per_replica(dp);
  for (int i = 0; i < n; ++i) per_replica[i % dp].push_back(i);
  int used = num_microbatches;
  for (const auto& seqs : per_replica) used = std::min<int>(used, seqs.size());
  if (used < num_microbatches) {
    split.notes = "asked " + std::to_string(num_microbatches) + " microbatches, used " +
                  std::to_string(used) + " (a replica has only " + std::to_string(used) +
                  " sequences)";
  }
  split.microbatches_used = used;
  for (int r = 0; r < dp; ++r) {
    const int count = static_cast<int>(per_replica[r].size());
    for (int m = 0; m < used; ++m) {
      auto [b, e] = EvenSlice(count, used, m);
      split.replicas[r].emplace_back(per_replica[r].begin() + b, per_replica[r].begin() + e);
    }
  }
  return split;
}

std::vector<graph::DeviceGroup> MakePipelineGroups(int num_groups, int tp, int cp, int dp) {
  std::vector<graph::DeviceGroup> groups;
  const int width = tp * cp;
  for (int g = 0; g < num_groups; ++g) {
    graph::DeviceGroup group;
    group.first_gpu = g * dp * width;
    group.num_gpus = width;
    group.dp = dp;
    group.dp_stride_gpus = width;
    group.label = "pp" + std::to_string(g);
    groups.push_back(group);
  }
  return groups;
}

Status FillGroupStateBytes(const spec::ModelSpec& model, const cost::CostModel& cost_model,
                           Placement& placement) {
  for (auto& group : placement.groups) {
    group.static_bytes = 0;
    group.grad_sync_bytes = 0;
    group.optimizer_bytes = 0;
  }
  for (const Chunk& chunk : placement.chunks) {
    if (chunk.group < 0 || chunk.group >= static_cast<int>(placement.groups.size())) {
      return InvalidArgumentError("placement chunk group " + std::to_string(chunk.group) +
                                  " out of range");
    }
    WEFT_ASSIGN_OR_RETURN(
        cost::ChunkCost c,
        cost_model.Chunk(model, chunk.module, chunk.first_layer, chunk.num_layers,
                         cost::TokenShape::Uniform(1), placement.parallel[chunk.module]));
    auto& group = placement.groups[chunk.group];
    group.static_bytes += static_cast<int64_t>(c.StateBytes());
    group.grad_sync_bytes += static_cast<int64_t>(c.gradient_bytes);
    // The optimizer step reads gradients, master weights and moments, writes them back and
    // writes the bf16 weights.
    group.optimizer_bytes += static_cast<int64_t>(2 * c.optimizer_bytes + c.gradient_bytes +
                                                  c.parameter_bytes);
  }
  placement.grad_syncs.clear();
  if (!placement.unfolded) return OkStatus();
  // Per module: the groups holding the k-th chunk of each replica reduce together (chunks of
  // one replica that share a group add up into one set).
  for (int m = 0; m < static_cast<int>(model.modules.size()); ++m) {
    const int replicas = placement.NumReplicas(m);
    if (replicas <= 1) continue;
    std::map<std::vector<graph::GroupId>, int64_t> sets;
    const auto first = placement.ChunksOf(m, 0);
    for (size_t k = 0; k < first.size(); ++k) {
      std::vector<graph::GroupId> members;
      int64_t bytes = 0;
      for (int r = 0; r < replicas; ++r) {
        const auto ids = placement.ChunksOf(m, r);
        if (ids.size() != first.size()) {
          return InvalidArgumentError("placement: module '" + model.modules[m].name +
                                      "' has " + std::to_string(ids.size()) +
                                      " chunks in replica " + std::to_string(r) + " and " +
                                      std::to_string(first.size()) + " in replica 0");
        }
        const Chunk& chunk = placement.chunks[ids[k]];
        members.push_back(chunk.group);
        if (r == 0) {
          WEFT_ASSIGN_OR_RETURN(
              cost::ChunkCost c,
              cost_model.Chunk(model, m, chunk.first_layer, chunk.num_layers,
                               cost::TokenShape::Uniform(1), placement.parallel[m]));
          bytes = static_cast<int64_t>(c.gradient_bytes);
        }
      }
      std::sort(members.begin(), members.end());
      if (std::adjacent_find(members.begin(), members.end()) != members.end()) {
        return InvalidArgumentError("placement: two replicas of module '" +
                                    model.modules[m].name + "' share a group");
      }
      sets[members] += bytes;
    }
    for (auto& [members, bytes] : sets) {
      placement.grad_syncs.push_back({.module = m, .groups = members, .bytes = bytes});
    }
  }
  return OkStatus();
}

std::vector<LayerUnit> ChainUnits(const spec::ModelSpec& model, const std::vector<int>& modules) {
  std::vector<LayerUnit> units;
  for (int m : modules) {
    const auto& module = model.modules[m];
    if (module.kind == spec::ModuleKind::kMlpProjector) {
      units.push_back({m, 0, module.num_layers});
    } else {
      for (int l = 0; l < module.num_layers; ++l) units.push_back({m, l, 1});
    }
  }
  return units;
}

std::vector<Chunk> ChunksFromPartition(const std::vector<LayerUnit>& units,
                                       const std::vector<int>& part_begin, int num_groups) {
  std::vector<Chunk> chunks;
  const int parts = static_cast<int>(part_begin.size());
  for (int k = 0; k < parts; ++k) {
    const int begin = part_begin[k];
    const int end = k + 1 < parts ? part_begin[k + 1] : static_cast<int>(units.size());
    for (int u = begin; u < end; ++u) {
      const LayerUnit& unit = units[u];
      if (!chunks.empty() && u > begin && chunks.back().module == unit.module) {
        chunks.back().num_layers += unit.num_layers;
        continue;
      }
      chunks.push_back({.module = unit.module,
                        .first_layer = unit.first_layer,
                        .num_layers = unit.num_layers,
                        .group = k % num_groups,
                        .chunk = k / num_groups});
    }
  }
  return chunks;
}

namespace {

// How a priced stage takes its latency, FLOPs and activation bytes from its chunk's cost.
enum class StageRole { kForward, kBackward, kBackwardInput, kBackwardWeight };

// The cost-dependent fields of one stage: which chunk cost (index into GraphDraft::costs) and
// the factors that turn it into the stage's numbers. Recompute only changes how the cost is
// read (ChunkCost::recompute), so one ChunkCost prices a stage at every level.
struct StagePricing {
  graph::StageId stage = -1;
  int cost = -1;
  StageRole role = StageRole::kForward;
  int module = 0;
  double replica_width = 1;  // tp · cp: the model FLOPs of every GPU of the stage
  double copies = 1;         // replicated modules count their FLOPs once
  bool has_backward = true;  // activations are kept only when something consumes them
  bool has_weight = false;   // split backward with a W stage (part of the activations kept)
};

// Sets `st`'s latency, FLOPs, activation bytes and recompute from its chunk cost under
// `recompute` (the same numbers whether the graph is built once or as a variant).
void PriceStage(const StagePricing& p,
                const cost::ChunkCost& c,
                spec::Recompute recompute,
                const GraphBuildOptions& options,
                graph::Stage& st) {
  // Offload: the stages compute only; the simulator runs the copies (Stage::offload_bytes).
  const bool offload = recompute == spec::Recompute::kOffload && c.offload_transfer_s > 0;
  const int64_t act =
      p.has_backward ? static_cast<int64_t>(c.CostTotals::ActivationBytes(recompute)) : 0;
  const int64_t kept =
      p.has_weight ? static_cast<int64_t>(act * options.weight_grad_activation_fraction) : 0;
  const int64_t offloaded =
      offload && p.has_backward
          ? static_cast<int64_t>(c.CostTotals::ActivationBytes(spec::Recompute::kNone))
          : 0;
  const double backward_s = c.CostTotals::BackwardS(recompute);
  st.recompute = recompute;
  st.offload_bytes = p.role == StageRole::kBackwardWeight ? 0 : offloaded;
  switch (p.role) {
    case StageRole::kForward:
      st.latency_s = c.forward_s;
      st.flops = c.forward_flops * p.replica_width / p.copies;
      st.activation_alloc_bytes = act;
      break;
    case StageRole::kBackward:
      st.latency_s = backward_s;
      st.flops = (c.backward_input_flops + c.backward_weight_flops) * p.replica_width / p.copies;
      st.activation_alloc_bytes = 0;
      st.activation_free_bytes = act;
      break;
    case StageRole::kBackwardInput:
      st.latency_s = backward_s - c.backward_weight_s;
      st.flops = c.backward_input_flops * p.replica_width / p.copies;
      st.activation_alloc_bytes = 0;
      st.activation_free_bytes = act - kept;
      break;
    case StageRole::kBackwardWeight:
      st.latency_s = c.backward_weight_s;
      st.flops = c.backward_weight_flops * p.replica_width / p.copies;
      st.activation_alloc_bytes = 0;
      st.activation_free_bytes = kept;
      break;
  }
}

// A replica graph before pricing: stages with their structural fields, edges, sample sets, and
// how to price each stage. Priced and finalized once per recompute assignment (MakeGraph).
struct GraphDraft {
  graph::StageGraph graph;             // not finalized; priced stages hold no costs yet
  // One per (module chunk class, sub-microbatch shape): chunks with equal layer counts and
  // first/last flags share one, so its layer range is the first such chunk's, not each stage's.
  std::vector<cost::ChunkCost> costs;
  std::vector<StagePricing> pricing;   // one per priced stage (zero-time stages have none)
};

// Builds the draft of one replica, microbatch by microbatch (see graph_builder.h for the rules):
//  1. DeriveWorkloads: each module's instances in the microbatch (data::DeriveModuleWorkload);
//  2. AddModuleFlows: per (module, sub-microbatch) a flow of forward / backward stages on the
//     module's chunks, priced from one chunk cost each, and LinkChunkChain inside the flow;
//  3. LinkModuleEdges: the model's edges between flows, with the tokens routed to each consumer
//     sub-microbatch.
class DraftBuilder {
 public:
  DraftBuilder(const spec::ModelSpec& model, const Placement& placement, const spec::Batch& batch,
               const cost::CostModel& cost_model, const data::WorkloadOptions& workload,
               const GraphBuildOptions& options)
      : model_(model),
        placement_(placement),
        batch_(batch),
        cost_model_(cost_model),
        workload_(workload),
        options_(options),
        num_modules_(static_cast<int>(model.modules.size())) {}

  StatusOr<GraphDraft> Build(const Microbatches& microbatches) {
    num_microbatches_ = static_cast<int>(microbatches.size());
    WEFT_RETURN_IF_ERROR(Init());
    // Every microbatch's workloads first: the dispatch of a module's work over its replicas
    // balances the whole iteration (PlanDispatch).
    std::vector<MicrobatchState> states;
    states.reserve(microbatches.size());
    for (int mb = 0; mb < static_cast<int>(microbatches.size()); ++mb) {
      MicrobatchState state(num_modules_);
      state.microbatch = mb;
      state.all_samples = MicrobatchSamples(microbatches[mb]);
      WEFT_RETURN_IF_ERROR(DeriveWorkloads(microbatches[mb], state));
      states.push_back(std::move(state));
    }
    WEFT_RETURN_IF_ERROR(PlanDispatch(states));
    for (MicrobatchState& state : states) {
      for (int i : order_) {
        if (chunks_of_[i].empty()) continue;
        WEFT_RETURN_IF_ERROR(AddModuleFlows(i, state));
      }
      LinkModuleEdges(state);
      // Loss: each sink module's last forward feeds its last backward (already linked by the
      // F(k) -> B(k) edge; nothing more to add).
      state = MicrobatchState(0);  // done: free its workloads
    }
    // Finalized once (unpriced): every variant copies its adjacency and topological order
    // (StageGraph::WithStages). A draft that fails here stays unfinalized, so that each
    // variant's own Finalize reports the error it always did.
    static_cast<void>(draft_.graph.Finalize());
    return std::move(draft_);
  }

 private:
  // Instances [begin, end) of a module's workload in one microbatch, on one of its replicas.
  struct Slice {
    int replica, begin, end;
  };

  // What one microbatch's modules hold while its graph part is built.
  struct MicrobatchState {
    explicit MicrobatchState(int num_modules)
        : flows(num_modules), module_tokens(num_modules, 0), works(num_modules) {}
    int microbatch = 0;
    std::vector<std::vector<FlowStages>> flows;  // [module][sub-microbatch]
    std::vector<int64_t> module_tokens;          // tokens of modules with work
    std::vector<data::ModuleWorkload> works;     // modules with chunks
    // Every sample of the microbatch (for stages whose workload does not say which it holds).
    std::vector<int32_t> all_samples;
  };

  Status Init() {
    if (static_cast<int>(placement_.parallel.size()) != num_modules_) {
      return InvalidArgumentError("placement.parallel has " +
                                  std::to_string(placement_.parallel.size()) +
                                  " entries; model has " + std::to_string(num_modules_) +
                                  " modules");
    }
    graph::StageGraph& g = draft_.graph;
    for (const auto& group : placement_.groups) g.AddGroup(group);
    std::vector<std::string> names;
    for (const auto& m : model_.modules) names.push_back(m.name);
    g.SetModuleNames(names);
    mode_.resize(num_modules_);
    chunks_of_.resize(num_modules_);
    replica_chunks_.resize(num_modules_);
    for (int i = 0; i < num_modules_; ++i) {
      WEFT_ASSIGN_OR_RETURN(mode_[i], cost::BackwardModeOf(model_, i));
      chunks_of_[i] = placement_.ChunksOf(i);
      const int replicas = std::max(1, placement_.NumReplicas(i));
      replica_chunks_[i].resize(replicas);
      for (int r = 0; r < replicas; ++r) replica_chunks_[i][r] = placement_.ChunksOf(i, r);
    }
    order_ = model_.TopologicalOrder();
    if (placement_.unfolded) {
      g.SetGradSyncs(placement_.grad_syncs);
      anchor_ = std::max(0, data::FirstLlmModule(model_));
    }
    const auto& producers = options_.producer_replicas;
    if (static_cast<int>(producers.size()) > num_modules_) {
      return InvalidArgumentError("producer_replicas names " + std::to_string(producers.size()) +
                                  " modules; the model has " + std::to_string(num_modules_));
    }
    for (int i = 0; i < static_cast<int>(producers.size()); ++i) {
      if (producers[i].empty()) continue;
      if (static_cast<int>(producers[i].size()) != num_microbatches_) {
        return InvalidArgumentError("producer_replicas of module '" + model_.modules[i].name +
                                    "' cover " + std::to_string(producers[i].size()) +
                                    " microbatches; the graph has " +
                                    std::to_string(num_microbatches_));
      }
      const int ri = static_cast<int>(replica_chunks_[i].size());
      for (const auto& list : producers[i]) {
        if (list.empty()) {
          return InvalidArgumentError("producer_replicas of module '" + model_.modules[i].name +
                                      "': a microbatch has no producer");
        }
        for (int r : list) {
          if (r < 0 || r >= ri) {
            return InvalidArgumentError("producer_replicas of module '" +
                                        model_.modules[i].name + "' names replica " +
                                        std::to_string(r) + "; the module has " +
                                        std::to_string(ri));
          }
        }
      }
    }
    return OkStatus();
  }

  std::vector<int32_t> MicrobatchSamples(const std::vector<int>& sequences) const {
    std::vector<int32_t> samples;
    for (int seq : sequences) {
      if (batch_.sequences.empty()) {
        samples.push_back(seq);
      } else if (seq >= 0 && seq < static_cast<int>(batch_.sequences.size())) {
        for (int sample : batch_.sequences[seq].sample_indices) samples.push_back(sample);
      }
    }
    return samples;
  }

  // Step 1: the workload of every module that has chunks, in topological order.
  Status DeriveWorkloads(const std::vector<int>& sequences, MicrobatchState& state) const {
    for (int i : order_) {
      if (chunks_of_[i].empty()) continue;
      WEFT_ASSIGN_OR_RETURN(state.works[i],
                            data::DeriveModuleWorkload(model_, i, batch_, sequences, workload_));
      state.module_tokens[i] = state.works[i].TotalTokens();
    }
    return OkStatus();
  }

  int SubMicrobatchSize(int i) const {
    return i < static_cast<int>(options_.sub_microbatch_size.size())
               ? options_.sub_microbatch_size[i]
               : 0;
  }

  // Step 2 for a module without work in the microbatch (no images): zero-time pass-through
  // stages on every chunk when options.keep_empty_stages (no activations, no bytes), else none.
  void AddEmptyFlow(int i, MicrobatchState& state) {
    if (!options_.keep_empty_stages) return;
    graph::StageGraph& g = draft_.graph;
    FlowStages flow;
    flow.samples = g.AddSampleSet({});
    const bool has_backward = mode_[i] != cost::BackwardMode::kNone;
    for (int ci : replica_chunks_[i][TargetReplicas(i, state).front()]) {
      const Chunk& chunk = placement_.chunks[ci];
      graph::Stage f;
      f.group = chunk.group;
      f.module = i;
      f.chunk = chunk.chunk;
      f.microbatch = state.microbatch;
      f.pass = spec::Pass::kForward;
      f.samples = flow.samples;
      flow.forward.push_back(g.AddStage(f));
      flow.group.push_back(chunk.group);
      flow.chunk_output_bytes.push_back(0);
      flow.weight.push_back(-1);
      if (has_backward) {
        f.pass = options_.split_backward ? spec::Pass::kBackwardInput : spec::Pass::kBackward;
        flow.backward.push_back(g.AddStage(f));
      } else {
        flow.backward.push_back(-1);
      }
    }
    LinkChunkChain(flow, placement_.IsReplicated(i), g);
    state.flows[i].push_back(std::move(flow));
  }

  // Cross-attention context of sub-microbatch [begin, end) of module i (DiT conditioned on
  // text): its own samples' producer tokens when the workloads say which, else an even share.
  int64_t SubContextTokens(int i, int subs, int begin, int end,
                           const MicrobatchState& state) const {
    if (model_.modules[i].text_condition_hidden <= 0) return 0;
    int64_t context = 0;
    for (int p : model_.Predecessors(i)) context += state.module_tokens[p];
    int64_t sub_context = context / subs;
    if (context > 0) {
      int64_t routed_context = 0;
      bool known = true;
      for (int p : model_.Predecessors(i)) {
        const auto r =
            RoutedTokens(state.works[p], 0, state.works[p].NumInstances(),
                         WantedKeys(state.works[i], begin, end, /*by_item=*/false), false);
        if (!r) known = false;
        routed_context += r ? r->tokens : 0;
      }
      if (known) sub_context = routed_context;
    }
    return sub_context;
  }

  // Step 2: the flows of module i in this microbatch, one per sub-microbatch (DIP §4: ⌈N_i/B_i⌉
  // near-equal instance slices), each with its stages on every chunk of the module.
  Status AddModuleFlows(int i, MicrobatchState& state) {
    const data::ModuleWorkload& w = state.works[i];
    const int n = w.NumInstances();
    if (n == 0 || w.TotalTokens() == 0) {
      state.module_tokens[i] = 0;
      AddEmptyFlow(i, state);
      return OkStatus();
    }
    const int b = SubMicrobatchSize(i);
    // Unfolded placements: the module's replicas that take this microbatch, each a contiguous
    // slice of its instances (PlanDispatch: balanced by cost; an assignment's producer table:
    // even by count, in its order), each slice cut into sub-microbatches.
    std::vector<Slice> pieces;
    if (!dispatch_[i].empty()) {
      pieces = dispatch_[i][state.microbatch];
    } else {
      const std::vector<int> targets = TargetReplicas(i, state);
      const int parts = std::min<int>(static_cast<int>(targets.size()), n);
      for (int t = 0; t < parts; ++t) {
        auto [tb, te] = EvenSlice(n, parts, t);
        pieces.push_back({targets[t], tb, te});
      }
    }
    std::vector<Slice> slices;
    for (const Slice& piece : pieces) {
      const int len = piece.end - piece.begin;
      const int subs = b > 0 ? (len + b - 1) / b : 1;
      for (int k = 0; k < subs; ++k) {
        auto [kb, ke] = EvenSlice(len, subs, k);
        slices.push_back({piece.replica, piece.begin + kb, piece.begin + ke});
      }
    }
    const int subs = static_cast<int>(slices.size());
    for (int s = 0; s < subs; ++s) {
      const Slice& slice = slices[s];
      WEFT_RETURN_IF_ERROR(AddSubMicrobatchFlow(
          i, s, slice.replica, slice.begin, slice.end,
          SubContextTokens(i, subs, slice.begin, slice.end, state), state));
    }
    return OkStatus();
  }

  // Before any flow: the dispatch of each module's work over its replicas (unfolded placements,
  // modules with several replicas and no producer table in the assignment). Each microbatch's
  // instances are cut into as many contiguous pieces as it has serving replicas
  // (TargetReplicas), balanced by their cost (algo::MinMaxContiguousPartition on each instance's
  // forward + backward seconds); then, microbatch by microbatch, its pieces go largest first to
  // the least-loaded replica that serves it, loads carried over the iteration
  // (algo::LongestProcessingTimeFirstEligible with initial loads: list scheduling).
  // A microbatch holding one long video thus goes to an idle replica, not always to the first.
  // A module fed by a dispatched one with as many replicas and, in every microbatch, as many
  // instances (a projector on its encoder's replicas) takes the same dispatch, so each replica's
  // outputs stay on its own groups.
  Status PlanDispatch(const std::vector<MicrobatchState>& states) {
    dispatch_.assign(num_modules_, {});
    if (!placement_.unfolded || !options_.balance_dispatch) return OkStatus();
    for (int i : order_) {
      const int replicas = static_cast<int>(replica_chunks_[i].size());
      if (chunks_of_[i].empty() || replicas <= 1) continue;
      if (i < static_cast<int>(options_.producer_replicas.size()) &&
          !options_.producer_replicas[i].empty()) {
        continue;  // the assignment says who serves each microbatch
      }
      bool followed = false;
      for (int p : model_.Predecessors(i)) {
        if (dispatch_[p].empty() || static_cast<int>(replica_chunks_[p].size()) != replicas) {
          continue;
        }
        const bool same = std::all_of(states.begin(), states.end(), [&](const auto& state) {
          return state.works[p].NumInstances() == state.works[i].NumInstances();
        });
        if (same) {
          dispatch_[i] = dispatch_[p];
          followed = true;
          break;
        }
      }
      if (followed) continue;
      // Microbatch by microbatch (the order the pipeline consumes them), as list scheduling:
      // the replicas carry their loads, and each microbatch's pieces go largest first to the
      // least-loaded replica that serves it.
      std::vector<double> load(replicas, 0.0);
      dispatch_[i].assign(num_microbatches_, {});
      for (const MicrobatchState& state : states) {
        const data::ModuleWorkload& w = state.works[i];
        const int n = w.NumInstances();
        if (n == 0 || w.TotalTokens() == 0) continue;
        const std::vector<int> targets = TargetReplicas(i, state);
        std::vector<double> cost(n);
        for (int k = 0; k < n; ++k) {
          WEFT_ASSIGN_OR_RETURN(cost[k], InstanceSeconds(i, w, k));
        }
        const int parts = std::min<int>(static_cast<int>(targets.size()), n);
        std::vector<int> begins = {0};
        if (parts > 1) {
          WEFT_ASSIGN_OR_RETURN(algo::ContiguousPartition cut,
                                algo::MinMaxContiguousPartition(cost, parts));
          begins = cut.boundaries;
        }
        std::vector<Slice> pieces;
        std::vector<double> seconds;
        for (int p = 0; p < parts; ++p) {
          const int begin = begins[p];
          const int end = p + 1 < parts ? begins[p + 1] : n;
          pieces.push_back({targets.front(), begin, end});
          seconds.push_back(std::accumulate(cost.begin() + begin, cost.begin() + end, 0.0));
        }
        const std::vector<std::vector<int>> eligible(pieces.size(), targets);
        WEFT_ASSIGN_OR_RETURN(
            algo::BalanceResult lpt,
            algo::LongestProcessingTimeFirstEligible(seconds, replicas, eligible, load));
        for (size_t k = 0; k < pieces.size(); ++k) {
          pieces[k].replica = lpt.bin_of_item[k];
          load[pieces[k].replica] += seconds[k];
        }
        dispatch_[i][state.microbatch] = std::move(pieces);
      }
    }
    return OkStatus();
  }

  // Forward + backward seconds of instance k of module i's workload through the whole module
  // (the dispatch's weight; the same cost model the stages are priced with).
  StatusOr<double> InstanceSeconds(int i, const data::ModuleWorkload& w, int k) const {
    WEFT_ASSIGN_OR_RETURN(cost::ChunkCost c,
                          cost_model_.Chunk(model_, i, 0, model_.modules[i].num_layers,
                                            ShapeOf(w, k, k + 1, 0), placement_.parallel[i]));
    const bool backward = mode_[i] != cost::BackwardMode::kNone;
    return c.forward_s + (backward ? c.CostTotals::BackwardS(spec::Recompute::kNone) : 0.0);
  }

  // The replicas of module i that take microbatch `state.microbatch` (unfolded placements; else
  // {0}). The microbatch belongs to replica a of the anchor module (the LLM;
  // GraphBuildOptions::anchor_replica) with R_a replicas; module i has R_i:
  //   R_i = R_a: replica a;   R_i = f·R_a: replicas [a·f, (a+1)·f) share it;
  //   R_a = f·R_i: replica a mod R_i;   otherwise every replica takes a share.
  std::vector<int> TargetReplicas(int i, const MicrobatchState& state) const {
    const int ri = static_cast<int>(replica_chunks_[i].size());
    if (!placement_.unfolded || ri <= 1) return {0};
    if (i < static_cast<int>(options_.producer_replicas.size()) &&
        !options_.producer_replicas[i].empty()) {
      return options_.producer_replicas[i][state.microbatch];
    }
    const int ra = std::max<int>(1, static_cast<int>(replica_chunks_[anchor_].size()));
    const int mb = state.microbatch;
    const int a = mb < static_cast<int>(options_.anchor_replica.size())
                      ? options_.anchor_replica[mb] % ra
                      : mb % ra;
    std::vector<int> out;
    if (ri == ra) {
      out = {a};
    } else if (ri % ra == 0) {
      const int f = ri / ra;
      for (int r = a * f; r < (a + 1) * f; ++r) out.push_back(r);
    } else if (ra % ri == 0) {
      out = {a % ri};
    } else {
      for (int r = 0; r < ri; ++r) out.push_back(r);
    }
    return out;
  }

  // One (module, sub-microbatch) flow: forward (and backward, or backward-input + weight) stages
  // per chunk, priced from the chunk's cost, and the chain between the chunks.
  Status AddSubMicrobatchFlow(int i, int s, int replica, int begin, int end,
                              int64_t sub_context, MicrobatchState& state) {
    graph::StageGraph& g = draft_.graph;
    const data::ModuleWorkload& w = state.works[i];
    const auto& parallel = placement_.parallel[i];
    const cost::TokenShape shape = ShapeOf(w, begin, end, sub_context);
    FlowStages flow;
    flow.instance_begin = begin;
    flow.instance_end = end;
    std::vector<int32_t> samples = InstanceSamples(w, begin, end, &flow.rows);
    flow.samples = g.AddSampleSet(samples.empty() ? state.all_samples : std::move(samples));
    const double out_bytes = cost::OutputActivationBytes(model_.modules[i], shape, parallel);
    // Every chunk of a cross-attending module needs the context: it travels with the
    // activations down the chunk chain (and its gradient back).
    const double context_bytes = 2.0 * static_cast<double>(sub_context) *
                                 model_.modules[i].text_condition_hidden /
                                 std::max(1, parallel.cp);
    const bool has_backward = mode_[i] != cost::BackwardMode::kNone;
    StagePricing pricing{.module = i,
                         .replica_width = static_cast<double>(parallel.tp) * parallel.cp,
                         // A replicated module repeats the same work on every copy: count its
                         // model FLOPs once.
                         .copies = placement_.IsReplicated(i)
                                       ? static_cast<double>(chunks_of_[i].size())
                                       : 1.0,
                         .has_backward = has_backward};
    // The chunks of one shape cost alike when they hold as many layers and the same ends of
    // the module: CostModel::Chunk prices every layer that is neither the module's first nor
    // its last alike (its layer cache keys them as one). Each such class is priced once.
    struct PricedClass {
      int num_layers;
      bool first, last;
      int cost;
    };
    std::vector<PricedClass> priced;
    const int module_layers = model_.modules[i].num_layers;
    for (int ci : replica_chunks_[i][replica]) {
      const Chunk& chunk = placement_.chunks[ci];
      const bool first = chunk.first_layer == 0;
      const bool last = chunk.first_layer + chunk.num_layers == module_layers;
      // Only ranges Chunk accepts share a price (the others fail there, as before).
      const bool valid = chunk.num_layers >= 1 && chunk.first_layer >= 0 &&
                         chunk.first_layer + chunk.num_layers <= module_layers;
      auto same = std::find_if(priced.begin(), priced.end(), [&](const PricedClass& k) {
        return k.num_layers == chunk.num_layers && k.first == first && k.last == last;
      });
      if (valid && same != priced.end()) {
        pricing.cost = same->cost;
      } else {
        WEFT_ASSIGN_OR_RETURN(cost::ChunkCost priced_cost,
                              cost_model_.Chunk(model_, i, chunk.first_layer, chunk.num_layers,
                                                shape, parallel));
        pricing.cost = static_cast<int>(draft_.costs.size());
        draft_.costs.push_back(std::move(priced_cost));
        if (valid) priced.push_back({chunk.num_layers, first, last, pricing.cost});
      }
      const cost::ChunkCost& c = draft_.costs[pricing.cost];
      pricing.has_weight = false;
      const auto add = [&](graph::Stage st, StageRole role) {
        st.latency_s = 0;
        st.flops = 0;
        st.activation_alloc_bytes = 0;
        st.activation_free_bytes = 0;
        const graph::StageId id = g.AddStage(st);
        pricing.stage = id;
        pricing.role = role;
        draft_.pricing.push_back(pricing);
        return id;
      };
      graph::Stage f;
      f.group = chunk.group;
      f.module = i;
      f.chunk = chunk.chunk;
      f.microbatch = state.microbatch;
      f.sub_microbatch = s;
      f.pass = spec::Pass::kForward;
      f.instance_begin = begin;
      f.instance_end = end;
      f.samples = flow.samples;
      flow.forward.push_back(add(f, StageRole::kForward));
      flow.group.push_back(chunk.group);
      flow.chunk_output_bytes.push_back(out_bytes + context_bytes);
      if (!has_backward) {
        flow.backward.push_back(-1);
        flow.weight.push_back(-1);
        continue;
      }
      graph::Stage bs = f;
      if (options_.split_backward) {
        pricing.has_weight = mode_[i] == cost::BackwardMode::kFull && c.backward_weight_s > 0;
        bs.pass = spec::Pass::kBackwardInput;
        flow.backward.push_back(add(bs, StageRole::kBackwardInput));
        if (pricing.has_weight) {
          bs.pass = spec::Pass::kBackwardWeight;
          flow.weight.push_back(add(bs, StageRole::kBackwardWeight));
        } else {
          flow.weight.push_back(-1);
        }
      } else {
        bs.pass = spec::Pass::kBackward;
        flow.backward.push_back(add(bs, StageRole::kBackward));
        flow.weight.push_back(-1);
      }
    }
    flow.output_bytes = out_bytes;
    LinkChunkChain(flow, placement_.IsReplicated(i), g);
    state.flows[i].push_back(std::move(flow));
    return OkStatus();
  }

  // Step 3: the model's edges between this microbatch's flows. Sub-microbatches: each consumer
  // gets exactly its instances' tokens (no edge where it takes none); empty flows and workloads
  // without provenance split evenly and carry the samples both ends hold.
  void LinkModuleEdges(const MicrobatchState& state) {
    graph::StageGraph& g = draft_.graph;
    for (const auto& edge : model_.edges) {
      const int p = *model_.FindModule(edge.from);
      const int c = *model_.FindModule(edge.to);
      const auto& producer_flows = state.flows[p];
      const auto& consumer_flows = state.flows[c];
      if (producer_flows.empty() || consumer_flows.empty()) continue;
      const double consumer_subs = static_cast<double>(consumer_flows.size());
      const auto producer_kind = model_.modules[p].kind;
      const bool by_item = model_.modules[c].kind == spec::ModuleKind::kMlpProjector &&
                           producer_kind != spec::ModuleKind::kMlpProjector &&
                           producer_kind != spec::ModuleKind::kLlm;
      std::vector<std::optional<std::vector<std::pair<int32_t, int32_t>>>> wanted;
      wanted.reserve(consumer_flows.size());
      for (const FlowStages& cf : consumer_flows) {
        wanted.push_back(cf.instance_end > cf.instance_begin
                             ? WantedKeys(state.works[c], cf.instance_begin, cf.instance_end,
                                          by_item)
                             : std::nullopt);
      }
      for (const FlowStages& pf : producer_flows) {
        for (size_t ck = 0; ck < consumer_flows.size(); ++ck) {
          const FlowStages& cf = consumer_flows[ck];
          auto bytes = static_cast<int64_t>(pf.output_bytes / consumer_subs);
          graph::SampleSetId carried = -1;
          int64_t rows = -1;
          if (pf.instance_end > pf.instance_begin && cf.instance_end > cf.instance_begin) {
            auto routed = RoutedTokens(state.works[p], pf.instance_begin, pf.instance_end,
                                       wanted[ck], by_item);
            if (routed) {
              if (routed->tokens == 0) continue;
              cost::TokenShape shape;
              shape.tokens = routed->tokens;
              bytes = static_cast<int64_t>(
                  cost::OutputActivationBytes(model_.modules[p], shape, placement_.parallel[p]));
              carried = g.AddSampleSet(std::move(routed->samples));
              rows = routed->tokens;
            }
          }
          if (carried < 0) {
            // No provenance: the samples both ends hold.
            std::vector<int32_t> both;
            const auto a = g.sample_set(pf.samples);
            const auto b = g.sample_set(cf.samples);
            std::set_intersection(a.begin(), a.end(), b.begin(), b.end(),
                                  std::back_inserter(both));
            carried = g.AddSampleSet(std::move(both));
          }
          LinkFlows(pf, cf, placement_.IsReplicated(p), bytes, carried, rows);
        }
      }
    }
  }

  // Activations from producer flow `pf` to consumer flow `cf` (and gradients back): a replicated
  // producer's copies feed the consumer's first chunk on their own group; otherwise the
  // producer's last chunk feeds the consumer's first.
  void LinkFlows(const FlowStages& pf, const FlowStages& cf, bool replicated_producer,
                 int64_t bytes, graph::SampleSetId carried, int64_t rows) {
    graph::StageGraph& g = draft_.graph;
    auto link = [&](size_t pk, size_t ck) {
      g.AddEdge(graph::Edge{.from = pf.forward[pk], .to = cf.forward[ck], .bytes = bytes,
                            .samples = carried, .rows = rows});
      if (cf.backward[ck] >= 0 && pf.backward[pk] >= 0) {
        g.AddEdge(graph::Edge{.from = cf.backward[ck], .to = pf.backward[pk], .bytes = bytes,
                              .samples = carried, .rows = rows});
      }
    };
    if (!replicated_producer) {
      link(pf.forward.size() - 1, 0);
      return;
    }
    for (size_t pk = 0; pk < pf.forward.size(); ++pk) {
      for (size_t ck = 0; ck < cf.forward.size(); ++ck) {
        if (cf.group[ck] == pf.group[pk]) {
          link(pk, ck);
          break;
        }
      }
    }
  }

  const spec::ModelSpec& model_;
  const Placement& placement_;
  const spec::Batch& batch_;
  const cost::CostModel& cost_model_;
  const data::WorkloadOptions& workload_;
  const GraphBuildOptions& options_;
  const int num_modules_;
  int num_microbatches_ = 0;
  std::vector<cost::BackwardMode> mode_;
  std::vector<std::vector<int>> chunks_of_;  // per module: its chunks (Placement::ChunksOf)
  std::vector<std::vector<std::vector<int>>> replica_chunks_;  // [module][replica] -> chunks
  int anchor_ = 0;  // unfolded: the module whose replica owns each microbatch (the LLM)
  // [module][microbatch] -> its instances' slices on its replicas (PlanDispatch); empty for a
  // module: the even rule in AddModuleFlows.
  std::vector<std::vector<std::vector<Slice>>> dispatch_;
  std::vector<int> order_;                   // the model's topological order
  GraphDraft draft_;
};

// The finalized graph of `draft` with module i's stages priced at recompute[i] (kNone when
// missing). The draft's stages, edges and sample sets are copied as they are.
StatusOr<graph::StageGraph> MakeGraph(const GraphDraft& draft,
                                      const std::vector<spec::Recompute>& recompute,
                                      const GraphBuildOptions& options) {
  const graph::StageGraph& d = draft.graph;
  std::vector<graph::Stage> stages(d.stages().begin(), d.stages().end());
  for (const StagePricing& p : draft.pricing) {
    const spec::Recompute level = p.module < static_cast<int>(recompute.size())
                                      ? recompute[p.module]
                                      : spec::Recompute::kNone;
    PriceStage(p, draft.costs[p.cost], level, options, stages[p.stage]);
  }
  return d.WithStages(std::move(stages));
}

}  // namespace

Status GraphBuildOptions::Validate() const {
  for (size_t i = 0; i < sub_microbatch_size.size(); ++i) {
    if (sub_microbatch_size[i] < 0) {
      return InvalidArgumentError(
          fmt::format("sub_microbatch_size[{}] = {}; must be >= 0 (0 = the whole microbatch)", i,
                      sub_microbatch_size[i]));
    }
  }
  for (size_t i = 0; i < recompute.size(); ++i) {
    if (static_cast<int>(recompute[i]) >= spec::kNumRecompute) {
      return InvalidArgumentError(
          fmt::format("recompute[{}] = {}; must be none, selective, full or offload", i,
                      static_cast<int>(recompute[i])));
    }
  }
  if (!(weight_grad_activation_fraction >= 0 && weight_grad_activation_fraction <= 1)) {
    return InvalidArgumentError(
        fmt::format("weight_grad_activation_fraction = {}; must be in [0, 1]",
                    weight_grad_activation_fraction));
  }
  for (size_t k = 0; k < anchor_replica.size(); ++k) {
    if (anchor_replica[k] < 0) {
      return InvalidArgumentError(
          fmt::format("anchor_replica[{}] = {}; must be >= 0", k, anchor_replica[k]));
    }
  }
  return OkStatus();
}

StatusOr<graph::StageGraph> BuildStageGraph(const spec::ModelSpec& model,
                                            const Placement& placement, const spec::Batch& batch,
                                            const Microbatches& microbatches,
                                            const cost::CostModel& cost_model,
                                            const data::WorkloadOptions& workload,
                                            const GraphBuildOptions& options) {
  WEFT_RETURN_IF_ERROR(options.Validate());
  DraftBuilder builder(model, placement, batch, cost_model, workload, options);
  WEFT_ASSIGN_OR_RETURN(GraphDraft draft, builder.Build(microbatches));
  return MakeGraph(draft, options.recompute, options);
}

StatusOr<std::vector<graph::StageGraph>> BuildStageGraphVariants(
    const spec::ModelSpec& model,
    const Placement& placement,
    const spec::Batch& batch,
    const Microbatches& microbatches,
    const cost::CostModel& cost_model,
    const data::WorkloadOptions& workload,
    const GraphBuildOptions& options,
    const std::vector<std::vector<spec::Recompute>>& recompute_by_variant) {
  WEFT_RETURN_IF_ERROR(options.Validate());
  DraftBuilder builder(model, placement, batch, cost_model, workload, options);
  WEFT_ASSIGN_OR_RETURN(GraphDraft draft, builder.Build(microbatches));
  std::vector<graph::StageGraph> out;
  out.reserve(recompute_by_variant.size());
  for (const auto& recompute : recompute_by_variant) {
    WEFT_ASSIGN_OR_RETURN(graph::StageGraph g, MakeGraph(draft, recompute, options));
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace weft::planning
