#pragma once
// PlannerService: the asynchronous planner (DIP §3.1/§6.2, PipeWeaver §7.1). Training submits the
// metadata of upcoming batches ahead of time; background threads plan them (a strategy's
// PlanIteration within a time budget) while the GPUs train; Get() hands plans out in batch order
// and never blocks beyond the caller's deadline: if the search has not finished by then, it
// returns the safe fallback plan computed first for every batch (the strategy's own placement
// ordered by a rule: 1F1B where it applies, else GPipe), and says so. Both go through the
// Planner, so the searched plan and the fallback follow its one memory policy and come evaluated.
//
//   auto planner = strategy::Planner::Create(job_options, "dip");
//   PlannerService service(**planner, {.threads = 1, .budget_s = 0.5});
//   for (auto& b : upcoming) service.Submit(b);
//   auto plan = service.Get(next_iteration, /*deadline=*/steady_clock::now() + 2s);
//
// Thread-safety: Submit and Get may be called from any thread. The service owns copies of the
// batches; the planner must outlive the service. The destructor interrupts running searches
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
#include <string>
#include <thread>
#include <vector>

#include "weft/common/status.h"
#include "weft/strategy/planner.h"

namespace weft::service {

struct PlannerServiceOptions {
  int threads = 0;             // background planning threads; 0 = half the cores (>= 1)
  double budget_s = 1.0;       // search budget per batch (PlanBudget::time_budget_s)
  int search_threads = 1;      // threads one search may use (PlanBudget::threads)
  int max_queued = 64;         // Submit fails with ResourceExhausted beyond this many pending
  Status Validate() const;
};

struct ServedPlan {
  strategy::PlannedIteration planned;  // the plan and its evaluation
  bool fallback = false;        // true when the search missed the deadline or failed
  std::string fallback_reason;  // why the fallback was served
  double search_time_s = 0;     // wall time of the search (0 if it never finished)
  double wait_time_s = 0;       // how long Get() waited
};

class PlannerService {
 public:
  explicit PlannerService(const strategy::Planner& planner, PlannerServiceOptions options = {});
  ~PlannerService();
  PlannerService(const PlannerService&) = delete;
  PlannerService& operator=(const PlannerService&) = delete;

  // Queues a batch for planning (keyed by batch.iteration; must be new).
  Status Submit(const spec::Batch& batch);
  // The plan of `iteration`: the searched plan if ready by `deadline`, else the fallback (which is
  // computed before the search starts; if even that is not ready, Get waits for it — it takes
  // milliseconds). NotFound for an iteration never submitted. The entry is removed after Get.
  StatusOr<ServedPlan> Get(int64_t iteration, std::chrono::steady_clock::time_point deadline);

  int threads() const { return static_cast<int>(workers_.size()); }

 private:
  struct Entry {
    spec::Batch batch;
    std::optional<StatusOr<strategy::PlannedIteration>> fallback;
    std::optional<StatusOr<strategy::PlannedIteration>> searched;
    double search_time_s = 0;
    bool started = false;
  };
  void WorkerLoop();

  const strategy::Planner& planner_;
  PlannerServiceOptions options_;
  std::atomic<bool> interrupt_{false};
  std::mutex mutex_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<int64_t> queue_;
  std::map<int64_t, std::shared_ptr<Entry>> entries_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace weft::service
