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
class SlowStrategy final : public strategy::Strategy {
 public:
  SlowStrategy(std::unique_ptr<strategy::Strategy> inner, milliseconds delay, bool fail = false)
      : inner_(std::move(inner)), delay_(delay), fail_(fail) {}
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
    std::this_thread::sleep_for(delay_);
    if (fail_) return InternalError("search exploded");
    return inner_->PlanIteration(job, plan, batch, budget);
  }
  mutable std::atomic<int> calls_{0};

 private:
  std::unique_ptr<strategy::Strategy> inner_;
  milliseconds delay_;
  bool fail_;
};

struct Fixture {
  std::unique_ptr<strategy::JobSetup> setup;
  std::vector<spec::Batch> batches;
  Fixture() {
    strategy::JobOptions o;
    o.model = "vlm-s";
    o.data = "mixed";
    o.num_microbatches = 4;
    setup = std::move(*strategy::MakeJobSetup(o));
    batches = std::move(*strategy::MakeIterationBatches(*setup, 0, 3));
  }
};

TEST(PlannerService, ReturnsSearchedPlansInBatchOrder) {
  Fixture f;
  SlowStrategy slow(std::move(*strategy::MakeStrategy("zb-h1")), milliseconds(0));
  auto fixed = slow.Prepare(f.setup->job);
  ASSERT_TRUE(fixed.ok());
  PlannerService service(f.setup->job, slow, *fixed, {.threads = 2});
  for (const auto& b : f.batches) ASSERT_TRUE(service.Submit(b).ok());
  EXPECT_EQ(service.Submit(f.batches[0]).code(), StatusCode::kInvalidArgument);
  for (const auto& b : f.batches) {
    auto served = service.Get(b.iteration, steady_clock::now() + std::chrono::seconds(60));
    ASSERT_TRUE(served.ok()) << served.status().ToString();
    EXPECT_FALSE(served->fallback) << served->fallback_reason;
    ASSERT_EQ(served->plan.replicas.size(), 1u);
    // The searched plan is the strategy's own: zb-h1 splits backward into B and W.
    bool has_w = false;
    for (const auto& s : served->plan.replicas[0].graph.stages()) {
      has_w = has_w || s.pass == graph::Pass::kBackwardWeight;
    }
    EXPECT_TRUE(has_w);
  }
  EXPECT_EQ(service.Get(0, steady_clock::now()).status().code(), StatusCode::kNotFound);
}

TEST(PlannerService, ServesTheFallbackWhenTheSearchMissesTheDeadline) {
  Fixture f;
  SlowStrategy slow(std::move(*strategy::MakeStrategy("zb-h1")), milliseconds(3000));
  auto fixed = slow.Prepare(f.setup->job);
  ASSERT_TRUE(fixed.ok());
  PlannerService service(f.setup->job, slow, *fixed, {.threads = 1});
  ASSERT_TRUE(service.Submit(f.batches[0]).ok());
  auto served = service.Get(0, steady_clock::now() + milliseconds(100));
  ASSERT_TRUE(served.ok()) << served.status().ToString();
  EXPECT_TRUE(served->fallback);
  EXPECT_FALSE(served->fallback_reason.empty());
  // The fallback is a complete, schedulable plan on the same placement.
  ASSERT_EQ(served->plan.replicas.size(), 1u);
  EXPECT_TRUE(served->plan.replicas[0].schedule.Validate(served->plan.replicas[0].graph).ok());
}

TEST(PlannerService, ServesTheFallbackWhenTheSearchFails) {
  Fixture f;
  SlowStrategy failing(std::move(*strategy::MakeStrategy("megatron-1f1b")), milliseconds(0),
                       /*fail=*/true);
  auto fixed = failing.Prepare(f.setup->job);
  ASSERT_TRUE(fixed.ok());
  PlannerService service(f.setup->job, failing, *fixed, {.threads = 1});
  ASSERT_TRUE(service.Submit(f.batches[1]).ok());
  auto served = service.Get(1, steady_clock::now() + std::chrono::seconds(60));
  ASSERT_TRUE(served.ok());
  EXPECT_TRUE(served->fallback);
  EXPECT_NE(served->fallback_reason.find("search exploded"), std::string::npos);
}

TEST(PlannerServiceOptions, RejectsBadValues) {
  EXPECT_FALSE(PlannerServiceOptions{.budget_s = 0}.Validate().ok());
  EXPECT_FALSE(PlannerServiceOptions{.threads = -1}.Validate().ok());
  EXPECT_TRUE(PlannerServiceOptions{}.Validate().ok());
}

}  // namespace
}  // namespace weft::service
