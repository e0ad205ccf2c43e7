#include "weft/strategy/graph_builder.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "weft/cost/ops.h"
#include "weft/data/workload.h"

namespace weft::strategy {
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
std::optional<Routed> RoutedTokens(const data::ModuleWorkload& pw, int pb, int pe,
                                   const data::ModuleWorkload& cw, int cb, int ce,
                                   bool by_item) {
  std::set<std::pair<int32_t, int32_t>> wanted;  // (sample, item); item = -1 when by sample
  for (int j = cb; j < ce; ++j) {
    const auto& inst = cw.instances[j];
    if (inst.segment_samples.size() != inst.segment_tokens.size()) return std::nullopt;
    if (by_item && inst.item < 0) return std::nullopt;
    for (int32_t sample : inst.segment_samples) wanted.insert({sample, by_item ? inst.item : -1});
  }
  Routed out;
  for (int i = pb; i < pe; ++i) {
    const auto& inst = pw.instances[i];
    if (inst.segment_samples.size() != inst.segment_tokens.size()) return std::nullopt;
    if (by_item && inst.item < 0) return std::nullopt;
    for (size_t k = 0; k < inst.segment_tokens.size(); ++k) {
      if (wanted.count({inst.segment_samples[k], by_item ? inst.item : -1})) {
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

StatusOr<graph::StageGraph> BuildStageGraph(const spec::ModelSpec& model,
                                            const Placement& placement, const spec::Batch& batch,
                                            const Microbatches& microbatches,
                                            const cost::CostModel& cost_model,
                                            const data::WorkloadOptions& workload,
                                            const GraphBuildOptions& options) {
  const int num_modules = static_cast<int>(model.modules.size());
  if (static_cast<int>(placement.parallel.size()) != num_modules) {
    return InvalidArgumentError("placement.parallel has " +
                                std::to_string(placement.parallel.size()) +
                                " entries; model has " + std::to_string(num_modules) + " modules");
  }
  graph::StageGraph g;
  for (const auto& group : placement.groups) g.AddGroup(group);
  std::vector<std::string> names;
  for (const auto& m : model.modules) names.push_back(m.name);
  g.SetModuleNames(names);

  std::vector<cost::BackwardMode> mode(num_modules);
  std::vector<std::vector<int>> chunks_of(num_modules);
  for (int i = 0; i < num_modules; ++i) {
    WEFT_ASSIGN_OR_RETURN(mode[i], cost::BackwardModeOf(model, i));
    chunks_of[i] = placement.ChunksOf(i);
  }
  auto recompute_of = [&](int i) {
    return i < static_cast<int>(options.recompute.size()) ? options.recompute[i]
                                                          : cost::Recompute::kNone;
  };
  auto sub_size_of = [&](int i) {
    return i < static_cast<int>(options.sub_microbatch_size.size())
               ? options.sub_microbatch_size[i]
               : 0;
  };
  const std::vector<int> order = model.TopologicalOrder();

  for (int mb = 0; mb < static_cast<int>(microbatches.size()); ++mb) {
    // flows[module][sub] for this microbatch.
    std::vector<std::vector<FlowStages>> flows(num_modules);
    std::vector<int64_t> module_tokens(num_modules, 0);
    std::vector<data::ModuleWorkload> works(num_modules);
    // Every sample of the microbatch (for stages whose workload does not say which it holds).
    std::vector<int32_t> mb_samples;
    for (int seq : microbatches[mb]) {
      if (batch.sequences.empty()) {
        mb_samples.push_back(seq);
      } else if (seq >= 0 && seq < static_cast<int>(batch.sequences.size())) {
        for (int sample : batch.sequences[seq].sample_indices) mb_samples.push_back(sample);
      }
    }
    for (int i : order) {
      if (chunks_of[i].empty()) continue;
      WEFT_ASSIGN_OR_RETURN(
          data::ModuleWorkload w,
          data::DeriveModuleWorkload(model, i, batch, microbatches[mb], workload));
      const int n = w.NumInstances();
      works[i] = w;
      if (n == 0 || w.TotalTokens() == 0) {
        if (!options.keep_empty_stages) continue;
        // Zero-time pass-through stages on every chunk (no activations, no bytes).
        FlowStages flow;
        flow.samples = g.AddSampleSet({});
        const bool has_backward = mode[i] != cost::BackwardMode::kNone;
        for (int ci : chunks_of[i]) {
          const Chunk& chunk = placement.chunks[ci];
          graph::Stage f;
          f.group = chunk.group;
          f.module = i;
          f.chunk = chunk.chunk;
          f.microbatch = mb;
          f.pass = graph::Pass::kForward;
          f.samples = flow.samples;
          flow.forward.push_back(g.AddStage(f));
          flow.group.push_back(chunk.group);
          flow.chunk_output_bytes.push_back(0);
          flow.weight.push_back(-1);
          if (has_backward) {
            f.pass = options.split_backward ? graph::Pass::kBackwardInput : graph::Pass::kBackward;
            flow.backward.push_back(g.AddStage(f));
          } else {
            flow.backward.push_back(-1);
          }
        }
        LinkChunkChain(flow, placement.IsReplicated(i), g);
        flows[i].push_back(std::move(flow));
        continue;
      }
      module_tokens[i] = w.TotalTokens();
      // Cross-attention context (DiT conditioned on text): the producers' tokens.
      int64_t context = 0;
      if (model.modules[i].text_condition_hidden > 0) {
        for (int p : model.Predecessors(i)) context += module_tokens[p];
      }
      const int b = sub_size_of(i);
      const int subs = b > 0 ? (n + b - 1) / b : 1;
      const auto& parallel = placement.parallel[i];
      const cost::Recompute recompute = recompute_of(i);
      for (int s = 0; s < subs; ++s) {
        auto [begin, end] = EvenSlice(n, subs, s);
        // A sub-microbatch attends to its own samples' context when the workloads say which.
        int64_t sub_context = context / subs;
        if (context > 0) {
          int64_t routed_context = 0;
          bool known = true;
          for (int p : model.Predecessors(i)) {
            const auto r = RoutedTokens(works[p], 0, works[p].NumInstances(), w, begin, end,
                                        /*by_item=*/false);
            if (!r) known = false;
            routed_context += r ? r->tokens : 0;
          }
          if (known) sub_context = routed_context;
        }
        cost::TokenShape shape = ShapeOf(w, begin, end, sub_context);
        FlowStages flow;
        flow.instance_begin = begin;
        flow.instance_end = end;
        std::vector<int32_t> samples = InstanceSamples(w, begin, end, &flow.rows);
        flow.samples = g.AddSampleSet(samples.empty() ? mb_samples : std::move(samples));
        const double out_bytes =
            cost::OutputActivationBytes(model.modules[i], shape, parallel);
        // Every chunk of a cross-attending module needs the context: it travels with the
        // activations down the chunk chain (and its gradient back).
        const double context_bytes = 2.0 * static_cast<double>(sub_context) *
                                     model.modules[i].text_condition_hidden /
                                     std::max(1, parallel.cp);
        for (int ci : chunks_of[i]) {
          const Chunk& chunk = placement.chunks[ci];
          WEFT_ASSIGN_OR_RETURN(cost::ChunkCost c,
                                cost_model.Chunk(model, i, chunk.first_layer, chunk.num_layers,
                                                 shape, parallel, recompute));
          const bool has_backward = mode[i] != cost::BackwardMode::kNone;
          const double replica_width = static_cast<double>(parallel.tp) * parallel.cp;
          graph::Stage f;
          f.group = chunk.group;
          f.module = i;
          f.chunk = chunk.chunk;
          f.microbatch = mb;
          f.sub_microbatch = s;
          f.pass = graph::Pass::kForward;
          f.instance_begin = begin;
          f.instance_end = end;
          f.samples = flow.samples;
          f.latency_s = recompute == cost::Recompute::kOffload
                            ? std::max(c.forward_s, c.offload_transfer_s)
                            : c.forward_s;
          // A replicated module repeats the same work on every copy: count its model FLOPs once.
          const double copies =
              placement.IsReplicated(i) ? static_cast<double>(chunks_of[i].size()) : 1.0;
          f.flops = c.forward_flops * replica_width / copies;
          const int64_t act = has_backward ? static_cast<int64_t>(c.ActivationBytes()) : 0;
          f.activation_alloc_bytes = act;
          f.recompute = static_cast<graph::Recompute>(static_cast<int>(recompute));
          flow.forward.push_back(g.AddStage(f));
          flow.group.push_back(chunk.group);
          flow.chunk_output_bytes.push_back(out_bytes + context_bytes);
          if (has_backward) {
            graph::Stage bs = f;
            const double backward_s = recompute == cost::Recompute::kOffload
                                          ? std::max(c.BackwardS(), c.offload_transfer_s)
                                          : c.BackwardS();
            bs.activation_alloc_bytes = 0;
            if (options.split_backward) {
              bs.pass = graph::Pass::kBackwardInput;
              bs.latency_s = backward_s - c.backward_weight_s;
              bs.flops = c.backward_input_flops * replica_width / copies;
              const bool has_w = mode[i] == cost::BackwardMode::kFull && c.backward_weight_s > 0;
              const int64_t kept =
                  has_w ? static_cast<int64_t>(act * options.weight_grad_activation_fraction) : 0;
              bs.activation_free_bytes = act - kept;
              flow.backward.push_back(g.AddStage(bs));
              if (has_w) {
                graph::Stage w_stage = bs;
                w_stage.pass = graph::Pass::kBackwardWeight;
                w_stage.latency_s = c.backward_weight_s;
                w_stage.flops = c.backward_weight_flops * replica_width / copies;
                w_stage.activation_free_bytes = kept;
                flow.weight.push_back(g.AddStage(w_stage));
              } else {
                flow.weight.push_back(-1);
              }
            } else {
              bs.pass = graph::Pass::kBackward;
              bs.latency_s = backward_s;
              bs.flops =
                  (c.backward_input_flops + c.backward_weight_flops) * replica_width / copies;
              bs.activation_free_bytes = act;
              flow.backward.push_back(g.AddStage(bs));
              flow.weight.push_back(-1);
            }
          } else {
            flow.backward.push_back(-1);
            flow.weight.push_back(-1);
          }
        }
        flow.output_bytes = out_bytes;
        LinkChunkChain(flow, placement.IsReplicated(i), g);
        flows[i].push_back(std::move(flow));
      }
    }
    // Edges between modules.
    for (const auto& edge : model.edges) {
      const int p = *model.FindModule(edge.from);
      const int c = *model.FindModule(edge.to);
      if (flows[p].empty() || flows[c].empty()) continue;
      const double consumer_subs = static_cast<double>(flows[c].size());
      const auto producer_kind = model.modules[p].kind;
      const bool by_item = model.modules[c].kind == spec::ModuleKind::kMlpProjector &&
                           producer_kind != spec::ModuleKind::kMlpProjector &&
                           producer_kind != spec::ModuleKind::kLlm;
      for (const FlowStages& pf : flows[p]) {
        for (const FlowStages& cf : flows[c]) {
          // Sub-microbatches: each consumer gets exactly its instances' tokens (no edge where it
          // takes none); empty flows and workloads without provenance split evenly.
          auto bytes = static_cast<int64_t>(pf.output_bytes / consumer_subs);
          graph::SampleSetId carried = -1;
          int64_t rows = -1;
          if (pf.instance_end > pf.instance_begin && cf.instance_end > cf.instance_begin) {
            auto routed =
                RoutedTokens(works[p], pf.instance_begin, pf.instance_end, works[c],
                             cf.instance_begin, cf.instance_end, by_item);
            if (routed) {
              if (routed->tokens == 0) continue;
              cost::TokenShape shape;
              shape.tokens = routed->tokens;
              bytes = static_cast<int64_t>(
                  cost::OutputActivationBytes(model.modules[p], shape, placement.parallel[p]));
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
          auto link = [&](size_t pk, size_t ck) {
            g.AddEdge(graph::Edge{.from = pf.forward[pk], .to = cf.forward[ck], .bytes = bytes,
                                  .samples = carried, .rows = rows});
            if (cf.backward[ck] >= 0 && pf.backward[pk] >= 0) {
              g.AddEdge(graph::Edge{.from = cf.backward[ck], .to = pf.backward[pk],
                                    .bytes = bytes, .samples = carried, .rows = rows});
            }
          };
          if (placement.IsReplicated(p)) {
            // Each copy feeds the consumer's first chunk on its own group.
            for (size_t pk = 0; pk < pf.forward.size(); ++pk) {
              for (size_t ck = 0; ck < cf.forward.size(); ++ck) {
                if (cf.group[ck] == pf.group[pk]) {
                  link(pk, ck);
                  break;
                }
              }
            }
          } else {
            link(pf.forward.size() - 1, 0);
          }
        }
      }
    }
    // Loss: each sink module's last forward feeds its last backward (already linked by the
    // F(k) -> B(k) edge; nothing more to add).
  }
  WEFT_RETURN_IF_ERROR(g.Finalize());
  return g;
}

}  // namespace weft::strategy
