#include "weft/service/planner_service.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "weft/strategy/compare.h"

namespace weft::service {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// Wraps a real strategy; PlanIteration waits `delay` first (or fails) to model a slow search.
// With `interrupted`, it instead waits (at most 60 s) for PlanBudget::interrupt and records that
// it saw it.
class SlowStrategy final : public strategy::Strategy {
 public:
  SlowStrategy(std::unique_ptr<strategy::Strategy> inner, milliseconds delay, bool fail = false,
               std::atomic<bool>* interrupted = nullptr)
      : inner_(std::move(inner)), delay_(delay), fail_(fail), interrupted_(interrupted) {}
  std::string_view Name() const override { return "slow"; }
  std::string_view Description() const override { return "test"; }
  StatusOr<strategy::StaticPlan> Prepare(const strategy::Job& job) const override {
    return inner_->Prepare(job);
  }
  StatusOr<strategy::IterationPlan> PlanIteration(const strategy::Job& job,
                                                  const strategy::StaticPlan& plan,
                                                  const spec::Batch& batch,
                                                  const strategy::PlanBudget& budget) const override {
    ++calls_;
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
    std::this_thread::sleep_for(delay_);
    if (fail_) return InternalError("search exploded");
    return inner_->PlanIteration(job, plan, batch, budget);
  }
  mutable std::atomic<int> calls_{0};

 private:
  std::unique_ptr<strategy::Strategy> inner_;
  milliseconds delay_;
  bool fail_;
  std::atomic<bool>* interrupted_;
};

struct Fixture {
  std::shared_ptr<const strategy::JobSetup> setup;
  std::vector<spec::Batch> batches;
  Fixture() {
    strategy::JobOptions o;
    o.model = "vlm-s";
    o.data = "mixed";
    o.num_microbatches = 4;
    setup = std::move(*strategy::MakeJobSetup(o));
    batches = std::move(*strategy::MakeIterationBatches(*setup, 0, 3));
  }
  // A planner over `inner` wrapped in a SlowStrategy.
  std::unique_ptr<strategy::Planner> Planner(std::string_view inner, milliseconds delay,
                                             bool fail = false) {
    auto s = std::make_unique<SlowStrategy>(std::move(*strategy::MakeStrategy(inner)), delay,
                                            fail);
    auto p = strategy::Planner::Create(setup, std::move(s));
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
    EXPECT_FALSE(served->fallback) << served->fallback_reason;
    ASSERT_EQ(served->planned.plan.replicas.size(), 1u);
    // Served plans come evaluated.
    EXPECT_GT(served->planned.evaluation.iteration_time_s, 0);
    // The searched plan is the strategy's own: zb-h1 splits backward into B and W.
    bool has_w = false;
    for (const auto& s : served->planned.plan.replicas[0].graph.stages()) {
      has_w = has_w || s.pass == graph::Pass::kBackwardWeight;
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
  EXPECT_TRUE(served->fallback);
  EXPECT_FALSE(served->fallback_reason.empty());
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
  strategy::JobOptions o;
  o.model = "vlm-m";
  o.data = "mixed";
  o.gpus = 32;
  auto setup = strategy::MakeJobSetup(o);
  ASSERT_TRUE(setup.ok()) << setup.status().ToString();
  std::shared_ptr<const strategy::JobSetup> shared(std::move(*setup));
  auto planner = strategy::Planner::Create(shared, *strategy::MakeStrategy("gpipe"));
  ASSERT_TRUE(planner.ok()) << planner.status().ToString();
  auto batches = (*planner)->Batches(0, 1);
  ASSERT_TRUE(batches.ok());
  auto direct = (*planner)->Plan(batches->front());
  ASSERT_TRUE(direct.ok()) << direct.status().ToString();
  ASSERT_NE(direct->recompute_used, cost::Recompute::kNone) << "meant to need recomputation";
  PlannerService service(**planner, {.threads = 1});
  ASSERT_TRUE(service.Submit(batches->front()).ok());
  auto served = service.Get(0, steady_clock::now() + std::chrono::seconds(120));
  ASSERT_TRUE(served.ok()) << served.status().ToString();
  EXPECT_FALSE(served->fallback) << served->fallback_reason;
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
  EXPECT_TRUE(served->fallback);
  EXPECT_NE(served->fallback_reason.find("search exploded"), std::string::npos);
}

TEST(PlannerService, DestructorInterruptsRunningSearches) {
  Fixture f;
  std::atomic<bool> interrupted{false};
  auto planner = strategy::Planner::Create(
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
  EXPECT_TRUE(PlannerServiceOptions{}.Validate().ok());
}

}  // namespace
}  // namespace weft::service
