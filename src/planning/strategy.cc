#include "weft/planning/strategy.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "weft/common/text.h"
#include "weft/data/workload.h"
#include "weft/planning/graph_builder.h"
#include "weft/planning/iteration.h"

namespace weft::planning {

int Job::PipelineSize() const {
  const int llm = data::FirstLlmModule(model);
  if (llm >= 0) return parallel.For(model.modules[llm].name).pp;
  int p = 1;
  for (const auto& m : model.modules) p = std::max(p, parallel.For(m.name).pp);
  return p;
}

int Job::DataParallelSize() const {
  const int llm = data::FirstLlmModule(model);
  const std::string& name = model.modules[llm >= 0 ? llm : 0].name;
  return parallel.For(name).dp;
}

Status Job::Validate() const {
  if (cost_model == nullptr) return InvalidArgumentError("job.cost_model is null");
  WEFT_RETURN_IF_ERROR(model.Validate());
  WEFT_RETURN_IF_ERROR(cluster.Validate());
  WEFT_RETURN_IF_ERROR(parallel.Validate(model));
  if (parallel.num_microbatches <= 0) {
    return InvalidArgumentError("parallel.num_microbatches = " +
                                std::to_string(parallel.num_microbatches) + "; must be > 0");
  }
  const int llm = data::FirstLlmModule(model);
  if (llm >= 0) {
    const auto p = parallel.For(model.modules[llm].name);
    const int gpus = p.tp * p.cp * p.pp * p.dp;
    if (gpus > cluster.TotalGpus()) {
      return FailedPreconditionError("parallel: tp·cp·pp·dp = " + std::to_string(gpus) +
                                     " GPUs for module '" + model.modules[llm].name +
                                     "'; cluster '" + cluster.name + "' has " +
                                     std::to_string(cluster.TotalGpus()));
    }
  }
  return OkStatus();
}

std::vector<int> Placement::ChunksOf(int module) const { return ChunksOf(module, 0); }

int Placement::NumReplicas(int module) const {
  int n = 0;
  for (const Chunk& c : chunks) {
    if (c.module == module) n = std::max(n, c.replica + 1);
  }
  return n;
}

int Placement::NumGpus() const {
  int n = 0;
  for (const auto& g : groups) n += g.TotalGpus();
  return n;
}

std::vector<int> Placement::ChunksOf(int module, int replica) const {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(chunks.size()); ++i) {
    if (chunks[i].module == module && chunks[i].replica == replica) out.push_back(i);
  }
  std::stable_sort(out.begin(), out.end(), [&](int a, int b) {
    if (chunks[a].first_layer != chunks[b].first_layer) {
      return chunks[a].first_layer < chunks[b].first_layer;
    }
    return chunks[a].group < chunks[b].group;
  });
  return out;
}

std::string Placement::Describe(const spec::ModelSpec& model) const {
  std::ostringstream out;
  for (int g = 0; g < static_cast<int>(groups.size()); ++g) {
    if (g > 0) out << " | ";
    out << (groups[g].label.empty() ? "g" + std::to_string(g) : groups[g].label) << ":";
    std::vector<const Chunk*> mine;
    for (const auto& c : chunks) {
      if (c.group == g) mine.push_back(&c);
    }
    std::stable_sort(mine.begin(), mine.end(),
                     [](const Chunk* a, const Chunk* b) { return a->chunk < b->chunk; });
    for (const Chunk* c : mine) {
      out << " " << model.modules[c->module].name << "[" << c->first_layer << ","
          << c->first_layer + c->num_layers << ")";
      if (c->chunk > 0) out << "@" << c->chunk;
    }
  }
  return out.str();
}

Status Placement::Validate(const spec::ModelSpec& model) const {
  if (groups.empty()) return InvalidArgumentError("placement.groups is empty");
  if (parallel.size() != model.modules.size()) {
    return InvalidArgumentError("placement.parallel has " + std::to_string(parallel.size()) +
                                " entries; model has " + std::to_string(model.modules.size()));
  }
  for (int m = 0; m < static_cast<int>(model.modules.size()); ++m) {
   const int replicas = std::max(1, NumReplicas(m));
   for (int r = 0; r < replicas; ++r) {
    const auto ids = ChunksOf(m, r);
    if (ids.empty()) {
      return InvalidArgumentError("placement: module '" + model.modules[m].name +
                                  "' has no chunk" +
                                  (r > 0 ? " in replica " + std::to_string(r) : ""));
    }
    if (IsReplicated(m)) continue;
    int next = 0;
    for (int id : ids) {
      const Chunk& c = chunks[id];
      if (c.first_layer != next || c.num_layers <= 0) {
        return InvalidArgumentError("placement: chunks of module '" + model.modules[m].name +
                                    "' do not tile its layers at layer " + std::to_string(next));
      }
      next += c.num_layers;
    }
    if (next != model.modules[m].num_layers) {
      return InvalidArgumentError("placement: chunks of module '" + model.modules[m].name +
                                  "' cover " + std::to_string(next) + " of " +
                                  std::to_string(model.modules[m].num_layers) + " layers");
    }
   }
  }
  if (unfolded) {
    for (size_t g = 0; g < groups.size(); ++g) {
      if (groups[g].dp != 1) {
        return InvalidArgumentError("placement.groups[" + std::to_string(g) +
                                    "].dp = " + std::to_string(groups[g].dp) +
                                    "; an unfolded placement has one group per replica (dp 1)");
      }
    }
  }
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (chunks[i].group < 0 || chunks[i].group >= static_cast<int>(groups.size())) {
      return InvalidArgumentError("placement.chunks[" + std::to_string(i) + "].group = " +
                                  std::to_string(chunks[i].group) + "; out of range");
    }
  }
  return OkStatus();
}

Status PlanBudget::Validate() const {
  // A work budget binds first: then a large time budget is "no time limit" (finite still).
  if (!std::isfinite(time_budget_s) || time_budget_s < 0 ||
      (work_budget == 0 && time_budget_s > kMaxTimeBudgetS)) {
    return InvalidArgumentError("budget time_budget_s = " + NumberForMessage(time_budget_s) +
                                "; must be finite and in [0, " + NumberForMessage(kMaxTimeBudgetS) +
                                "] (any finite value >= 0 with a work budget)");
  }
  if (work_budget < 0 || work_budget > kMaxWorkBudget) {
    return InvalidArgumentError("budget work_budget = " + std::to_string(work_budget) +
                                "; must be in [0, " + std::to_string(kMaxWorkBudget) +
                                "] (0 = no work limit)");
  }
  if (threads < 1 || threads > kMaxThreads) {
    return InvalidArgumentError("budget threads = " + std::to_string(threads) +
                                "; must be in [1, " + std::to_string(kMaxThreads) + "]");
  }
  return OkStatus();
}

std::string DescribeBudget(const PlanBudget& budget) {
  return budget.work_budget > 0
             ? "work " + std::to_string(budget.work_budget) + " units (deterministic)"
             : "wall clock " + std::to_string(static_cast<int64_t>(budget.time_budget_s * 1000)) +
                   " ms";
}

Status Assignment::Validate(const spec::Batch& batch) const {
  const int num_samples = static_cast<int>(batch.samples.size());
  if (!sequences.empty()) {
    std::vector<char> packed(num_samples, 0);
    for (size_t s = 0; s < sequences.size(); ++s) {
      if (sequences[s].sample_indices.empty()) {
        return InvalidArgumentError("assignment (" + policy + "): sequence " + std::to_string(s) +
                                    " holds no sample");
      }
      for (int i : sequences[s].sample_indices) {
        if (i < 0 || i >= num_samples) {
          return InvalidArgumentError("assignment (" + policy + "): sequence " +
                                      std::to_string(s) + " names sample " + std::to_string(i) +
                                      "; the batch has " + std::to_string(num_samples));
        }
        if (packed[i]++) {
          return InvalidArgumentError("assignment (" + policy + "): sample " + std::to_string(i) +
                                      " is packed twice");
        }
      }
    }
  }
  const int n = !sequences.empty()        ? static_cast<int>(sequences.size())
                : batch.sequences.empty() ? num_samples
                                          : static_cast<int>(batch.sequences.size());
  if (replicas.empty()) {
    return InvalidArgumentError("assignment (" + policy + "): no replica");
  }
  std::vector<char> seen(n, 0);
  for (size_t r = 0; r < replicas.size(); ++r) {
    if (replicas[r].empty()) {
      return InvalidArgumentError("assignment (" + policy + "): replica " + std::to_string(r) +
                                  " has no microbatch");
    }
    for (size_t m = 0; m < replicas[r].size(); ++m) {
      if (replicas[r][m].empty()) {
        return InvalidArgumentError("assignment (" + policy + "): replica " + std::to_string(r) +
                                    " microbatch " + std::to_string(m) + " is empty");
      }
      for (int s : replicas[r][m]) {
        if (s < 0 || s >= n) {
          return InvalidArgumentError("assignment (" + policy + "): replica " +
                                      std::to_string(r) + " microbatch " + std::to_string(m) +
                                      " names sequence " + std::to_string(s) + "; there are " +
                                      std::to_string(n));
        }
        if (seen[s]++) {
          return InvalidArgumentError("assignment (" + policy + "): sequence " +
                                      std::to_string(s) + " is assigned twice");
        }
      }
    }
  }
  for (size_t m = 0; m < producers.size(); ++m) {
    if (producers[m].empty()) continue;
    if (producers[m].size() != replicas.size()) {
      return InvalidArgumentError("assignment (" + policy + "): producers of module " +
                                  std::to_string(m) + " cover " +
                                  std::to_string(producers[m].size()) + " replicas; the " +
                                  "assignment has " + std::to_string(replicas.size()));
    }
    for (size_t a = 0; a < replicas.size(); ++a) {
      if (producers[m][a].size() != replicas[a].size()) {
        return InvalidArgumentError("assignment (" + policy + "): producers of module " +
                                    std::to_string(m) + " replica " + std::to_string(a) +
                                    " cover " + std::to_string(producers[m][a].size()) +
                                    " microbatches; the replica has " +
                                    std::to_string(replicas[a].size()));
      }
      for (const auto& list : producers[m][a]) {
        if (list.empty()) {
          return InvalidArgumentError("assignment (" + policy + "): a microbatch of replica " +
                                      std::to_string(a) + " has no producer of module " +
                                      std::to_string(m));
        }
        for (int q : list) {
          if (q < 0) {
            return InvalidArgumentError("assignment (" + policy + "): producer replica " +
                                        std::to_string(q) + " of module " + std::to_string(m) +
                                        " is negative");
          }
        }
      }
    }
  }
  return OkStatus();
}

spec::Batch Assignment::Apply(const spec::Batch& batch) const {
  spec::Batch out = batch;
  if (!sequences.empty()) out.sequences = sequences;
  return out;
}

StatusOr<Assignment> DefaultAssignment(const spec::Batch& batch, int dp, int num_microbatches) {
  WEFT_ASSIGN_OR_RETURN(BatchSplit split, SplitBatch(batch, dp, num_microbatches));
  Assignment out;
  out.replicas = std::move(split.replicas);
  out.notes = std::move(split.notes);
  return out;
}

StatusOr<Assignment> Strategy::Assign(const Job& job, const StaticPlan& plan,
                                      const spec::Batch& batch, const PlanState&) const {
  return DefaultAssignmentFor(job, plan, batch);
}

StatusOr<std::shared_ptr<const StrategyFeedback>> Strategy::Observe(
    const Job&, const StaticPlan&, const PlanState& state, const IterationPlan&,
    const std::vector<MeasuredStage>&) const {
  return state.feedback;
}

StatusOr<IterationPlan> Strategy::PlanBatch(const Job& job, const StaticPlan& plan,
                                            const spec::Batch& batch,
                                            const PlanBudget& budget) const {
  const PlanState state;
  WEFT_ASSIGN_OR_RETURN(Assignment assignment, Assign(job, plan, batch, state));
  WEFT_RETURN_IF_ERROR(assignment.Validate(batch));
  const spec::Batch assigned = assignment.Apply(batch);
  WEFT_ASSIGN_OR_RETURN(IterationPlan out,
                        PlanIteration(job, plan,
                                      {.batch = assigned, .assignment = assignment,
                                       .budget = budget, .state = &state}));
  out.batch = std::make_shared<const spec::Batch>(assigned);
  out.assignment = std::move(assignment);
  return out;
}

}  // namespace weft::planning
