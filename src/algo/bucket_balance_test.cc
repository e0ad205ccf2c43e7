#include "weft/algo/bucket_balance.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>

namespace weft::algo {
namespace {

using ::testing::HasSubstr;

// Optimal C_max by enumerating all assignments (item 0 pinned to bucket 0; with nonempty, branches
// that cannot fill every bucket any more are cut).
double BruteForceMakespan(const std::vector<TwoResourceItem>& items, int buckets, bool nonempty) {
  const int n = static_cast<int>(items.size());
  std::vector<double> first(buckets, 0.0), second(buckets, 0.0);
  std::vector<int> count(buckets, 0);
  int empty = buckets;
  double best = std::numeric_limits<double>::infinity();
  auto rec = [&](auto&& self, int i, double current) -> void {
    if (current >= best) return;
    if (nonempty && empty > n - i) return;
    if (i == n) {
      best = current;
      return;
    }
    for (int b = 0; b < (i == 0 ? 1 : buckets); ++b) {
      first[b] += items[i].first_s;
      second[b] += items[i].second_s;
      if (count[b]++ == 0) --empty;
      self(self, i + 1, std::max({current, first[b], second[b]}));
      if (--count[b] == 0) ++empty;
      first[b] -= items[i].first_s;
      second[b] -= items[i].second_s;
    }
  };
  rec(rec, 0, 0.0);
  return best;
}

std::string Describe(const std::vector<TwoResourceItem>& items, int buckets) {
  std::string s = fmt::format("buckets={} items=", buckets);
  for (const auto& it : items) s += fmt::format("({:g},{:g})", it.first_s, it.second_s);
  return s;
}

void ExpectConsistent(const BucketBalanceResult& r,
                      const std::vector<TwoResourceItem>& items,
                      const BucketBalanceOptions& options,
                      const std::string& instance) {
  const int m = options.num_buckets;
  ASSERT_EQ(r.bucket_of_item.size(), items.size()) << instance;
  ASSERT_EQ(r.first_load_s.size(), static_cast<size_t>(m)) << instance;
  ASSERT_EQ(r.second_load_s.size(), static_cast<size_t>(m)) << instance;
  std::vector<double> first(m, 0.0), second(m, 0.0);
  std::vector<int> count(m, 0);
  for (size_t i = 0; i < items.size(); ++i) {
    ASSERT_GE(r.bucket_of_item[i], 0) << instance;
    ASSERT_LT(r.bucket_of_item[i], m) << instance;
    first[r.bucket_of_item[i]] += items[i].first_s;
    second[r.bucket_of_item[i]] += items[i].second_s;
    ++count[r.bucket_of_item[i]];
  }
  double makespan = 0.0;
  for (int b = 0; b < m; ++b) {
    EXPECT_NEAR(r.first_load_s[b], first[b], 1e-9) << instance;
    EXPECT_NEAR(r.second_load_s[b], second[b], 1e-9) << instance;
    makespan = std::max({makespan, first[b], second[b]});
    if (options.nonempty_buckets) {
      EXPECT_GE(count[b], 1) << instance << " bucket " << b;
    }
  }
  EXPECT_NEAR(r.makespan_s, makespan, 1e-9) << instance;
  EXPECT_DOUBLE_EQ(r.lower_bound_s, TwoResourceLowerBound(items, m)) << instance;
  EXPECT_GE(r.makespan_s, r.lower_bound_s * (1 - 1e-12)) << instance;
}

// Small instances mixing text-only (first = 0), encoder-heavy, LLM-heavy and balanced items, on a
// 0.01 grid so that ties happen.
std::vector<TwoResourceItem> RandomItems(std::mt19937_64& rng, int n) {
  std::uniform_int_distribution<int> kind(0, 3);
  auto u = [&](double lo, double hi) {
    return std::round(std::uniform_real_distribution<double>(lo, hi)(rng) * 100) / 100;
  };
  std::vector<TwoResourceItem> items(n);
  for (auto& it : items) {
    switch (kind(rng)) {
      case 0:
        it = {0.0, u(0.1, 1.0)};
        break;  // text only
      case 1:
        it = {u(0.5, 2.0), u(0.1, 0.6)};
        break;  // encoder heavy (image / video)
      case 2:
        it = {u(0.0, 0.4), u(0.5, 2.0)};
        break;  // LLM heavy (long text + small image)
      default:
        it = {u(0.2, 1.2), u(0.2, 1.2)};
        break;
    }
  }
  return items;
}

TEST(BucketBalance, HeuristicAndLptAgainstBruteForce) {
  std::mt19937_64 rng(20261128);
  int instances = 0;
  double heuristic_sum = 0, heuristic_max = 0, lpt_sum = 0, lpt_max = 0;
  int heuristic_optimal = 0, lpt_optimal = 0;
  for (int t = 0; t < 600; ++t) {
    const int m = 2 + t % 3;
    const int n = std::uniform_int_distribution<int>(m, 9)(rng);
    const bool nonempty = t % 5 != 4;
    const auto items = RandomItems(rng, n);
    const std::string instance = Describe(items, m) + (nonempty ? " nonempty" : " may-be-empty");
    const BucketBalanceOptions options{.num_buckets = m, .nonempty_buckets = nonempty};
    const double optimum = BruteForceMakespan(items, m, nonempty);
    auto heuristic = BalanceBucketsHeuristic(items, options);
    auto lpt = TwoResourceLpt(items, options);
    ASSERT_TRUE(heuristic.ok()) << heuristic.status().ToString() << " " << instance;
    ASSERT_TRUE(lpt.ok()) << lpt.status().ToString() << " " << instance;
    ExpectConsistent(*heuristic, items, options, instance);
    ExpectConsistent(*lpt, items, options, instance);
    ASSERT_GE(heuristic->makespan_s, optimum * (1 - 1e-12)) << instance;
    ASSERT_LE(heuristic->makespan_s, lpt->makespan_s) << instance;
    EXPECT_GE(optimum, heuristic->lower_bound_s * (1 - 1e-12)) << instance;
    if (heuristic->proven_optimal) {
      EXPECT_NEAR(heuristic->makespan_s, optimum, 1e-9) << instance;
    }
    const double hg = heuristic->makespan_s / optimum - 1, lg = lpt->makespan_s / optimum - 1;
    heuristic_sum += hg;
    lpt_sum += lg;
    heuristic_max = std::max(heuristic_max, hg);
    lpt_max = std::max(lpt_max, lg);
    heuristic_optimal += hg < 1e-9;
    lpt_optimal += lg < 1e-9;
    ++instances;
  }
  const double heuristic_mean = heuristic_sum / instances, lpt_mean = lpt_sum / instances;
  fmt::print(
      "[bucket_balance] {} instances (N <= 9, m 2..4): heuristic gap to optimum mean {:.4f}% max "
      "{:.2f}% ({} optimal); LPT mean {:.2f}% max {:.2f}% ({} optimal)\n",
      instances, 100 * heuristic_mean, 100 * heuristic_max, heuristic_optimal, 100 * lpt_mean,
      100 * lpt_max, lpt_optimal);
  EXPECT_LE(heuristic_mean, lpt_mean);
  // Measured (docs/algo.md): mean 0.0029%, max 1.75%, 599 of 600 optimal; LPT mean 7.58%.
  EXPECT_LT(heuristic_mean, 0.0005);
  EXPECT_GE(heuristic_optimal, 590);
}

TEST(BucketBalance, ExactMatchesBruteForce) {
  std::mt19937_64 rng(7);
  for (int t = 0; t < 120; ++t) {
    const int m = 2 + t % 3;
    const int n = std::uniform_int_distribution<int>(m, 9)(rng);
    const bool nonempty = t % 4 != 3;
    const auto items = RandomItems(rng, n);
    const std::string instance = Describe(items, m) + (nonempty ? " nonempty" : " may-be-empty");
    const BucketBalanceOptions options{
        .num_buckets = m, .nonempty_buckets = nonempty, .milp_time_limit_s = 20};
    auto exact = BalanceBucketsExact(items, options);
    ASSERT_TRUE(exact.ok()) << exact.status().ToString() << " " << instance;
    ExpectConsistent(*exact, items, options, instance);
    EXPECT_TRUE(exact->proven_optimal) << instance;
    EXPECT_NEAR(exact->makespan_s, BruteForceMakespan(items, m, nonempty), 1e-9) << instance;
    auto hybrid = BalanceBuckets(items, options);
    ASSERT_TRUE(hybrid.ok()) << hybrid.status().ToString() << " " << instance;
    ExpectConsistent(*hybrid, items, options, instance);
    EXPECT_NEAR(hybrid->makespan_s, exact->makespan_s, 1e-9) << instance;
  }
}

TEST(BucketBalance, LptFollowsThePaperRule) {
  // Keys max(first, second): 5, 4, 3, 3, 1. Onto the least max(first load, second load).
  const std::vector<TwoResourceItem> items = {{5, 1}, {0, 4}, {3, 0}, {1, 3}, {1, 1}};
  auto r = TwoResourceLpt(items, {.num_buckets = 2});
  ASSERT_TRUE(r.ok());
  // 5 -> b0 (loads 0, 0); 4 -> b1; (3,0) -> b1 (load 4 < 5): b1 = (3, 4); (1,3) -> b1 (4 < 5):
  // b1 = (4, 7); (1,1) -> b0 (5 < 7): b0 = (6, 2).
  EXPECT_THAT(r->bucket_of_item, ::testing::ElementsAre(0, 1, 1, 1, 0));
  EXPECT_DOUBLE_EQ(r->makespan_s, 7.0);
  EXPECT_EQ(r->method, "lpt");
  // Zero items still open every bucket when nonempty_buckets is set.
  const std::vector<TwoResourceItem> zeros(3);
  auto z = TwoResourceLpt(zeros, {.num_buckets = 3});
  ASSERT_TRUE(z.ok());
  EXPECT_THAT(z->bucket_of_item, ::testing::ElementsAre(0, 1, 2));
  EXPECT_TRUE(z->proven_optimal);
}

TEST(BucketBalance, HeuristicPairsComplementaryItems) {
  // Two encoder-heavy and two LLM-heavy items: the optimum pairs one of each per bucket (C_max 5).
  const std::vector<TwoResourceItem> items = {{4, 1}, {4, 1}, {1, 4}, {1, 4}};
  auto r = BalanceBuckets(items, {.num_buckets = 2});
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->makespan_s, 5.0);
  EXPECT_TRUE(r->proven_optimal);
  EXPECT_THAT(r->BriefReport(), HasSubstr("4 items in 2 buckets: makespan 5 s"));
}

// Heavy-tailed mixed batch, as in the benchmark (text-only, single-image, multi-image, video).
std::vector<TwoResourceItem> MixedBatch(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::lognormal_distribution<double> text_tokens(6.0, 0.8);
  std::vector<TwoResourceItem> items(n);
  for (auto& it : items) {
    const double kind = u(rng);
    const double images = kind < 0.25   ? 0
                          : kind < 0.75 ? 1
                          : kind < 0.92 ? 2 + 4 * u(rng)
                                        : 8 + 24 * u(rng);
    const double tokens = text_tokens(rng) + 729 * images;
    it.first_s = 0.004 * images;
    it.second_s = 1.5e-6 * tokens + 1e-10 * tokens * tokens;
  }
  return items;
}

TEST(BucketBalance, LargeMixedBatchIsWithinOnePercentAndDeterministic) {
  for (int m : {32, 128}) {
    const auto items = MixedBatch(2048, 11);
    const BucketBalanceOptions options{.num_buckets = m};
    auto a = BalanceBucketsHeuristic(items, options);
    auto b = BalanceBucketsHeuristic(items, options);
    auto lpt = TwoResourceLpt(items, options);
    ASSERT_TRUE(a.ok() && b.ok() && lpt.ok());
    ExpectConsistent(*a, items, options, fmt::format("mixed m={}", m));
    EXPECT_EQ(a->bucket_of_item, b->bucket_of_item);
    EXPECT_LE(a->makespan_s, lpt->makespan_s);
    EXPECT_LT(a->gap_to_lower_bound, 0.01) << a->BriefReport();
    fmt::print("[bucket_balance] m={}: {} | LPT {}\n", m, a->BriefReport(), lpt->BriefReport());
  }
}

TEST(BucketBalance, ZeroBudgetIsTheBestGreedyStart) {
  const auto items = MixedBatch(300, 3);
  const BucketBalanceOptions options{.num_buckets = 16, .local_search_evaluations = 0};
  auto r = BalanceBucketsHeuristic(items, options);
  auto lpt = TwoResourceLpt(items, options);
  ASSERT_TRUE(r.ok() && lpt.ok());
  ExpectConsistent(*r, items, options, "zero budget");
  EXPECT_THAT(r->method, ::testing::AnyOf("lpt", "greedy"));
  EXPECT_LE(r->makespan_s, lpt->makespan_s);
  auto full = BalanceBucketsHeuristic(items, {.num_buckets = 16});
  ASSERT_TRUE(full.ok());
  EXPECT_LE(full->makespan_s, r->makespan_s);
}

TEST(BucketBalance, RejectsInvalidInput) {
  const std::vector<TwoResourceItem> ok = {{1, 1}, {2, 2}};
  EXPECT_THAT(BalanceBuckets(ok, {.num_buckets = 0}).status().message(),
              HasSubstr("num_buckets = 0; must be >= 1"));
  EXPECT_THAT(BalanceBuckets(ok, {.num_buckets = 3}).status().message(),
              HasSubstr("items.size() = 2 < num_buckets = 3"));
  EXPECT_TRUE(BalanceBuckets(ok, {.num_buckets = 3, .nonempty_buckets = false}).ok());
  EXPECT_THAT(
      BalanceBuckets(ok, {.num_buckets = 1, .local_search_evaluations = -1}).status().message(),
      HasSubstr("local_search_evaluations = -1"));
  EXPECT_THAT(BalanceBuckets(ok, {.num_buckets = 1, .milp_time_limit_s = -1}).status().message(),
              HasSubstr("milp_time_limit_s = -1"));
  const std::vector<TwoResourceItem> negative = {{1, 1}, {-1, 2}};
  EXPECT_THAT(TwoResourceLpt(negative, {.num_buckets = 1}).status().message(),
              HasSubstr("items[1].first_s = -1; must be finite and >= 0"));
  const std::vector<TwoResourceItem> nan = {{1, std::numeric_limits<double>::quiet_NaN()}};
  EXPECT_THAT(BalanceBucketsHeuristic(nan, {.num_buckets = 1}).status().message(),
              HasSubstr("items[0].second_s = nan"));
  EXPECT_EQ(BalanceBucketsExact(MixedBatch(100, 1), {.num_buckets = 50}).status().code(),
            StatusCode::kFailedPrecondition);
  // No items, buckets may be empty: a valid empty answer.
  auto empty = BalanceBuckets({}, {.num_buckets = 2, .nonempty_buckets = false});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->makespan_s, 0.0);
  EXPECT_TRUE(empty->proven_optimal);
}

}  // namespace
}  // namespace weft::algo
