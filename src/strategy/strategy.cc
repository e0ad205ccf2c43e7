#include "weft/strategy/strategy.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "weft/common/text.h"
#include "weft/data/workload.h"
#include "weft/strategy/registry.h"

namespace weft::strategy {

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

std::vector<std::string> StrategyNames() {
  std::vector<std::string> names;
  for (const auto& entry : internal::Registry()) names.emplace_back(entry.name);
  return names;
}

StatusOr<std::unique_ptr<Strategy>> MakeStrategy(std::string_view name) {
  for (const auto& entry : internal::Registry()) {
    if (entry.name == name) return entry.make();
  }
  std::string known;
  for (const auto& entry : internal::Registry()) {
    known += (known.empty() ? "" : ", ") + std::string(entry.name);
  }
  return NotFoundError("unknown strategy '" + std::string(name) + "'; known: " + known);
}

}  // namespace weft::strategy
