#include "weft/strategy/lpt_assign/lpt_assign.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <random>

#include "weft/plan/validator.h"
#include "weft/strategy/compare.h"

namespace weft::strategy::lpt_assign {
namespace {

int64_t MaxLoad(const Assignment& a, const std::vector<int64_t>& loads) {
  int64_t worst = 0;
  for (const auto& replica : a.replicas) {
    for (const auto& mb : replica) {
      int64_t sum = 0;
      for (int s : mb) sum += loads[s];
      worst = std::max(worst, sum);
    }
  }
  return worst;
}

// The exact min–max over every assignment of n items to k buckets (each non-empty).
int64_t BruteForceMinMax(const std::vector<int64_t>& loads, int k) {
  const int n = static_cast<int>(loads.size());
  std::vector<int> bucket(n, 0);
  int64_t best = std::numeric_limits<int64_t>::max();
  std::function<void(int)> go = [&](int i) {
    if (i == n) {
      std::vector<int64_t> sum(k, 0);
      std::vector<int> count(k, 0);
      for (int j = 0; j < n; ++j) sum[bucket[j]] += loads[j], ++count[bucket[j]];
      if (std::count(count.begin(), count.end(), 0) > 0) return;
      best = std::min(best, *std::max_element(sum.begin(), sum.end()));
      return;
    }
    for (int b = 0; b < k; ++b) bucket[i] = b, go(i + 1);
  };
  go(0);
  return best;
}

TEST(LptAssignment, EveryBucketFilledEverySequenceOnce) {
  const std::vector<int64_t> loads = {5, 9, 1, 7, 3, 3, 8, 2};
  auto a = LptAssignment(loads, 2, 2);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  spec::Batch batch;
  batch.samples.resize(loads.size());
  EXPECT_TRUE(a->Validate(batch).ok());
  ASSERT_EQ(a->replicas.size(), 2u);
  for (const auto& r : a->replicas) ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(a->policy, "lpt-llm-tokens");
}

TEST(LptAssignment, WithinFourThirdsOfTheBruteForceOptimum) {
  // Graham's bound for LPT: max load <= (4/3 - 1/(3k)) · OPT; checked on many small instances.
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const int dp = 1 + static_cast<int>(rng() % 2), m = 1 + static_cast<int>(rng() % 2);
    const int k = dp * m;
    const int n = k + static_cast<int>(rng() % 5);
    std::vector<int64_t> loads(n);
    for (auto& l : loads) l = 1 + static_cast<int64_t>(rng() % 100);
    auto a = LptAssignment(loads, dp, m);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    const int64_t opt = BruteForceMinMax(loads, k);
    EXPECT_LE(3 * k * MaxLoad(*a, loads), (4 * k - 1) * opt) << "trial " << trial;
  }
}

TEST(LptAssignment, FewerSequencesThanBucketsUsesFewerMicrobatches) {
  auto a = LptAssignment({4, 3, 2}, 1, 4);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->replicas[0].size(), 3u);
  EXPECT_NE(a->notes.find("used 3"), std::string::npos);
  EXPECT_FALSE(LptAssignment({1}, 2, 1).ok());
}

// Through the seam: the planner asks the strategy, records its assignment, compiles and
// validates; the LLM's microbatch loads are no worse balanced than round-robin's.
TEST(LptAssignStrategy, PlansCompilesAndBalancesThroughThePlanner) {
  auto planner = MakePlanner({.model = "vlm-s", .data = "mixed", .seed = 3}, "megatron-1f1b-lpt");
  ASSERT_TRUE(planner.ok()) << planner.status().ToString();
  auto rr = MakePlanner({.model = "vlm-s", .data = "mixed", .seed = 3}, "megatron-1f1b");
  ASSERT_TRUE(rr.ok()) << rr.status().ToString();
  auto batches = (*planner)->Batches(0, 1);
  ASSERT_TRUE(batches.ok());
  auto planned = (*planner)->Plan(batches->front());
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  EXPECT_EQ(planned->plan.assignment.policy, "lpt-llm-tokens");
  ASSERT_EQ(planned->plan.assignment.replicas.size(), planned->plan.replicas.size());
  for (size_t r = 0; r < planned->plan.replicas.size(); ++r) {
    EXPECT_EQ(planned->plan.replicas[r].microbatches, planned->plan.assignment.replicas[r]);
  }
  auto base = (*rr)->Plan(batches->front());
  ASSERT_TRUE(base.ok());
  EXPECT_EQ(base->plan.assignment.policy, "round-robin");
  auto max_tokens = [](const PlannedIteration& p) {
    int64_t worst = 0;
    for (const auto& r : p.plan.assignment.replicas) {
      for (const auto& mb : r) {
        int64_t t = 0;
        for (int s : mb) t += p.plan.batch->sequences[s].llm_tokens;
        worst = std::max(worst, t);
      }
    }
    return worst;
  };
  EXPECT_LE(max_tokens(*planned), max_tokens(*base));
  auto compiled = (*planner)->CompileWorld(*planned);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  EXPECT_TRUE(plan::ValidatePlan(*compiled).ok());
  // The fallback keeps the strategy's assignment.
  auto fallback = (*planner)->Fallback(batches->front());
  ASSERT_TRUE(fallback.ok()) << fallback.status().ToString();
  EXPECT_EQ(fallback->plan.assignment.replicas, planned->plan.assignment.replicas);
}

}  // namespace
}  // namespace weft::strategy::lpt_assign
