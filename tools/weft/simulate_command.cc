// weft simulate / weft plan: one strategy on the batches of K iterations.
#include <filesystem>
#include <iostream>

#include "cli_common.h"
#include "job_options.h"
#include "weft/plan/compiler.h"
#include "weft/plan/plan_json.h"
#include "weft/plan/validator.h"
#include "weft/report/svg.h"
#include "weft/report/trace.h"
#include "weft/service/planner_service.h"
#include "weft/strategy/common.h"
#include "weft/strategy/compare.h"

namespace weft::cli {
namespace {

struct RunOptions {
  strategy::JobOptions job;
  std::string strategy = "megatron-1f1b";
  int iterations = 1;
  int first_iteration = 0;
  double budget_ms = 1000;
  std::string trace, svg, out, out_dir;
};

// Plans and simulates the iterations; calls `each` with (iteration, setup, plan, evaluation).
// What every run needs: the job, the strategy and its static plan, the batches.
struct Prepared {
  std::unique_ptr<strategy::JobSetup> setup;
  std::unique_ptr<strategy::Strategy> strategy;
  strategy::StaticPlan fixed;
  std::vector<spec::Batch> batches;
};

StatusOr<Prepared> PrepareRun(const RunOptions& o) {
  if (o.iterations <= 0) {
    return InvalidArgumentError("--iterations = " + std::to_string(o.iterations) +
                                "; must be > 0");
  }
  Prepared p;
  WEFT_ASSIGN_OR_RETURN(p.setup, strategy::MakeJobSetup(o.job));
  WEFT_ASSIGN_OR_RETURN(p.strategy, strategy::MakeStrategy(o.strategy));
  WEFT_ASSIGN_OR_RETURN(p.fixed, p.strategy->Prepare(p.setup->job));
  std::cout << "strategy " << p.strategy->Name() << ": " << p.fixed.description << "\n";
  if (!p.setup->notes.empty()) std::cout << "note: " << p.setup->notes << "\n";
  WEFT_ASSIGN_OR_RETURN(p.batches, strategy::MakeIterationBatches(*p.setup, o.first_iteration,
                                                                  o.iterations));
  return p;
}

template <typename Fn>
Status RunIterations(const RunOptions& o, Fn each) {
  WEFT_ASSIGN_OR_RETURN(Prepared prepared, PrepareRun(o));
  auto& [setup, s, fixed, batches] = prepared;
  strategy::PlanBudget budget;
  budget.time_budget_s = o.budget_ms / 1000.0;
  for (const auto& batch : batches) {
    WEFT_ASSIGN_OR_RETURN(auto planned,
                          strategy::PlanAndEvaluate(*s, setup->job, fixed, batch, budget));
    WEFT_RETURN_IF_ERROR(each(batch.iteration, *setup, planned));
  }
  return OkStatus();
}

// Like RunIterations, but the plans come from the asynchronous PlannerService: every batch is
// submitted up front, each Get() waits at most 2x the budget (+1 s), then the fallback is served.
template <typename Fn>
Status RunIterationsWithService(const RunOptions& o, Fn each) {
  WEFT_ASSIGN_OR_RETURN(Prepared prepared, PrepareRun(o));
  auto& [setup, s, fixed, batches] = prepared;
  // Fix the memory policy once (the recomputation the first batch needs to fit), so every plan
  // the service hands out uses the same choice.
  if (!batches.empty()) {
    strategy::PlanBudget budget{.time_budget_s = o.budget_ms / 1000.0};
    WEFT_ASSIGN_OR_RETURN(auto first,
                          strategy::PlanAndEvaluate(*s, setup->job, fixed, batches[0], budget));
    if (fixed.recompute.empty() && first.recompute_used != cost::Recompute::kNone) {
      fixed.recompute.assign(setup->job.model.modules.size(), first.recompute_used);
      std::cout << "note: recompute " << cost::RecomputeName(first.recompute_used)
                << " for every module (to fit memory on the first batch)\n";
    }
  }
  service::PlannerService planner(setup->job, *s, fixed,
                                  {.budget_s = std::max(1e-3, o.budget_ms / 1000.0)});
  for (const auto& batch : batches) WEFT_RETURN_IF_ERROR(planner.Submit(batch));
  for (const auto& batch : batches) {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(static_cast<int64_t>(2 * o.budget_ms + 1000));
    WEFT_ASSIGN_OR_RETURN(auto served, planner.Get(batch.iteration, deadline));
    strategy::PlannedIteration planned;
    planned.plan = std::move(served.plan);
    planned.plan.plan_time_s = served.search_time_s;
    if (served.fallback) planned.plan.notes += "fallback plan: " + served.fallback_reason;
    WEFT_ASSIGN_OR_RETURN(planned.evaluation,
                          strategy::EvaluateIteration(setup->job, planned.plan));
    WEFT_RETURN_IF_ERROR(each(batch.iteration, *setup, planned));
  }
  return OkStatus();
}

void AddRunOptions(CLI::App* cmd, RunOptions& o) {
  AddJobOptions(cmd, o.job);
  cmd->add_option("--strategy", o.strategy, "strategy name (see `weft compare --help`)")
      ->capture_default_str();
  cmd->add_option("--iterations", o.iterations, "iterations (batches) to plan")
      ->capture_default_str();
  cmd->add_option("--first-iteration", o.first_iteration, "index of the first batch")
      ->capture_default_str();
  cmd->add_option("--budget-ms", o.budget_ms, "planning budget per iteration (search strategies)")
      ->capture_default_str();
}

}  // namespace

void RegisterSimulateCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand(
      "simulate",
      "Simulate one strategy on the batches of K iterations; print the timeline summary.\n"
      "Example:\n  weft simulate --model vlm-s --strategy megatron-1f1b --data mixed "
      "--trace out/1f1b.trace.json --svg out/1f1b.svg");
  AddRunOptions(cmd, *o);
  cmd->add_option("--trace", o->trace, "Chrome/Perfetto trace of the last iteration");
  cmd->add_option("--svg", o->svg, "SVG timeline of the last iteration");
  cmd->callback([o, &exit_code]() {
    Status s = RunIterations(*o, [&](int64_t it, const strategy::JobSetup&,
                                     strategy::PlannedIteration& p) -> Status {
      const auto& e = p.evaluation;
      std::cout << "iteration " << it << ": " << e.timelines[e.slowest_replica].BriefReport();
      if (!p.plan.notes.empty()) std::cout << "  note: " << p.plan.notes << "\n";
      const auto& g = p.plan.replicas[e.slowest_replica].graph;
      const auto& t = e.timelines[e.slowest_replica];
      if (!o->trace.empty()) {
        WEFT_ASSIGN_OR_RETURN(auto trace, report::ChromeTraceString(g, t));
        WEFT_RETURN_IF_ERROR(WriteFileAtomically(o->trace, trace));
      }
      if (!o->svg.empty()) {
        WEFT_ASSIGN_OR_RETURN(auto svg, report::TimelineSvg(g, t));
        WEFT_RETURN_IF_ERROR(WriteFileAtomically(o->svg, svg));
      }
      return OkStatus();
    });
    exit_code = s.ok() ? 0 : ReportError(s);
  });
}

void RegisterPlanCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "Plan batches with a strategy and write validated execution plans (JSON, weft.plan/v1).\n"
      "Example:\n  weft plan --model tiny-vlm --strategy megatron-1f1b --out plan.json\n"
      "  weft plan --model vlm-s --strategy zb-h1 --iterations 4 --out-dir out/plans");
  AddRunOptions(cmd, *o);
  cmd->add_option("--out", o->out, "plan file of the (single) iteration");
  cmd->add_option("--out-dir", o->out_dir, "one plan file per iteration: plan_<i>.json");
  cmd->callback([o, &exit_code]() {
    if (o->out.empty() == o->out_dir.empty()) {
      exit_code = ReportError(InvalidArgumentError("plan: give exactly one of --out or --out-dir"));
      return;
    }
    if (!o->out.empty() && o->iterations != 1) {
      exit_code = ReportError(
          InvalidArgumentError("plan: --out writes one iteration; use --out-dir for --iterations > 1"));
      return;
    }
    auto write_plan = [&](int64_t it, const strategy::JobSetup& setup,
                          strategy::PlannedIteration& p) -> Status {
      const auto& e = p.evaluation;
      // Replica 0's plan: every DP replica runs the same kind of plan on its own data.
      const auto& replica = p.plan.replicas[0];
      plan::CompileOptions c;
      c.model = setup.model_name;
      c.strategy = o->strategy;
      c.iteration = it;
      for (const auto& m : setup.job.model.modules) c.hidden_size_by_module.push_back(m.hidden_size);
      WEFT_ASSIGN_OR_RETURN(auto compiled,
                            plan::CompilePlan(replica.graph, replica.schedule, e.timelines[0], c));
      auto report = plan::ValidatePlan(compiled);
      if (!report.ok()) {
        return InternalError("iteration " + std::to_string(it) +
                             ": compiled plan does not validate: " + report.status().message() +
                             (p.plan.notes.empty() ? "" : " [" + p.plan.notes + "]"));
      }
      const std::string path =
          !o->out.empty() ? o->out
                          : (std::filesystem::path(o->out_dir) /
                             ("plan_" + std::to_string(it) + ".json")).string();
      WEFT_RETURN_IF_ERROR(WriteFileAtomically(path, plan::PlanToJson(compiled)));
      std::cout << "iteration " << it << ": " << path << ": " << report->BriefReport()
                << "; simulated " << e.iteration_time_s << " s; planned in "
                << p.plan.plan_time_s * 1e3 << " ms (budget " << o->budget_ms << " ms)"
                << (p.plan.notes.empty() ? "" : "; " + p.plan.notes) << "\n";
      return OkStatus();
    };
    // A stream of batches goes through the asynchronous planner service; one batch is planned
    // in the foreground.
    Status s = o->out_dir.empty() ? RunIterations(*o, write_plan)
                                  : RunIterationsWithService(*o, write_plan);
    exit_code = s.ok() ? 0 : ReportError(s);
  });
}

}  // namespace weft::cli
