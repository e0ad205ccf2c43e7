#include "weft/algo/live_selection.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>

#include <gtest/gtest.h>

namespace weft::algo {
namespace {

// Optimal cost by enumeration (infinity when nothing fits).
double BruteForce(const LiveSelectionProblem& p) {
  const int n = static_cast<int>(p.items.size());
  std::vector<int> choice(n, 0);
  double best = std::numeric_limits<double>::infinity();
  while (true) {
    bool fits = true;
    for (const auto& ck : p.checkpoints) {
      double used = 0;
      for (int i : ck.items) used += p.items[i][choice[i]].weight;
      fits = fits && used <= ck.budget + 1e-9;
    }
    if (fits) {
      double c = 0;
      for (int i = 0; i < n; ++i) c += p.items[i][choice[i]].cost;
      best = std::min(best, c);
    }
    int i = 0;
    while (i < n && ++choice[i] == static_cast<int>(p.items[i].size())) choice[i++] = 0;
    if (i == n) break;
  }
  return best;
}

// Items = (F, B) pairs on one rank with 1F1B-like lifetimes; options trade time for bytes.
LiveSelectionProblem RandomProblem(std::mt19937& rng, int n) {
  LiveSelectionProblem p;
  std::uniform_real_distribution<double> u(0, 1);
  for (int i = 0; i < n; ++i) {
    const double bytes = 4 + 8 * u(rng);
    const double time = 1 + 2 * u(rng);
    p.items.push_back({{0, bytes}, {0.3 * time, 0.5 * bytes}, {time, 0.1 * bytes}});
  }
  // Checkpoint k: items k-2..k live (a window of 3).
  double total = 0;
  for (const auto& it : p.items) total += it[0].weight;
  for (int k = 0; k < n; ++k) {
    LiveCheckpoint ck;
    for (int i = std::max(0, k - 2); i <= k; ++i) ck.items.push_back(i);
    ck.budget = (0.25 + 0.5 * u(rng)) * 3 * total / n;
    p.checkpoints.push_back(ck);
  }
  return p;
}

// The greedy rule by a full scan per step (the reference the lazy heap must reproduce): from
// the lightest options, repeatedly take the move with the most cost saved per extra byte that
// keeps its item's checkpoints within budget; ties by item, then option.
std::vector<int> ScanGreedy(const LiveSelectionProblem& p) {
  const int n = static_cast<int>(p.items.size());
  std::vector<int> choice(n, 0);
  for (int i = 0; i < n; ++i) {
    for (int o = 1; o < static_cast<int>(p.items[i].size()); ++o) {
      const auto& a = p.items[i][o];
      const auto& b = p.items[i][choice[i]];
      if (a.weight < b.weight || (a.weight == b.weight && a.cost < b.cost)) choice[i] = o;
    }
  }
  std::vector<double> slack;
  std::vector<std::vector<int>> of(n);
  for (size_t k = 0; k < p.checkpoints.size(); ++k) {
    const auto& ck = p.checkpoints[k];
    slack.push_back(ck.budget + 1e-9 * std::max(1.0, std::abs(ck.budget)));
    for (int i : ck.items) {
      slack.back() -= p.items[i][choice[i]].weight;
      of[i].push_back(static_cast<int>(k));
    }
  }
  if (std::any_of(slack.begin(), slack.end(), [](double s) { return s < 0; })) return choice;
  while (true) {
    int bi = -1, bo = -1;
    double best = -1;
    for (int i = 0; i < n; ++i) {
      double room = std::numeric_limits<double>::infinity();
      for (int k : of[i]) room = std::min(room, slack[k]);
      for (int o = 0; o < static_cast<int>(p.items[i].size()); ++o) {
        const double saved = p.items[i][choice[i]].cost - p.items[i][o].cost;
        const double extra = p.items[i][o].weight - p.items[i][choice[i]].weight;
        if (saved <= 0 || extra > room) continue;
        if (saved / std::max(extra, 1e-9) > best) {
          best = saved / std::max(extra, 1e-9);
          bi = i;
          bo = o;
        }
      }
    }
    if (bi < 0) return choice;
    for (int k : of[bi]) slack[k] -= p.items[bi][bo].weight - p.items[bi][choice[bi]].weight;
    choice[bi] = bo;
  }
}

TEST(LiveSelectionTest, EverythingFitsTakesCheapest) {
  LiveSelectionProblem p;
  p.items = {{{5, 1}, {0, 10}}, {{3, 1}, {1, 2}}};
  p.checkpoints = {{{0, 1}, 100}};
  auto r = SolveLiveSelection(p);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->feasible);
  EXPECT_EQ(r->choice, (std::vector<int>{1, 1}));
  EXPECT_DOUBLE_EQ(r->total_cost, 1);
  EXPECT_DOUBLE_EQ(r->lower_bound, 1);
}

TEST(LiveSelectionTest, BudgetForcesLighterOption) {
  LiveSelectionProblem p;
  // Two items live together; budget 12 fits only one heavy option: upgrade the one saving more.
  p.items = {{{4, 2}, {0, 10}}, {{6, 2}, {0, 10}}};
  p.checkpoints = {{{0, 1}, 12}};
  auto r = SolveLiveSelection(p);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->feasible);
  EXPECT_EQ(r->choice, (std::vector<int>{0, 1}));
  EXPECT_DOUBLE_EQ(r->total_cost, 4);
}

TEST(LiveSelectionTest, InfeasibleReportsLightest) {
  LiveSelectionProblem p;
  p.items = {{{4, 5}, {0, 10}}};
  p.checkpoints = {{{0}, 3}};
  auto r = SolveLiveSelection(p);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->feasible);
  EXPECT_EQ(r->choice, (std::vector<int>{0}));
}

TEST(LiveSelectionTest, RejectsMalformedProblems) {
  LiveSelectionProblem p;
  p.items = {{}};
  EXPECT_FALSE(SolveLiveSelection(p).ok());
  p.items = {{{1, 1}}};
  p.checkpoints = {{{0, 0}, 5}};
  auto r = SolveLiveSelection(p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("twice"), std::string::npos) << r.status().ToString();
  p.checkpoints = {{{3}, 5}};
  EXPECT_FALSE(SolveLiveSelection(p).ok());
  p.checkpoints = {};
  p.items = {{{1, -1}}};
  EXPECT_FALSE(SolveLiveSelection(p).ok());
}

TEST(LiveSelectionTest, RejectsMalformedIntervals) {
  LiveSelectionProblem p;
  p.items = {{{1, 1}}, {{1, 2}}};
  p.checkpoints = {{{}, 5}, {{}, 5}};
  p.live = {{0, 1}};  // one interval for two items
  EXPECT_FALSE(SolveLiveSelection(p).ok());
  p.live = {{0, 1}, {1, 2}};  // past the last checkpoint
  EXPECT_FALSE(SolveLiveSelection(p).ok());
  p.live = {{0, 1}, {1, 1}};
  p.checkpoints[0].items = {0};  // both forms at once
  EXPECT_FALSE(SolveLiveSelection(p).ok());
  p.checkpoints[0].items = {};
  EXPECT_TRUE(SolveLiveSelection(p).ok());
  p.live = {{0, 1}, {1, 0}};  // empty: live nowhere
  EXPECT_TRUE(SolveLiveSelection(p).ok());
}

// The interval form of a problem whose checkpoints name contiguous runs of items (nullopt-like
// empty result when some item's checkpoints are not contiguous).
LiveSelectionProblem IntervalForm(const LiveSelectionProblem& p) {
  LiveSelectionProblem out;
  out.items = p.items;
  out.live.assign(p.items.size(), {0, -1});
  for (int k = 0; k < static_cast<int>(p.checkpoints.size()); ++k) {
    out.checkpoints.push_back({{}, p.checkpoints[k].budget});
    for (int i : p.checkpoints[k].items) {
      LiveInterval& r = out.live[i];
      if (r.last < r.first) r.first = k;
      EXPECT_TRUE(r.last < r.first || r.last == k - 1) << "item " << i << " not contiguous";
      r.last = k;
    }
  }
  return out;
}

TEST(LiveSelectionTest, IntervalFormSolvesLikeTheListForm) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(0, 1);
  int tree = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 2 + trial % 40;
    LiveSelectionProblem p = RandomProblem(rng, n);
    // Byte counts (integers: the exact segment-tree path) on most trials, fractions on the rest
    // (the list-form path); options in any order and lighter-and-cheaper moves (freeing bytes).
    const bool bytes = trial % 5 != 4;
    for (auto& item : p.items) {
      if (trial % 3 == 1) std::shuffle(item.begin(), item.end(), rng);
      item.push_back({0.2 + u(rng), 2 + 6 * u(rng)});
      for (auto& o : item) {
        if (bytes) o.weight = std::round(o.weight * 1e9);
      }
    }
    for (auto& ck : p.checkpoints) {
      if (bytes) ck.budget = std::round(ck.budget * 1e9);
    }
    // Some items live nowhere.
    if (trial % 7 == 3) {
      for (auto& ck : p.checkpoints) std::erase(ck.items, 0);
    }
    const LiveSelectionProblem q = IntervalForm(p);
    tree += bytes;
    for (auto method : {LiveSelectionMethod::kGreedy, LiveSelectionMethod::kMilp}) {
      // CBC on a tenth of the trials, on its node limit only (deterministic).
      if (method == LiveSelectionMethod::kMilp && trial % 10 != 0) continue;
      const LiveSelectionOptions o{.method = method, .time_limit_s = 0, .max_nodes = 200};
      auto listed = SolveLiveSelection(p, o);
      auto intervals = SolveLiveSelection(q, o);
      ASSERT_TRUE(listed.ok() && intervals.ok()) << trial;
      EXPECT_EQ(intervals->choice, listed->choice) << "trial " << trial;
      EXPECT_EQ(intervals->feasible, listed->feasible) << "trial " << trial;
      EXPECT_EQ(intervals->total_cost, listed->total_cost) << "trial " << trial;
      EXPECT_EQ(intervals->lower_bound, listed->lower_bound) << "trial " << trial;
      EXPECT_EQ(intervals->method, listed->method) << "trial " << trial;
      if (method == LiveSelectionMethod::kGreedy) {
        EXPECT_EQ(intervals->choice, ScanGreedy(p)) << "trial " << trial;
      }
    }
  }
  EXPECT_GT(tree, 200);
}

// Long, overlapping lives (a rank that runs most forwards before the backwards) over up to a
// few hundred checkpoints: the segment tree's deep paths, checkpoint counts off powers of two;
// on half the trials, items sharing option lists (the greedy's shared move lists).
TEST(LiveSelectionTest, LongLivesSolveLikeTheListForm) {
  std::mt19937 rng(13);
  std::uniform_real_distribution<double> u(0, 1);
  int upgraded = 0;  // feasible trials where the greedy moved off the lightest options
  for (int trial = 0; trial < 60; ++trial) {
    const int n = 3 + (trial * 37) % 150;
    LiveSelectionProblem q;
    for (int i = 0; i < n; ++i) {
      // On odd trials most items repeat one of a few option lists (pairs of one shape).
      if (trial % 2 == 1 && i >= 3 && u(rng) < 0.9) {
        q.items.push_back(q.items[static_cast<int>(u(rng) * 3)]);
        continue;
      }
      const double bytes = std::round((1 + 3 * u(rng)) * 1e8);
      std::vector<LiveOption> item;
      for (int o = 0; o < 3 + trial % 8; ++o) {
        item.push_back({std::round(100 * u(rng)) / 10, std::round(bytes * u(rng))});
      }
      q.items.push_back(std::move(item));
    }
    const int num_checkpoints = n + trial % 5;
    double total = 0;
    for (int i = 0; i < n; ++i) {
      const int first = std::min(num_checkpoints - 1, static_cast<int>(u(rng) * num_checkpoints));
      const int last = trial % 4 == 0
                           ? num_checkpoints - 1
                           : first + static_cast<int>(u(rng) * (num_checkpoints - first));
      q.live.push_back(i % 11 == 5 ? LiveInterval{first, first - 1} : LiveInterval{first, last});
      total += q.items[i][0].weight;
    }
    for (int k = 0; k < num_checkpoints; ++k) {
      q.checkpoints.push_back({{}, std::round((0.1 + 0.4 * u(rng)) * total)});
    }
    LiveSelectionProblem p = q;
    p.live.clear();
    for (int i = 0; i < n; ++i) {
      for (int k = q.live[i].first; k <= q.live[i].last; ++k) p.checkpoints[k].items.push_back(i);
    }
    const LiveSelectionOptions o{.method = LiveSelectionMethod::kGreedy};
    auto listed = SolveLiveSelection(p, o);
    auto intervals = SolveLiveSelection(q, o);
    ASSERT_TRUE(listed.ok() && intervals.ok()) << trial;
    EXPECT_EQ(intervals->choice, listed->choice) << "trial " << trial;
    EXPECT_EQ(intervals->total_cost, listed->total_cost) << "trial " << trial;
    EXPECT_EQ(intervals->feasible, listed->feasible) << "trial " << trial;
    EXPECT_EQ(intervals->choice, ScanGreedy(p)) << "trial " << trial;
    std::vector<int> lightest(n, 0);
    for (int i = 0; i < n; ++i) {
      for (int j = 1; j < static_cast<int>(q.items[i].size()); ++j) {
        const LiveOption& a = q.items[i][j];
        const LiveOption& b = q.items[i][lightest[i]];
        if (a.weight < b.weight || (a.weight == b.weight && a.cost < b.cost)) lightest[i] = j;
      }
    }
    upgraded += intervals->feasible && intervals->choice != lightest;
  }
  EXPECT_GT(upgraded, 25);
}

TEST(LiveSelectionTest, GreedyFeasibleAndMilpNearOptimalOnRandomProblems) {
  std::mt19937 rng(7);
  double greedy_gap_sum = 0, milp_gap_sum = 0;
  int counted = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const LiveSelectionProblem p = RandomProblem(rng, 7);
    const double opt = BruteForce(p);
    auto greedy = SolveLiveSelection(p, {.method = LiveSelectionMethod::kGreedy});
    auto milp = SolveLiveSelection(p, {.method = LiveSelectionMethod::kMilp, .relative_gap = 0});
    ASSERT_TRUE(greedy.ok() && milp.ok());
    if (!std::isfinite(opt)) {
      EXPECT_FALSE(greedy->feasible);
      continue;
    }
    ASSERT_TRUE(greedy->feasible) << "trial " << trial;
    ASSERT_TRUE(milp->feasible);
    EXPECT_GE(greedy->total_cost, opt - 1e-9);
    EXPECT_LE(milp->total_cost, greedy->total_cost + 1e-9);
    EXPECT_NEAR(milp->total_cost, opt, 1e-6 * std::max(1.0, opt)) << "trial " << trial;
    EXPECT_LE(milp->lower_bound, opt + 1e-6);
    const double denom = std::max(opt, 1e-9);
    greedy_gap_sum += (greedy->total_cost - opt) / denom;
    milp_gap_sum += (milp->total_cost - opt) / denom;
    ++counted;
  }
  ASSERT_GT(counted, 20);
  EXPECT_LT(milp_gap_sum / counted, 1e-6);
  EXPECT_LT(greedy_gap_sum / counted, 0.25);  // a heuristic: bounded, not optimal
}

TEST(LiveSelectionTest, ADeadlineInThePastKeepsTheGreedyAnswer) {
  // Random problems where CBC improves on the greedy: with the deadline passed, CBC is not run
  // and the answer is the greedy's, bound included; with a deadline ahead, CBC runs as without.
  std::mt19937 rng(7);
  int improved = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const LiveSelectionProblem p = RandomProblem(rng, 7);
    auto greedy = SolveLiveSelection(p, {.method = LiveSelectionMethod::kGreedy});
    auto milp = SolveLiveSelection(p, {.method = LiveSelectionMethod::kMilp, .relative_gap = 0});
    ASSERT_TRUE(greedy.ok() && milp.ok());
    if (milp->method != "milp") continue;
    ++improved;
    const auto now = std::chrono::steady_clock::now();
    auto late = SolveLiveSelection(p, {.method = LiveSelectionMethod::kMilp,
                                       .relative_gap = 0,
                                       .deadline = now - std::chrono::seconds(1)});
    ASSERT_TRUE(late.ok());
    EXPECT_EQ(late->choice, greedy->choice) << "trial " << trial;
    EXPECT_EQ(late->method, "greedy");
    EXPECT_EQ(late->lower_bound, greedy->lower_bound);
    auto ahead = SolveLiveSelection(p, {.method = LiveSelectionMethod::kMilp,
                                        .relative_gap = 0,
                                        .time_limit_s = 0,
                                        .deadline = now + std::chrono::hours(1)});
    ASSERT_TRUE(ahead.ok());
    EXPECT_EQ(ahead->choice, milp->choice) << "trial " << trial;
  }
  EXPECT_GT(improved, 3);
}

TEST(LiveSelectionTest, GreedyMatchesTheFullScanRuleOnRandomProblems) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(0, 1);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 2 + trial % 40;
    LiveSelectionProblem p = RandomProblem(rng, n);
    // Also options in any order, equal ratios (rounded values) and dominated ones.
    for (auto& item : p.items) {
      if (trial % 3 == 1) std::shuffle(item.begin(), item.end(), rng);
      if (trial % 4 == 2) {
        for (auto& o : item) {
          o.cost = std::round(o.cost * 2) / 2;
          o.weight = std::round(o.weight);
        }
        item.push_back({std::round(4 * u(rng)) / 2, std::round(8 * u(rng))});
      }
    }
    auto greedy = SolveLiveSelection(p, {.method = LiveSelectionMethod::kGreedy});
    ASSERT_TRUE(greedy.ok());
    EXPECT_EQ(greedy->choice, ScanGreedy(p)) << "trial " << trial << ", " << n << " items";
  }
}

}  // namespace
}  // namespace weft::algo
