#include "weft/strategy/common.h"

#include "weft/common/parallel.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "weft/cost/ops.h"
#include "weft/data/workload.h"
#include "weft/sched/partition.h"

namespace weft::strategy {

std::vector<spec::ModuleParallel> ModuleParallels(const Job& job) {
  std::vector<spec::ModuleParallel> out;
  for (const auto& m : job.model.modules) {
    spec::ModuleParallel p = job.parallel.For(m.name);
    p.module = m.name;
    out.push_back(p);
  }
  return out;
}

StaticPlan MakeStaticPlan(Placement placement, std::string_view description,
                          const spec::ModelSpec& model) {
  StaticPlan plan;
  plan.placement = std::move(placement);
  plan.description = std::string(description) + ": " + plan.placement.Describe(model);
  return plan;
}

namespace {

// Mean per-module shape of one microbatch over the profile batches.
StatusOr<std::vector<cost::TokenShape>> RepresentativeShapes(const Job& job) {
  const int n = static_cast<int>(job.model.modules.size());
  std::vector<cost::TokenShape> shapes(n);
  std::vector<double> tokens(n, 0), sumsq(n, 0), inst(n, 0), ctx(n, 0);
  int count = 0;
  const int dp = job.DataParallelSize();
  const std::vector<int> order = job.model.TopologicalOrder();
  for (const auto& batch : job.profile_batches) {
    auto split = SplitBatch(batch, dp, std::max(1, job.parallel.num_microbatches));
    if (!split.ok()) continue;
    for (const auto& mb : split->replicas[0]) {
      ++count;
      std::vector<int64_t> mt(n, 0);
      for (int i : order) {
        WEFT_ASSIGN_OR_RETURN(auto w,
                              data::DeriveModuleWorkload(job.model, i, batch, mb, job.workload));
        tokens[i] += w.TotalTokens();
        sumsq[i] += w.SumSquaredTokens();
        inst[i] += w.NumInstances();
        mt[i] = w.TotalTokens();
        if (job.model.modules[i].text_condition_hidden > 0) {
          for (int p : job.model.Predecessors(i)) ctx[i] += mt[p];
        }
      }
    }
  }
  for (int i = 0; i < n; ++i) {
    if (count == 0 || tokens[i] <= 0) {
      shapes[i] = cost::TokenShape::Uniform(1024);  // no data: a nominal 1K-token shape
      continue;
    }
    shapes[i].tokens = std::max<int64_t>(1, std::llround(tokens[i] / count));
    shapes[i].instances = std::max(1, static_cast<int>(std::lround(inst[i] / count)));
    const double t = static_cast<double>(shapes[i].tokens);
    shapes[i].sum_squared_tokens = std::clamp(sumsq[i] / count, t, t * t);
    shapes[i].context_tokens = static_cast<int64_t>(ctx[i] / count);
  }
  return shapes;
}

}  // namespace

StatusOr<std::vector<double>> UnitWeights(const Job& job, const std::vector<LayerUnit>& units,
                                          UnitWeight weight) {
  std::vector<double> w;
  w.reserve(units.size());
  if (weight == UnitWeight::kParameters) {
    for (const auto& u : units) {
      const auto& m = job.model.modules[u.module];
      double params = static_cast<double>(m.ParametersPerLayer()) * u.num_layers;
      w.push_back(std::max(params, 1.0));
    }
    return w;
  }
  WEFT_ASSIGN_OR_RETURN(auto shapes, RepresentativeShapes(job));
  const auto parallel = ModuleParallels(job);
  for (const auto& u : units) {
    WEFT_ASSIGN_OR_RETURN(auto c, job.cost_model->Chunk(job.model, u.module, u.first_layer,
                                                         u.num_layers, shapes[u.module],
                                                         parallel[u.module]));
    if (weight == UnitWeight::kForwardLatency) {
      w.push_back(3 * c.forward_s);  // the colocated baseline assumes backward = 2× forward
    } else {
      w.push_back(c.forward_s + c.BackwardS());
    }
  }
  return w;
}

StatusOr<Placement> ChainPlacement(const Job& job, const std::vector<int>& modules, int parts,
                                   UnitWeight weight) {
  const int p = job.PipelineSize();
  const auto units = ChainUnits(job.model, modules);
  if (static_cast<int>(units.size()) < parts) {
    return FailedPreconditionError("the chain has " + std::to_string(units.size()) +
                                   " layers; cannot split it into " + std::to_string(parts) +
                                   " pipeline stages");
  }
  WEFT_ASSIGN_OR_RETURN(auto weights, UnitWeights(job, units, weight));
  WEFT_ASSIGN_OR_RETURN(auto partition, sched::PartitionMinMax(weights, parts));
  std::vector<int> begins(partition.boundaries.begin(), partition.boundaries.end() - 1);
  Placement placement;
  placement.parallel = ModuleParallels(job);
  const auto& llm = placement.parallel[std::max(0, data::FirstLlmModule(job.model))];
  placement.groups = MakePipelineGroups(p, llm.tp, llm.cp, job.DataParallelSize());
  placement.chunks = ChunksFromPartition(units, begins, p);
  WEFT_RETURN_IF_ERROR(FillGroupStateBytes(job.model, *job.cost_model, placement));
  return placement;
}

StatusOr<IterationPlan> PlanReplicas(const Job& job, const StaticPlan& plan,
                                     const spec::Batch& batch, const ScheduleFn& schedule) {
  return PlanReplicas(
      job, plan, batch, [&](int, const graph::StageGraph& g) { return schedule(g); }, 1);
}

StatusOr<IterationPlan> PlanReplicas(const Job& job, const StaticPlan& plan,
                                     const spec::Batch& batch, const ReplicaScheduleFn& schedule,
                                     int threads) {
  return PlanReplicaVariants(
      job, plan, batch, {},
      [&](int r, std::vector<graph::StageGraph>& variants) { return schedule(r, variants[0]); },
      threads);
}

StatusOr<IterationPlan> PlanReplicaVariants(
    const Job& job, const StaticPlan& plan, const spec::Batch& batch,
    const std::vector<std::vector<cost::Recompute>>& extra_recompute,
    const ReplicaVariantsScheduleFn& schedule, int threads) {
  const auto start = std::chrono::steady_clock::now();
  const Placement& placement = plan.placement;
  const int anchor = std::max(0, data::FirstLlmModule(job.model));
  const int dp = placement.unfolded ? std::max(1, placement.NumReplicas(anchor))
                                    : job.DataParallelSize();
  WEFT_ASSIGN_OR_RETURN(BatchSplit split,
                        SplitBatch(batch, dp,
                                   plan.num_microbatches > 0 ? plan.num_microbatches
                                                             : job.parallel.num_microbatches));
  IterationPlan out;
  out.notes = split.notes;
  GraphBuildOptions options{.sub_microbatch_size = plan.sub_microbatch_size,
                            .recompute = plan.recompute,
                            .split_backward = plan.split_backward,
                            .keep_empty_stages = plan.keep_empty_stages};
  if (placement.unfolded) {
    // One graph for the whole iteration: microbatch j of anchor replica a is joint microbatch
    // j·R + a (replicas interleaved, so every producer replica serves each consumer early).
    Microbatches joint;
    for (int j = 0;; ++j) {
      bool any = false;
      for (int a = 0; a < dp; ++a) {
        if (j >= static_cast<int>(split.replicas[a].size())) continue;
        any = true;
        joint.push_back(split.replicas[a][j]);
        options.anchor_replica.push_back(a);
      }
      if (!any) break;
    }
    split.replicas.assign(1, std::move(joint));
  }
  const int llm = data::FirstLlmModule(job.model);
  out.replicas.resize(split.replicas.size());
  WEFT_RETURN_IF_ERROR(ParallelFor(static_cast<int>(split.replicas.size()), threads,
                                   [&](int r) -> Status {
    Microbatches& microbatches = split.replicas[r];
    ReplicaPlan& replica = out.replicas[r];
    std::vector<graph::StageGraph> variants;
    if (extra_recompute.empty()) {
      WEFT_ASSIGN_OR_RETURN(graph::StageGraph g,
                            BuildStageGraph(job.model, plan.placement, batch, microbatches,
                                            *job.cost_model, job.workload, options));
      variants.push_back(std::move(g));
    } else {
      std::vector<std::vector<cost::Recompute>> levels = {options.recompute};
      levels.insert(levels.end(), extra_recompute.begin(), extra_recompute.end());
      WEFT_ASSIGN_OR_RETURN(variants,
                            BuildStageGraphVariants(job.model, plan.placement, batch, microbatches,
                                                    *job.cost_model, job.workload, options,
                                                    levels));
    }
    WEFT_ASSIGN_OR_RETURN(replica.schedule, schedule(r, variants));
    replica.graph = std::move(variants[0]);
    for (const auto& mb : microbatches) {
      for (int seq : mb) {
        if (batch.sequences.empty()) {
          replica.samples += 1;
        } else {
          replica.samples += batch.sequences[seq].sample_indices.size();
        }
      }
      if (llm >= 0) {
        WEFT_ASSIGN_OR_RETURN(auto w,
                              data::DeriveModuleWorkload(job.model, llm, batch, mb, job.workload));
        replica.tokens += static_cast<double>(w.TotalTokens());
      }
    }
    replica.microbatches = std::move(microbatches);
    return OkStatus();
  }));
  for (const ReplicaPlan& replica : out.replicas) {
    for (const auto& stage : replica.graph.stages()) out.model_flops += stage.flops;
  }
  out.plan_time_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

StatusOr<IterationEvaluation> EvaluateIteration(const Job& job, const IterationPlan& plan,
                                                const sim::SimOptions& options) {
  IterationEvaluation eval;
  if (plan.replicas.empty()) return InvalidArgumentError("iteration plan has no replicas");
  double samples = 0, tokens = 0;
  int num_gpus = 0;
  for (size_t r = 0; r < plan.replicas.size(); ++r) {
    const auto& replica = plan.replicas[r];
    sim::SimOptions o = options;
    o.samples_per_iteration = replica.samples;
    o.tokens_per_iteration = replica.tokens;
    // Each replica graph folds the dp copies of its groups; count one copy's FLOPs and GPUs.
    double flops = 0;
    for (const auto& s : replica.graph.stages()) flops += s.flops;
    o.model_flops = flops;
    int gpus = 0;
    for (const auto& g : replica.graph.groups()) gpus += g.num_gpus;
    o.num_gpus = gpus;
    WEFT_ASSIGN_OR_RETURN(sim::Timeline t,
                          sim::Simulate(replica.graph, replica.schedule, job.cluster, o));
    if (t.iteration_time_s > eval.iteration_time_s) {
      eval.iteration_time_s = t.iteration_time_s;
      eval.slowest_replica = static_cast<int>(r);
    }
    eval.lower_bound_s = std::max(eval.lower_bound_s, t.lower_bound_s);
    for (const auto& g : t.groups) eval.peak_memory_bytes = std::max(eval.peak_memory_bytes, g.peak_bytes);
    eval.oom = eval.oom || !t.oom.empty();
    samples += replica.samples;
    tokens += replica.tokens;
    num_gpus += gpus;
    eval.timelines.push_back(std::move(t));
  }
  eval.bubble_ratio = eval.timelines[eval.slowest_replica].bubble_ratio;
  const double peak = job.cluster.gpu.peak_bf16_flops_per_s;
  if (eval.iteration_time_s > 0) {
    eval.samples_per_s = samples / eval.iteration_time_s;
    eval.tokens_per_s = tokens / eval.iteration_time_s;
  }
  // One accounting of GPUs: those the placement uses, and the cluster's others as idle (charged
  // in MFU unless the job says otherwise).
  eval.gpus_used = num_gpus;
  eval.gpus_idle = std::max(0, job.cluster.TotalGpus() - num_gpus);
  eval.gpus_charged = job.charge_idle_gpus ? num_gpus + eval.gpus_idle : num_gpus;
  if (eval.iteration_time_s > 0 && eval.gpus_charged > 0 && peak > 0) {
    eval.mfu = plan.model_flops / (eval.gpus_charged * peak * eval.iteration_time_s);
  }
  return eval;
}

}  // namespace weft::strategy
