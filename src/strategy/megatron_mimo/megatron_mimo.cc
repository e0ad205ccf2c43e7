#include "weft/strategy/megatron_mimo/megatron_mimo.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <limits>

#include "weft/sched/generators.h"
#include "weft/strategy/common.h"
#include "weft/planning/placement_file.h"

namespace weft::strategy::megatron_mimo {
namespace {

// At most this many configs are simulated (beyond, GPU shares move in coarser steps).
constexpr int kMaxConfigs = 256;

constexpr const char* kRule =
    "TP and CP per module from the job's setup; every GPU split over the modules (rank ranges in "
    "data-flow order) and PP x DP per module passing Megatron-Bridge's MIMO checks simulated with "
    "1F1B on the profile batches (first uniform recompute level that fits), the fastest kept "
    "(at most 256 configs: GPU shares in coarser steps beyond)";

struct Evaluated {
  double mean_s = 0;
  spec::Recompute recompute = spec::Recompute::kNone;
  bool fits = false;
};

// Mean simulated iteration over the profile batches, with the first uniform recompute level
// at which every batch fits (the last level tried when none does).
StatusOr<Evaluated> Evaluate(const Job& job, const StaticPlan& base) {
  Evaluated out;
  for (spec::Recompute level :
       {spec::Recompute::kNone, spec::Recompute::kSelective, spec::Recompute::kFull}) {
    StaticPlan plan = base;
    plan.recompute.assign(job.model.modules.size(), level);
    double total_s = 0;
    bool fits = true;
    for (const auto& batch : job.profile_batches) {
      WEFT_ASSIGN_OR_RETURN(Assignment assignment,
                            planning::DefaultAssignmentFor(job, plan, batch));
      WEFT_ASSIGN_OR_RETURN(
          IterationPlan it,
          PlanReplicas(job, plan, {.batch = batch, .assignment = assignment},
                       [](const graph::StageGraph& g) {
            return sched::MakeSchedule(sched::ScheduleKind::kOneFOneB, g);
          }));
      WEFT_ASSIGN_OR_RETURN(IterationEvaluation e, EvaluateIteration(job, it));
      total_s += e.iteration_time_s;
      fits = fits && !e.oom;
    }
    out = {.mean_s = total_s / static_cast<double>(job.profile_batches.size()),
           .recompute = level,
           .fits = fits};
    if (fits) break;
  }
  return out;
}

}  // namespace

StatusOr<MimoChoice> ChooseMimoConfig(const Job& job) {
  if (job.profile_batches.empty()) {
    return InvalidArgumentError("megatron-mimo chooses its config on the job's profile batches; "
                                "the job has none");
  }
  const spec::ModelSpec& model = job.model;
  const int gpus = job.cluster.TotalGpus();
  const int language = planning::MimoLanguageModule(model);
  // MIMO modules: every module but projectors (part of their encoder's modality submodule), in
  // data-flow order.
  std::vector<int> named;
  for (int m : model.TopologicalOrder()) {
    if (model.modules[m].kind != spec::ModuleKind::kMlpProjector || m == language) {
      named.push_back(m);
    }
  }
  const auto parallel = ModuleParallels(job);

  // Every config of the GPUs (rank ranges in data-flow order, the last module takes the rest),
  // each module's GPU count in steps of `step` × its TP·CP.
  auto enumerate_configs = [&](int step) {
    std::vector<std::vector<planning::MimoModuleParallelism>> out;
    std::vector<planning::MimoModuleParallelism> current;
    std::function<void(size_t, int)> rec = [&](size_t k, int offset) {
      if (k == named.size()) {
        if (offset == gpus) out.push_back(current);
        return;
      }
      const int m = named[k];
      const auto& p = parallel[m];
      const int width = std::max(1, p.tp * std::max(1, p.cp));
      int min_rest = 0;
      for (size_t j = k + 1; j < named.size(); ++j) {
        min_rest += std::max(1, parallel[named[j]].tp * std::max(1, parallel[named[j]].cp));
      }
      const bool last = k + 1 == named.size();
      for (int n = width; offset + n + min_rest <= gpus; n += last ? width : width * step) {
        if (last && offset + n != gpus) continue;
        const int slots = n / width;
        for (int pp = 1; pp <= slots; ++pp) {
          if (slots % pp != 0 || pp > model.modules[m].num_layers) continue;
          current.push_back({.name = m == language ? "llm" : model.modules[m].name,
                             .module = model.modules[m].name,
                             .tp = p.tp,
                             .pp = pp,
                             .cp = std::max(1, p.cp),
                             .dp = slots / pp,
                             .rank_offset = offset});
          rec(k + 1, offset + n);
          current.pop_back();
        }
      }
    };
    rec(0, 0);
    return out;
  };
  // A bounded search: coarser GPU steps while there are more than kMaxConfigs configs.
  int step = 1;
  auto configs = enumerate_configs(step);
  while (static_cast<int>(configs.size()) > kMaxConfigs && step < gpus) {
    step *= 2;
    configs = enumerate_configs(step);
  }

  MimoChoice best;
  best.gpu_step = step;
  bool have_best = false;
  Status last_error = OkStatus();
  for (auto& modules : configs) {
    planning::MimoConfig config{.source = "megatron-mimo", .modules = std::move(modules)};
    if (!planning::CheckMimoConfig(config, model, job.cluster).ok()) {
      ++best.configs_rejected;
      continue;
    }
    WEFT_ASSIGN_OR_RETURN(planning::PlacementSpec spec,
                          planning::MimoConfigToPlacementSpec(config, model, job.cluster));
    auto placement = planning::BuildPlacement(spec, model, job.cluster, *job.cost_model);
    if (!placement.ok()) {
      last_error = placement.status();
      ++best.configs_rejected;
      continue;
    }
    StaticPlan plan;
    plan.placement = std::move(*placement);
    auto e = Evaluate(job, plan);
    if (!e.ok()) {  // e.g. 1F1B cannot order this graph
      last_error = e.status();
      ++best.configs_rejected;
      continue;
    }
    ++best.configs_evaluated;
    best.candidates.push_back({.config = config, .mean_iteration_s = e->mean_s, .fits = e->fits});
    const bool better = !have_best || (e->fits && !best.fits) ||
                        (e->fits == best.fits && e->mean_s < best.mean_iteration_s);
    if (better) {
      have_best = true;
      best.config = std::move(config);
      best.spec = std::move(spec);
      best.mean_iteration_s = e->mean_s;
      best.recompute = e->recompute;
      best.fits = e->fits;
    }
  }
  if (!have_best) {
    int min_gpus = 0;
    for (int m : named) min_gpus += std::max(1, parallel[m].tp * std::max(1, parallel[m].cp));
    return FailedPreconditionError(fmt::format(
        "megatron-mimo: no MIMO config of {} GPUs passes Megatron-Bridge's and weft's checks "
        "with the setup's TP/CP ({} modules need rank ranges of their own, at least {} GPUs; {} "
        "configs rejected){}",
        gpus, named.size(), min_gpus, best.configs_rejected,
        last_error.ok() ? "" : "; last error: " + std::string(last_error.message())));
  }
  return best;
}

namespace {

class MegatronMimoStrategy final : public Strategy {
 public:
  std::string_view Name() const override { return "megatron-mimo"; }
  std::string_view Description() const override {
    return "Megatron MIMO: each module on a rank range of its own (own TP/PP/CP/DP), layers "
           "even within a module, multimodule 1F1B; config searched once on profile batches";
  }

  StatusOr<StaticPlan> Prepare(const Job& job) const override {
    WEFT_RETURN_IF_ERROR(job.Validate());
    WEFT_ASSIGN_OR_RETURN(MimoChoice choice, ChooseMimoConfig(job));
    WEFT_ASSIGN_OR_RETURN(Placement placement, planning::BuildPlacement(choice.spec, job.model,
                                                                      job.cluster,
                                                                      *job.cost_model));
    const std::string description = fmt::format(
        "Megatron MIMO, multimodule 1F1B, layers even within each module; {}; chosen before "
        "training from {} configs ({} rejected by the checks) "
        "by the rule: {}{}; {:.4g} s mean on {} profile batch(es) with recompute {}{}",
        planning::DescribeMimoConfig(choice.config), choice.configs_evaluated,
        choice.configs_rejected, kRule,
        choice.gpu_step > 1
            ? fmt::format(" (GPU shares in steps of {}·TP·CP here)", choice.gpu_step)
            : "",
        choice.mean_iteration_s, job.profile_batches.size(), spec::RecomputeName(choice.recompute),
        choice.fits ? "" : " (none fits memory)");
    // The plan is exactly the one its MIMO config gives as a user placement (strategy manual):
    // the job's microbatches per LLM replica (fewer when its DP leaves fewer sequences).
    return MakeStaticPlan(std::move(placement), description, job.model);
  }

  StatusOr<IterationPlan> PlanIteration(const Job& job, const StaticPlan& plan,
                                        const IterationInput& input) const override {
    return PlanReplicas(job, plan, input, [](const graph::StageGraph& g) {
      return sched::MakeSchedule(sched::ScheduleKind::kOneFOneB, g);
    });
  }
};

}  // namespace

std::unique_ptr<Strategy> MakeMegatronMimoStrategy() {
  return std::make_unique<MegatronMimoStrategy>();
}

}  // namespace weft::strategy::megatron_mimo
