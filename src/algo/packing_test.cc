#include "weft/algo/packing.h"

#include <algorithm>
#include <random>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace weft::algo {
namespace {

using ::testing::ElementsAre;

// Minimum number of bins by exhaustive search (items in decreasing order, each into an existing
// bin or a new one; symmetric bins are skipped).
int OptimalBinCount(std::vector<int64_t> sizes, int64_t capacity) {
  std::sort(sizes.rbegin(), sizes.rend());
  int best = static_cast<int>(sizes.size());
  std::vector<int64_t> used;
  auto rec = [&](auto&& self, size_t i) -> void {
    if (static_cast<int>(used.size()) >= best) return;
    if (i == sizes.size()) {
      best = static_cast<int>(used.size());
      return;
    }
    for (size_t b = 0; b < used.size(); ++b) {
      if (used[b] + sizes[i] <= capacity) {
        used[b] += sizes[i];
        self(self, i + 1);
        used[b] -= sizes[i];
      }
    }
    used.push_back(sizes[i]);
    self(self, i + 1);
    used.pop_back();
  };
  rec(rec, 0);
  return sizes.empty() ? 0 : best;
}

void ExpectValid(const BinPacking& p, const std::vector<int64_t>& sizes, int64_t capacity,
                 const std::string& instance) {
  ASSERT_EQ(p.bin_of_item.size(), sizes.size()) << instance;
  std::vector<int64_t> used(p.num_bins(), 0);
  for (size_t i = 0; i < sizes.size(); ++i) {
    ASSERT_GE(p.bin_of_item[i], 0) << instance;
    ASSERT_LT(p.bin_of_item[i], p.num_bins()) << instance;
    used[p.bin_of_item[i]] += sizes[i];
  }
  for (int b = 0; b < p.num_bins(); ++b) {
    EXPECT_EQ(used[b], p.bin_used[b]) << instance;
    EXPECT_LE(used[b], capacity) << instance;
  }
}

// Naive first fit decreasing, to check the segment-tree version.
std::vector<int> NaiveFirstFitDecreasing(const std::vector<int64_t>& sizes, int64_t capacity) {
  std::vector<int> order(sizes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return sizes[a] > sizes[b]; });
  std::vector<int64_t> used;
  std::vector<int> bin_of_item(sizes.size());
  for (int i : order) {
    size_t b = 0;
    while (b < used.size() && used[b] + sizes[i] > capacity) ++b;
    if (b == used.size()) used.push_back(0);
    used[b] += sizes[i];
    bin_of_item[i] = static_cast<int>(b);
  }
  return bin_of_item;
}

TEST(NextFit, OpensANewBinWheneverTheItemDoesNotFit) {
  const std::vector<int64_t> sizes = {6, 5, 4, 7, 3};
  auto p = NextFit(sizes, 10);
  ASSERT_TRUE(p.ok());
  EXPECT_THAT(p->bin_of_item, ElementsAre(0, 1, 1, 2, 2));
  EXPECT_EQ(p->wasted(), 5);
}

TEST(BestFit, PutsTheItemIntoTheTightestBin) {
  // Bins after 3 items: residuals 4 (bin 0), 2 (bin 1), 5 (bin 2). Item 2 goes to bin 1, item 4 to
  // bin 0 (residual 4 < 5), item 5 to bin 2.
  const std::vector<int64_t> sizes = {6, 8, 5, 2, 4, 5};
  auto p = BestFit(sizes, 10);
  ASSERT_TRUE(p.ok());
  EXPECT_THAT(p->bin_of_item, ElementsAre(0, 1, 2, 1, 0, 2));
  EXPECT_EQ(p->wasted(), 0);
}

TEST(BestFit, ClosedBinsAreNotOfferedAgain) {
  const std::vector<int64_t> sizes = {7, 2, 1};
  auto open = BestFit(sizes, 10);
  ASSERT_TRUE(open.ok());
  EXPECT_THAT(open->bin_of_item, ElementsAre(0, 0, 0));
  // After 7+2 the residual 1 < 2 closes bin 0: the last item opens bin 1.
  auto closing = BestFit(sizes, 10, {.close_below_residual = 2});
  ASSERT_TRUE(closing.ok());
  EXPECT_THAT(closing->bin_of_item, ElementsAre(0, 0, 1));
}

TEST(Packing, RejectsItemsLargerThanTheCapacity) {
  const std::vector<int64_t> sizes = {3, 11};
  for (auto* pack : {&NextFit, &FirstFitDecreasing}) {
    auto p = pack(sizes, 10);
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(p.status().message(), ::testing::HasSubstr("sizes[1] = 11"));
  }
  EXPECT_EQ(BestFit(sizes, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(BestFit({}, kMaxSegmentTreeCapacity + 1).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_TRUE(BestFitLinearScan({}, kMaxSegmentTreeCapacity + 1).ok());
}

TEST(Packing, MatchesOracleBoundsAndBaselinesOnRandomInstances) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = std::uniform_int_distribution<int>(0, 10)(rng);
    const int64_t capacity = std::uniform_int_distribution<int64_t>(5, 40)(rng);
    std::vector<int64_t> sizes(n);
    for (auto& s : sizes) s = std::uniform_int_distribution<int64_t>(1, capacity)(rng);
    const std::string instance =
        fmt::format("trial {} capacity {} sizes [{}]", trial, capacity, fmt::join(sizes, ", "));
    const int optimum = OptimalBinCount(sizes, capacity);
    auto nf = NextFit(sizes, capacity);
    auto ffd = FirstFitDecreasing(sizes, capacity);
    ASSERT_TRUE(nf.ok() && ffd.ok()) << instance;
    ExpectValid(*nf, sizes, capacity, instance);
    ExpectValid(*ffd, sizes, capacity, instance);
    EXPECT_GE(nf->num_bins(), optimum) << instance;
    EXPECT_LE(nf->num_bins(), std::max(0, 2 * optimum - 1)) << instance;
    EXPECT_GE(ffd->num_bins(), optimum) << instance;
    EXPECT_LE(9 * ffd->num_bins(), 11 * optimum + 6) << instance;
    EXPECT_EQ(ffd->bin_of_item, NaiveFirstFitDecreasing(sizes, capacity)) << instance;
    for (bool decreasing : {false, true}) {
      for (int64_t close : {int64_t{0}, int64_t{3}}) {
        const BestFitOptions options{.sort_decreasing = decreasing, .close_below_residual = close};
        auto tree = BestFit(sizes, capacity, options);
        auto scan = BestFitLinearScan(sizes, capacity, options);
        ASSERT_TRUE(tree.ok() && scan.ok()) << instance;
        ExpectValid(*tree, sizes, capacity, instance);
        EXPECT_EQ(tree->bin_of_item, scan->bin_of_item) << instance << " decreasing " << decreasing;
        EXPECT_GE(tree->num_bins(), optimum) << instance;
        if (close == 0) {
          EXPECT_LE(10 * tree->num_bins(), 17 * optimum + 10) << instance;
        }
      }
    }
  }
}

TEST(BestFit, PendingMinRuleClosesBinsNoPendingItemFits) {
  // Online order 6, 5, 3, 3: after 6 (residual 4) and 5 (residual 5) the pending minimum is 3, so
  // both stay open; after the first 3 (into bin 0, residual 1 < 3) bin 0 closes. The packing is
  // the same as without the rule; fewer bins are open at once.
  const std::vector<int64_t> sizes = {6, 5, 3, 3, 4};
  auto plain = BestFit(sizes, 10);
  auto dynamic = BestFit(sizes, 10, {.close_below_pending_min = true});
  ASSERT_TRUE(plain.ok() && dynamic.ok());
  EXPECT_EQ(dynamic->bin_of_item, plain->bin_of_item);
  EXPECT_THAT(dynamic->bin_of_item, ElementsAre(0, 1, 0, 1, 2));
  EXPECT_EQ(plain->max_open_bins, 3);
  // Before item 4 (size 4): bin 0 residual 1 and bin 1 residual 2 are closed (pending min 4).
  EXPECT_EQ(dynamic->max_open_bins, 2);
}

TEST(BestFit, PendingMinRuleKeepsThePackingAndAgreesWithTheLinearScan) {
  std::mt19937_64 rng(29);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = std::uniform_int_distribution<int>(0, 10)(rng);
    const int64_t capacity = std::uniform_int_distribution<int64_t>(5, 40)(rng);
    std::vector<int64_t> sizes(n);
    for (auto& s : sizes) s = std::uniform_int_distribution<int64_t>(1, capacity)(rng);
    const std::string instance =
        fmt::format("trial {} capacity {} sizes [{}]", trial, capacity, fmt::join(sizes, ", "));
    const int optimum = OptimalBinCount(sizes, capacity);
    for (bool decreasing : {false, true}) {
      for (int64_t close : {int64_t{0}, int64_t{3}}) {
        const BestFitOptions fixed{.sort_decreasing = decreasing, .close_below_residual = close};
        BestFitOptions dynamic = fixed;
        dynamic.close_below_pending_min = true;
        auto base = BestFit(sizes, capacity, fixed);
        auto tree = BestFit(sizes, capacity, dynamic);
        auto scan = BestFitLinearScan(sizes, capacity, dynamic);
        ASSERT_TRUE(base.ok() && tree.ok() && scan.ok()) << instance;
        ExpectValid(*tree, sizes, capacity, instance);
        EXPECT_EQ(tree->bin_of_item, base->bin_of_item) << instance << " decreasing " << decreasing;
        EXPECT_EQ(tree->bin_of_item, scan->bin_of_item) << instance << " decreasing " << decreasing;
        EXPECT_EQ(tree->max_open_bins, scan->max_open_bins) << instance;
        EXPECT_LE(tree->max_open_bins, base->max_open_bins) << instance;
        EXPECT_GE(tree->num_bins(), optimum) << instance;
        if (close == 0 && decreasing) {
          EXPECT_LE(9 * tree->num_bins(), 11 * optimum + 6) << instance;  // BFD's bound
        }
      }
    }
  }
}

TEST(BestFit, SegmentTreeAgreesWithLinearScanOnLargeStreams) {
  std::mt19937_64 rng(3);
  std::vector<int64_t> sizes(5000);
  for (auto& s : sizes) s = std::uniform_int_distribution<int64_t>(16, 8192)(rng);
  auto tree = BestFit(sizes, 8192, {.close_below_residual = 16});
  auto scan = BestFitLinearScan(sizes, 8192, {.close_below_residual = 16});
  ASSERT_TRUE(tree.ok() && scan.ok());
  EXPECT_EQ(tree->bin_of_item, scan->bin_of_item);
}

}  // namespace
}  // namespace weft::algo
