// Cornstarch's two baselines (cornstarch.txt §6): encoders-colocated and encoders-replicated.
#include <algorithm>
#include <limits>

#include "weft/data/workload.h"
#include "weft/sched/generators.h"
#include "weft/sched/partition.h"
#include "weft/strategy/baselines.h"
#include "weft/strategy/common.h"
#include "weft/strategy/module_sets.h"

namespace weft::strategy {
namespace {

StatusOr<IterationPlan> OneFOneB(const Job& job, const StaticPlan& plan,
                                 const IterationInput& input) {
  return PlanReplicas(job, plan, input, [](const graph::StageGraph& g) {
    return sched::MakeSchedule(sched::ScheduleKind::kOneFOneB, g);
  });
}

class ColocatedStrategy final : public Strategy {
 public:
  std::string_view Name() const override { return "colocated"; }
  std::string_view Description() const override {
    return "Cornstarch encoders-colocated: every encoder split into the same c stages, LLM on "
           "P-c, balanced by forward time (backward assumed 2x), 1F1B";
  }

  StatusOr<StaticPlan> Prepare(const Job& job) const override {
    WEFT_RETURN_IF_ERROR(job.Validate());
    WEFT_ASSIGN_OR_RETURN(ModuleSides sides, SplitEncoderSide(job.model));
    const int p = job.PipelineSize();
    if (sides.encoders.empty() || p < 2) {
      return FailedPreconditionError(
          "colocated: needs encoders upstream of the LLM and a pipeline of >= 2 ranks");
    }
    // Encoder-side chains: each encoder with its projector(s) downstream of it form one chain.
    // Group modules by their source encoder: modules with no predecessor start a chain.
    std::vector<std::vector<int>> chains;
    for (int m : sides.encoders) {
      const auto preds = job.model.Predecessors(m);
      if (preds.empty()) {
        chains.push_back({m});
      } else {
        for (auto& chain : chains) {
          if (std::find(chain.begin(), chain.end(), preds[0]) != chain.end()) {
            chain.push_back(m);
            break;
          }
        }
      }
    }
    std::vector<std::vector<LayerUnit>> chain_units;
    std::vector<std::vector<double>> chain_weights;
    for (const auto& chain : chains) {
      chain_units.push_back(ChainUnits(job.model, chain));
      WEFT_ASSIGN_OR_RETURN(auto w, UnitWeights(job, chain_units.back(),
                                                UnitWeight::kForwardLatency));
      chain_weights.push_back(std::move(w));
    }
    const auto llm_units = ChainUnits(job.model, sides.backbone);
    WEFT_ASSIGN_OR_RETURN(auto llm_w, UnitWeights(job, llm_units, UnitWeight::kForwardLatency));
    // Choose c (encoder stages) minimizing the largest stage.
    double best = std::numeric_limits<double>::infinity();
    int best_c = -1;
    std::vector<std::vector<int>> best_enc_begins;
    std::vector<int> best_llm_begins;
    for (int c = 1; c < p; ++c) {
      double worst = 0;
      std::vector<double> enc_stage(c, 0);
      std::vector<std::vector<int>> enc_begins;
      bool feasible = true;
      for (size_t k = 0; k < chains.size(); ++k) {
        if (static_cast<int>(chain_units[k].size()) < c) { feasible = false; break; }
        auto part = sched::PartitionMinMax(chain_weights[k], c);
        if (!part.ok()) { feasible = false; break; }
        for (int s = 0; s < c; ++s) enc_stage[s] += part->stage_costs[s];
        enc_begins.emplace_back(part->boundaries.begin(), part->boundaries.end() - 1);
      }
      if (!feasible || static_cast<int>(llm_units.size()) < p - c) continue;
      auto llm_part = sched::PartitionMinMax(llm_w, p - c);
      if (!llm_part.ok()) continue;
      for (double t : enc_stage) worst = std::max(worst, t);
      worst = std::max(worst, llm_part->max_stage_cost);
      if (worst < best) {
        best = worst;
        best_c = c;
        best_enc_begins = enc_begins;
        best_llm_begins.assign(llm_part->boundaries.begin(), llm_part->boundaries.end() - 1);
      }
    }
    if (best_c < 0) return FailedPreconditionError("colocated: no feasible encoder/LLM split");
    Placement placement;
    placement.parallel = ModuleParallels(job);
    const auto& lp = placement.parallel[data::FirstLlmModule(job.model)];
    placement.groups = MakePipelineGroups(p, lp.tp, lp.cp, job.DataParallelSize());
    for (size_t k = 0; k < chains.size(); ++k) {
      for (Chunk c : ChunksFromPartition(chain_units[k], best_enc_begins[k], p)) {
        placement.chunks.push_back(c);
      }
    }
    for (Chunk c : ChunksFromPartition(llm_units, best_llm_begins, p)) {
      c.group += best_c;
      placement.chunks.push_back(c);
    }
    WEFT_RETURN_IF_ERROR(FillGroupStateBytes(job.model, *job.cost_model, placement));
    return MakeStaticPlan(std::move(placement),
                          std::string(Description()) + "; c = " + std::to_string(best_c),
                          job.model);
  }

  StatusOr<IterationPlan> PlanIteration(const Job& job, const StaticPlan& plan,
                                        const IterationInput& input) const override {
    return OneFOneB(job, plan, input);
  }
};

class ReplicatedStrategy final : public Strategy {
 public:
  std::string_view Name() const override { return "replicated"; }
  std::string_view Description() const override {
    return "Cornstarch encoders-replicated: LLM over P stages balanced by parameters, full "
           "encoder copies on every stage, 1F1B";
  }

  StatusOr<StaticPlan> Prepare(const Job& job) const override {
    WEFT_RETURN_IF_ERROR(job.Validate());
    WEFT_ASSIGN_OR_RETURN(ModuleSides sides, SplitEncoderSide(job.model));
    if (sides.encoders.empty()) {
      return FailedPreconditionError("replicated: model '" + job.model.name +
                                     "' has no encoder upstream of its LLM");
    }
    const int p = job.PipelineSize();
    WEFT_ASSIGN_OR_RETURN(Placement placement,
                          ChainPlacement(job, sides.backbone, p, UnitWeight::kParameters));
    placement.replicated.assign(job.model.modules.size(), false);
    for (int m : sides.encoders) {
      placement.replicated[m] = true;
      for (int g = 0; g < p; ++g) {
        placement.chunks.push_back({.module = m,
                                    .first_layer = 0,
                                    .num_layers = job.model.modules[m].num_layers,
                                    .group = g,
                                    .chunk = 0});
      }
    }
    WEFT_RETURN_IF_ERROR(FillGroupStateBytes(job.model, *job.cost_model, placement));
    return MakeStaticPlan(std::move(placement), Description(), job.model);
  }

  StatusOr<IterationPlan> PlanIteration(const Job& job, const StaticPlan& plan,
                                        const IterationInput& input) const override {
    return OneFOneB(job, plan, input);
  }
};

class NnScalerStrategy final : public Strategy {
 public:
  std::string_view Name() const override { return "nnscaler"; }
  std::string_view Description() const override {
    return "nnScaler*: one static min-max partition of the chain by fwd+bwd latency on a "
           "representative batch, 1F1B, reused for every batch";
  }

  StatusOr<StaticPlan> Prepare(const Job& job) const override {
    WEFT_RETURN_IF_ERROR(job.Validate());
    WEFT_ASSIGN_OR_RETURN(Placement placement,
                          ChainPlacement(job, job.model.TopologicalOrder(), job.PipelineSize(),
                                         UnitWeight::kStepLatency));
    StaticPlan plan = MakeStaticPlan(std::move(placement), Description(), job.model);
    // A static pipeline: every microbatch passes every stage (a microbatch without images runs
    // zero-time encoder stages), as nnScaler's compiled SPMD pipeline does. Without this, the
    // 1F1B rule's per-rank warm-up counts microbatches a rank never sees and deadlocks (VLM-XL).
    plan.keep_empty_stages = true;
    return plan;
  }

  StatusOr<IterationPlan> PlanIteration(const Job& job, const StaticPlan& plan,
                                        const IterationInput& input) const override {
    return OneFOneB(job, plan, input);
  }
};

}  // namespace

std::unique_ptr<Strategy> MakeColocatedStrategy() { return std::make_unique<ColocatedStrategy>(); }
std::unique_ptr<Strategy> MakeReplicatedStrategy() {
  return std::make_unique<ReplicatedStrategy>();
}
std::unique_ptr<Strategy> MakeNnScalerStrategy() { return std::make_unique<NnScalerStrategy>(); }

}  // namespace weft::strategy
