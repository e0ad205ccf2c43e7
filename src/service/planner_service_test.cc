#include "weft/service/planner_service.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "weft/strategy/compare.h"

namespace weft::service {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// Wraps a real strategy; PlanIteration waits `delay` first (or fails) to model a slow search;
// the wait ends early on PlanBudget::interrupt.
// With `interrupted`, it instead waits (at most 60 s) for PlanBudget::interrupt and records that
// it saw it.
class SlowStrategy final : public planning::Strategy {
 public:
  SlowStrategy(std::unique_ptr<planning::Strategy> inner, milliseconds delay, bool fail = false,
               std::atomic<bool>* interrupted = nullptr)
      : inner_(std::move(inner)), delay_(delay), fail_(fail), interrupted_(interrupted) {}
  std::string_view Name() const override { return "slow"; }
  std::string_view Description() const override { return "test"; }
  StatusOr<planning::StaticPlan> Prepare(const planning::Job& job) const override {
    return inner_->Prepare(job);
  }
  StatusOr<planning::IterationPlan> PlanIteration(
      const planning::Job& job, const planning::StaticPlan& plan,
      const planning::IterationInput& input) const override {
    const planning::PlanBudget& budget = input.budget;
    ++calls_;
    {
      std::lock_guard<std::mutex> lock(budgets_mutex_);
      budgets_.push_back({budget.time_budget_s, budget.work_budget});
    }
    if (interrupted_ != nullptr) {
      const auto give_up = steady_clock::now() + std::chrono::seconds(60);
      while (steady_clock::now() < give_up) {
        if (budget.interrupt != nullptr && budget.interrupt->load()) {
          interrupted_->store(true);
          break;
        }
        std::this_thread::sleep_for(milliseconds(1));
      }
    }
    // The delay ends early when the search is cancelled (as a real search's would).
    const auto wake = steady_clock::now() + delay_;
    while (steady_clock::now() < wake &&
           !(budget.interrupt != nullptr && budget.interrupt->load())) {
      std::this_thread::sleep_for(milliseconds(1));
    }
    if (fail_) return InternalError("search exploded");
    return inner_->PlanIteration(job, plan, input);
  }
  mutable std::atomic<int> calls_{0};
  // (time_budget_s, work_budget) of every PlanIteration call.
  std::vector<std::pair<double, int64_t>> Budgets() const {
    std::lock_guard<std::mutex> lock(budgets_mutex_);
    return budgets_;
  }

 private:
  std::unique_ptr<planning::Strategy> inner_;
  milliseconds delay_;
  bool fail_;
  std::atomic<bool>* interrupted_;
  mutable std::mutex budgets_mutex_;
  mutable std::vector<std::pair<double, int64_t>> budgets_;
};

struct Fixture {
  std::shared_ptr<const planning::JobSetup> setup;
  std::vector<spec::Batch> batches;
  Fixture() {
    planning::JobOptions o;
    o.model = "vlm-s";
    o.data = "mixed";
    o.num_microbatches = 4;
    setup = std::move(*planning::MakeJobSetup(o));
    batches = std::move(*planning::MakeIterationBatches(*setup, 0, 3));
  }
  // A planner over `inner` wrapped in a SlowStrategy.
  std::unique_ptr<planning::Planner> Planner(std::string_view inner, milliseconds delay,
                                             bool fail = false) {
    auto s = std::make_unique<SlowStrategy>(std::move(*strategy::MakeStrategy(inner)), delay,
                                            fail);
    auto p = planning::Planner::Create(setup, std::move(s));
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return std::move(*p);
  }
};

TEST(PlannerService, ReturnsSearchedPlansInBatchOrder) {
  Fixture f;
  auto planner = f.Planner("zb-h1", milliseconds(0));
  PlannerService service(*planner, {.threads = 2});
  for (const auto& b : f.batches) ASSERT_TRUE(service.Submit(b).ok());
  EXPECT_EQ(service.Submit(f.batches[0]).code(), StatusCode::kInvalidArgument);
  for (const auto& b : f.batches) {
    auto served = service.Get(b.iteration, steady_clock::now() + std::chrono::seconds(60));
    ASSERT_TRUE(served.ok()) << served.status().ToString();
    EXPECT_FALSE(served->planned.outcome.is_fallback()) << served->planned.outcome.detail;
    ASSERT_EQ(served->planned.plan.replicas.size(), 1u);
    // Served plans come evaluated.
    EXPECT_GT(served->planned.evaluation.iteration_time_s, 0);
    // The searched plan is the strategy's own: zb-h1 splits backward into B and W.
    bool has_w = false;
    for (const auto& s : served->planned.plan.replicas[0].graph.stages()) {
      has_w = has_w || s.pass == spec::Pass::kBackwardWeight;
    }
    EXPECT_TRUE(has_w);
  }
  EXPECT_EQ(service.Get(0, steady_clock::now()).status().code(), StatusCode::kNotFound);
}

TEST(PlannerService, ServesTheFallbackWhenTheSearchMissesTheDeadline) {
  Fixture f;
  auto planner = f.Planner("zb-h1", milliseconds(3000));
  PlannerService service(*planner, {.threads = 1});
  ASSERT_TRUE(service.Submit(f.batches[0]).ok());
  auto served = service.Get(0, steady_clock::now() + milliseconds(100));
  ASSERT_TRUE(served.ok()) << served.status().ToString();
  EXPECT_TRUE(served->planned.outcome.is_fallback());
  EXPECT_EQ(served->planned.outcome.kind, planning::PlanOutcomeKind::kFallback);
  EXPECT_EQ(served->planned.outcome.fallback, planning::FallbackReason::kStillRunning);
  EXPECT_EQ(served->planned.outcome.detail.rfind("fallback: ", 0), 0u)
      << served->planned.outcome.detail;
  // The fallback is a complete, schedulable plan on the same placement.
  const auto& plan = served->planned.plan;
  ASSERT_EQ(plan.replicas.size(), 1u);
  EXPECT_TRUE(plan.replicas[0].schedule.Validate(plan.replicas[0].graph).ok());
  // The fallback is evaluated and follows the memory policy like any other served plan.
  EXPECT_GT(served->planned.evaluation.iteration_time_s, 0);
  EXPECT_FALSE(served->planned.evaluation.oom);
}

// Every served plan of a rule strategy is memory-checked (the service used to hand out
// PlanIteration's plan unchecked): on a job that does not fit without recomputation, the
// searched plan comes back with the recompute level that fits, like Planner::Plan's.
TEST(PlannerService, ServedPlansFollowThePlannersMemoryPolicy) {
  planning::JobOptions o;
  o.model = "vlm-m";
  o.data = "mixed";
  o.gpus = 32;
  auto setup = planning::MakeJobSetup(o);
  ASSERT_TRUE(setup.ok()) << setup.status().ToString();
  std::shared_ptr<const planning::JobSetup> shared(std::move(*setup));
  auto planner = planning::Planner::Create(shared, *strategy::MakeStrategy("gpipe"));
  ASSERT_TRUE(planner.ok()) << planner.status().ToString();
  auto batches = (*planner)->Batches(0, 1);
  ASSERT_TRUE(batches.ok());
  auto direct = (*planner)->Plan(batches->front());
  ASSERT_TRUE(direct.ok()) << direct.status().ToString();
  ASSERT_NE(direct->recompute_used, spec::Recompute::kNone) << "meant to need recomputation";
  PlannerService service(**planner, {.threads = 1});
  ASSERT_TRUE(service.Submit(batches->front()).ok());
  auto served = service.Get(0, steady_clock::now() + std::chrono::seconds(120));
  ASSERT_TRUE(served.ok()) << served.status().ToString();
  EXPECT_FALSE(served->planned.outcome.is_fallback()) << served->planned.outcome.detail;
  EXPECT_EQ(served->planned.outcome.kind, direct->outcome.kind);
  EXPECT_EQ(direct->outcome.fallback, planning::FallbackReason::kNone);
  EXPECT_EQ(served->planned.recompute_used, direct->recompute_used);
  EXPECT_EQ(served->planned.evaluation.oom, direct->evaluation.oom);
  EXPECT_DOUBLE_EQ(served->planned.evaluation.iteration_time_s,
                   direct->evaluation.iteration_time_s);
}

TEST(PlannerService, ServesTheFallbackWhenTheSearchFails) {
  Fixture f;
  auto planner = f.Planner("megatron-1f1b", milliseconds(0), /*fail=*/true);
  PlannerService service(*planner, {.threads = 1});
  ASSERT_TRUE(service.Submit(f.batches[1]).ok());
  auto served = service.Get(1, steady_clock::now() + std::chrono::seconds(60));
  ASSERT_TRUE(served.ok());
  EXPECT_TRUE(served->planned.outcome.is_fallback());
  EXPECT_EQ(served->planned.outcome.fallback, planning::FallbackReason::kSearchFailed);
  EXPECT_NE(served->planned.outcome.detail.find("search exploded"), std::string::npos)
      << served->planned.outcome.detail;
}

TEST(PlannerService, DestructorInterruptsRunningSearches) {
  Fixture f;
  std::atomic<bool> interrupted{false};
  auto planner = planning::Planner::Create(
      f.setup, std::make_unique<SlowStrategy>(std::move(*strategy::MakeStrategy("gpipe")),
                                              milliseconds(0), false, &interrupted));
  ASSERT_TRUE(planner.ok()) << planner.status().ToString();
  {
    PlannerService service(**planner, {.threads = 1});
    ASSERT_TRUE(service.Submit(f.batches[0]).ok());
    // The fallback comes first; then the search starts and waits for the interrupt.
    auto served = service.Get(0, steady_clock::now() + milliseconds(200));
    ASSERT_TRUE(served.ok()) << served.status().ToString();
    ASSERT_TRUE(service.Submit(f.batches[1]).ok());
    std::this_thread::sleep_for(milliseconds(50));
  }  // the destructor sets the interrupt and joins
  EXPECT_TRUE(interrupted.load());
}

TEST(PlannerServiceOptions, RejectsBadValues) {
  EXPECT_FALSE(PlannerServiceOptions{.budget_s = 0}.Validate().ok());
  EXPECT_FALSE(PlannerServiceOptions{.threads = -1}.Validate().ok());
  EXPECT_FALSE(PlannerServiceOptions{.work_budget = -1}.Validate().ok());
  EXPECT_FALSE(PlannerServiceOptions{.lookahead = 0}.Validate().ok());
  EXPECT_FALSE(PlannerServiceOptions{.min_budget_s = 0}.Validate().ok());
  EXPECT_FALSE(PlannerServiceOptions{.margin_s = -0.1}.Validate().ok());
  EXPECT_FALSE(PlannerServiceOptions{.time_window = 0}.Validate().ok());
  // The upper bound (max_budget_s, else budget_s) must not be below the lower one.
  EXPECT_FALSE(PlannerServiceOptions{.budget_s = 0.001}.Validate().ok());
  EXPECT_TRUE((PlannerServiceOptions{.budget_s = 0.001, .min_budget_s = 0.001}).Validate().ok());
  EXPECT_TRUE(PlannerServiceOptions{}.Validate().ok());
}

// ---- The budget rule: clamp(min(lookahead, threads) x median - margin - overrun, min, max). ----

TEST(SearchBudgetRule, UsesBudgetSUntilAnIterationTimeIsReported) {
  const SearchBudget b = SearchBudgetRule({.budget_s = 0.5, .lookahead = 2}, 1, {}, {});
  EXPECT_DOUBLE_EQ(b.time_budget_s, 0.5);
  EXPECT_EQ(b.work_budget, 0);
  EXPECT_NE(b.rule.find("no iteration time reported"), std::string::npos) << b.rule;
}

TEST(SearchBudgetRule, IsMinOfLookaheadAndThreadsTimesTheMedianMinusMarginAndOverrun) {
  const PlannerServiceOptions o{.budget_s = 10, .lookahead = 2, .margin_s = 0.01};
  const std::vector<double> times = {0.3, 0.1, 0.2};  // median 0.2 s
  // One planning thread finishes one search per iteration only if each takes <= 1 iteration.
  EXPECT_DOUBLE_EQ(SearchBudgetRule(o, 1, times, {}).time_budget_s, 0.2 - 0.01);
  // Two threads: each search may take 2 iterations; lookahead 2 allows as much.
  EXPECT_DOUBLE_EQ(SearchBudgetRule(o, 2, times, {}).time_budget_s, 2 * 0.2 - 0.01);
  // More threads than lookahead: the lookahead (latency) binds.
  EXPECT_DOUBLE_EQ(SearchBudgetRule(o, 8, times, {}).time_budget_s, 2 * 0.2 - 0.01);
  PlannerServiceOptions k3 = o;
  k3.lookahead = 3;
  EXPECT_DOUBLE_EQ(SearchBudgetRule(k3, 8, times, {}).time_budget_s, 3 * 0.2 - 0.01);
  // The median of an even count is the mean of the two middle values.
  const std::vector<double> even = {0.4, 0.1, 0.3, 0.2};
  EXPECT_DOUBLE_EQ(SearchBudgetRule(o, 1, even, {}).time_budget_s, 0.25 - 0.01);
  // The measured overrun (time outside the budget) is kept free too; a negative one is 0.
  const std::vector<double> overruns = {0.02, -0.5, 0.04};
  EXPECT_DOUBLE_EQ(SearchBudgetRule(o, 1, times, overruns).time_budget_s, 0.2 - 0.01 - 0.02);
  const std::vector<double> under = {-0.02, -0.01};
  EXPECT_DOUBLE_EQ(SearchBudgetRule(o, 1, times, under).time_budget_s, 0.2 - 0.01);
  const SearchBudget b = SearchBudgetRule(o, 1, times, overruns);
  EXPECT_NE(b.rule.find("min(lookahead 2, threads 1) x median 200.0 ms of 3 iterations"),
            std::string::npos)
      << b.rule;
}

TEST(SearchBudgetRule, UsesOnlyTheLastTimeWindowTimes) {
  const PlannerServiceOptions o{.budget_s = 10, .margin_s = 0, .time_window = 2};
  const std::vector<double> times = {5.0, 0.1, 0.2};  // the 5 s warm-up falls out of the window
  EXPECT_DOUBLE_EQ(SearchBudgetRule(o, 1, times, {}).time_budget_s, 0.15);
}

TEST(SearchBudgetRule, ClampsToMinAndMax) {
  const PlannerServiceOptions o{.budget_s = 0.5, .min_budget_s = 0.02, .margin_s = 0.01};
  const std::vector<double> slow = {10.0};
  const std::vector<double> fast = {0.015};
  EXPECT_DOUBLE_EQ(SearchBudgetRule(o, 1, slow, {}).time_budget_s, 0.5);  // max = budget_s
  EXPECT_DOUBLE_EQ(SearchBudgetRule(o, 1, fast, {}).time_budget_s, 0.02);
  EXPECT_NE(SearchBudgetRule(o, 1, fast, {}).rule.find("clamped"), std::string::npos);
  PlannerServiceOptions with_max = o;
  with_max.max_budget_s = 2.0;
  EXPECT_DOUBLE_EQ(SearchBudgetRule(with_max, 1, slow, {}).time_budget_s, 2.0);
}

TEST(SearchBudgetRule, WorkBudgetIgnoresTimesAndHasNoTimeLimit) {
  const PlannerServiceOptions o{.budget_s = 0.5, .work_budget = 16, .lookahead = 2};
  const std::vector<double> times = {0.1, 0.2};
  for (const auto& b : {SearchBudgetRule(o, 1, {}, {}), SearchBudgetRule(o, 4, times, times)}) {
    EXPECT_EQ(b.work_budget, 16);
    EXPECT_EQ(b.time_budget_s, 0);
    EXPECT_NE(b.rule.find("deterministic"), std::string::npos) << b.rule;
  }
}

// ---- The rule in the service: reports feed the budget a search gets when it starts. ----

TEST(PlannerService, SearchesGetTheRuleBudgetFromReportedIterationTimes) {
  Fixture f;
  auto planner = f.Planner("gpipe", milliseconds(0));
  PlannerService service(*planner, {.threads = 1, .budget_s = 5, .lookahead = 2});
  EXPECT_DOUBLE_EQ(service.NextBudget().time_budget_s, 5);
  EXPECT_EQ(service.ReportIterationTime(0, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(service.ReportIterationTime(0, -1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(service.ReportIterationTime(0, std::nan("")).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(service.ReportIterationTime(0, INFINITY).code(), StatusCode::kInvalidArgument);
  for (double t : {0.3, 0.1, 0.2}) ASSERT_TRUE(service.ReportIterationTime(0, t).ok());
  // min(lookahead 2, threads 1) x median 0.2 s - margin 0.01 s; no search has run (no overrun).
  const double expected_s = 0.2 - 0.01;
  EXPECT_DOUBLE_EQ(service.NextBudget().time_budget_s, expected_s);
  ASSERT_TRUE(service.Submit(f.batches[0]).ok());
  auto served = service.Get(0, steady_clock::now() + std::chrono::seconds(60));
  ASSERT_TRUE(served.ok()) << served.status().ToString();
  EXPECT_FALSE(served->planned.outcome.is_fallback()) << served->planned.outcome.detail;
  EXPECT_DOUBLE_EQ(served->search_budget_s, expected_s);
  EXPECT_EQ(served->work_budget, 0);
  const auto& slow = dynamic_cast<const SlowStrategy&>(planner->strategy());
  ASSERT_FALSE(slow.Budgets().empty());
  for (const auto& [time_s, work] : slow.Budgets()) {
    EXPECT_DOUBLE_EQ(time_s, expected_s);
    EXPECT_EQ(work, 0);
  }
  EXPECT_EQ(served->planned.outcome.detail.rfind("searched: ", 0), 0u)
      << served->planned.outcome.detail;
  EXPECT_NE(
      served->planned.outcome.detail.find("time budget 190.0 ms = min(lookahead 2, threads 1)"),
      std::string::npos)
      << served->planned.outcome.detail;
}

// Polls `done` (at most 60 s): waits for a state, asserts nothing about time.
template <typename Fn>
bool Eventually(Fn done) {
  const auto give_up = steady_clock::now() + std::chrono::seconds(60);
  while (!done()) {
    if (steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

// Lookahead k: iterations i + 1 .. i + k are searched while i is served; a plan whose search is
// done when it is needed is served at once, whatever the deadline (even one already past).
TEST(PlannerService, PlansSearchedAheadAreServedAtAPassedDeadline) {
  Fixture f;
  auto planner = f.Planner("zb-h1", milliseconds(0));
  PlannerService service(*planner, {.threads = 1, .work_budget = 4, .lookahead = 2});
  for (const auto& b : f.batches) ASSERT_TRUE(service.Submit(b).ok());
  auto first = service.Get(0, steady_clock::now() + std::chrono::seconds(60));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(first->planned.outcome.is_fallback()) << first->planned.outcome.detail;
  ASSERT_TRUE(Eventually([&] { return service.SearchDone(1) && service.SearchDone(2); }));
  for (int64_t i : {1, 2}) {
    auto served = service.Get(i, steady_clock::now() - std::chrono::seconds(1));
    ASSERT_TRUE(served.ok()) << served.status().ToString();
    EXPECT_FALSE(served->planned.outcome.is_fallback()) << served->planned.outcome.detail;
    EXPECT_GE(served->ready_ahead_s, 0);
    EXPECT_EQ(served->work_budget, 4);
    EXPECT_EQ(served->search_budget_s, 0);
    EXPECT_EQ(served->planned.outcome.detail.rfind("searched: ready ", 0), 0u)
        << served->planned.outcome.detail;
    EXPECT_NE(served->planned.outcome.detail.find("work budget 4 units"), std::string::npos)
        << served->planned.outcome.detail;
    EXPECT_FALSE(service.SearchDone(i));  // served: gone
  }
  // Work-budget searches got no time limit.
  const auto& slow = dynamic_cast<const SlowStrategy&>(planner->strategy());
  for (const auto& [time_s, work] : slow.Budgets()) {
    EXPECT_EQ(time_s, 0);
    EXPECT_EQ(work, 4);
  }
}

// With a work budget, a batch's searched plan does not depend on timing: not on the reported
// iteration times, not on how many threads plan. (On the job the runtime trains, tiny-vlm on 4
// ranks: dip's per-rank memory selection, whose MILP has a wall-time limit, does not bind there.)
TEST(PlannerService, WorkBudgetPlansAreDeterministic) {
  auto setup = planning::MakeJobSetup(
      {.model = "tiny-vlm", .gpus = 4, .pipeline_size = 4, .data = "coco-llava"});
  ASSERT_TRUE(setup.ok()) << setup.status().ToString();
  std::shared_ptr<const planning::JobSetup> shared(std::move(*setup));
  auto made = planning::MakeIterationBatches(*shared, 0, 3);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  const std::vector<spec::Batch>& batches = *made;
  auto planner = planning::Planner::Create(shared, *strategy::MakeStrategy("dip"));
  ASSERT_TRUE(planner.ok()) << planner.status().ToString();
  std::vector<std::vector<planning::PlannedIteration>> runs;
  for (int threads : {1, 2}) {
    PlannerService service(**planner, {.threads = threads, .work_budget = 2, .lookahead = 2});
    if (threads == 2) {
      for (double t : {0.001, 0.002}) ASSERT_TRUE(service.ReportIterationTime(0, t).ok());
    }
    for (const auto& b : batches) ASSERT_TRUE(service.Submit(b).ok());
    std::vector<planning::PlannedIteration> plans;
    for (const auto& b : batches) {
      auto served = service.Get(b.iteration, steady_clock::now() + std::chrono::seconds(120));
      ASSERT_TRUE(served.ok()) << served.status().ToString();
      ASSERT_FALSE(served->planned.outcome.is_fallback()) << served->planned.outcome.detail;
      plans.push_back(std::move(served->planned));
    }
    runs.push_back(std::move(plans));
  }
  for (size_t i = 0; i < batches.size(); ++i) {
    const auto& a = runs[0][i];
    const auto& b = runs[1][i];
    EXPECT_EQ(a.evaluation.iteration_time_s, b.evaluation.iteration_time_s) << "batch " << i;
    ASSERT_EQ(a.plan.replicas.size(), b.plan.replicas.size());
    for (size_t r = 0; r < a.plan.replicas.size(); ++r) {
      EXPECT_EQ(a.plan.replicas[r].schedule.order, b.plan.replicas[r].schedule.order)
          << "batch " << i << " replica " << r;
    }
  }
}

// Each fallback says why: the search not started (queued behind a busy thread), or still running
// (then it is cancelled, freeing the thread).
TEST(PlannerService, FallbackReasonsNameTheSearchState) {
  Fixture f;
  std::atomic<bool> interrupted{false};
  auto planner = planning::Planner::Create(
      f.setup, std::make_unique<SlowStrategy>(std::move(*strategy::MakeStrategy("gpipe")),
                                              milliseconds(0), false, &interrupted));
  ASSERT_TRUE(planner.ok()) << planner.status().ToString();
  const auto& slow = dynamic_cast<const SlowStrategy&>((*planner)->strategy());
  PlannerService service(**planner, {.threads = 1, .budget_s = 0.25, .lookahead = 2});
  ASSERT_TRUE(service.Submit(f.batches[0]).ok());
  ASSERT_TRUE(service.Submit(f.batches[1]).ok());
  // Search 0 is running (it waits for its interrupt); search 1 waits for the only thread.
  ASSERT_TRUE(Eventually([&] { return slow.calls_.load() >= 1; }));
  auto queued = service.Get(1, steady_clock::now());
  ASSERT_TRUE(queued.ok()) << queued.status().ToString();
  EXPECT_TRUE(queued->planned.outcome.is_fallback());
  EXPECT_EQ(queued->planned.outcome.fallback, planning::FallbackReason::kNotStarted);
  EXPECT_EQ(queued->planned.outcome.detail,
            "fallback: search for iteration 1 not started by the deadline (0 searches queued "
            "before it, 1 planning threads busy)");
  EXPECT_FALSE(interrupted.load());
  auto running = service.Get(0, steady_clock::now());
  ASSERT_TRUE(running.ok()) << running.status().ToString();
  EXPECT_TRUE(running->planned.outcome.is_fallback());
  EXPECT_EQ(running->planned.outcome.fallback, planning::FallbackReason::kStillRunning);
  EXPECT_EQ(
      running->planned.outcome.detail.rfind("fallback: search for iteration 0 still running at the "
                                            "deadline (time budget 250.0 ms = budget_s",
                                            0),
      0u)
      << running->planned.outcome.detail;
  EXPECT_NE(running->planned.outcome.detail.find("ago); cancelled"), std::string::npos)
      << running->planned.outcome.detail;
  EXPECT_DOUBLE_EQ(running->search_budget_s, 0.25);
  // Served the fallback, the service cancels the search: the thread is free again.
  EXPECT_TRUE(Eventually([&] { return interrupted.load(); }));
}

// Measured feedback through the service (issue 28, item 4): the vision encoder's forward runs 3x
// slower than predicted. Each served plan's measured stage times are reported; plans made after
// the reports predict those stages within 10% of the measured time and every other stage as
// before. A plan made before a report (planned ahead) keeps the state it was made in, and its own
// report is un-corrected with that state.
TEST(PlannerService, ReportedStageTimesCorrectLaterPlans) {
  auto planner =
      strategy::MakePlanner({.model = "tiny-vlm", .data = "coco-llava"}, "megatron-1f1b");
  ASSERT_TRUE(planner.ok()) << planner.status().ToString();
  const planning::Planner& p = **planner;
  auto batches = p.Batches(0, 1);
  ASSERT_TRUE(batches.ok());
  int vision = -1;
  for (int m = 0; m < static_cast<int>(p.job().model.modules.size()); ++m) {
    if (p.job().model.modules[m].name == "vision") vision = m;
  }
  ASSERT_GE(vision, 0);
  auto is_slow = [&](const graph::Stage& st) {
    return st.module == vision && st.pass == spec::Pass::kForward && st.latency_s > 0;
  };
  auto batch_of = [&](int64_t iteration) {
    spec::Batch b = batches->front();  // the same samples every iteration: the same shapes
    b.iteration = iteration;
    return b;
  };
  PlannerService service(p, {.threads = 1});
  std::optional<planning::PlannedIteration> base;
  // The "true" time of each compute stage by what it computes (rank, module, chunk, microbatch,
  // sub-microbatch, pass; action indices move with the timings): iteration 0's uncorrected
  // prediction, 3x on the slowed stages.
  std::map<std::tuple<int, int, int, int, int, int>, double> truth_s;
  auto key_of = [](const plan::MeasuredStage& m) {
    return std::make_tuple(m.rank, m.stage.module, m.stage.chunk, m.stage.microbatch,
                           m.stage.sub_microbatch, static_cast<int>(m.stage.pass));
  };
  auto compute_stages = [&](const ServedPlan& served) {
    std::vector<plan::MeasuredStage> out;
    auto compiled = p.CompileWorld(served.planned, served.iteration);
    EXPECT_TRUE(compiled.ok()) << compiled.status().ToString();
    if (!compiled.ok()) return out;
    for (int r = 0; r < compiled->num_ranks(); ++r) {
      const auto& actions = compiled->ranks[r].actions;
      for (int a = 0; a < static_cast<int>(actions.size()); ++a) {
        if (!plan::IsCompute(actions[a].kind)) continue;
        auto stage = plan::MeasuredStageOf(*compiled, r, a);
        EXPECT_TRUE(stage.ok()) << stage.status().ToString();
        if (stage.ok()) out.push_back(*stage);
      }
    }
    return out;
  };
  // What a runtime would measure executing `served`.
  auto measure = [&](const ServedPlan& served) {
    plan::MeasuredIteration m;
    m.model = "tiny-vlm";
    m.strategy = "megatron-1f1b";
    m.iteration = served.iteration;
    for (const auto& module : p.job().model.modules) m.module_names.push_back(module.name);
    for (plan::MeasuredStage stage : compute_stages(served)) {
      auto found = truth_s.find(key_of(stage));
      EXPECT_NE(found, truth_s.end());
      if (found == truth_s.end()) continue;
      stage.measured_s = found->second;
      m.stages.push_back(stage);
    }
    return m;
  };
  auto get = [&](int64_t iteration) {
    auto served = service.Get(iteration, steady_clock::now() + std::chrono::seconds(120));
    EXPECT_TRUE(served.ok()) << served.status().ToString();
    EXPECT_EQ(served->planned.outcome.kind, planning::PlanOutcomeKind::kPlanned);
    EXPECT_EQ(served->iteration, iteration);
    return *std::move(served);
  };
  // Iterations 0 and 1 are planned before any report.
  ASSERT_TRUE(service.Submit(batch_of(0)).ok());
  ASSERT_TRUE(service.Submit(batch_of(1)).ok());
  ServedPlan s0 = get(0);
  base = s0.planned;
  for (const plan::MeasuredStage& stage : compute_stages(s0)) {
    const bool slow = stage.stage.module == vision && stage.stage.pass == spec::Pass::kForward;
    truth_s[key_of(stage)] = stage.planned_s * (slow ? 3.0 : 1.0);
  }
  ASSERT_TRUE(Eventually([&] { return service.SearchDone(1); }));
  ASSERT_TRUE(service.Report(s0, measure(s0)).ok());
  EXPECT_EQ(service.reports(), 1);
  ASSERT_NE(service.state().correction, nullptr);
  // Planned ahead: iteration 1 was made in the empty state and predicts as iteration 0 did.
  ServedPlan s1 = get(1);
  EXPECT_EQ(s1.planned_in.correction, nullptr);
  for (int s = 0; s < s1.planned.plan.replicas[0].graph.num_stages(); ++s) {
    EXPECT_EQ(s1.planned.plan.replicas[0].graph.stage(s).latency_s,
              base->plan.replicas[0].graph.stage(s).latency_s);
  }
  ASSERT_TRUE(service.Report(s1, measure(s1)).ok());
  ServedPlan last;
  for (int64_t it = 2; it <= 3; ++it) {
    ASSERT_TRUE(service.Submit(batch_of(it)).ok());
    last = get(it);
    EXPECT_NE(last.planned_in.correction, nullptr);
    ASSERT_TRUE(service.Report(last, measure(last)).ok());
  }
  ASSERT_TRUE(service.Submit(batch_of(4)).ok());
  last = get(4);
  int slowed = 0;
  for (int r = 0; r < static_cast<int>(last.planned.plan.replicas.size()); ++r) {
    const auto& g = last.planned.plan.replicas[r].graph;
    const auto& g_base = base->plan.replicas[r].graph;
    ASSERT_EQ(g.num_stages(), g_base.num_stages());
    for (int s = 0; s < g.num_stages(); ++s) {
      const graph::Stage& before = g_base.stage(s);
      if (is_slow(before)) {
        ++slowed;
        EXPECT_NEAR(g.stage(s).latency_s, 3.0 * before.latency_s, 0.1 * 3.0 * before.latency_s)
            << "stage " << s;
      } else {
        EXPECT_EQ(g.stage(s).latency_s, before.latency_s) << "stage " << s;
      }
    }
  }
  EXPECT_GT(slowed, 0);
  EXPECT_EQ(service.reports(), 4);
  // A record of another plan is refused, naming the iteration; the state does not move.
  plan::MeasuredIteration wrong = measure(last);
  wrong.stages.front().stage.microbatch = 1 << 20;
  const auto before_state = service.state().correction;
  Status bad = service.Report(last, wrong);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("report of iteration 4: measured rank"), std::string::npos)
      << bad.message();
  EXPECT_EQ(service.state().correction, before_state);
}

}  // namespace
}  // namespace weft::service
