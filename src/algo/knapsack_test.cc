#include "weft/algo/knapsack.h"

#include <algorithm>
#include <random>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace weft::algo {
namespace {

using ::testing::ElementsAre;

struct Combo {
  double cost;
  double weight;
};

// Every selection's (cost, weight).
std::vector<Combo> AllSelections(const std::vector<KnapsackGroup>& groups) {
  std::vector<Combo> all = {{0.0, 0.0}};
  for (const auto& group : groups) {
    std::vector<Combo> next;
    for (const Combo& c : all) {
      for (const auto& o : group) next.push_back({c.cost + o.cost, c.weight + o.weight});
    }
    all = std::move(next);
  }
  return all;
}

std::string Describe(const std::vector<KnapsackGroup>& groups, double capacity) {
  std::string s = fmt::format("capacity {} groups:", capacity);
  for (const auto& g : groups) {
    s += " [";
    for (const auto& o : g) s += fmt::format("({} {})", o.cost, o.weight);
    s += "]";
  }
  return s;
}

std::vector<KnapsackGroup> RandomGroups(std::mt19937_64& rng, bool integral) {
  const int num_groups = std::uniform_int_distribution<int>(1, 5)(rng);
  std::vector<KnapsackGroup> groups(num_groups);
  for (auto& g : groups) {
    g.resize(std::uniform_int_distribution<int>(1, 4)(rng));
    for (auto& o : g) {
      o.cost = std::uniform_int_distribution<int>(1, 30)(rng);
      o.weight = integral ? std::uniform_int_distribution<int>(0, 12)(rng)
                          : std::uniform_real_distribution<double>(0.0, 12.0)(rng);
    }
  }
  return groups;
}

TEST(SolveMultipleChoiceKnapsack, PicksTheCheapestCombinationThatFits) {
  // Layer strategies (latency, memory): fast+heavy vs slow+light.
  const std::vector<KnapsackGroup> groups = {
      {{1.0, 10}, {2.0, 4}, {3.0, 1}},
      {{1.0, 8}, {1.5, 5}},
  };
  auto r = SolveMultipleChoiceKnapsack(groups, 12);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_THAT(r->choice, ElementsAre(1, 0));  // 2.0 + 1.0 at weight 12
  EXPECT_DOUBLE_EQ(r->total_cost, 3.0);
  EXPECT_DOUBLE_EQ(r->total_weight, 12.0);
  EXPECT_TRUE(r->exact);
  EXPECT_EQ(SolveMultipleChoiceKnapsack(groups, 5).status().code(),
            StatusCode::kResourceExhausted);
}

TEST(SolveMultipleChoiceKnapsack, RejectsEmptyGroupsAndBadNumbers) {
  EXPECT_THAT(SolveMultipleChoiceKnapsack(std::vector<KnapsackGroup>{{}}, 1).status().message(),
              ::testing::HasSubstr("groups[0] is empty"));
  const std::vector<KnapsackGroup> negative = {{{1.0, -1.0}}};
  EXPECT_THAT(SolveMultipleChoiceKnapsack(negative, 1).status().message(),
              ::testing::HasSubstr("groups[0][0].weight = -1"));
  EXPECT_EQ(SolveMultipleChoiceKnapsack(negative, 1, {.weight_quantum = -1}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(SolveMultipleChoiceKnapsack, MatchesBruteForceOnRandomInstances) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    const bool integral = trial % 3 != 0;
    const auto groups = RandomGroups(rng, integral);
    const double capacity = std::uniform_int_distribution<int>(0, 40)(rng);
    const std::string instance = fmt::format("trial {} {}", trial, Describe(groups, capacity));
    double optimum = std::numeric_limits<double>::infinity();
    for (const Combo& c : AllSelections(groups)) {
      if (c.weight <= capacity) optimum = std::min(optimum, c.cost);
    }
    // Fractional weights: a fine quantum (rounding up) must stay feasible and near the optimum.
    const KnapsackOptions options{.weight_quantum = integral ? 0.0 : 1e-3};
    auto r = SolveMultipleChoiceKnapsack(groups, capacity, options);
    if (optimum == std::numeric_limits<double>::infinity()) {
      EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted) << instance;
      continue;
    }
    if (!integral && !r.ok()) continue;  // rounding up may make a tight instance infeasible
    ASSERT_TRUE(r.ok()) << instance << ": " << r.status().ToString();
    EXPECT_LE(r->total_weight, capacity + 1e-9) << instance;
    double cost = 0, weight = 0;
    for (size_t g = 0; g < groups.size(); ++g) {
      cost += groups[g][r->choice[g]].cost;
      weight += groups[g][r->choice[g]].weight;
    }
    EXPECT_DOUBLE_EQ(r->total_cost, cost) << instance;
    EXPECT_DOUBLE_EQ(r->total_weight, weight) << instance;
    if (integral) {
      EXPECT_TRUE(r->exact) << instance;
      EXPECT_DOUBLE_EQ(r->total_cost, optimum) << instance;
    } else {
      EXPECT_GE(r->total_cost, optimum) << instance;
    }
  }
}

TEST(MultipleChoiceParetoFrontier, MatchesBruteForceFrontier) {
  std::mt19937_64 rng(9);
  for (int trial = 0; trial < 200; ++trial) {
    const auto groups = RandomGroups(rng, /*integral=*/true);
    const std::string instance = fmt::format("trial {} {}", trial, Describe(groups, 0));
    // Brute-force frontier: sort by (weight, cost), keep strictly decreasing cost.
    auto all = AllSelections(groups);
    std::sort(all.begin(), all.end(), [](const Combo& a, const Combo& b) {
      return a.weight != b.weight ? a.weight < b.weight : a.cost < b.cost;
    });
    std::vector<Combo> expected;
    for (const Combo& c : all) {
      if (expected.empty() || c.cost < expected.back().cost) expected.push_back(c);
    }
    auto frontier = MultipleChoiceParetoFrontier(groups);
    ASSERT_TRUE(frontier.ok()) << instance;
    EXPECT_TRUE(frontier->exact);
    ASSERT_EQ(frontier->points.size(), expected.size()) << instance;
    for (size_t p = 0; p < expected.size(); ++p) {
      EXPECT_DOUBLE_EQ(frontier->points[p].total_weight, expected[p].weight) << instance;
      EXPECT_DOUBLE_EQ(frontier->points[p].total_cost, expected[p].cost) << instance;
    }
  }
}

TEST(SelectMemoryBucketCandidates, ReturnsFastestLightestAndBestPerBucket) {
  std::mt19937_64 rng(13);
  for (int trial = 0; trial < 200; ++trial) {
    const auto groups = RandomGroups(rng, /*integral=*/trial % 2 == 0);
    const int s = std::uniform_int_distribution<int>(2, 6)(rng);
    const std::string instance = fmt::format("trial {} S {} {}", trial, s, Describe(groups, 0));
    auto picked = SelectMemoryBucketCandidates(groups, s);
    ASSERT_TRUE(picked.ok()) << instance;
    ASSERT_GE(picked->size(), 1u) << instance;
    EXPECT_LE(static_cast<int>(picked->size()), s) << instance;
    const auto all = AllSelections(groups);
    double min_cost = 1e300, min_weight = 1e300;
    for (const Combo& c : all) min_cost = std::min(min_cost, c.cost), min_weight = std::min(min_weight, c.weight);
    EXPECT_NEAR(picked->front().total_weight, min_weight, 1e-9) << instance;
    EXPECT_NEAR(picked->back().total_cost, min_cost, 1e-9) << instance;
    // Every candidate is the cheapest selection at or below its own weight (non-dominated).
    for (const auto& cand : *picked) {
      for (const Combo& c : all) {
        if (c.weight <= cand.total_weight + 1e-9) {
          EXPECT_GE(c.cost, cand.total_cost - 1e-9) << instance;
        }
      }
    }
    for (size_t i = 1; i < picked->size(); ++i) {
      EXPECT_GT((*picked)[i].total_weight, (*picked)[i - 1].total_weight) << instance;
    }
  }
}

TEST(SelectMemoryBucketCandidates, FillsEveryBucketOnADenseFrontier) {
  // 4 layers x {fast+heavy, slow+light}: weights 0..4 units in steps of 1, all non-dominated.
  const std::vector<KnapsackGroup> groups(4, KnapsackGroup{{1.0, 1.0}, {2.0, 0.0}});
  auto picked = SelectMemoryBucketCandidates(groups, 5);
  ASSERT_TRUE(picked.ok());
  std::vector<double> weights;
  for (const auto& c : *picked) weights.push_back(c.total_weight);
  // Buckets over (0, 4): (0,4/3], (4/3,8/3], (8/3,4) -> weights 1, 2, 3 plus the ends 0 and 4.
  EXPECT_THAT(weights, ElementsAre(0.0, 1.0, 2.0, 3.0, 4.0));
}

}  // namespace
}  // namespace weft::algo
