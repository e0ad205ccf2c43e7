// Bindings: weft::service::PlannerService, the asynchronous planner. Python submits iterations
// (their batches come from the job's data generator), background threads plan them, get() hands
// out each plan in the same dict `weft.plan` returns plus `fallback`, `reason` and the search's
// budget and timing; report_iteration_time() feeds the service's budget rule.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "plan_dict.h"
#include "weft/service/planner_service.h"
#include "weft/strategy/common.h"
#include "weft/strategy/compare.h"
#include "weft/strategy/strategy.h"

namespace weft::python {

namespace {

// One PlannerService with the Planner it plans through.
class PyPlannerService {
 public:
  static Status Create(const std::string& strategy_name,
                       const planning::JobOptions& job,
                       const service::PlannerServiceOptions& options,
                       bool world,
                       std::unique_ptr<PyPlannerService>& out) {
    auto self = std::unique_ptr<PyPlannerService>(new PyPlannerService());
    self->world_ = world;
    WEFT_RETURN_IF_ERROR(options.Validate());
    WEFT_ASSIGN_OR_RETURN(self->planner_, strategy::MakePlanner(job, strategy_name));
    self->service_ = std::make_unique<service::PlannerService>(*self->planner_, options);
    WEFT_RETURN_IF_ERROR(self->service_->status());  // planning threads could not start
    out = std::move(self);
    return OkStatus();
  }

  Status Submit(int64_t iteration, spec::Batch& batch) {
    WEFT_ASSIGN_OR_RETURN(auto batches, planner_->Batches(iteration, 1));
    batch = batches.at(0);
    WEFT_RETURN_IF_ERROR(service_->Submit(batch));
    return OkStatus();
  }

  // Waits (up to timeout_s) for the plan (evaluated by the planner) and compiles replica 0.
  struct Output {
    service::ServedPlan served;
    spec::Batch batch;
    CompiledReplica compiled;
  };
  Status Get(int64_t iteration, double timeout_s, const spec::Batch& batch, Output& out) {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(timeout_s));
    WEFT_ASSIGN_OR_RETURN(out.served, service_->Get(iteration, deadline));
    out.batch = batch;
    // Kept for report(): the plan and the state it was made in (the oldest go beyond a bound).
    {
      std::lock_guard<std::mutex> lock(served_mutex_);  // get() and report() release the GIL
      served_[iteration] = out.served;
      while (static_cast<int>(served_.size()) > kMaxServedKept) served_.erase(served_.begin());
    }
    return world_ ? CompileWorldPlan(*planner_, iteration, out.served.planned, out.compiled)
                  : CompileReplica0(*planner_, iteration, out.served.planned, out.compiled);
  }

  py::dict ToDict(int64_t iteration, const Output& out) const {
    py::dict d =
        PlannedIterationDict(*planner_, iteration, out.served.planned, out.batch, out.compiled);
    const planning::PlanOutcome& outcome = out.served.planned.outcome;
    d["fallback"] = outcome.is_fallback();
    d["reason"] = outcome.detail;
    d["fallback_reason"] = outcome.is_fallback() ? outcome.detail : std::string();
    d["fallback_cause"] = std::string(planning::FallbackReasonName(outcome.fallback));
    d["outcome"] = std::string(planning::PlanOutcomeKindName(outcome.kind));
    d["search_time_s"] = out.served.search_time_s;
    d["search_budget_s"] = out.served.search_budget_s;
    d["work_budget"] = out.served.work_budget;
    d["ready_ahead_s"] = out.served.ready_ahead_s;
    d["wait_time_s"] = out.served.wait_time_s;
    return d;
  }

  // Folds the weft.measured/v1 record of served iteration `iteration` into the service's state.
  Status Report(int64_t iteration,
                const std::string& measured_json,
                const cost::CorrectionRule& rule) {
    std::lock_guard<std::mutex> lock(served_mutex_);
    auto found = served_.find(iteration);
    if (found == served_.end()) {
      return FailedPreconditionError(
          "report: iteration " + std::to_string(iteration) +
          " was not served by get(), or was reported already, or is older than the last " +
          std::to_string(kMaxServedKept) + " served");
    }
    WEFT_ASSIGN_OR_RETURN(auto records, plan::MeasuredFromJson(measured_json));
    if (records.size() != 1) {
      return InvalidArgumentError("report: the document holds " + std::to_string(records.size()) +
                                  " iterations; give the record of iteration " +
                                  std::to_string(iteration) + " alone");
    }
    if (records[0].iteration != iteration) {
      return InvalidArgumentError("report: the record is of iteration " +
                                  std::to_string(records[0].iteration) + ", not " +
                                  std::to_string(iteration));
    }
    WEFT_RETURN_IF_ERROR(service_->Report(found->second, records[0], rule));
    served_.erase(found);
    return OkStatus();
  }
  py::list Correction() const { return CorrectionList(*planner_, service_->state()); }
  int64_t Reports() const { return service_->reports(); }

  Status ReportIterationTime(int64_t iteration, double seconds) {
    return service_->ReportIterationTime(iteration, seconds);
  }
  service::SearchBudget NextBudget() const { return service_->NextBudget(); }
  bool SearchDone(int64_t iteration) const { return service_->SearchDone(iteration); }
  int threads() const { return service_->threads(); }
  int lookahead() const { return service_->options().lookahead; }
  // Batches of submitted, not yet served iterations (the service keeps its own copies).
  std::map<int64_t, spec::Batch> pending;

  ~PyPlannerService() { service_.reset(); }  // joins the threads before the planner goes

 private:
  PyPlannerService() = default;
  std::unique_ptr<planning::Planner> planner_;
  std::unique_ptr<service::PlannerService> service_;
  bool world_ = false;  // get() compiles the world plan (weft.plan(world=True))
  static constexpr int kMaxServedKept = 8;  // plans hold graphs: keep few
  std::mutex served_mutex_;
  std::map<int64_t, service::ServedPlan> served_;  // served, not yet reported
};

}  // namespace

void RegisterService(py::module_& m) {
  py::class_<PyPlannerService>(
      m, "PlannerService",
      "Asynchronous planner: submit(iteration) queues the iteration's batch (from the data "
      "generator) for background planning; get(iteration, timeout_s) returns its plan (the dict "
      "weft.plan returns, plus fallback, reason, fallback_reason, search_time_s, "
      "search_budget_s, work_budget, ready_ahead_s, wait_time_s). If the search is not done by "
      "the timeout, the safe fallback plan is served (fallback = True) and the search is "
      "cancelled. Online planning: submit iteration i + lookahead when iteration i starts and "
      "report_iteration_time() each measured iteration; each search's time budget then follows "
      "the service's rule (see report_iteration_time). work_budget > 0: deterministic work-unit "
      "searches (same seed, same plans), no time limit, no rule. world=True: get() returns "
      "world plans (as weft.plan(world=True)).")
      .def(py::init([](const std::string& strategy_name, const std::string& model,
                       const std::string& cluster, int gpus, const std::string& data, uint64_t seed,
                       int num_microbatches, int sequences_per_batch, int pipeline_size,
                       double budget_s, int threads, int search_threads, int max_queued,
                       int lookahead, int64_t work_budget, double min_budget_s, double max_budget_s,
                       double margin_s, int time_window, bool world) {
             auto job = MakeJobOptions(model, cluster, gpus, data, num_microbatches,
                                       sequences_per_batch, seed, pipeline_size);
             service::PlannerServiceOptions options;
             options.budget_s = budget_s;
             options.threads = threads;
             options.search_threads = search_threads;
             options.max_queued = max_queued;
             options.lookahead = lookahead;
             options.work_budget = work_budget;
             options.min_budget_s = min_budget_s;
             options.max_budget_s = max_budget_s;
             options.margin_s = margin_s;
             options.time_window = time_window;
             std::unique_ptr<PyPlannerService> out;
             Status status;
             {
               py::gil_scoped_release release;
               status = PyPlannerService::Create(strategy_name, job, options, world, out);
             }
             Check(status);
             return out;
           }),
           py::arg("strategy"), py::arg("model"), py::arg("cluster") = "", py::arg("gpus") = 0,
           py::arg("data") = "mixed", py::arg("seed") = 1, py::arg("num_microbatches") = 0,
           py::arg("sequences_per_batch") = 0, py::arg("pipeline_size") = 0,
           py::arg("budget_s") = 1.0, py::arg("threads") = 1, py::arg("search_threads") = 1,
           py::arg("max_queued") = 64, py::arg("lookahead") = 1, py::arg("work_budget") = 0,
           py::arg("min_budget_s") = 0.005, py::arg("max_budget_s") = 0.0,
           py::arg("margin_s") = 0.01, py::arg("time_window") = 5, py::arg("world") = false)
      .def(
          "submit",
          [](PyPlannerService& self, int64_t iteration) {
            if (self.pending.count(iteration)) {
              throw py::value_error("iteration " + std::to_string(iteration) +
                                    " was already submitted");
            }
            spec::Batch batch;
            Status status;
            {
              py::gil_scoped_release release;
              status = self.Submit(iteration, batch);
            }
            Check(status);
            self.pending.emplace(iteration, std::move(batch));
          },
          py::arg("iteration"), "Queues the batch of `iteration` for background planning.")
      .def(
          "get",
          [](PyPlannerService& self, int64_t iteration, double timeout_s) {
            auto it = self.pending.find(iteration);
            if (it == self.pending.end()) {
              throw py::value_error("iteration " + std::to_string(iteration) +
                                    " was never submitted (or already served)");
            }
            if (!(timeout_s >= 0)) throw py::value_error("timeout_s must be >= 0");
            spec::Batch batch = std::move(it->second);
            self.pending.erase(it);
            PyPlannerService::Output out;
            Status status;
            {
              py::gil_scoped_release release;
              status = self.Get(iteration, timeout_s, batch, out);
            }
            Check(status);
            return self.ToDict(iteration, out);
          },
          py::arg("iteration"), py::arg("timeout_s") = 60.0,
          "The plan of `iteration`: searched if ready within timeout_s, else the fallback.")
      .def(
          "report_iteration_time",
          [](PyPlannerService& self, int64_t iteration, double seconds) {
            Check(self.ReportIterationTime(iteration, seconds));
          },
          py::arg("iteration"), py::arg("seconds"),
          "The measured wall time of one training iteration: the budget rule's input (the next "
          "searches get clamp(min(lookahead, threads) x median of the last time_window times - "
          "margin_s - overrun, min_budget_s, max_budget_s or budget_s)).")
      .def(
          "next_budget",
          [](const PyPlannerService& self) {
            const service::SearchBudget b = self.NextBudget();
            py::dict d;
            d["time_budget_s"] = b.time_budget_s;
            d["work_budget"] = b.work_budget;
            d["rule"] = b.rule;
            return d;
          },
          "The budget a search started now would get: {time_budget_s, work_budget, rule}.")
      .def(
          "report",
          [](PyPlannerService& self, int64_t iteration, const std::string& measured_json,
             double alpha, double min_ratio, double max_ratio) {
            Status status;
            {
              py::gil_scoped_release release;
              status =
                  self.Report(iteration, measured_json,
                              {.alpha = alpha, .min_ratio = min_ratio, .max_ratio = max_ratio});
            }
            Check(status);
          },
          py::arg("iteration"), py::arg("measured_json"),
          py::arg("alpha") = cost::CorrectionRule{}.alpha,
          py::arg("min_ratio") = cost::CorrectionRule{}.min_ratio,
          py::arg("max_ratio") = cost::CorrectionRule{}.max_ratio,
          "Measured feedback: folds the weft.measured/v1 document holding the record of served "
          "iteration `iteration` (what the runtime measured executing it) into the service's cost "
          "correction (PlannerService::Report, Planner::Observe under the rule alpha, min_ratio, "
          "max_ratio); searches started afterwards plan with it. Each served iteration is "
          "reported at most once.")
      .def("correction", &PyPlannerService::Correction,
           "The factors of the service's cost correction (as FeedbackPlanner.correction()).")
      .def_property_readonly("reports", &PyPlannerService::Reports)
      .def("search_done", &PyPlannerService::SearchDone, py::arg("iteration"),
           "True once the search of a submitted, not yet served iteration has finished.")
      .def_property_readonly("threads", &PyPlannerService::threads)
      .def_property_readonly("lookahead", &PyPlannerService::lookahead);
}

}  // namespace weft::python
