#include "weft/strategy/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>

#include "weft/common/text.h"
#include "weft/data/generators.h"
#include "weft/data/packing.h"
#include "weft/data/readers.h"
#include "weft/data/workload.h"
#include "weft/planning/configuration.h"
#include "weft/planning/placement_file.h"
#include "weft/planning/planner.h"
#include "weft/planning/window.h"
#include "weft/strategy/common.h"
#include "weft/strategy/manual/manual.h"

namespace weft::strategy {
namespace {

// The window evaluation of a streaming strategy's planned iterations (planning/window.h): the
// warm-up is at least the first iteration when there are several (the pool fills), longer when
// the MSER truncation of the iteration times says so (planning::kAutoWarmup); each row takes the
// window's time of its iteration and the steady-state throughput and MFU.
Status EvaluateStreaming(const planning::Planner& planner,
                         const std::vector<planning::IterationPlan>& plans,
                         int keep,
                         report::StrategyResult& result,
                         CompareRun& run) {
  std::vector<const planning::IterationPlan*> ptrs;
  for (const auto& p : plans) ptrs.push_back(&p);
  const int warmup = planning::kAutoWarmup;
  sim::SimOptions sim_options;
  sim_options.record_transfers = true;
  WEFT_ASSIGN_OR_RETURN(
      planning::WindowEvaluation w,
      planning::EvaluateWindow(planner.job(), planner.static_plan(), ptrs, warmup, sim_options));
  run.static_plans.back() +=
      " [streaming: " + w.Brief() + "; " + planner.static_plan().pool->description + "]";
  for (size_t k = 0; k < result.iterations.size() && k < w.iteration_time_s.size(); ++k) {
    report::IterationResult& r = result.iterations[k];
    const sim::Timeline& t = w.window.iterations[k];
    r.iteration_time_s = w.iteration_time_s[k];
    r.samples_per_s = plans[k].replicas[0].samples / std::max(1e-30, r.iteration_time_s);
    r.tokens_per_s = plans[k].replicas[0].tokens / std::max(1e-30, r.iteration_time_s);
    const double peak_flops = planner.job().cluster.gpu.peak_bf16_flops_per_s;
    r.mfu = peak_flops > 0 && w.gpus_charged > 0
                ? plans[k].model_flops /
                      (w.gpus_charged * peak_flops * std::max(1e-30, r.iteration_time_s))
                : 0;
    r.bubble_ratio = t.bubble_ratio;
    int64_t peak = 0;
    for (const auto& g : t.groups) peak = std::max(peak, g.peak_bytes);
    r.peak_memory_bytes = peak;
    r.oom = !t.oom.empty();
  }
  // The strategy's memory peak (the first iteration holding it, the kept one on ties), kept
  // too when it is another iteration.
  int peak = -1;
  int64_t peak_bytes = -1;
  for (size_t k = 0; k < result.iterations.size() && k < w.window.iterations.size(); ++k) {
    const int64_t bytes = result.iterations[k].peak_memory_bytes;
    if (bytes > peak_bytes || (bytes == peak_bytes && static_cast<int>(k) == keep)) {
      peak_bytes = bytes;
      peak = static_cast<int>(k);
    }
  }
  if (peak >= 0 && peak != keep) {
    KeptTimeline kept;
    kept.strategy = result.name;
    kept.iteration = peak;
    kept.graph = w.graphs[peak].graph;
    kept.timeline = w.window.iterations[peak];
    run.peak_memory_timelines.push_back(std::move(kept));
  }
  if (keep >= 0 && keep < static_cast<int>(plans.size())) {
    KeptTimeline kept;
    kept.strategy = result.name;
    kept.iteration = keep;
    kept.replica = 0;
    kept.num_replicas = 1;
    kept.graph = w.graphs[keep].graph;
    kept.timeline = w.window.iterations[keep];
    if (!w.window.buffers.empty()) kept.pool = w.window.buffers[0];
    kept.pool_iterations = static_cast<int>(w.window.iterations.size());
    run.timelines.push_back(std::move(kept));
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<Strategy>> MakeStrategyForJob(std::string_view name,
                                                       const JobOptions& options,
                                                       const Job& job) {
  if (name != "manual") return MakeStrategy(name);
  if (options.placement.empty()) {
    return InvalidArgumentError(
        "strategy 'manual' needs --placement FILE.yaml (the user's "
        "per-module placement; docs/placements.md)");
  }
  StatusOr<planning::PlacementSpec> spec =
      planning::ReadPlacementFile(options.placement, job.model, job.cluster);
  if (!spec.ok()) {
    // A placement fits one model; say which one it was checked against (issue 34 item 3: a
    // file run without --model is checked against the default model).
    const bool default_model = options.model == JobOptions{}.model;
    return Status(
        spec.status().code(),
        fmt::format("{} (checked against model '{}'{})", spec.status().message(), job.model.name,
                    default_model ? ", the default: pass --model MODEL for the model "
                                    "this placement is for"
                                  : ""));
  }
  return manual::MakeManualStrategy(*std::move(spec));
}

StatusOr<std::unique_ptr<planning::Planner>> MakePlanner(const JobOptions& job,
                                                         std::string_view strategy,
                                                         planning::PlannerOptions options) {
  WEFT_RETURN_IF_ERROR(options.budget.Validate());  // before the work of the setup
  // A placement file is the `manual` strategy's input; every other strategy places the model
  // itself, so a placement given beside one would be silently ignored: refuse it.
  if (!job.placement.empty() && strategy != "manual") {
    return InvalidArgumentError(fmt::format(
        "--placement {} runs strategy 'manual'; strategy '{}' chooses its own placement (drop "
        "--strategy to run the file, or drop --placement; weft compare runs both)",
        job.placement, strategy));
  }
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<JobSetup> setup, MakeJobSetup(job));
  WEFT_ASSIGN_OR_RETURN(auto s, MakeStrategyForJob(strategy, job, setup->job));
  return planning::Planner::Create(std::shared_ptr<const JobSetup>(std::move(setup)), std::move(s),
                                   std::move(options));
}

Status CompareOptions::Validate() const {
  WEFT_RETURN_IF_ERROR(job.Validate());
  if (iterations < 1) {
    return InvalidArgumentError(fmt::format("iterations = {}; must be >= 1", iterations));
  }
  for (size_t i = 0; i < strategies.size(); ++i) {
    if (strategies[i].empty()) {
      return InvalidArgumentError(fmt::format("strategies[{}] = ''; must be a strategy name", i));
    }
    for (size_t j = 0; j < i; ++j) {
      if (strategies[j] == strategies[i]) {
        return InvalidArgumentError(fmt::format(
            "strategies[{}] = '{}'; must not repeat strategies[{}]", i, strategies[i], j));
      }
    }
  }
  WEFT_RETURN_IF_ERROR(budget.Validate());
  if (keep_timeline_of_iteration < -1) {
    return InvalidArgumentError(
        fmt::format("keep_timeline_of_iteration = {}; must be >= -1 (-1 = the last)",
                    keep_timeline_of_iteration));
  }
  return OkStatus();
}

StatusOr<CompareRun> RunComparison(const CompareOptions& options) {
  WEFT_RETURN_IF_ERROR(options.Validate());
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<JobSetup> owned, MakeJobSetup(options.job));
  std::shared_ptr<const JobSetup> setup(std::move(owned));
  std::vector<std::string> names =
      options.strategies.empty() ? StrategyNames() : options.strategies;
  // A user placement is compared too: "how good is my setup, and what would weft do?".
  if (!options.job.placement.empty() &&
      std::find(names.begin(), names.end(), "manual") == names.end()) {
    names.push_back("manual");
  }
  std::vector<std::unique_ptr<Strategy>> strategies;
  for (const auto& name : names) {
    WEFT_ASSIGN_OR_RETURN(auto s, MakeStrategyForJob(name, options.job, setup->job));
    strategies.push_back(std::move(s));
  }
  CompareRun run;
  WEFT_ASSIGN_OR_RETURN(auto batches,
                        MakeIterationBatches(*setup, 0, options.iterations, &run.data_warning));
  run.setup_notes = setup->notes;
  auto& cmp = run.comparison;
  cmp.model = setup->model_name;
  cmp.cluster = setup->cluster_name;
  cmp.num_gpus = setup->job.cluster.TotalGpus();
  cmp.data_profile = setup->data_name;
  cmp.planning_budget = DescribeBudget(options.budget);
  cmp.num_iterations = options.iterations;
  if (std::find(names.begin(), names.end(), options.baseline) != names.end()) {
    cmp.baseline = options.baseline;
  }
  const int keep = options.keep_timeline_of_iteration >= 0
                       ? std::min(options.keep_timeline_of_iteration, options.iterations - 1)
                       : options.iterations - 1;
  for (auto& strategy : strategies) {
    // Every registered strategy (no list given): a system that does not apply to this model
    // (FlowTrain without frozen encoders) is left out with its reason, not shown as an error.
    if (options.strategies.empty()) {
      if (Status applies = strategy->Applies(setup->job); !applies.ok()) {
        run.static_plans.push_back(std::string(strategy->Name()) +
                                   ": left out (does not apply): " + applies.message());
        continue;
      }
    }
    report::StrategyResult result;
    result.name = std::string(strategy->Name());
    result.description = std::string(strategy->Description());
    auto planner =
        planning::Planner::Create(setup, std::move(strategy), {.budget = options.budget});
    if (!planner.ok()) {
      result.error = planner.status().message();
      run.static_plans.push_back(result.name + ": " + planner.status().message());
      cmp.strategies.push_back(std::move(result));
      continue;
    }
    run.static_plans.push_back(result.name + ": " + (*planner)->static_plan().description);
    // A streaming plan (a pool: planning/window.h) is evaluated over the window of all
    // iterations once they are planned; its per-iteration rows are then the window's.
    const bool streaming = (*planner)->static_plan().pool.has_value();
    std::vector<planning::IterationPlan> streamed;
    planning::ConfigurationUsage usage;  // recompute and microbatches the iterations used
    // The iteration and DP replica holding the strategy's memory peak so far, when it is not
    // the kept timeline (the first such; the kept one on ties).
    int64_t peak_bytes = -1;
    std::optional<KeptTimeline> peak;
    for (int it = 0; it < options.iterations; ++it) {
      sim::SimOptions sim_options;
      sim_options.record_transfers = it == keep;
      sim_options.record_memory_curves = true;  // any iteration may hold the memory peak
      auto planned = (*planner)->Plan(batches[it], options.budget, sim_options);
      if (!planned.ok()) {
        result.error = "iteration " + std::to_string(it) + ": " + planned.status().message();
        break;
      }
      auto* plan = &planned->plan;
      auto* eval = &planned->evaluation;
      usage.Add(*plan);
      if (it == 0 && !plan->notes.empty()) {
        run.static_plans.back() += " [" + plan->notes + "]";
      }
      if (it == 0 && eval->gpus_idle > 0) {
        run.static_plans.back() +=
            " [uses " + std::to_string(eval->gpus_used) + " of " +
            std::to_string(eval->gpus_used + eval->gpus_idle) + " GPUs; " +
            std::to_string(eval->gpus_idle) + " idle, " +
            (setup->job.charge_idle_gpus ? "charged in MFU" : "not charged (--ignore-idle-gpus)") +
            "]";
      }
      report::IterationResult r;
      r.iteration = it;
      r.iteration_time_s = eval->iteration_time_s;
      r.samples_per_s = eval->samples_per_s;
      r.tokens_per_s = eval->tokens_per_s;
      r.mfu = eval->mfu;
      r.bubble_ratio = eval->bubble_ratio;
      r.peak_memory_bytes = eval->peak_memory_bytes;
      r.lower_bound_s = eval->lower_bound_s;
      r.oom = eval->oom;
      r.plan_time_s = plan->plan_time_s;
      result.iterations.push_back(r);
      if (streaming) {
        streamed.push_back(std::move(planned->plan));
        continue;
      }
      {
        const auto replica_peak = [&](int replica) {
          int64_t bytes = 0;
          for (const auto& g : eval->timelines[replica].groups) {
            bytes = std::max(bytes, g.peak_bytes);
          }
          return bytes;
        };
        int peak_replica = eval->slowest_replica;  // the kept replica on ties
        for (int k = 0; k < static_cast<int>(eval->timelines.size()); ++k) {
          if (replica_peak(k) > replica_peak(peak_replica)) peak_replica = k;
        }
        const int64_t bytes = replica_peak(peak_replica);
        const bool is_kept = it == keep && peak_replica == eval->slowest_replica;
        if (bytes > peak_bytes || (bytes == peak_bytes && is_kept)) {
          peak_bytes = bytes;
          peak.reset();
          if (!is_kept) {
            peak.emplace();
            peak->strategy = result.name;
            peak->iteration = it;
            peak->replica = peak_replica;
            peak->num_replicas = static_cast<int>(plan->replicas.size());
            peak->graph = plan->replicas[peak_replica].graph;
            peak->timeline = eval->timelines[peak_replica];
          }
        }
      }
      if (it == keep) {
        KeptTimeline kept;
        kept.strategy = result.name;
        kept.iteration = it;
        kept.replica = eval->slowest_replica;
        kept.num_replicas = static_cast<int>(plan->replicas.size());
        kept.graph = std::move(plan->replicas[eval->slowest_replica].graph);
        kept.timeline = std::move(eval->timelines[eval->slowest_replica]);
        run.timelines.push_back(std::move(kept));
      }
      if (options.progress) {
        options.progress(result.name + " iteration " + std::to_string(it) + ": " +
                         std::to_string(r.iteration_time_s) + " s");
      }
    }
    if (peak.has_value()) run.peak_memory_timelines.push_back(*std::move(peak));
    if (streaming && !result.error) {
      if (auto w = EvaluateStreaming(**planner, streamed, keep, result, run); !w.ok()) {
        result.error = w.message();
      }
    }
    result.configuration =
        planning::DescribeConfiguration((*planner)->job(), (*planner)->static_plan(), &usage);
    if (result.error) {
      result.iterations.clear();
      const auto of_this = [&](const KeptTimeline& k) { return k.strategy == result.name; };
      std::erase_if(run.timelines, of_this);
      std::erase_if(run.peak_memory_timelines, of_this);
    }
    cmp.strategies.push_back(std::move(result));
  }
  if (cmp.baseline.empty() == false) {
    const int b = cmp.FindStrategy(cmp.baseline);
    if (b < 0 || !cmp.strategies[b].ok()) cmp.baseline.clear();
  }
  return run;
}

}  // namespace weft::strategy
