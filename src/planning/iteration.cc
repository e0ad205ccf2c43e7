#include "weft/planning/iteration.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <numeric>
#include <tuple>
#include <utility>

#include "weft/common/parallel.h"
#include "weft/data/workload.h"

namespace weft::planning {

int AnchorReplicas(const Job& job, const StaticPlan& plan) {
  const Placement& placement = plan.placement;
  const int anchor = std::max(0, data::FirstLlmModule(job.model));
  return placement.unfolded ? std::max(1, placement.NumReplicas(anchor))
                            : job.DataParallelSize();
}

StatusOr<Assignment> DefaultAssignmentFor(const Job& job, const StaticPlan& plan,
                                          const spec::Batch& batch) {
  return DefaultAssignment(batch, AnchorReplicas(job, plan),
                           plan.num_microbatches > 0 ? plan.num_microbatches
                                                     : job.parallel.num_microbatches);
}

namespace {

// Unfolded placements: every module with several replicas whose compute (the seconds of their
// stages in the iteration's graph) is unbalanced by more than 10% (max / mean) is named, e.g.
// "vision replicas unbalanced: max/mean compute 1.42 (4 replicas, 310.2 ms max, 120.5 ms min)".
std::string ReplicaImbalanceNotes(const spec::ModelSpec& model, const Placement& placement,
                                  const graph::StageGraph& graph) {
  constexpr double kNotedImbalance = 1.10;
  std::map<std::tuple<int, int, int>, int> replica_of;  // (module, group, slot) -> replica
  for (const Chunk& c : placement.chunks) replica_of[{c.module, c.group, c.chunk}] = c.replica;
  const int num_modules = static_cast<int>(model.modules.size());
  std::vector<std::vector<double>> seconds(num_modules);
  for (int m = 0; m < num_modules; ++m) {
    seconds[m].assign(std::max(1, placement.NumReplicas(m)), 0.0);
  }
  for (const graph::Stage& st : graph.stages()) {
    auto it = replica_of.find({st.module, st.group, st.chunk});
    if (st.module < 0 || st.module >= num_modules || it == replica_of.end()) continue;
    if (it->second >= 0 && it->second < static_cast<int>(seconds[st.module].size())) {
      seconds[st.module][it->second] += st.latency_s;
    }
  }
  std::string notes;
  for (int m = 0; m < num_modules; ++m) {
    const auto& s = seconds[m];
    if (s.size() < 2) continue;
    const double mean = std::accumulate(s.begin(), s.end(), 0.0) / static_cast<double>(s.size());
    const auto [lo, hi] = std::minmax_element(s.begin(), s.end());
    if (mean <= 0 || *hi / mean <= kNotedImbalance) continue;
    notes += fmt::format(
        "{}{} replicas unbalanced: max/mean compute {:.2f} ({} replicas, {:.1f} ms max, {:.1f} ms "
        "min)",
        notes.empty() ? "" : "; ", model.modules[m].name, *hi / mean, s.size(), *hi * 1e3,
        *lo * 1e3);
  }
  return notes;
}

}  // namespace

StatusOr<IterationPlan> PlanReplicas(const Job& job, const StaticPlan& plan,
                                     const IterationInput& input, const ScheduleFn& schedule) {
  return PlanReplicas(
      job, plan, input, [&](int, const graph::StageGraph& g) { return schedule(g); }, 1);
}

StatusOr<IterationPlan> PlanReplicas(const Job& job, const StaticPlan& plan,
                                     const IterationInput& input,
                                     const ReplicaScheduleFn& schedule, int threads) {
  return PlanReplicaVariants(
      job, plan, input, {},
      [&](int r, std::vector<graph::StageGraph>& variants) { return schedule(r, variants[0]); },
      threads);
}

StatusOr<IterationPlan> PlanReplicaVariants(
    const Job& job,
    const StaticPlan& plan,
    const IterationInput& input,
    const std::vector<std::vector<spec::Recompute>>& extra_recompute,
    const ReplicaVariantsScheduleFn& schedule,
    int threads) {
  const auto start = std::chrono::steady_clock::now();
  const Placement& placement = plan.placement;
  const spec::Batch& batch = input.batch;
  const Assignment& assignment = input.assignment;
  const int dp = AnchorReplicas(job, plan);
  if (static_cast<int>(assignment.replicas.size()) != dp) {
    return InvalidArgumentError("assignment (" + assignment.policy + ") has " +
                                std::to_string(assignment.replicas.size()) +
                                " replicas; the static plan has " + std::to_string(dp));
  }
  BatchSplit split;
  split.replicas = assignment.replicas;
  IterationPlan out;
  out.notes = assignment.notes;
  GraphBuildOptions options{.sub_microbatch_size = plan.sub_microbatch_size,
                            .recompute = plan.recompute,
                            .split_backward = plan.split_backward,
                            .keep_empty_stages = plan.keep_empty_stages};
  if (placement.unfolded) {
    // One graph for the whole iteration: microbatch j of anchor replica a is joint microbatch
    // j·R + a (replicas interleaved, so every producer replica serves each consumer early).
    Microbatches joint;
    const int num_modules = static_cast<int>(job.model.modules.size());
    std::vector<std::vector<std::vector<int>>> producers(num_modules);
    for (int j = 0;; ++j) {
      bool any = false;
      for (int a = 0; a < dp; ++a) {
        if (j >= static_cast<int>(split.replicas[a].size())) continue;
        any = true;
        joint.push_back(split.replicas[a][j]);
        options.anchor_replica.push_back(a);
        for (int m = 0; m < num_modules; ++m) {
          if (m < static_cast<int>(assignment.producers.size()) &&
              !assignment.producers[m].empty()) {
            producers[m].push_back(assignment.producers[m][a][j]);
          }
        }
      }
      if (!any) break;
    }
    if (std::any_of(producers.begin(), producers.end(),
                    [](const auto& p) { return !p.empty(); })) {
      options.producer_replicas = std::move(producers);
    }
    split.replicas.assign(1, std::move(joint));
  }
  const int llm = data::FirstLlmModule(job.model);
  out.replicas.resize(split.replicas.size());
  std::vector<char> even_dispatch(split.replicas.size(), 0);
  WEFT_RETURN_IF_ERROR(ParallelFor(static_cast<int>(split.replicas.size()), threads,
                                   [&](int r) -> Status {
    Microbatches& microbatches = split.replicas[r];
    ReplicaPlan& replica = out.replicas[r];
    auto build = [&](const GraphBuildOptions& o) -> StatusOr<std::vector<graph::StageGraph>> {
      std::vector<graph::StageGraph> built;
      if (extra_recompute.empty()) {
        WEFT_ASSIGN_OR_RETURN(graph::StageGraph g,
                              BuildStageGraph(job.model, plan.placement, batch, microbatches,
                                              *job.cost_model, job.workload, o));
        built.push_back(std::move(g));
      } else {
        std::vector<std::vector<spec::Recompute>> levels = {o.recompute};
        levels.insert(levels.end(), extra_recompute.begin(), extra_recompute.end());
        WEFT_ASSIGN_OR_RETURN(built, BuildStageGraphVariants(job.model, plan.placement, batch,
                                                             microbatches, *job.cost_model,
                                                             job.workload, o, levels));
      }
      return built;
    };
    WEFT_ASSIGN_OR_RETURN(std::vector<graph::StageGraph> variants, build(options));
    StatusOr<sched::Schedule> scheduled = schedule(r, variants);
    if (!scheduled.ok() && placement.unfolded && options.balance_dispatch) {
      // The rule cannot order the cost-balanced dispatch (e.g. 1F1B's warm-up on a replica that
      // holds microbatches out of its pattern): the even dispatch, which it orders as before.
      GraphBuildOptions even = options;
      even.balance_dispatch = false;
      WEFT_ASSIGN_OR_RETURN(variants, build(even));
      StatusOr<sched::Schedule> retried = schedule(r, variants);
      if (retried.ok()) even_dispatch[r] = 1;
      scheduled = std::move(retried);
    }
    WEFT_ASSIGN_OR_RETURN(replica.schedule, std::move(scheduled));
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
  if (std::any_of(even_dispatch.begin(), even_dispatch.end(), [](char c) { return c != 0; })) {
    out.notes += std::string(out.notes.empty() ? "" : "; ") +
                 "the schedule rule cannot order the cost-balanced encoder dispatch: even "
                 "shares by instance count";
  }
  for (const ReplicaPlan& replica : out.replicas) {
    for (const auto& stage : replica.graph.stages()) out.model_flops += stage.flops;
  }
  if (placement.unfolded && out.replicas.size() == 1) {
    const std::string imbalance =
        ReplicaImbalanceNotes(job.model, placement, out.replicas.front().graph);
    if (!imbalance.empty()) out.notes += (out.notes.empty() ? "" : "; ") + imbalance;
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
  sim::Simulator simulator;  // one for all replicas: its scratch is allocated once
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
                          simulator.Simulate(replica.graph, replica.schedule, job.cluster, o));
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

std::string_view PlanOutcomeKindName(PlanOutcomeKind kind) {
  switch (kind) {
    case PlanOutcomeKind::kPlanned:
      return "planned";
    case PlanOutcomeKind::kFallback:
      return "fallback";
    case PlanOutcomeKind::kOutOfMemory:
      return "out_of_memory";
  }
  return "unknown";
}

std::string_view FallbackReasonName(FallbackReason reason) {
  switch (reason) {
    case FallbackReason::kNone:
      return "none";
    case FallbackReason::kRequested:
      return "requested";
    case FallbackReason::kNotStarted:
      return "not_started";
    case FallbackReason::kStillRunning:
      return "still_running";
    case FallbackReason::kSearchFailed:
      return "search_failed";
  }
  return "unknown";
}

PlanOutcome MakePlanOutcome(bool oom, FallbackReason fallback, std::string detail) {
  PlanOutcome out;
  out.kind = oom ? PlanOutcomeKind::kOutOfMemory
                 : (fallback != FallbackReason::kNone ? PlanOutcomeKind::kFallback
                                                      : PlanOutcomeKind::kPlanned);
  out.fallback = fallback;
  out.detail = std::move(detail);
  return out;
}

}  // namespace weft::planning
