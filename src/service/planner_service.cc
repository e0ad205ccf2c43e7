#include "weft/service/planner_service.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string_view>
#include <system_error>

namespace weft::service {

namespace {

double SecondsBetween(std::chrono::steady_clock::time_point from,
                      std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// Median (mean of the two middle values for an even count); 0 for none.
double Median(std::span<const double> values) {
  if (values.empty()) return 0;
  std::vector<double> v(values.begin(), values.end());
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string Ms(double seconds) { return fmt::format("{:.1f} ms", seconds * 1e3); }

std::string BudgetText(const SearchBudget& b) {
  if (b.work_budget > 0) return b.rule;
  return "time budget " + Ms(b.time_budget_s) + " = " + b.rule;
}

void PushBounded(std::deque<double>& values, double value, int limit) {
  values.push_back(value);
  while (static_cast<int>(values.size()) > limit) values.pop_front();
}

}  // namespace

Status PlannerServiceOptions::Validate() const {
  auto bad = [](std::string_view field, auto value, std::string_view rule) {
    return InvalidArgumentError(fmt::format("{} = {}; {}", field, value, rule));
  };
  if (threads < 0 || threads > kMaxThreads) {
    return bad("threads", threads,
               fmt::format("must be in [0, {}] (0 = half the cores)", kMaxThreads));
  }
  if (!(budget_s > 0)) return bad("budget_s", budget_s, "must be > 0");
  if (work_budget < 0) return bad("work_budget", work_budget, "must be >= 0");
  if (search_threads < 1 || search_threads > kMaxThreads) {
    return bad("search_threads", search_threads, fmt::format("must be in [1, {}]", kMaxThreads));
  }
  if (max_queued < 1) return bad("max_queued", max_queued, "must be >= 1");
  if (lookahead < 1) return bad("lookahead", lookahead, "must be >= 1");
  if (!(min_budget_s > 0)) return bad("min_budget_s", min_budget_s, "must be > 0");
  if (!(max_budget_s >= 0)) return bad("max_budget_s", max_budget_s, "must be >= 0");
  const double max_s = max_budget_s > 0 ? max_budget_s : budget_s;
  if (max_s < min_budget_s) {
    return bad("max_budget_s (0 = budget_s)", max_s,
               fmt::format("must be >= min_budget_s = {}", min_budget_s));
  }
  if (!(margin_s >= 0)) return bad("margin_s", margin_s, "must be >= 0");
  if (time_window < 1) return bad("time_window", time_window, "must be >= 1");
  return OkStatus();
}

SearchBudget SearchBudgetRule(const PlannerServiceOptions& options,
                              int threads,
                              std::span<const double> iteration_times_s,
                              std::span<const double> overruns_s) {
  SearchBudget b;
  if (options.work_budget > 0) {
    b.work_budget = options.work_budget;
    b.rule =
        fmt::format("work budget {} units (deterministic, no time limit)", options.work_budget);
    return b;
  }
  if (iteration_times_s.empty()) {
    b.time_budget_s = options.budget_s;
    b.rule = "budget_s (no iteration time reported yet)";
    return b;
  }
  if (static_cast<int>(iteration_times_s.size()) > options.time_window) {
    iteration_times_s = iteration_times_s.last(options.time_window);
  }
  if (static_cast<int>(overruns_s.size()) > options.time_window) {
    overruns_s = overruns_s.last(options.time_window);
  }
  const int slots = std::max(1, std::min(options.lookahead, threads));
  const double median_s = Median(iteration_times_s);
  const double overrun_s = std::max(0.0, Median(overruns_s));
  const double raw_s = slots * median_s - options.margin_s - overrun_s;
  const double max_s = options.max_budget_s > 0 ? options.max_budget_s : options.budget_s;
  b.time_budget_s = std::clamp(raw_s, options.min_budget_s, max_s);
  b.rule = fmt::format(
      "min(lookahead {}, threads {}) x median {} of {} iterations - margin {} - "
      "overrun {}",
      options.lookahead, threads, Ms(median_s), iteration_times_s.size(), Ms(options.margin_s),
      Ms(overrun_s));
  if (b.time_budget_s != raw_s) {
    b.rule +=
        fmt::format(" = {}, clamped to [{}, {}]", Ms(raw_s), Ms(options.min_budget_s), Ms(max_s));
  }
  return b;
}

PlannerService::PlannerService(const planning::Planner& planner, PlannerServiceOptions options)
    : planner_(planner), options_(options) {
  int n = options_.threads;
  if (n <= 0) n = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / 2);
  num_threads_ = n;  // before the workers start: they read it (the budget rule)
  for (int i = 0; i < n; ++i) {
    try {
      workers_.emplace_back([this] { WorkerLoop(); });
    } catch (const std::exception& e) {  // system_error, or bad_alloc for its state
      // A limit on threads or memory: an error the caller sees (status(), Submit), not an abort.
      start_status_ = ResourceExhaustedError(fmt::format(
          "PlannerService: cannot start planning thread {} of {}: {}; use fewer threads", i + 1, n,
          e.what()));
      {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
      }
      work_cv_.notify_all();
      for (auto& t : workers_) t.join();
      workers_.clear();
      return;
    }
  }
}

PlannerService::~PlannerService() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    for (const auto& entry : running_) entry->cancel.store(true);
  }
  work_cv_.notify_all();
  done_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

Status PlannerService::Submit(const spec::Batch& batch) {
  if (!start_status_.ok()) return start_status_;
  std::lock_guard<std::mutex> lock(mutex_);
  if (entries_.count(batch.iteration)) {
    return InvalidArgumentError("batch " + std::to_string(batch.iteration) + " already submitted");
  }
  if (static_cast<int>(queue_.size()) >= options_.max_queued) {
    return ResourceExhaustedError("planner queue full (" + std::to_string(options_.max_queued) +
                                  " batches pending)");
  }
  auto entry = std::make_shared<Entry>();
  entry->batch = batch;
  entries_[batch.iteration] = entry;
  queue_.push_back(batch.iteration);
  work_cv_.notify_one();
  return OkStatus();
}

Status PlannerService::ReportIterationTime(int64_t iteration, double seconds) {
  if (!(seconds > 0) || !std::isfinite(seconds)) {
    return InvalidArgumentError("iteration " + std::to_string(iteration) + " time = " +
                                std::to_string(seconds) + " s; must be finite and > 0");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  PushBounded(iteration_times_s_, seconds, options_.time_window);
  return OkStatus();
}

Status PlannerService::Report(const ServedPlan& served,
                              const plan::MeasuredIteration& measured,
                              const cost::CorrectionRule& rule) {
  std::lock_guard<std::mutex> report_lock(report_mutex_);
  planning::PlanState current;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    current = state_;
  }
  // Observe runs without the service's lock: the planning threads go on meanwhile.
  auto next = planner_.Observe(current, served.planned_in, served.planned, measured, rule);
  if (!next.ok()) {
    return Status(next.status().code(), "report of iteration " + std::to_string(served.iteration) +
                                            ": " + std::string(next.status().message()));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  state_ = *std::move(next);
  ++reports_;
  return OkStatus();
}

planning::PlanState PlannerService::state() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return state_;
}

int64_t PlannerService::reports() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reports_;
}

SearchBudget PlannerService::NextBudgetLocked() const {
  const std::vector<double> times(iteration_times_s_.begin(), iteration_times_s_.end());
  const std::vector<double> overruns(overruns_s_.begin(), overruns_s_.end());
  return SearchBudgetRule(options_, num_threads_, times, overruns);
}

SearchBudget PlannerService::NextBudget() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return NextBudgetLocked();
}

bool PlannerService::SearchDone(int64_t iteration) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = entries_.find(iteration);
  return found != entries_.end() && found->second->searched.has_value();
}

void PlannerService::WorkerLoop() {
  for (;;) {
    std::shared_ptr<Entry> entry;
    Clock::time_point start;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      const int64_t it = queue_.front();
      queue_.pop_front();
      auto found = entries_.find(it);
      if (found == entries_.end()) continue;  // taken by Get() meanwhile
      entry = found->second;
      entry->started = true;
      // The budget is fixed now, from the iteration times reported so far.
      entry->budget = NextBudgetLocked();
      entry->state = state_;  // the fallback and the search plan in the state of now
      start = Clock::now();
      entry->search_start = start;
      running_.insert(entry);
    }
    auto fallback = planner_.Fallback(entry->batch, entry->state);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      entry->fallback = std::move(fallback);
    }
    done_cv_.notify_all();
    planning::PlanBudget budget = planner_.options().budget;
    budget.time_budget_s = entry->budget.time_budget_s;
    budget.work_budget = entry->budget.work_budget;
    budget.threads = options_.search_threads;
    budget.interrupt = &entry->cancel;
    const auto search_start = Clock::now();
    auto step = planner_.Plan(entry->batch, entry->state, budget);
    const auto done = Clock::now();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      running_.erase(entry);
      if (step.ok()) {
        entry->searched = std::move(step->planned);
      } else {
        entry->searched = step.status();
      }
      entry->search_time_s = SecondsBetween(search_start, done);
      entry->search_done = done;
      // What the budget did not cover (the fallback, evaluation, memory policy), for the rule;
      // a cancelled search says nothing about it.
      if (entry->budget.work_budget == 0 && !entry->cancel.load()) {
        PushBounded(overruns_s_, SecondsBetween(start, done) - entry->budget.time_budget_s,
                    options_.time_window);
      }
    }
    done_cv_.notify_all();
  }
}

StatusOr<ServedPlan> PlannerService::Get(int64_t iteration, Clock::time_point deadline) {
  const auto start = Clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  auto found = entries_.find(iteration);
  if (found == entries_.end()) {
    return NotFoundError("batch " + std::to_string(iteration) + " was never submitted");
  }
  std::shared_ptr<Entry> entry = found->second;
  done_cv_.wait_until(lock, deadline, [&] { return stopping_ || entry->searched.has_value(); });
  ServedPlan served;
  served.iteration = iteration;
  served.search_budget_s = entry->budget.time_budget_s;
  served.work_budget = entry->budget.work_budget;
  const std::string it = std::to_string(iteration);
  if (entry->searched.has_value() && entry->searched->ok()) {
    served.planned = std::move(**entry->searched);
    served.planned_in = entry->state;
    served.search_time_s = entry->search_time_s;
    served.ready_ahead_s = SecondsBetween(entry->search_done, start);
    served.planned.outcome.detail =
        (served.ready_ahead_s >= 0
             ? "searched: ready " + Ms(served.ready_ahead_s) + " before it was needed"
             : "searched: waited " + Ms(-served.ready_ahead_s) + " for it") +
        " (search " + Ms(served.search_time_s) + "; " + BudgetText(entry->budget) + ")";
  } else {
    planning::FallbackReason why;
    std::string detail;
    if (entry->searched.has_value()) {
      why = planning::FallbackReason::kSearchFailed;
      detail = "fallback: search for iteration " + it +
               " failed: " + std::string(entry->searched->status().message());
      served.search_time_s = entry->search_time_s;
    } else if (entry->started) {
      entry->cancel.store(true);  // nobody will take its plan: free the thread for the next one
      why = planning::FallbackReason::kStillRunning;
      detail = "fallback: search for iteration " + it + " still running at the deadline (" +
               BudgetText(entry->budget) + "; started " +
               Ms(SecondsBetween(entry->search_start, Clock::now())) + " ago); cancelled";
    } else {
      why = planning::FallbackReason::kNotStarted;
      const auto pos = std::find(queue_.begin(), queue_.end(), iteration);
      detail = fmt::format(
          "fallback: search for iteration {} not started by the deadline ({} searches queued "
          "before it, {} planning threads busy)",
          it, pos - queue_.begin(), running_.size());
    }
    if (!entry->fallback.has_value()) {
      if (!entry->started) {
        // No worker has it yet: compute the fallback here (milliseconds) in the state of now,
        // drop it from the queue.
        std::erase(queue_, iteration);
        entry->state = state_;
        const planning::PlanState state = entry->state;
        lock.unlock();
        auto fb = planner_.Fallback(entry->batch, state);
        lock.lock();
        entry->fallback = std::move(fb);
      } else {
        done_cv_.wait(lock, [&] { return stopping_ || entry->fallback.has_value(); });
      }
    }
    if (!entry->fallback.has_value()) return CancelledError("planner service stopped");
    if (!entry->fallback->ok()) return entry->fallback->status();
    served.planned = std::move(**entry->fallback);
    served.planned_in = entry->state;
    served.planned.outcome =
        planning::MakePlanOutcome(served.planned.evaluation.oom, why, std::move(detail));
  }
  entries_.erase(iteration);
  served.wait_time_s = SecondsBetween(start, Clock::now());
  return served;
}

}  // namespace weft::service
