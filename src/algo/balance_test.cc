#include "weft/algo/balance.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace weft::algo {
namespace {

// Optimal makespan by enumerating all bins^n assignments (first item pinned to bin 0).
double BruteForceMakespan(const std::vector<double>& sizes, int bins) {
  const int n = static_cast<int>(sizes.size());
  if (n == 0) return 0.0;
  std::vector<double> load(bins, 0.0);
  double best = std::numeric_limits<double>::infinity();
  auto rec = [&](auto&& self, int i, double current) -> void {
    if (current >= best) return;
    if (i == n) {
      best = current;
      return;
    }
    for (int b = 0; b < (i == 0 ? 1 : bins); ++b) {
      load[b] += sizes[i];
      self(self, i + 1, std::max(current, load[b]));
      load[b] -= sizes[i];
    }
  };
  rec(rec, 0, 0.0);
  return best;
}

void ExpectConsistent(const BalanceResult& r, const std::vector<double>& sizes, int bins,
                      const std::string& instance) {
  ASSERT_EQ(r.bin_of_item.size(), sizes.size()) << instance;
  std::vector<double> load(bins, 0.0);
  for (size_t i = 0; i < sizes.size(); ++i) {
    ASSERT_GE(r.bin_of_item[i], 0) << instance;
    ASSERT_LT(r.bin_of_item[i], bins) << instance;
    load[r.bin_of_item[i]] += sizes[i];
  }
  for (int b = 0; b < bins; ++b) EXPECT_NEAR(r.bin_load[b], load[b], 1e-9) << instance;
  EXPECT_NEAR(r.makespan, *std::max_element(load.begin(), load.end()), 1e-9) << instance;
  EXPECT_GE(r.makespan, r.lower_bound - 1e-9) << instance;
}

TEST(LongestProcessingTimeFirst, PlacesEachItemOnTheLeastLoadedBin) {
  const std::vector<double> sizes = {5, 5, 4, 4, 3, 3, 3};  // classic LPT worst-case family, k=3
  auto r = LongestProcessingTimeFirst(sizes, 3);
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->makespan, 11.0);  // optimum is 9 = (5+4), (5+4), (3+3+3)
  EXPECT_DOUBLE_EQ(r->lower_bound, 9.0);
  EXPECT_NEAR(r->gap_to_lower_bound, 2.0 / 9.0, 1e-12);
  EXPECT_FALSE(r->proven_optimal);
}

TEST(KarmarkarKarp, SolvesTheClassicTwoWayExample) {
  const std::vector<double> sizes = {8, 7, 6, 5, 4};  // KK: 8,7->1; 6,5->1; 4,1->3; 3,1->2
  auto r = KarmarkarKarp(sizes, 2);
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->makespan, 16.0);  // difference 2 (optimum is 15/15)
}

TEST(ExactBalance, FindsTheOptimumWhereLptFails) {
  const std::vector<double> sizes = {5, 5, 4, 4, 3, 3, 3};
  auto r = ExactBalance(sizes, 3);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_DOUBLE_EQ(r->makespan, 9.0);
  EXPECT_TRUE(r->proven_optimal);
  EXPECT_DOUBLE_EQ(r->gap_to_lower_bound, 0.0);
}

TEST(ExactBalance, RejectsBadInputAndOversizedInstances) {
  const std::vector<double> sizes = {1, -1};
  EXPECT_THAT(ExactBalance(sizes, 2).status().message(), ::testing::HasSubstr("sizes[1] = -1"));
  EXPECT_EQ(LongestProcessingTimeFirst(sizes, 0).status().code(), StatusCode::kInvalidArgument);
  const std::vector<double> many(100, 1.0);
  EXPECT_EQ(ExactBalance(many, 8, {.max_variables = 100}).status().code(),
            StatusCode::kFailedPrecondition);
}

TEST(Balancers, HandleEmptyInputAndMoreBinsThanItems) {
  for (auto* balance : {&LongestProcessingTimeFirst, &KarmarkarKarp}) {
    auto empty = balance({}, 3);
    ASSERT_TRUE(empty.ok());
    EXPECT_EQ(empty->makespan, 0.0);
    const std::vector<double> two = {2, 3};
    auto r = balance(two, 4);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->makespan, 3.0);
    EXPECT_TRUE(r->proven_optimal);
  }
}

TEST(Balancers, MatchBruteForceOracleOnRandomInstances) {
  std::mt19937_64 rng(7);
  int lpt_optimal = 0, kk_optimal = 0, trials = 0;
  for (int trial = 0; trial < 150; ++trial) {
    const int n = std::uniform_int_distribution<int>(1, 9)(rng);
    const int bins = std::uniform_int_distribution<int>(2, 4)(rng);
    std::vector<double> sizes(n);
    for (double& s : sizes) {
      s = trial % 2 ? std::uniform_int_distribution<int>(1, 20)(rng)
                    : std::uniform_real_distribution<double>(0.1, 10.0)(rng);
    }
    const std::string instance =
        fmt::format("trial {} bins {} sizes [{}]", trial, bins, fmt::join(sizes, ", "));
    const double optimum = BruteForceMakespan(sizes, bins);
    auto lpt = LongestProcessingTimeFirst(sizes, bins);
    auto kk = KarmarkarKarp(sizes, bins);
    auto exact = ExactBalance(sizes, bins);
    ASSERT_TRUE(lpt.ok() && kk.ok() && exact.ok()) << instance;
    ExpectConsistent(*lpt, sizes, bins, instance);
    ExpectConsistent(*kk, sizes, bins, instance);
    ExpectConsistent(*exact, sizes, bins, instance);
    EXPECT_NEAR(exact->makespan, optimum, 1e-6) << instance;
    EXPECT_TRUE(exact->proven_optimal) << instance;
    EXPECT_GE(lpt->makespan, optimum - 1e-9) << instance;
    EXPECT_GE(kk->makespan, optimum - 1e-9) << instance;
    // Graham's bound for LPT.
    EXPECT_LE(lpt->makespan, (4.0 / 3.0 - 1.0 / (3.0 * bins)) * optimum + 1e-9) << instance;
    lpt_optimal += lpt->makespan <= optimum + 1e-9;
    kk_optimal += kk->makespan <= optimum + 1e-9;
    ++trials;
  }
  // Both heuristics are optimal on most small instances.
  EXPECT_GT(lpt_optimal, trials / 2);
  EXPECT_GT(kk_optimal, trials / 2);
}

// The smallest makespan over every assignment of item i to a bin of eligible[i] (empty: any).
double BruteForceEligibleMakespan(const std::vector<double>& sizes, int bins,
                                  const std::vector<std::vector<int>>& eligible) {
  std::vector<double> load(bins, 0.0);
  double best = std::numeric_limits<double>::infinity();
  auto go = [&](auto&& self, size_t i) -> void {
    const double now = *std::max_element(load.begin(), load.end());
    if (now >= best) return;
    if (i == sizes.size()) {
      best = now;
      return;
    }
    std::vector<int> all(bins);
    std::iota(all.begin(), all.end(), 0);
    for (int b : eligible[i].empty() ? all : eligible[i]) {
      load[b] += sizes[i];
      self(self, i + 1);
      load[b] -= sizes[i];
    }
  };
  go(go, 0);
  return best;
}

// The oracle of the encoder dispatch (planning/graph_builder.cc): every item eligible on one
// block of f bins (the replicas that serve its microbatch), blocks tiling the bins. LPT with
// eligibility is then LPT per block: Graham's bound per block against the brute-force optimum,
// and with one block it equals the plain LPT item for item.
TEST(LongestProcessingTimeFirstEligible, MeetsGrahamsBoundPerBlockAgainstBruteForce) {
  std::mt19937_64 rng(11);
  int optimal = 0, trials = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const int f = std::uniform_int_distribution<int>(1, 4)(rng);
    const int blocks = std::uniform_int_distribution<int>(1, 2)(rng);
    const int bins = f * blocks;
    const int n = std::uniform_int_distribution<int>(1, bins > 4 ? 7 : 9)(rng);
    std::vector<double> sizes(n);
    std::vector<std::vector<int>> eligible(n);
    for (int i = 0; i < n; ++i) {
      // Skewed sizes: one long video among short clips is the case that matters.
      sizes[i] = std::uniform_int_distribution<int>(0, 5)(rng) == 0
                     ? std::uniform_real_distribution<double>(20, 100)(rng)
                     : std::uniform_real_distribution<double>(0.1, 10)(rng);
      const int block = std::uniform_int_distribution<int>(0, blocks - 1)(rng);
      for (int b = block * f; b < (block + 1) * f; ++b) eligible[i].push_back(b);
    }
    const std::string instance = fmt::format("trial {} f {} blocks {} sizes [{}]", trial, f,
                                             blocks, fmt::join(sizes, ", "));
    auto lpt = LongestProcessingTimeFirstEligible(sizes, bins, eligible);
    ASSERT_TRUE(lpt.ok()) << instance;
    ExpectConsistent(*lpt, sizes, bins, instance);
    for (int i = 0; i < n; ++i) {
      EXPECT_NE(std::find(eligible[i].begin(), eligible[i].end(), lpt->bin_of_item[i]),
                eligible[i].end())
          << instance << " item " << i;
    }
    const double optimum = BruteForceEligibleMakespan(sizes, bins, eligible);
    EXPECT_GE(lpt->makespan, optimum - 1e-9) << instance;
    EXPECT_LE(lpt->makespan, (4.0 / 3.0 - 1.0 / (3.0 * f)) * optimum + 1e-9) << instance;
    optimal += lpt->makespan <= optimum + 1e-9;
    ++trials;
    if (blocks == 1) {
      auto plain = LongestProcessingTimeFirst(sizes, bins);
      ASSERT_TRUE(plain.ok());
      EXPECT_EQ(lpt->bin_of_item, plain->bin_of_item) << instance;
    }
  }
  EXPECT_GT(optimal, trials / 2);
}

TEST(LongestProcessingTimeFirstEligible, RefusesBadEligibility) {
  const std::vector<double> sizes = {1, 2};
  const std::vector<std::vector<int>> one = {{0}};
  EXPECT_EQ(LongestProcessingTimeFirstEligible(sizes, 2, one).status().code(),
            StatusCode::kInvalidArgument);
  const std::vector<std::vector<int>> outside = {{0}, {2}};
  EXPECT_EQ(LongestProcessingTimeFirstEligible(sizes, 2, outside).status().message(),
            "eligible[1] names bin 2; must be in [0, 2)");
  const std::vector<std::vector<int>> pinned = {{1}, {}};
  auto r = LongestProcessingTimeFirstEligible(sizes, 2, pinned);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bin_of_item, (std::vector<int>{1, 0}));  // item 1 first (larger), then pinned
  // Carried loads (list scheduling): bin 0 already holds 5, so both items go to bin 1 first.
  const std::vector<double> carried = {5, 0};
  const std::vector<std::vector<int>> any(2);
  r = LongestProcessingTimeFirstEligible(sizes, 2, any, carried);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bin_of_item, (std::vector<int>{1, 1}));
  EXPECT_EQ(r->bin_load, (std::vector<double>{0, 3}));
  const std::vector<double> short_loads = {1};
  EXPECT_EQ(LongestProcessingTimeFirstEligible(sizes, 2, any, short_loads).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace weft::algo
