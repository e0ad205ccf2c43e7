#include "weft/cp/distribution.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <random>

#include "weft/cp/mask.h"

namespace weft::cp {
namespace {

using ::testing::ElementsAre;

Distribution Assign(const std::vector<int64_t>& w, int ranks, Method method, uint64_t seed = 0) {
  auto d = Distribute(w, {.ranks = ranks, .method = method, .seed = seed});
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return *d;
}

TEST(Distribute, RingIsContiguous) {
  const Distribution d = Assign({1, 1, 1, 1, 1, 1, 1}, 3, Method::kRing);
  EXPECT_THAT(d.rank_of_block, ElementsAre(0, 0, 0, 1, 1, 2, 2));
  EXPECT_THAT(d.load_of_rank, ElementsAre(3, 2, 2));
}

TEST(Distribute, ZigzagTakesChunksRAnd2GMinus1MinusR) {
  const Distribution d = Assign({1, 2, 3, 4, 5, 6, 7, 8}, 4, Method::kZigzag);
  EXPECT_THAT(d.rank_of_block, ElementsAre(0, 1, 2, 3, 3, 2, 1, 0));
  EXPECT_THAT(d.blocks_of_rank[1], ElementsAre(1, 6));
  // One causal text: block b has b + 1 key blocks; zigzag is exactly balanced, ring is not.
  EXPECT_DOUBLE_EQ(d.Imbalance(), 1.0);
  EXPECT_GT(Assign({1, 2, 3, 4, 5, 6, 7, 8}, 4, Method::kRing).Imbalance(), 1.5);
}

TEST(Distribute, RandomIsSeededWithEqualCounts) {
  std::vector<int64_t> w(100);
  for (int i = 0; i < 100; ++i) w[i] = i + 1;
  const Distribution a = Assign(w, 8, Method::kRandom, 3);
  EXPECT_EQ(a.rank_of_block, Assign(w, 8, Method::kRandom, 3).rank_of_block);
  EXPECT_NE(a.rank_of_block, Assign(w, 8, Method::kRandom, 4).rank_of_block);
  for (const auto& blocks : a.blocks_of_rank) {
    EXPECT_TRUE(blocks.size() == 12 || blocks.size() == 13);
    EXPECT_TRUE(std::is_sorted(blocks.begin(), blocks.end()));
  }
}

TEST(Distribute, LptTieBreaksAreDeterministic) {
  const Distribution d = Assign({5, 5, 5, 5, 2}, 2, Method::kLpt);
  // 5→r0, 5→r1, 5→r0, 5→r1, 2→r0 (equal loads: lower rank).
  EXPECT_THAT(d.rank_of_block, ElementsAre(0, 1, 0, 1, 0));
  EXPECT_THAT(d.load_of_rank, ElementsAre(12, 10));
}

TEST(Distribute, RejectsBadRankCounts) {
  EXPECT_THAT(Distribute(std::vector<int64_t>{1, 2}, {.ranks = 0}).status().message(),
              ::testing::HasSubstr("ranks = 0; must be >= 1"));
  EXPECT_THAT(Distribute(std::vector<int64_t>{1, 2}, {.ranks = 3}).status().message(),
              ::testing::HasSubstr("ranks = 3; must be <= blocks (2)"));
  EXPECT_FALSE(Distribute(std::vector<int64_t>{1, -1}, {.ranks = 1}).ok());
  EXPECT_THAT(*ParseMethods("lpt,ring"), ElementsAre(Method::kLpt, Method::kRing));
  EXPECT_THAT(ParseMethods("lpt,rr").status().message(), ::testing::HasSubstr("\"rr\""));
}

// Optimal makespan by enumerating every assignment (rank 0 fixed for block 0: symmetry).
int64_t OptimalMakespan(const std::vector<int64_t>& w, int g) {
  const int n = static_cast<int>(w.size());
  int64_t best = INT64_MAX;
  std::vector<int> a(n, 0);
  std::vector<int64_t> load(g);
  while (true) {
    std::fill(load.begin(), load.end(), 0);
    for (int i = 0; i < n; ++i) load[a[i]] += w[i];
    best = std::min(best, *std::max_element(load.begin(), load.end()));
    int i = n - 1;
    while (i >= 1 && a[i] == g - 1) a[i--] = 0;
    if (i < 1) break;
    ++a[i];
  }
  return best;
}

// The oracle test: LPT against the optimal makespan on many tiny instances. Graham's bound
// LPT ≤ (4/3 − 1/(3G))·OPT must hold on every one; how often LPT is optimal is reported.
TEST(Distribute, LptWithinGrahamBoundOfBruteForceOptimum) {
  std::mt19937_64 rng(13);
  int optimal = 0, trials = 0;
  double worst_ratio = 1.0;
  for (int trial = 0; trial < 400; ++trial) {
    const int g = 2 + static_cast<int>(rng() % 3);        // 2..4 ranks
    const int n = g + static_cast<int>(rng() % (10 - g));  // g..9 blocks
    std::vector<int64_t> w(n);
    for (int64_t& x : w) x = 1 + static_cast<int64_t>(rng() % 30);
    const int64_t lpt = Assign(w, g, Method::kLpt).MaxLoad();
    const int64_t opt = OptimalMakespan(w, g);
    ASSERT_GE(lpt, opt);
    const double bound = 4.0 / 3.0 - 1.0 / (3.0 * g);
    ASSERT_LE(static_cast<double>(lpt), bound * opt + 1e-9)
        << "G = " << g << " workloads " << ::testing::PrintToString(w);
    optimal += lpt == opt;
    ++trials;
    worst_ratio = std::max(worst_ratio, static_cast<double>(lpt) / opt);
  }
  std::cout << "LPT optimal on " << optimal << " of " << trials
            << " tiny instances; worst LPT/OPT = " << worst_ratio << "\n";
  ::testing::Test::RecordProperty("lpt_optimal", optimal);
  EXPECT_GT(optimal, trials / 2);  // LPT is optimal on most tiny instances
}

// Cornstarch Fig. 12's qualitative claim on one EE layout: LPT is near-perfect, ring is worst.
TEST(Distribute, LptBalancesEmbeddedLayoutBetterThanRingAndZigzag) {
  auto layout = MakeLayout(MaskKind::kEe, {.tokens = 65536, .seed = 1});
  ASSERT_TRUE(layout.ok());
  auto blocks = ComputeBlockWorkloads(*layout);
  ASSERT_TRUE(blocks.ok());
  const double lpt = Assign(blocks->key_blocks, 8, Method::kLpt).Imbalance();
  const double ring = Assign(blocks->key_blocks, 8, Method::kRing).Imbalance();
  const double zigzag = Assign(blocks->key_blocks, 8, Method::kZigzag).Imbalance();
  EXPECT_LT(lpt, 1.01);
  EXPECT_LT(lpt, zigzag);
  EXPECT_LT(zigzag, ring);
}

}  // namespace
}  // namespace weft::cp
