#include "weft/algo/mcts.h"

#include <algorithm>
#include <atomic>
#include <new>
#include <numeric>
#include <random>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace weft::algo {
namespace {

// Toy scheduling problem: order jobs on one machine to minimize the weighted sum of completion
// times. Action = index of the next job.
struct Jobs {
  std::vector<double> processing_s;
  std::vector<double> weight;

  double Cost(std::span<const int> order) const {
    double t = 0, cost = 0;
    for (int j : order) {
      t += processing_s[j];
      cost += weight[j] * t;
    }
    return cost;
  }

  MctsProblem Problem() const {
    return {
        .legal_actions =
            [this](std::span<const int> partial, std::vector<int>& actions) {
              actions.clear();
              for (int j = 0; j < static_cast<int>(processing_s.size()); ++j) {
                if (std::find(partial.begin(), partial.end(), j) == partial.end()) {
                  actions.push_back(j);
                }
              }
            },
        .cost = [this](std::span<const int> complete) { return Cost(complete); },
    };
  }

  double BruteForce() const {
    std::vector<int> order(processing_s.size());
    std::iota(order.begin(), order.end(), 0);
    double best = Cost(order);
    while (std::next_permutation(order.begin(), order.end())) best = std::min(best, Cost(order));
    return best;
  }

  std::string Describe() const {
    return fmt::format("processing_s [{}] weight [{}]", fmt::join(processing_s, ", "),
                       fmt::join(weight, ", "));
  }
};

Jobs RandomJobs(std::mt19937_64& rng, int n) {
  Jobs jobs;
  for (int j = 0; j < n; ++j) {
    jobs.processing_s.push_back(std::uniform_int_distribution<int>(1, 20)(rng));
    jobs.weight.push_back(std::uniform_int_distribution<int>(1, 10)(rng));
  }
  return jobs;
}

TEST(MctsSearch, FindsTheOptimalJobOrderWithinTheIterationBudget) {
  std::mt19937_64 rng(1);
  for (int instance = 0; instance < 10; ++instance) {
    const Jobs jobs = RandomJobs(rng, 7);  // 5040 orders
    const double optimum = jobs.BruteForce();
    for (uint64_t seed : {1, 2, 3}) {
      auto r = MctsSearch(jobs.Problem(), {.max_iterations = 300, .seed = seed});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_DOUBLE_EQ(r->best_cost, optimum) << jobs.Describe() << " seed " << seed;
      EXPECT_DOUBLE_EQ(jobs.Cost(r->best_assignment), r->best_cost);
      EXPECT_EQ(r->best_assignment.size(), 7u);
      EXPECT_EQ(r->stop_reason, MctsStopReason::kIterationBudget);
      EXPECT_EQ(r->iterations, 300);
      EXPECT_LE(r->evaluations, 3000);  // under 60% of the 5040 orders
    }
  }
}

TEST(MctsSearch, SameSeedGivesTheSameSearchWithOneThread) {
  std::mt19937_64 rng(2);
  const Jobs jobs = RandomJobs(rng, 9);
  const MctsOptions options{.max_iterations = 200, .seed = 42};
  auto a = MctsSearch(jobs.Problem(), options);
  auto b = MctsSearch(jobs.Problem(), options);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->best_assignment, b->best_assignment);
  EXPECT_EQ(a->best_cost, b->best_cost);
  EXPECT_EQ(a->evaluations, b->evaluations);
  EXPECT_EQ(a->tree_nodes, b->tree_nodes);
  ASSERT_EQ(a->curve.size(), b->curve.size());
  for (size_t i = 0; i < a->curve.size(); ++i) {
    EXPECT_EQ(a->curve[i].iteration, b->curve[i].iteration);
    EXPECT_EQ(a->curve[i].best_cost, b->curve[i].best_cost);
  }
  // The curve strictly improves and ends at the best cost.
  for (size_t i = 1; i < a->curve.size(); ++i) EXPECT_LT(a->curve[i].best_cost, a->curve[i - 1].best_cost);
  EXPECT_EQ(a->curve.back().best_cost, a->best_cost);
}

TEST(MctsSearch, StopsWithAProvenOptimumWhenTheTreeIsExhausted) {
  std::mt19937_64 rng(3);
  const Jobs jobs = RandomJobs(rng, 4);  // 24 orders, 65 tree nodes
  auto r = MctsSearch(jobs.Problem(), {.rollouts_per_expansion = 1, .max_iterations = 100000});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stop_reason, MctsStopReason::kExhausted);
  EXPECT_DOUBLE_EQ(r->best_cost, jobs.BruteForce());
  EXPECT_EQ(r->tree_nodes, 1 + 4 + 12 + 24 + 24);
}

TEST(MctsSearch, ParallelWorkersShareTheTreeAndFindTheOptimum) {
  std::mt19937_64 rng(4);
  for (int instance = 0; instance < 3; ++instance) {
    const Jobs jobs = RandomJobs(rng, 7);
    // Within a fixed iteration count the best found depends on thread timing; run the shared
    // tree to exhaustion instead: every node exists once (1 + 7 + 7·6 + ... + 7! + 7! leaves'
    // rollouts), and the proven optimum is the brute-force one.
    auto r = MctsSearch(jobs.Problem(), {.rollouts_per_expansion = 1,
                                         .max_iterations = 1000000,
                                         .seed = 5,
                                         .threads = 4,
                                         .expansions_per_sync = 8});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->stop_reason, MctsStopReason::kExhausted);
    EXPECT_DOUBLE_EQ(r->best_cost, jobs.BruteForce()) << jobs.Describe();
    EXPECT_EQ(r->tree_nodes, 1 + 7 + 42 + 210 + 840 + 2520 + 5040 + 5040);
  }
}

TEST(MctsSearch, HonoursTimeBudgetAndCancellation) {
  std::mt19937_64 rng(5);
  const Jobs jobs = RandomJobs(rng, 12);
  auto timed = MctsSearch(jobs.Problem(), {.time_budget_s = 0.05, .threads = 2});
  ASSERT_TRUE(timed.ok());
  EXPECT_EQ(timed->stop_reason, MctsStopReason::kTimeBudget);
  EXPECT_LT(timed->elapsed_s, 5.0);

  std::atomic<bool> cancel{true};
  auto cancelled = MctsSearch(jobs.Problem(), {.max_iterations = 1000, .cancel = &cancel});
  EXPECT_EQ(cancelled.status().code(), StatusCode::kCancelled);
}

TEST(MctsSearch, IncumbentGuidedRolloutsAreSeededAndFindTheOptimum) {
  // Rollout steps that follow the best order so far (probability 0.5) keep the search
  // deterministic with one thread and still find the optimum of small instances.
  std::mt19937_64 rng(4);
  for (int instance = 0; instance < 5; ++instance) {
    const Jobs jobs = RandomJobs(rng, 7);
    const double optimum = jobs.BruteForce();
    const MctsOptions options{.max_iterations = 300, .seed = 7,
                              .incumbent_rollout_probability = 0.5};
    auto a = MctsSearch(jobs.Problem(), options);
    auto b = MctsSearch(jobs.Problem(), options);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->best_assignment, b->best_assignment);
    EXPECT_EQ(a->evaluations, b->evaluations);
    EXPECT_DOUBLE_EQ(a->best_cost, optimum) << jobs.Describe();
  }
  // Always following the incumbent still completes every rollout with legal actions.
  const Jobs jobs = RandomJobs(rng, 9);
  auto r = MctsSearch(jobs.Problem(), {.max_iterations = 50, .incumbent_rollout_probability = 1});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->best_assignment.size(), 9u);
  EXPECT_DOUBLE_EQ(jobs.Cost(r->best_assignment), r->best_cost);
}

// A worker thread whose evaluation throws (std::bad_alloc under a memory limit) stops the
// search with an error naming it; std::terminate would end the process without a message.
TEST(MctsSearch, AnExceptionInAWorkerThreadBecomesAnError) {
  std::atomic<int> evaluations{0};
  MctsProblem throwing{
      .legal_actions =
          [](std::span<const int> partial, std::vector<int>& actions) {
            actions = partial.size() < 4 ? std::vector<int>{0, 1} : std::vector<int>{};
          },
      .cost =
          [&](std::span<const int>) -> double {
            if (++evaluations == 3) throw std::bad_alloc();
            return 1.0;
          },
  };
  auto r = MctsSearch(throwing, {.max_iterations = 200, .threads = 2});
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("threw: std::bad_alloc"));
}

TEST(MctsSearch, ReportsInfeasibleProblemsAndBadOptions) {
  MctsProblem infeasible{
      .legal_actions = [](std::span<const int> partial,
                          std::vector<int>& actions) { actions = partial.size() < 3 ? std::vector<int>{0, 1} : std::vector<int>{}; },
      .cost = [](std::span<const int>) { return std::numeric_limits<double>::infinity(); },
  };
  auto r = MctsSearch(infeasible, {.max_iterations = 50});
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(MctsSearch(infeasible, {}).status().message(), ::testing::HasSubstr("budget"));
  EXPECT_THAT(MctsSearch(infeasible, {.max_iterations = 5, .threads = 0}).status().message(),
              ::testing::HasSubstr("mcts_options.threads = 0"));
  EXPECT_EQ(MctsSearch(MctsProblem{}, {.max_iterations = 5}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_THAT(MctsSearch(infeasible, {.max_iterations = 5, .incumbent_rollout_probability = 1.5})
                  .status()
                  .message(),
              ::testing::HasSubstr("incumbent_rollout_probability = 1.5"));
}

}  // namespace
}  // namespace weft::algo
