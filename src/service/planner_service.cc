#include "weft/service/planner_service.h"

#include <algorithm>


namespace weft::service {

Status PlannerServiceOptions::Validate() const {
  if (threads < 0) return InvalidArgumentError("threads = " + std::to_string(threads) + "; must be >= 0");
  if (!(budget_s > 0)) return InvalidArgumentError("budget_s = " + std::to_string(budget_s) + "; must be > 0");
  if (search_threads < 1) {
    return InvalidArgumentError("search_threads = " + std::to_string(search_threads) + "; must be >= 1");
  }
  if (max_queued < 1) return InvalidArgumentError("max_queued = " + std::to_string(max_queued) + "; must be >= 1");
  return OkStatus();
}

PlannerService::PlannerService(const strategy::Planner& planner, PlannerServiceOptions options)
    : planner_(planner), options_(options) {
  int n = options_.threads;
  if (n <= 0) n = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / 2);
  for (int i = 0; i < n; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

PlannerService::~PlannerService() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  interrupt_.store(true);
  work_cv_.notify_all();
  done_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

Status PlannerService::Submit(const spec::Batch& batch) {
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

void PlannerService::WorkerLoop() {
  for (;;) {
    std::shared_ptr<Entry> entry;
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
    }
    auto fallback = planner_.Fallback(entry->batch);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      entry->fallback = std::move(fallback);
    }
    done_cv_.notify_all();
    strategy::PlanBudget budget = planner_.options().budget;
    budget.time_budget_s = options_.budget_s;
    budget.threads = options_.search_threads;
    budget.interrupt = &interrupt_;
    const auto start = std::chrono::steady_clock::now();
    auto searched = planner_.Plan(entry->batch, budget);
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      entry->searched = std::move(searched);
      entry->search_time_s = elapsed;
    }
    done_cv_.notify_all();
  }
}

StatusOr<ServedPlan> PlannerService::Get(int64_t iteration,
                                         std::chrono::steady_clock::time_point deadline) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  auto found = entries_.find(iteration);
  if (found == entries_.end()) {
    return NotFoundError("batch " + std::to_string(iteration) + " was never submitted");
  }
  std::shared_ptr<Entry> entry = found->second;
  done_cv_.wait_until(lock, deadline, [&] { return stopping_ || entry->searched.has_value(); });
  ServedPlan served;
  if (entry->searched.has_value() && entry->searched->ok()) {
    served.planned = std::move(**entry->searched);
    served.search_time_s = entry->search_time_s;
  } else {
    served.fallback = true;
    if (entry->searched.has_value()) {
      served.fallback_reason = "search failed: " + entry->searched->status().message();
      served.search_time_s = entry->search_time_s;
    } else {
      served.fallback_reason = entry->started ? "search missed the deadline"
                                              : "batch not started before the deadline";
    }
    if (!entry->fallback.has_value()) {
      if (!entry->started) {
        // No worker has it yet: compute the fallback here (milliseconds) and drop it from the queue.
        std::erase(queue_, iteration);
        lock.unlock();
        auto fb = planner_.Fallback(entry->batch);
        lock.lock();
        entry->fallback = std::move(fb);
      } else {
        done_cv_.wait(lock, [&] { return stopping_ || entry->fallback.has_value(); });
      }
    }
    if (!entry->fallback.has_value()) return CancelledError("planner service stopped");
    if (!entry->fallback->ok()) return entry->fallback->status();
    served.planned = std::move(**entry->fallback);
  }
  entries_.erase(iteration);
  served.wait_time_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return served;
}

}  // namespace weft::service
