// Bindings: planning one iteration with a strategy (plan JSON + simulated summary), simulate.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "plan_dict.h"
#include "weft/strategy/common.h"
#include "weft/report/comparison.h"
#include "weft/report/tables.h"
#include "weft/strategy/compare.h"
#include "weft/strategy/tune.h"
#include "weft/plan/measured.h"
#include "weft/planning/planner.h"
#include "weft/strategy/strategy.h"

namespace weft::python {
namespace {

// The CLI's default budget: 100 deterministic work units; budget_s > 0 with work_budget not given
// is a wall-clock budget instead; both given: both apply (PlanBudget::Validate checks them).
planning::PlanBudget DefaultBudget(double budget_s, std::optional<int64_t> work_budget) {
  planning::PlanBudget b;
  b.time_budget_s = budget_s;
  b.work_budget = work_budget.has_value() ? *work_budget : (budget_s > 0 ? 0 : 100);
  return b;
}

}  // namespace


namespace {

// Everything computed without the GIL.
struct PlanOutput {
  std::unique_ptr<planning::Planner> planner;
  spec::Batch batch;
  planning::PlannedIteration planned;
  CompiledReplica compiled;
  std::string data_warning;  // given vs used, when data was not all used as given
};

Status RunPlan(const std::string& strategy_name, const planning::JobOptions& job,
               int64_t iteration, const planning::PlanBudget& budget, bool world,
               PlanOutput& out) {
  WEFT_ASSIGN_OR_RETURN(out.planner,
                        strategy::MakePlanner(job, strategy_name, {.budget = budget}));
  WEFT_ASSIGN_OR_RETURN(auto batches, out.planner->Batches(iteration, 1, &out.data_warning));
  out.batch = batches.at(0);
  WEFT_ASSIGN_OR_RETURN(out.planned, out.planner->Plan(out.batch));
  return world ? CompileWorldPlan(*out.planner, iteration, out.planned, out.compiled)
               : CompileReplica0(*out.planner, iteration, out.planned, out.compiled);
}

// A planner that carries its PlanState between iterations and learns from measured times
// (Planner::Plan(batch, state) / Planner::Observe): weft.FeedbackPlanner.
class FeedbackPlanner {
 public:
  FeedbackPlanner(const std::string& strategy_name, const planning::JobOptions& job,
                  const planning::PlanBudget& budget, const cost::CorrectionRule& rule)
      : rule_(rule) {
    Check(rule_.Validate());
    Status status;
    {
      py::gil_scoped_release release;
      auto made = strategy::MakePlanner(job, strategy_name, {.budget = budget});
      status = made.status();
      if (made.ok()) planner_ = std::move(*made);
    }
    Check(status);
  }

  // Plans iteration `iteration`'s batch in the current state and compiles the world plan.
  py::dict Plan(int64_t iteration) {
    spec::Batch batch;
    CompiledReplica compiled;
    Status status = [&]() -> Status {
      py::gil_scoped_release release;
      WEFT_ASSIGN_OR_RETURN(auto batches, planner_->Batches(iteration, 1));
      batch = batches.at(0);
      WEFT_ASSIGN_OR_RETURN(planning::PlannedStep step, planner_->Plan(batch, state_));
      last_ = std::move(step.planned);
      state_ = std::move(step.next);
      return CompileWorldPlan(*planner_, iteration, *last_, compiled);
    }();
    Check(status);
    return PlannedIterationDict(*planner_, iteration, *last_, batch, compiled);
  }

  // Folds a weft.measured/v1 record of the last plan into the state's correction.
  void Observe(const std::string& measured_json) {
    Status status = [&]() -> Status {
      py::gil_scoped_release release;
      if (!last_.has_value()) {
        return FailedPreconditionError("observe: no plan yet (call plan first)");
      }
      WEFT_ASSIGN_OR_RETURN(auto records, plan::MeasuredFromJson(measured_json));
      if (records.size() != 1) {
        return InvalidArgumentError("observe: the document holds " +
                                    std::to_string(records.size()) +
                                    " iterations; give the record of the last plan alone");
      }
      WEFT_ASSIGN_OR_RETURN(state_, planner_->Observe(state_, *last_, records[0], rule_));
      return OkStatus();
    }();
    Check(status);
  }

  // The correction's entries: module, pass, token bucket, factor, observations.
  py::list Correction() const {
    py::list out;
    if (state_.correction == nullptr) return out;
    for (const cost::CorrectionEntry& e : state_.correction->entries()) {
      py::dict d;
      d["module"] = planner_->job().model.modules.at(e.key.module).name;
      d["pass"] = std::string(spec::PassName(e.key.pass));
      d["tokens_bucket"] = e.key.bucket.tokens;
      d["segment_bucket"] = e.key.bucket.mean_segment;
      d["factor"] = e.factor;
      d["observations"] = e.observations;
      out.append(d);
    }
    return out;
  }

  int64_t IterationsPlanned() const { return state_.iterations_planned; }

 private:
  std::unique_ptr<planning::Planner> planner_;
  cost::CorrectionRule rule_;
  planning::PlanState state_;
  std::optional<planning::PlannedIteration> last_;
};

}  // namespace

void RegisterStrategy(py::module_& m) {
  m.def("strategy_names", []() { return strategy::StrategyNames(); });
  py::class_<FeedbackPlanner>(
      m, "FeedbackPlanner",
      "A planner that carries its state between iterations (Planner::Plan(batch, state)) and "
      "learns from what the runtime measured (Planner::Observe): plan(iteration) returns what "
      "weft.plan(world=True) returns, planned with the current cost correction; "
      "observe(measured_json) folds one weft.measured/v1 iteration record of the last plan in; "
      "correction() lists the learned factors (docs/cost_model.md 'Measured correction'). "
      "alpha, min_ratio, max_ratio: the update rule (cost::CorrectionRule; a runtime on a CPU "
      "measures ~10^3x a GPU prediction: widen the clamp).")
      .def(py::init([](const std::string& strategy_name, const std::string& model,
                       const std::string& cluster, int gpus, const std::string& data,
                       uint64_t seed, int num_microbatches, int pipeline_size,
                       int64_t work_budget, double alpha, double min_ratio, double max_ratio) {
             auto job = MakeJobOptions(model, cluster, gpus, data, num_microbatches, 0, seed,
                                       pipeline_size, "");
             planning::PlanBudget budget;
             budget.work_budget = work_budget;
             budget.time_budget_s = work_budget > 0 ? 0 : 1.0;
             return std::make_unique<FeedbackPlanner>(
                 strategy_name, job, budget,
                 cost::CorrectionRule{
                     .alpha = alpha, .min_ratio = min_ratio, .max_ratio = max_ratio});
           }),
           py::arg("strategy"), py::arg("model"), py::arg("cluster") = "", py::arg("gpus") = 0,
           py::arg("data") = "mixed", py::arg("seed") = 1, py::arg("num_microbatches") = 0,
           py::arg("pipeline_size") = 0, py::arg("work_budget") = 0,
           py::arg("alpha") = cost::CorrectionRule{}.alpha,
           py::arg("min_ratio") = cost::CorrectionRule{}.min_ratio,
           py::arg("max_ratio") = cost::CorrectionRule{}.max_ratio)
      .def("plan", &FeedbackPlanner::Plan, py::arg("iteration"))
      .def("observe", &FeedbackPlanner::Observe, py::arg("measured_json"))
      .def("correction", &FeedbackPlanner::Correction)
      .def_property_readonly("iterations_planned", &FeedbackPlanner::IterationsPlanned);
  m.def(
      "plan",
      [](const std::string& strategy_name, const std::string& model, const std::string& cluster,
         int gpus, const std::string& data, int64_t iteration, uint64_t seed,
         int num_microbatches, int sequences_per_batch, double budget_s, int pipeline_size,
         std::optional<int64_t> work_budget, int threads, bool world,
         const std::string& placement) {
        auto job = MakeJobOptions(model, cluster, gpus, data, num_microbatches,
                                  sequences_per_batch, seed, pipeline_size, placement);
        planning::PlanBudget budget = DefaultBudget(budget_s, work_budget);
        budget.threads = threads;
        PlanOutput out;
        Status status;
        {
          py::gil_scoped_release release;
          status = RunPlan(strategy_name, job, iteration, budget, world, out);
        }
        Check(status);
        py::dict d =
            PlannedIterationDict(*out.planner, iteration, out.planned, out.batch, out.compiled);
        d["data_warning"] = out.data_warning;
        return d;
      },
      py::arg("strategy"), py::arg("model"), py::arg("cluster") = "", py::arg("gpus") = 0,
      py::arg("data") = "", py::arg("iteration") = 0, py::arg("seed") = 1,
      py::arg("num_microbatches") = 0, py::arg("sequences_per_batch") = 0,
      py::arg("budget_s") = 0.0, py::arg("pipeline_size") = 0, py::arg("work_budget") = py::none(),
      py::arg("threads") = 1, py::arg("world") = false, py::arg("placement") = "",
      "Plans and simulates one iteration; returns the compiled, validated plan of replica 0 "
      "(plan_json, weft.plan/v3: its data tables hold the batch's samples and sequences, the "
      "microbatches with every module's instances and per rank its replica, group and chunks; "
      "a runtime needs nothing else), the simulated summary (iteration_time_s, mfu, "
      "bubble_ratio, ...) and, for reading, the placement chunks, the batch and replica 0's "
      "microbatches (sequence indices). world=True: plan_json is the world plan (every rank of "
      "every DP replica, Planner::CompileWorld), microbatches every replica's; num_ranks = the "
      "plan's ranks. "
      "placement: a user placement file (strategy 'manual', docs/placements.md). "
      "Defaults as the CLI's: data '' = the model's setup profile (else mixed); a deterministic "
      "budget of 100 work units (work_budget; budget_s > 0 alone = a wall-clock budget instead). "
      "threads = search threads. weft.plan_graph gives the stage graph and per-group order. "
      "data_warning: the given-vs-used line of the data (as weft.simulate), else ''.");
  m.def(
      "simulate",
      [](const std::string& strategy_name, const std::string& model, const std::string& cluster,
         int gpus, const std::string& data, int64_t first_iteration, int iterations,
         uint64_t seed, double budget_s, std::optional<int64_t> work_budget) {
        if (iterations <= 0) {
          throw py::value_error("iterations = " + std::to_string(iterations) + "; must be > 0");
        }
        auto job = MakeJobOptions(model, cluster, gpus, data, 0, 0, seed);
        std::vector<planning::PlannedIteration> results;
        std::string data_warning;
        Status status = [&]() -> Status {
          py::gil_scoped_release release;
          planning::PlannerOptions options;
          options.budget = DefaultBudget(budget_s, work_budget);
          WEFT_ASSIGN_OR_RETURN(auto planner,
                                strategy::MakePlanner(job, strategy_name, options));
          WEFT_ASSIGN_OR_RETURN(auto batches,
                                planner->Batches(first_iteration, iterations, &data_warning));
          for (const auto& batch : batches) {
            WEFT_ASSIGN_OR_RETURN(auto p, planner->Plan(batch));
            results.push_back(std::move(p));
          }
          return OkStatus();
        }();
        Check(status);
        py::list out;
        for (size_t i = 0; i < results.size(); ++i) {
          py::dict d;
          d["iteration"] = first_iteration + static_cast<int64_t>(i);
          FillSummary(d, results[i]);
          d["data_warning"] = data_warning;
          out.append(d);
        }
        return out;
      },
      py::arg("strategy"), py::arg("model"), py::arg("cluster") = "", py::arg("gpus") = 0,
      py::arg("data") = "", py::arg("first_iteration") = 0, py::arg("iterations") = 1,
      py::arg("seed") = 1, py::arg("budget_s") = 0.0, py::arg("work_budget") = py::none(),
      "Plans and simulates K iterations; list of summaries (no plans). Defaults as weft.plan's "
      "(the model's data profile, 100 deterministic work units). Each has data_warning: "
      "the given-vs-used line when data was not all used as given (malformed records, samples "
      "packing rejected, a dropped short batch, videos frame-sampled or clips cut), else ''.");
  m.def(
      "compare",
      [](const std::string& model, const std::string& cluster, int gpus, const std::string& data,
         int iterations, const std::vector<std::string>& strategies, uint64_t seed,
         double budget_s, std::optional<int64_t> work_budget, bool tune,
         const std::string& baseline) {
        strategy::CompareOptions options;
        options.job = MakeJobOptions(model, cluster, gpus, data, 0, 0, seed);
        options.iterations = iterations;
        options.strategies = strategies;
        options.baseline = baseline;
        options.budget = DefaultBudget(budget_s, work_budget);
        std::string json;
        Status status = [&]() -> Status {
          py::gil_scoped_release release;
          WEFT_RETURN_IF_ERROR(options.budget.Validate());
          if (tune) {
            WEFT_ASSIGN_OR_RETURN(strategy::TunedComparison t,
                                  strategy::RunTunedComparison(options, {}));
            json = report::ComparisonJsonString(t.run.comparison);
          } else {
            WEFT_ASSIGN_OR_RETURN(strategy::CompareRun run, strategy::RunComparison(options));
            json = report::ComparisonJsonString(run.comparison);
          }
          return OkStatus();
        }();
        Check(status);
        return py::module_::import("json").attr("loads")(json);
      },
      py::arg("model"), py::arg("cluster") = "", py::arg("gpus") = 0, py::arg("data") = "",
      py::arg("iterations") = 10, py::arg("strategies") = std::vector<std::string>{},
      py::arg("seed") = 1, py::arg("budget_s") = 0.0, py::arg("work_budget") = py::none(),
      py::arg("tune") = false, py::arg("baseline") = "megatron-1f1b",
      "weft compare as a call: every strategy (or `strategies`) on the same batches; returns the "
      "weft.compare/v1 dict that `weft compare --json` writes (rows ranked, the best marked, each "
      "with its configuration). tune=True tunes each strategy first (weft compare --tune).");
  m.def(
      "tune",
      [](const std::string& model, const std::string& cluster, int gpus, const std::string& data,
         const std::vector<std::string>& strategies, uint64_t seed, int max_simulations,
         bool exhaustive, double budget_s, std::optional<int64_t> work_budget,
         int memory_check_batches) {
        strategy::TuneOptions options;
        options.memory_check_batches = memory_check_batches;
        options.job = MakeJobOptions(model, cluster, gpus, data, 0, 0, seed);
        options.strategies = strategies;
        options.max_simulations = max_simulations;
        options.exhaustive = exhaustive;
        options.budget = DefaultBudget(budget_s, work_budget);
        std::string json;
        Status status = [&]() -> Status {
          py::gil_scoped_release release;
          WEFT_ASSIGN_OR_RETURN(strategy::TuneResult r, strategy::Tune(options));
          json = r.ToJson();
          return OkStatus();
        }();
        Check(status);
        return py::module_::import("json").attr("loads")(json);
      },
      py::arg("model"), py::arg("cluster") = "", py::arg("gpus") = 0, py::arg("data") = "",
      py::arg("strategies") = std::vector<std::string>{}, py::arg("seed") = 1,
      py::arg("max_simulations") = 4, py::arg("exhaustive") = false, py::arg("budget_s") = 0.0,
      py::arg("work_budget") = py::none(), py::arg("memory_check_batches") = 8,
      "weft tune as a call: each strategy's best TP/CP/PP/DP and microbatches (docs/tune.md); "
      "returns the weft.tune/v1 dict of `weft tune --json`.");
}

}  // namespace weft::python
