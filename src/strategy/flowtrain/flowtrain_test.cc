#include "weft/strategy/flowtrain/flowtrain.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "weft/planning/planner.h"
#include "weft/planning/window.h"
#include "weft/strategy/compare.h"
#include "weft/strategy/flowtrain/allocator.h"

namespace weft::strategy::flowtrain {
namespace {

using ::testing::HasSubstr;

JobOptions TinyFrozen(int gpus) {
  return JobOptions{.model = "tiny-vlm",
                    .gpus = gpus,
                    .data = "coco-llava",
                    .sequences_per_batch = 16,
                    .freeze = {"vision"}};
}

double Rel(double a, double b) {
  return std::abs(a - b) / std::max({std::abs(a), std::abs(b), 1e-12});
}

// The MILP's lexicographic optimum (throughput, then imbalance) equals the exhaustive search's
// on many small budgets of two models.
TEST(FlowTrainAllocator, MilpEqualsExhaustiveOnSmallBudgets) {
  struct Case {
    JobOptions job;
    std::vector<int> budgets;
  };
  const std::vector<Case> cases = {
      {TinyFrozen(8), {2, 3, 4, 5, 6, 7, 8}},
      // Two producers (the set E): both encoders frozen.
      {JobOptions{.model = "tiny-valm",
                  .gpus = 8,
                  .data = "mixed",
                  .sequences_per_batch = 16,
                  .freeze = {"vision", "audio"}},
       {3, 4, 5, 6, 8}},
      {JobOptions{.model = "flowtrain-vlm-6b", .gpus = 32, .data = "infovqa"},
       {4, 6, 8, 12, 16, 24, 32}},
  };
  int compared = 0;
  for (const auto& c : cases) {
    auto planner = MakePlanner(c.job, "megatron-1f1b");
    ASSERT_TRUE(planner.ok()) << planner.status().ToString();
    const planning::Job& job = (*planner)->job();
    auto roles = FindRoles(job.model);
    ASSERT_TRUE(roles.ok()) << roles.status().ToString();
    auto tables = cost::ThroughputTable::Analytical(job.model, *job.cost_model);
    ASSERT_TRUE(tables.ok());
    for (int budget : c.budgets) {
      SCOPED_TRACE(c.job.model + " budget " + std::to_string(budget));
      const AllocatorOptions options{.max_gpus = budget};
      auto milp = AllocateMilp(job, *roles, *tables, options);
      auto exhaustive = AllocateExhaustive(job, *roles, *tables, options);
      ASSERT_EQ(milp.ok(), exhaustive.ok()) << (milp.ok() ? "" : milp.status().ToString());
      if (!milp.ok()) continue;
      EXPECT_LT(Rel(milp->throughput_samples_per_s, exhaustive->throughput_samples_per_s), 1e-9);
      EXPECT_LT(Rel(milp->imbalance_samples_per_s, exhaustive->imbalance_samples_per_s), 1e-6);
      EXPECT_LE(milp->gpus, budget);
      EXPECT_EQ(milp->candidates, exhaustive->candidates);
      // The throughput is the slowest module's rate; the runner-up is another split, no better.
      double slowest = 1e300;
      for (const auto& m : milp->modules) slowest = std::min(slowest, m.rate_samples_per_s);
      EXPECT_DOUBLE_EQ(milp->throughput_samples_per_s, slowest);
      if (milp->has_runner_up) {
        EXPECT_LE(milp->runner_up_throughput_samples_per_s,
                  milp->throughput_samples_per_s * (1 + 1e-9));
        std::vector<int> a, b;
        for (const auto& m : milp->modules) a.push_back(m.layout.Gpus());
        for (const auto& m : milp->runner_up) b.push_back(m.layout.Gpus());
        EXPECT_NE(a, b);
      }
      // The two baselines price the same candidates and stay within the budget; neither beats
      // the MILP's throughput (DistTrain's stage rates are another measure, not compared).
      auto share = AllocateByParameterShare(job, *roles, *tables, options);
      if (share.ok()) {
        EXPECT_LE(share->gpus, budget);
        EXPECT_LE(share->throughput_samples_per_s, milp->throughput_samples_per_s * (1 + 1e-9));
      }
      auto dist = AllocateDistTrain(job, *roles, *tables, options);
      ASSERT_TRUE(dist.ok()) << dist.status().ToString();
      EXPECT_LE(dist->gpus, budget);
      ++compared;
    }
  }
  EXPECT_GE(compared, 17);
}

TEST(FlowTrain, AppliesOnlyWithFrozenEncoders) {
  auto planner = MakePlanner(JobOptions{.model = "tiny-vlm", .gpus = 4, .data = "coco-llava"},
                             "megatron-1f1b");
  ASSERT_TRUE(planner.ok());
  auto s = MakeFlowTrainStrategy(Variant::kFlowTrain);
  const Status applies = s->Applies((*planner)->job());
  EXPECT_EQ(applies.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(applies.message(), HasSubstr("no frozen encoder"));
  EXPECT_THAT(s->Prepare((*planner)->job()).status().message(), HasSubstr("--freeze"));
}

// A flowtrain plan: producers on groups of their own, the pool in the static plan, the
// assignment packs every sample once and gives each microbatch's encoder work to one replica,
// balanced; the coupled plans compile; the window keeps the pool within its capacity, puts
// and gets balance per iteration, and the iteration times add up to the window.
TEST(FlowTrain, PlansCompileAndStreamThroughTheBoundedPool) {
  auto planner = MakePlanner(TinyFrozen(6), "flowtrain");
  ASSERT_TRUE(planner.ok()) << planner.status().ToString();
  const auto& sp = (*planner)->static_plan();
  ASSERT_TRUE(sp.pool.has_value());
  EXPECT_THAT(sp.pool->description, HasSubstr("HBM tier"));
  auto batches = (*planner)->Batches(0, 4);
  ASSERT_TRUE(batches.ok());
  std::vector<planning::IterationPlan> plans;
  for (const auto& batch : *batches) {
    auto planned = (*planner)->Plan(batch);
    ASSERT_TRUE(planned.ok()) << planned.status().ToString();
    EXPECT_TRUE((*planner)->CompileWorld(*planned, batch.iteration).ok());
    const auto& a = planned->plan.assignment;
    EXPECT_EQ(a.policy, "flowtrain-pack");
    std::multiset<int> seen;
    for (const auto& seq : a.sequences)
      seen.insert(seq.sample_indices.begin(), seq.sample_indices.end());
    EXPECT_EQ(seen.size(), batch.samples.size());
    EXPECT_EQ(std::set<int>(seen.begin(), seen.end()).size(), batch.samples.size());
    const int vision = *(*planner)->job().model.FindModule("vision");
    ASSERT_GT(a.producers.size(), static_cast<size_t>(vision));
    for (size_t r = 0; r < a.replicas.size(); ++r) {
      for (size_t j = 0; j < a.replicas[r].size(); ++j) {
        EXPECT_EQ(a.producers[vision][r][j].size(), 1u);
      }
    }
    plans.push_back(std::move(planned->plan));
  }
  std::vector<const planning::IterationPlan*> ptrs;
  for (const auto& p : plans) ptrs.push_back(&p);
  auto w = planning::EvaluateWindow((*planner)->job(), sp, ptrs, 1);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  const auto& pool = w->window.buffers.at(0);
  EXPECT_LE(pool.peak_bytes, pool.capacity_bytes);
  EXPECT_EQ(pool.put_bytes, pool.get_bytes);
  EXPECT_EQ(pool.final_bytes, 0);
  int64_t put = 0;
  for (const auto& g : w->graphs) {
    int64_t got = 0, given = 0;
    for (const auto& u : g.buffer_uses)
      (u.action == sim::BufferAction::kPut ? given : got) += u.bytes;
    EXPECT_EQ(given, got);
    EXPECT_EQ(given, g.pool_bytes);
    EXPECT_GT(g.edges_cut, 0);
    put += given;
  }
  EXPECT_EQ(put, pool.put_bytes);
  const double sum = std::accumulate(w->iteration_time_s.begin(), w->iteration_time_s.end(), 0.0);
  EXPECT_NEAR(sum, w->window.iteration_end_s.back() - w->window.iteration_origin_s.front(), 1e-9);
  EXPECT_GT(w->mfu, 0);

  // A pool that holds two of the largest puts: producers stall, occupancy never exceeds it.
  int64_t largest = 0;
  for (const auto& g : w->graphs) {
    for (const auto& u : g.buffer_uses) largest = std::max(largest, u.bytes);
  }
  planning::StaticPlan small = sp;
  small.pool->capacity_bytes = 2 * largest;
  auto tight = planning::EvaluateWindow((*planner)->job(), small, ptrs, 1);
  ASSERT_TRUE(tight.ok()) << tight.status().ToString();
  EXPECT_LE(tight->window.buffers[0].peak_bytes, 2 * largest);
  EXPECT_GT(tight->window.buffers[0].producer_stall_s, 0);
  EXPECT_GE(tight->window.steady.iteration_time_s, w->window.steady.iteration_time_s * (1 - 1e-9));

  // A pool smaller than one put is refused with the stage named.
  small.pool->capacity_bytes = largest - 1;
  EXPECT_THAT(planning::EvaluateWindow((*planner)->job(), small, ptrs, 1).status().message(),
              HasSubstr("more than the pool's capacity"));
}

// One batch repeated for 12 iterations through a pool of about three iterations' embeddings:
// the window settles into a steady state (the last iterations take the same time, the backbone's
// period), the producers run ahead until the pool bounds them, and occupancy stays within it.
// --pool-bytes (JobOptions::pool_bytes) sets the pool's capacity whatever the sizing rule gives,
// and says so; a negative one is refused naming the flag.
TEST(FlowTrain, PoolBytesOverrideTheSizingRule) {
  JobOptions options = TinyFrozen(4);
  options.pool_bytes = 123456;
  auto planner = MakePlanner(options, "flowtrain");
  ASSERT_TRUE(planner.ok()) << planner.status().ToString();
  ASSERT_TRUE((*planner)->static_plan().pool.has_value());
  EXPECT_EQ((*planner)->static_plan().pool->capacity_bytes, 123456);
  EXPECT_THAT((*planner)->static_plan().pool->description, HasSubstr("--pool-bytes"));
  options.pool_bytes = -1;
  auto bad = MakePlanner(options, "flowtrain");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("--pool-bytes = -1"));
}

TEST(FlowTrain, RepeatedBatchesReachAStableSteadyState) {
  auto planner = MakePlanner(TinyFrozen(6), "flowtrain");
  ASSERT_TRUE(planner.ok()) << planner.status().ToString();
  auto batches = (*planner)->Batches(0, 1);
  ASSERT_TRUE(batches.ok());
  auto planned = (*planner)->Plan((*batches)[0]);
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  std::vector<const planning::IterationPlan*> ptrs(12, &planned->plan);
  auto once = planning::EvaluateWindow((*planner)->job(), (*planner)->static_plan(), ptrs, 1);
  ASSERT_TRUE(once.ok()) << once.status().ToString();
  planning::StaticPlan bounded = (*planner)->static_plan();
  bounded.pool->capacity_bytes = 3 * once->graphs[0].pool_bytes;
  auto w = planning::EvaluateWindow((*planner)->job(), bounded, ptrs, 4);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  const auto& times = w->iteration_time_s;
  ASSERT_EQ(times.size(), 12u);
  for (size_t k = 8; k < times.size(); ++k) {
    EXPECT_NEAR(times[k], times[7], 1e-9 * times[7]) << k;
  }
  EXPECT_LE(w->window.buffers[0].peak_bytes, bounded.pool->capacity_bytes);
  EXPECT_NEAR(w->window.steady.iteration_time_s, times.back(), 1e-6 * times.back());
}

// The ablations and DistTrain plan the same job; the batch-synchronized ones carry no pool.
TEST(FlowTrain, VariantsPlan) {
  for (auto [name, pool] :
       {std::pair{"flowtrain-no-pool", false}, std::pair{"flowtrain-no-allocator", true},
        std::pair{"flowtrain-no-scheduler", true}, std::pair{"disttrain", false}}) {
    SCOPED_TRACE(name);
    auto planner = MakePlanner(TinyFrozen(6), name);
    ASSERT_TRUE(planner.ok()) << planner.status().ToString();
    EXPECT_EQ((*planner)->static_plan().pool.has_value(), pool);
    auto batches = (*planner)->Batches(0, 1);
    ASSERT_TRUE(batches.ok());
    auto planned = (*planner)->Plan((*batches)[0]);
    ASSERT_TRUE(planned.ok()) << planned.status().ToString();
    EXPECT_GT(planned->evaluation.iteration_time_s, 0);
  }
}

}  // namespace
}  // namespace weft::strategy::flowtrain
