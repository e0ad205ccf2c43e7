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
  std::vector<double> tokens(n, 0), sumsq(n, 0), winsq(n, 0), inst(n, 0), ctx(n, 0);
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
        winsq[i] += w.WindowSumSquaredTokens();
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
    shapes[i].window_sum_squared_tokens =
        std::clamp(winsq[i] / count, 0.0, shapes[i].sum_squared_tokens);
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

}  // namespace weft::strategy
