// FSDP (full shard, ZeRO-3) baseline: see include/weft/strategy/fsdp/fsdp.h for the cost model.
#include "weft/strategy/fsdp/fsdp.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <string>
#include <tuple>

#include <fmt/format.h>

#include "weft/cost/latency.h"
#include "weft/cost/ops.h"
#include "weft/data/workload.h"
#include "weft/sim/simulator.h"
#include "weft/strategy/common.h"
#include "weft/planning/graph_builder.h"

namespace weft::strategy::fsdp {
namespace {

int64_t CeilDiv(double bytes, int parts) {
  const auto b = static_cast<int64_t>(bytes);
  return parts <= 1 ? b : (b + parts - 1) / parts;
}

// The link the DP ranks' collectives use: NVLink when every rank's GPUs lie in one node.
const spec::LinkSpec& DpLink(const Job& job, const FsdpLayout& layout) {
  const int width = layout.tp * layout.cp;
  const graph::DeviceGroup first{.first_gpu = 0, .num_gpus = width};
  const graph::DeviceGroup last{.first_gpu = (layout.dp - 1) * width, .num_gpus = width};
  return sim::LinkBetween(first, last, job.cluster) == sim::LinkKind::kIntraNode
             ? job.cluster.intra_node
             : job.cluster.inter_node;
}

// Execution order of one rank: microbatch by microbatch, its forwards along the chain (units in
// data-flow order, Stage::chunk), then its backwards in reverse: gradient accumulation.
StatusOr<sched::Schedule> SequentialSchedule(const graph::StageGraph& g) {
  sched::Schedule s;
  s.name = "fsdp-sequential";
  s.order.assign(g.num_groups(), {});
  std::vector<graph::StageId> ids(g.num_stages());
  std::iota(ids.begin(), ids.end(), 0);
  auto key = [&](graph::StageId id) {
    const graph::Stage& st = g.stage(id);
    const bool backward = spec::IsBackward(st.pass);
    return std::make_tuple(st.microbatch, backward ? 1 : 0, backward ? -st.chunk : st.chunk,
                           st.sub_microbatch, static_cast<int>(st.pass));
  };
  std::stable_sort(ids.begin(), ids.end(),
                   [&](graph::StageId a, graph::StageId b) { return key(a) < key(b); });
  for (graph::StageId id : ids) s.order[g.stage(id).group].push_back(id);
  return s;
}

// `g` with stage latencies replaced (ids, edges, groups and sample sets kept).
StatusOr<graph::StageGraph> WithLatencies(const graph::StageGraph& g,
                                          const std::vector<double>& latency_s) {
  std::vector<graph::Stage> stages(g.stages().begin(), g.stages().end());
  for (size_t s = 0; s < stages.size(); ++s) stages[s].latency_s = latency_s[s];
  return g.WithStages(std::move(stages));
}

class FsdpStrategy final : public Strategy {
 public:
  std::string_view Name() const override { return "fsdp"; }
  planning::StrategyTraits Traits() const override { return {.is_own_fallback = true}; }
  std::string_view Description() const override {
    return "PyTorch FSDP full shard (ZeRO-3): every rank runs the whole model, parameters "
           "all-gathered per layer with prefetch, gradients reduce-scattered, states / DP";
  }

  // Every FSDP rank is a data-parallel replica: the batch is dealt over the layout's DP.
  StatusOr<Assignment> Assign(const Job& job, const StaticPlan& plan, const spec::Batch& batch,
                              const planning::PlanState&) const override {
    WEFT_ASSIGN_OR_RETURN(FsdpLayout layout, LayoutOf(job));
    if (NumSequences(batch) < layout.dp) {
      return FailedPreconditionError(fmt::format(
          "fsdp over {} ranks: batch {} has {} sequences; every rank needs one (raise "
          "--sequences or lower --gpus)",
          layout.dp, batch.iteration, NumSequences(batch)));
    }
    return planning::DefaultAssignmentFor(FsdpJob(job, layout), plan, batch);
  }

  StatusOr<StaticPlan> Prepare(const Job& job) const override {
    WEFT_RETURN_IF_ERROR(job.Validate());
    WEFT_ASSIGN_OR_RETURN(FsdpLayout layout, LayoutOf(job));
    const Job fj = FsdpJob(job, layout);
    WEFT_RETURN_IF_ERROR(fj.Validate());
    Placement placement;
    placement.parallel = ModuleParallels(fj);
    const int width = layout.tp * layout.cp;
    placement.groups = {graph::DeviceGroup{.first_gpu = 0,
                                           .num_gpus = width,
                                           .dp = layout.dp,
                                           .dp_stride_gpus = width,
                                           .label = "fsdp"}};
    // One chunk per FSDP unit, in data-flow order (slot k = unit k).
    const auto units = ChainUnits(job.model, job.model.TopologicalOrder());
    std::vector<int> begins(units.size());
    std::iota(begins.begin(), begins.end(), 0);
    placement.chunks = ChunksFromPartition(units, begins, 1);
    // Sharded states plus two units' unsharded parameters and gradients.
    double state_bytes = 0, optimizer_traffic_bytes = 0, max_param_bytes = 0, max_grad_bytes = 0;
    for (const Chunk& chunk : placement.chunks) {
      spec::ModuleParallel unsharded = placement.parallel[chunk.module];
      unsharded.dp = 1;
      WEFT_ASSIGN_OR_RETURN(cost::ChunkCost c,
                            job.cost_model->Chunk(job.model, chunk.module, chunk.first_layer,
                                                  chunk.num_layers, cost::TokenShape::Uniform(1),
                                                  unsharded));
      state_bytes += c.StateBytes();
      // The optimizer step of the shard reads gradients, master weights and moments, writes
      // them back and writes the bf16 weights (as FillGroupStateBytes, / DP).
      optimizer_traffic_bytes += 2 * c.optimizer_bytes + c.gradient_bytes + c.parameter_bytes;
      max_param_bytes = std::max(max_param_bytes, c.parameter_bytes);
      max_grad_bytes = std::max(max_grad_bytes, c.gradient_bytes);
    }
    graph::DeviceGroup& group = placement.groups[0];
    group.static_bytes = CeilDiv(state_bytes, layout.dp) +
                         2 * static_cast<int64_t>(max_param_bytes + max_grad_bytes);
    group.grad_sync_bytes = 0;  // the per-unit reduce-scatters replace the all-reduce
    group.optimizer_bytes = CeilDiv(optimizer_traffic_bytes, layout.dp);
    WEFT_RETURN_IF_ERROR(placement.Validate(job.model));
    StaticPlan plan;
    plan.placement = std::move(placement);
    plan.keep_empty_stages = true;  // every rank runs every unit (collectives need all ranks)
    plan.num_microbatches = layout.num_microbatches;
    plan.description = fmt::format(
        "FSDP full shard (ZeRO-3) over DP {} ranks of TP {}{}, {} microbatch(es) per rank, {} "
        "units (one per layer), all-gather prefetch of the next unit, states {:.3f} GiB per GPU",
        layout.dp, layout.tp, layout.cp > 1 ? fmt::format(" CP {}", layout.cp) : "",
        layout.num_microbatches, units.size(),
        static_cast<double>(plan.placement.groups[0].static_bytes) / (1LL << 30));
    return plan;
  }

  StatusOr<IterationPlan> PlanIteration(const Job& job, const StaticPlan& plan,
                                        const IterationInput& input) const override {
    WEFT_ASSIGN_OR_RETURN(FsdpLayout layout, LayoutOf(job));
    const Job fj = FsdpJob(job, layout);
    const Placement& placement = plan.placement;
    if (placement.groups.size() != 1) {
      return InvalidArgumentError("fsdp: the static plan has " +
                                  std::to_string(placement.groups.size()) +
                                  " groups; FSDP plans one group per rank");
    }
    WEFT_ASSIGN_OR_RETURN(IterationPlan out,
                          PlanReplicas(fj, plan, input, SequentialSchedule));
    // Collectives of every unit (chunk slot k = unit k).
    std::map<int, UnitCollectives> comm;        // by Stage::chunk
    std::map<int, cost::BackwardMode> mode_of;  // by module
    for (const Chunk& chunk : placement.chunks) {
      WEFT_ASSIGN_OR_RETURN(comm[chunk.chunk],
                            UnitCollectivesOf(fj, layout, chunk.module, chunk.first_layer,
                                              chunk.num_layers));
      if (!mode_of.count(chunk.module)) {
        WEFT_ASSIGN_OR_RETURN(mode_of[chunk.module],
                              cost::BackwardModeOf(job.model, chunk.module));
      }
    }
    // Lockstep: position i of every rank's order is the same unit pass.
    const auto& order0 = out.replicas[0].schedule.order[0];
    const size_t n = order0.size();
    std::vector<UnitStep> steps(n);
    double comm_s = 0, own_compute_s = 0;  // own: summed over ranks
    for (size_t i = 0; i < n; ++i) {
      const graph::Stage& ref = out.replicas[0].graph.stage(order0[i]);
      double compute_s = 0;
      for (const ReplicaPlan& r : out.replicas) {
        const auto& order = r.schedule.order[0];
        if (order.size() != n) {
          return InternalError("fsdp: ranks have different stage counts (" +
                               std::to_string(order.size()) + " vs " + std::to_string(n) + ")");
        }
        const graph::Stage& st = r.graph.stage(order[i]);
        if (st.microbatch != ref.microbatch || st.chunk != ref.chunk || st.pass != ref.pass ||
            st.module != ref.module) {
          return InternalError("fsdp: ranks' orders differ at position " + std::to_string(i));
        }
        compute_s = std::max(compute_s, st.latency_s);
        own_compute_s += st.latency_s;
      }
      UnitStep& step = steps[i];
      step.compute_s = compute_s;
      if (compute_s <= 0) continue;  // no rank runs the unit in this microbatch: no collective
      const UnitCollectives& c = comm.at(ref.chunk);
      step.all_gather_s = c.all_gather_s;
      if (spec::IsBackward(ref.pass) && mode_of.at(ref.module) == cost::BackwardMode::kFull) {
        step.reduce_scatter_s = c.reduce_scatter_s;
      }
      comm_s += step.all_gather_s + step.reduce_scatter_s;
    }
    const std::vector<double> exposed = ExposedStepTimes(steps);
    double compute_total_s = 0, exposed_total_s = 0;
    for (size_t i = 0; i < n; ++i) {
      compute_total_s += steps[i].compute_s;
      exposed_total_s += exposed[i];
    }
    for (ReplicaPlan& r : out.replicas) {
      std::vector<double> latency_s(r.graph.num_stages(), 0.0);
      for (size_t i = 0; i < n; ++i) latency_s[r.schedule.order[0][i]] = exposed[i];
      WEFT_ASSIGN_OR_RETURN(r.graph, WithLatencies(r.graph, latency_s));
    }
    out.notes += fmt::format(
        "{}fsdp: {} ranks x {} microbatch(es); per rank {:.3f} s of collectives, {:.3f} s "
        "exposed, {:.3f} s (mean) waiting for the slowest rank",
        out.notes.empty() ? "" : "; ", layout.dp, out.replicas[0].microbatches.size(), comm_s,
        exposed_total_s - compute_total_s,
        std::max(0.0, compute_total_s - own_compute_s / static_cast<double>(out.replicas.size())));
    return out;
  }

};

}  // namespace

StatusOr<FsdpLayout> LayoutOf(const Job& job) {
  const int llm = data::FirstLlmModule(job.model);
  const spec::ModuleParallel lp =
      job.parallel.For(job.model.modules[std::max(0, llm)].name);
  FsdpLayout layout;
  layout.tp = std::max(1, lp.tp);
  layout.cp = std::max(1, lp.cp);
  const int width = layout.tp * layout.cp;
  const int gpus = job.cluster.TotalGpus();
  if (gpus < width) {
    return FailedPreconditionError(fmt::format(
        "fsdp: cluster '{}' has {} GPUs; one rank needs tp·cp = {}", job.cluster.name, gpus,
        width));
  }
  layout.dp = gpus / width;
  // The job's microbatch size: its DP replicas' microbatches, spread over the FSDP ranks.
  const int64_t job_microbatches =
      static_cast<int64_t>(std::max(1, job.DataParallelSize())) *
      std::max(1, job.parallel.num_microbatches);
  layout.num_microbatches =
      static_cast<int>(std::max<int64_t>(1, (job_microbatches + layout.dp - 1) / layout.dp));
  return layout;
}

Job FsdpJob(const Job& job, const FsdpLayout& layout) {
  Job out = job;
  std::vector<spec::ModuleParallel> modules;
  for (const auto& m : job.model.modules) {
    spec::ModuleParallel p = job.parallel.For(m.name);
    p.module = m.name;
    p.pp = 1;
    p.dp = layout.dp;
    modules.push_back(p);
  }
  out.parallel.modules = std::move(modules);
  out.parallel.num_microbatches = layout.num_microbatches;
  return out;
}

std::vector<double> ExposedStepTimes(std::span<const UnitStep> steps) {
  const size_t n = steps.size();
  std::vector<double> out(n, 0.0);
  if (n == 0) return out;
  // gather_end[i]: when step i's parameters are gathered (0 = nothing to wait for).
  std::vector<double> gather_end(n, 0.0);
  double comm_free_s = 0;
  if (steps[0].all_gather_s > 0) {
    gather_end[0] = steps[0].all_gather_s;
    comm_free_s = gather_end[0];
  }
  double prev_end_s = 0;
  for (size_t i = 0; i < n; ++i) {
    const double start_s = std::max(prev_end_s, gather_end[i]);
    // Prefetch: the next unit's all-gather is issued as this compute starts.
    if (i + 1 < n && steps[i + 1].all_gather_s > 0) {
      gather_end[i + 1] = std::max(comm_free_s, start_s) + steps[i + 1].all_gather_s;
      comm_free_s = gather_end[i + 1];
    }
    const double end_s = start_s + steps[i].compute_s;
    // The unit's reduce-scatter is issued as its compute ends.
    if (steps[i].reduce_scatter_s > 0) {
      comm_free_s = std::max(comm_free_s, end_s) + steps[i].reduce_scatter_s;
    }
    out[i] = end_s - prev_end_s;
    prev_end_s = end_s;
  }
  out[n - 1] += std::max(0.0, comm_free_s - prev_end_s);
  return out;
}

StatusOr<UnitCollectives> UnitCollectivesOf(const Job& job, const FsdpLayout& layout, int module,
                                            int first_layer, int num_layers) {
  if (job.cost_model == nullptr) return InvalidArgumentError("job.cost_model is null");
  if (module < 0 || module >= static_cast<int>(job.model.modules.size())) {
    return InvalidArgumentError("module " + std::to_string(module) + " out of range");
  }
  spec::ModuleParallel p = job.parallel.For(job.model.modules[module].name);
  p.dp = 1;
  WEFT_ASSIGN_OR_RETURN(cost::ChunkCost c,
                        job.cost_model->Chunk(job.model, module, first_layer, num_layers,
                                              cost::TokenShape::Uniform(1), p));
  UnitCollectives out;
  out.parameter_bytes = static_cast<int64_t>(c.parameter_bytes);
  out.gradient_bytes = static_cast<int64_t>(c.gradient_bytes);
  const spec::LinkSpec& link = DpLink(job, layout);
  const double efficiency = job.cluster.efficiency.network;
  const cost::CostOptions& options = job.cost_model->options();
  out.all_gather_s = cost::CollectiveLatency(cost::CollectiveKind::kAllGather,
                                             static_cast<double>(out.parameter_bytes), layout.dp,
                                             link, efficiency, options);
  if (out.gradient_bytes > 0) {
    out.reduce_scatter_s = cost::CollectiveLatency(cost::CollectiveKind::kReduceScatter,
                                                   static_cast<double>(out.gradient_bytes),
                                                   layout.dp, link, efficiency, options);
  }
  return out;
}

std::unique_ptr<Strategy> MakeFsdpStrategy() { return std::make_unique<FsdpStrategy>(); }

}  // namespace weft::strategy::fsdp
