#pragma once
// PlannerService: the asynchronous planner (DIP §3.1/§6.2, PipeWeaver §7.1). Training submits the
// metadata of upcoming batches ahead of time; background threads plan them (a strategy's
// PlanIteration within a budget) while the GPUs train; Get() hands plans out in batch order
// and never blocks beyond the caller's deadline: if the search has not finished by then, it
// returns the safe fallback plan computed first for every batch (the strategy's own placement
// ordered by a rule: 1F1B where it applies, else GPipe), says why, and cancels that search. Both
// go through the Planner, so the searched plan and the fallback follow its one memory policy and
// come evaluated.
//
// Online planning that keeps up (DIP §6.2 prefetches the metadata of upcoming batches): the
// caller submits iteration i + lookahead when iteration i starts, and reports each measured
// iteration wall time (ReportIterationTime). Each search then gets the time budget of
// SearchBudgetRule (below), fixed when a planning thread starts it, so that in steady state its
// plan is ready before the iteration needs it:
//
//   auto planner = planning::Planner::Create(job_options, "dip");
//   PlannerService service(**planner, {.threads = 1, .budget_s = 0.5, .lookahead = 2});
//   for (int64_t i = 0; i <= 2; ++i) service.Submit(batches[i]);
//   for (int64_t i = 0;; ++i) {
//     auto served = service.Get(i, /*deadline=*/steady_clock::now());  // searched or fallback
//     service.Submit(batches[i + 2]);
//     ... run iteration i, measure its wall time t_s (and its stage times, measured) ...
//     service.ReportIterationTime(i, t_s);
//     service.Report(*served, measured);  // optional: measured stage times correct later plans
//   }
//
// Measured feedback (Spine v3): the service carries a planning::PlanState. Every fallback and
// search plans in the state current when it starts; Report folds a served plan's measured stage
// times into the state (Planner::Observe), so later plans use the corrected cost model and the
// strategy's own feedback (DFLOP's correction). With lookahead L, iteration i is planned before
// the reports of i - L .. i - 1 arrive: their corrections reach iteration i + L.
//
// Determinism: with options.work_budget > 0 every search is bounded by deterministic work units
// only (no time limit), so a batch's searched plan depends on the batch, the seed and the work
// budget alone — whether it is ready in time does not. With work_budget = 0 the budget is wall
// time (the rule's, or budget_s) and the searched plan may vary from run to run.
//
// Thread-safety: every method may be called from any thread. The service owns copies of the
// batches; the planner must outlive the service. The destructor cancels running searches
// (PlanBudget::interrupt) and joins the threads.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "weft/common/status.h"
#include "weft/planning/planner.h"

namespace weft::service {

struct PlannerServiceOptions {
  int threads = 0;  // background planning threads, <= kMaxThreads; 0 = half the cores (>= 1)
  // Time budget per search until an iteration time is reported; the rule's upper bound unless
  // max_budget_s is set. Ignored when work_budget > 0.
  double budget_s = 1.0;
  // > 0: every search is bounded by this many deterministic work units (PlanBudget::work_budget)
  // and by no time limit: same batch and seed, same plan. The budget rule does not apply.
  int64_t work_budget = 0;
  int search_threads = 1;  // threads one search may use (PlanBudget::threads)
  int max_queued = 64;     // Submit fails with ResourceExhausted beyond this many pending
  // Iterations planned ahead: the caller submits iteration i + lookahead when iteration i starts,
  // so a search has `lookahead` iterations to finish. Used by the budget rule.
  int lookahead = 1;
  double min_budget_s = 0.005;  // the rule's lower bound (a search always gets this much)
  double max_budget_s = 0;      // the rule's upper bound; 0 = budget_s
  double margin_s = 0.01;       // the rule keeps this much slack before the plan is needed
  int time_window = 5;          // the rule's median is over the last this many iteration times
  static constexpr int kMaxThreads = 256;  // threads and search_threads
  Status Validate() const;
};

// The budget one search gets.
struct SearchBudget {
  double time_budget_s = 0;  // wall-time budget (PlanBudget::time_budget_s); 0 in work mode
  int64_t work_budget = 0;   // deterministic work units (PlanBudget::work_budget); 0 = time mode
  std::string rule;          // how it was derived, e.g. "min(lookahead 2, threads 1) x ..."
};

// The budget rule (pure, deterministic in its inputs):
//   work mode (options.work_budget > 0): work_budget units, no time limit;
//   no iteration time reported yet:      budget_s;
//   else: clamp(min(lookahead, threads) x median(iteration_times_s) - margin_s - overrun,
//               min_budget_s, max_budget_s)
// where iteration_times_s are the last time_window reported iteration wall times and overrun is
// max(0, median(overruns_s)), the recent (planning-thread time per batch - time budget given):
// the fallback, the evaluation and the memory policy around a search. Why min(lookahead,
// threads): a search submitted when iteration i starts is needed lookahead iterations later
// (latency), and `threads` planning threads finish one search per iteration only if each takes
// at most `threads` iterations (throughput).
SearchBudget SearchBudgetRule(const PlannerServiceOptions& options,
                              int threads,
                              std::span<const double> iteration_times_s,
                              std::span<const double> overruns_s);

struct ServedPlan {
  int64_t iteration = 0;
  // The plan and its evaluation. planned.outcome says what was served, typed: kPlanned (the
  // search's plan), kFallback with the reason (kNotStarted / kStillRunning / kSearchFailed), or
  // kOutOfMemory; its detail says why in words, e.g. "searched: ready 41 ms before it was
  // needed (search 80 ms; time budget 96 ms = min(lookahead 2, threads 1) x median ...)" or
  // "fallback: search for iteration 5 still running (time budget 120 ms, started 80 ms ago);
  // cancelled".
  planning::PlannedIteration planned;
  // The state the plan was made in (its cost correction and strategy feedback): what Report
  // needs to un-correct its predictions.
  planning::PlanState planned_in;
  double search_time_s = 0;  // wall time of the search (0 if it never finished)
  // The budget the search got (both 0 when it never started).
  double search_budget_s = 0;
  int64_t work_budget = 0;
  // Searched plans: how long before Get() was called the search had finished; negative when
  // Get() waited for it.
  double ready_ahead_s = 0;
  double wait_time_s = 0;  // how long Get() waited
};

class PlannerService {
 public:
  explicit PlannerService(const planning::Planner& planner, PlannerServiceOptions options = {});
  ~PlannerService();
  PlannerService(const PlannerService&) = delete;
  PlannerService& operator=(const PlannerService&) = delete;

  // Queues a batch for planning (keyed by batch.iteration; must be new).
  Status Submit(const spec::Batch& batch);
  // The plan of `iteration`: the searched plan if ready by `deadline`, else the fallback (which is
  // computed before the search starts; if even that is not ready, Get waits for it — it takes
  // milliseconds) and the search, if running, is cancelled. NotFound for an iteration never
  // submitted. The entry is removed after Get.
  StatusOr<ServedPlan> Get(int64_t iteration, std::chrono::steady_clock::time_point deadline);
  // The measured wall time of one training iteration (the time between two consecutive plans
  // being needed): the budget rule's input. InvalidArgument unless finite and > 0.
  Status ReportIterationTime(int64_t iteration, double seconds);
  // Measured feedback: folds what a runtime measured executing `served` (its stage times,
  // weft.measured/v1) into the service's state (Planner::Observe under `rule`: the planned
  // latencies un-corrected with served.planned_in, the service's current correction updated).
  // Searches and fallbacks started afterwards plan with the new state; plans already made keep
  // theirs. Reports may come in any order and from any thread; each is applied once, in the
  // order they arrive. InvalidArgument naming the first measured record that matches no stage.
  Status Report(const ServedPlan& served,
                const plan::MeasuredIteration& measured,
                const cost::CorrectionRule& rule = {});
  // The state new searches plan in (PlanState::correction null until a report changed it).
  planning::PlanState state() const;
  // Reports applied so far.
  int64_t reports() const;
  // The budget a search started now would get.
  SearchBudget NextBudget() const;
  // True once the search of a submitted, not yet served iteration has finished (ok or failed).
  bool SearchDone(int64_t iteration) const;

  int threads() const { return num_threads_; }
  const PlannerServiceOptions& options() const { return options_; }
  // OK unless the constructor could not start its planning threads (a limit on threads or
  // memory): then ResourceExhausted saying how many started, no thread runs, and Submit returns
  // this error. Check it after construction.
  const Status& status() const { return start_status_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    spec::Batch batch;
    std::optional<StatusOr<planning::PlannedIteration>> fallback;
    std::optional<StatusOr<planning::PlannedIteration>> searched;
    planning::PlanState state;  // what the fallback and the search plan in
    SearchBudget budget;
    Clock::time_point search_start, search_done;
    double search_time_s = 0;
    bool started = false;
    std::atomic<bool> cancel{false};  // PlanBudget::interrupt of its search
  };
  void WorkerLoop();
  SearchBudget NextBudgetLocked() const;

  const planning::Planner& planner_;
  PlannerServiceOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<int64_t> queue_;
  std::map<int64_t, std::shared_ptr<Entry>> entries_;
  std::set<std::shared_ptr<Entry>> running_;  // searches in progress (the destructor cancels)
  std::deque<double> iteration_times_s_;      // the last time_window reports
  std::deque<double> overruns_s_;             // the last time_window searches' overruns
  planning::PlanState state_;                 // state(): what new searches plan in
  int64_t reports_ = 0;
  std::mutex report_mutex_;  // one Report at a time (Observe runs unlocked)
  bool stopping_ = false;
  int num_threads_ = 0;  // planning threads (set before they start)
  Status start_status_;  // status(); set by the constructor only
  std::vector<std::thread> workers_;
};

}  // namespace weft::service
