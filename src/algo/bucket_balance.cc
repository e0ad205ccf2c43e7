#include "weft/algo/bucket_balance.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <queue>
#include <random>
#include <tuple>

#include "weft/algo/milp.h"

namespace weft::algo {
namespace {

Status CheckInput(std::span<const TwoResourceItem> items, const BucketBalanceOptions& options) {
  WEFT_RETURN_IF_ERROR(options.Validate());
  for (size_t i = 0; i < items.size(); ++i) {
    const TwoResourceItem& it = items[i];
    if (!std::isfinite(it.first_s) || it.first_s < 0) {
      return InvalidArgumentError(
          fmt::format("items[{}].first_s = {}; must be finite and >= 0", i, it.first_s));
    }
    if (!std::isfinite(it.second_s) || it.second_s < 0) {
      return InvalidArgumentError(
          fmt::format("items[{}].second_s = {}; must be finite and >= 0", i, it.second_s));
    }
  }
  if (options.nonempty_buckets && items.size() < static_cast<size_t>(options.num_buckets)) {
    return InvalidArgumentError(
        fmt::format("items.size() = {} < num_buckets = {}; nonempty_buckets needs at least one "
                    "item per bucket",
                    items.size(), options.num_buckets));
  }
  return OkStatus();
}

// Fills loads, makespan, bound and gap from bucket_of_item.
BucketBalanceResult Finish(std::span<const TwoResourceItem> items,
                           int buckets,
                           std::vector<int> bucket_of_item,
                           std::string method) {
  BucketBalanceResult r;
  r.bucket_of_item = std::move(bucket_of_item);
  r.first_load_s.assign(buckets, 0.0);
  r.second_load_s.assign(buckets, 0.0);
  for (size_t i = 0; i < items.size(); ++i) {
    r.first_load_s[r.bucket_of_item[i]] += items[i].first_s;
    r.second_load_s[r.bucket_of_item[i]] += items[i].second_s;
  }
  for (int b = 0; b < buckets; ++b) {
    r.makespan_s = std::max({r.makespan_s, r.first_load_s[b], r.second_load_s[b]});
  }
  r.lower_bound_s = TwoResourceLowerBound(items, buckets);
  r.gap_to_lower_bound = r.lower_bound_s > 0 ? r.makespan_s / r.lower_bound_s - 1.0 : 0.0;
  // Relative tolerance: the sums in the bound are computed in floating point.
  r.proven_optimal = r.makespan_s <= r.lower_bound_s * (1 + 1e-12) + 1e-300;
  r.method = std::move(method);
  return r;
}

// Indices sorted by decreasing key (ties: lower index first).
template <typename Key>
std::vector<int> DecreasingOrder(std::span<const TwoResourceItem> items, Key key) {
  std::vector<int> order(items.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return key(items[a]) > key(items[b]); });
  return order;
}

// Greedy placement in `order` (see BalanceBucketsHeuristic). Returns bucket_of_item.
std::vector<int> GreedyPlace(std::span<const TwoResourceItem> items,
                             std::span<const int> order,
                             int buckets,
                             bool nonempty) {
  std::vector<double> first(buckets, 0.0), second(buckets, 0.0);
  std::vector<int> bucket_of_item(items.size(), 0);
  size_t pos = 0;
  if (nonempty) {
    for (; pos < static_cast<size_t>(buckets); ++pos) {
      const int i = order[pos];
      bucket_of_item[i] = static_cast<int>(pos);
      first[pos] = items[i].first_s;
      second[pos] = items[i].second_s;
    }
  }
  for (; pos < order.size(); ++pos) {
    const int i = order[pos];
    const double e = items[i].first_s, l = items[i].second_s;
    int best = 0;
    double best_max = std::numeric_limits<double>::infinity(), best_sum = best_max;
    for (int b = 0; b < buckets; ++b) {
      const double fe = first[b] + e, fl = second[b] + l;
      const double mx = std::max(fe, fl);
      if (mx < best_max || (mx == best_max && fe + fl < best_sum)) {
        best_max = mx;
        best_sum = fe + fl;
        best = b;
      }
    }
    bucket_of_item[i] = best;
    first[best] += e;
    second[best] += l;
  }
  return bucket_of_item;
}

// Local search of moves and swaps out of the critical bucket (see BalanceBucketsHeuristic).
// Returns the evaluations spent (setup counts as items + buckets).
int64_t LocalSearch(std::span<const TwoResourceItem> items,
                    int buckets,
                    bool nonempty,
                    int64_t budget,
                    std::vector<int>& bucket_of_item) {
  const int n = static_cast<int>(items.size());
  if (n == 0 || buckets < 2 || budget <= 0) return 0;
  std::vector<double> first(buckets, 0.0), second(buckets, 0.0);
  std::vector<std::vector<int>> members(buckets);
  std::vector<int> slot(n);  // position of item i in members[bucket_of_item[i]]
  for (int i = 0; i < n; ++i) {
    const int b = bucket_of_item[i];
    first[b] += items[i].first_s;
    second[b] += items[i].second_s;
    slot[i] = static_cast<int>(members[b].size());
    members[b].push_back(i);
  }
  auto remove = [&](int i) {
    const int b = bucket_of_item[i];
    const int last = members[b].back();
    members[b][slot[i]] = last;
    slot[last] = slot[i];
    members[b].pop_back();
    first[b] -= items[i].first_s;
    second[b] -= items[i].second_s;
  };
  auto insert = [&](int i, int b) {
    bucket_of_item[i] = b;
    slot[i] = static_cast<int>(members[b].size());
    members[b].push_back(i);
    first[b] += items[i].first_s;
    second[b] += items[i].second_s;
  };

  const double lower_bound = TwoResourceLowerBound(items, buckets);
  // Buckets by increasing cost max(first, second) (ties: lower index); the last is critical. Only
  // two buckets change per step; each is moved to its new place in O(distance).
  std::vector<double> cost(buckets);
  for (int b = 0; b < buckets; ++b) cost[b] = std::max(first[b], second[b]);
  std::vector<int> by_cost(buckets), position(buckets);
  std::iota(by_cost.begin(), by_cost.end(), 0);
  auto before = [&](int x, int y) { return cost[x] != cost[y] ? cost[x] < cost[y] : x < y; };
  std::sort(by_cost.begin(), by_cost.end(), before);
  for (int p = 0; p < buckets; ++p) position[by_cost[p]] = p;
  auto reposition = [&](int b) {
    int p = position[b];
    for (; p > 0 && before(b, by_cost[p - 1]); --p) {
      by_cost[p] = by_cost[p - 1];
      position[by_cost[p]] = p;
    }
    for (; p + 1 < buckets && before(by_cost[p + 1], b); ++p) {
      by_cost[p] = by_cost[p + 1];
      position[by_cost[p]] = p;
    }
    by_cost[p] = b;
    position[b] = p;
  };
  int64_t evaluations = n + buckets;
  while (evaluations < budget) {
    const int c = by_cost.back();
    const double cmax = cost[c];
    if (cmax <= lower_bound * (1 + 1e-12)) break;  // optimal
    const std::vector<int>& crit = members[c];
    const bool can_move = !nonempty || crit.size() > 1;
    // Partners from the least loaded up; the first one that admits a move or swap bringing both
    // buckets below cmax gets the best such move or swap (smallest max of the two new costs).
    double best = cmax;
    int best_a = -1, best_b = -1, best_k = -1;
    for (int idx = 0; idx + 1 < buckets && best_a < 0 && evaluations < budget; ++idx) {
      const int k = by_cost[idx];
      for (int a : crit) {
        const double ea = items[a].first_s, la = items[a].second_s;
        const double fc = first[c] - ea, sc = second[c] - la;
        const double fk = first[k] + ea, sk = second[k] + la;
        if (can_move) {
          const double pair = std::max(std::max(fc, sc), std::max(fk, sk));
          if (pair < best) {
            best = pair;
            best_a = a;
            best_b = -1;
          }
        }
        for (int b : members[k]) {
          const double eb = items[b].first_s, lb = items[b].second_s;
          const double pair = std::max(std::max(fc + eb, sc + lb), std::max(fk - eb, sk - lb));
          if (pair < best) {
            best = pair;
            best_a = a;
            best_b = b;
          }
        }
      }
      evaluations += static_cast<int64_t>(crit.size()) * (1 + members[k].size());
      if (best_a >= 0) best_k = k;
    }
    if (best_a < 0) break;
    remove(best_a);
    if (best_b >= 0) {
      remove(best_b);
      insert(best_b, c);
    }
    insert(best_a, best_k);
    cost[c] = std::max(first[c], second[c]);
    reposition(c);
    cost[best_k] = std::max(first[best_k], second[best_k]);
    reposition(best_k);
  }
  return evaluations;
}

// MILP warm-started with `incumbent` (see BalanceBucketsExact).
StatusOr<BucketBalanceResult> SolveExact(std::span<const TwoResourceItem> items,
                                         const BucketBalanceOptions& options,
                                         BucketBalanceResult incumbent) {
  const int n = static_cast<int>(items.size());
  const int m = options.num_buckets;
  if (incumbent.proven_optimal || n == 0) return incumbent;

  // Relabel buckets by first use so that item i sits in a bucket <= i (the symmetry breaking).
  std::vector<int> relabel(m, -1);
  int next_label = 0;
  std::vector<int> start_bucket(n);
  for (int i = 0; i < n; ++i) {
    int& label = relabel[incumbent.bucket_of_item[i]];
    if (label < 0) label = next_label++;
    start_bucket[i] = label;
  }

  MilpModel model;
  std::vector<std::vector<int>> x(n);
  std::vector<std::vector<LinearTerm>> first_terms(m), second_terms(m), count_terms(m);
  for (int i = 0; i < n; ++i) {
    std::vector<LinearTerm> one;
    for (int b = 0; b <= std::min(i, m - 1); ++b) {
      const int v = model.AddBinary(fmt::format("x_{}_{}", i, b));
      x[i].push_back(v);
      one.push_back({v, 1.0});
      first_terms[b].push_back({v, items[i].first_s});
      second_terms[b].push_back({v, items[i].second_s});
      count_terms[b].push_back({v, 1.0});
    }
    model.AddEqual(std::move(one), 1.0, fmt::format("assign_{}", i));
  }
  const int cmax = model.AddContinuous(incumbent.lower_bound_s, incumbent.makespan_s, "makespan_s");
  for (int b = 0; b < m; ++b) {
    first_terms[b].push_back({cmax, -1.0});
    model.AddLessEqual(std::move(first_terms[b]), 0.0, fmt::format("first_{}", b));
    second_terms[b].push_back({cmax, -1.0});
    model.AddLessEqual(std::move(second_terms[b]), 0.0, fmt::format("second_{}", b));
    if (options.nonempty_buckets) {
      model.AddGreaterEqual(std::move(count_terms[b]), 1.0, fmt::format("nonempty_{}", b));
    }
  }
  model.SetObjective({{cmax, 1.0}}, ObjectiveSense::kMinimize);
  MilpOptions milp;
  milp.time_limit_s = options.milp_time_limit_s;
  milp.max_nodes = options.milp_max_nodes;
  milp.lightweight = true;
  milp.warm_start.assign(model.num_variables(), 0.0);
  for (int i = 0; i < n; ++i) milp.warm_start[x[i][start_bucket[i]]] = 1.0;
  milp.warm_start[cmax] = incumbent.makespan_s;

  WEFT_ASSIGN_OR_RETURN(MilpResult solved, SolveMilp(model, milp));
  if (!solved.has_solution()) return incumbent;
  std::vector<int> bucket_of_item(n, 0);
  for (int i = 0; i < n; ++i) {
    for (size_t b = 0; b < x[i].size(); ++b) {
      if (solved.values[x[i][b]] > 0.5) bucket_of_item[i] = static_cast<int>(b);
    }
  }
  BucketBalanceResult result = Finish(items, m, std::move(bucket_of_item), "milp");
  if (options.nonempty_buckets) {
    std::vector<int> count(m, 0);
    for (int b : result.bucket_of_item) ++count[b];
    if (std::find(count.begin(), count.end(), 0) != count.end()) return incumbent;  // MILP noise
  }
  // Numerical noise in the MILP (or no improvement): keep the incumbent, proving it if CBC did.
  if (result.makespan_s >= incumbent.makespan_s) {
    if (solved.status == MilpStatus::kOptimal &&
        incumbent.makespan_s <= result.makespan_s * (1 + 1e-9)) {
      incumbent.proven_optimal = true;
    }
    return incumbent;
  }
  result.proven_optimal = result.proven_optimal || solved.status == MilpStatus::kOptimal;
  return result;
}

}  // namespace

Status BucketBalanceOptions::Validate() const {
  if (num_buckets < 1) {
    return InvalidArgumentError(fmt::format("num_buckets = {}; must be >= 1", num_buckets));
  }
  if (local_search_evaluations < 0) {
    return InvalidArgumentError(
        fmt::format("local_search_evaluations = {}; must be >= 0", local_search_evaluations));
  }
  if (!std::isfinite(milp_time_limit_s) || milp_time_limit_s < 0) {
    return InvalidArgumentError(
        fmt::format("milp_time_limit_s = {}; must be finite and >= 0", milp_time_limit_s));
  }
  if (milp_max_nodes < 0) {
    return InvalidArgumentError(fmt::format("milp_max_nodes = {}; must be >= 0", milp_max_nodes));
  }
  if (max_milp_variables < 0) {
    return InvalidArgumentError(
        fmt::format("max_milp_variables = {}; must be >= 0", max_milp_variables));
  }
  return OkStatus();
}

std::string BucketBalanceResult::BriefReport() const {
  return fmt::format(
      "{} items in {} buckets: makespan {:g} s (lower bound {:g} s, gap {:.2f}%{}, {})",
      bucket_of_item.size(), first_load_s.size(), makespan_s, lower_bound_s,
      100.0 * gap_to_lower_bound, proven_optimal ? ", optimal" : "", method);
}

double TwoResourceLowerBound(std::span<const TwoResourceItem> items, int buckets) {
  if (items.empty() || buckets < 1) return 0.0;
  double first = 0.0, second = 0.0, largest = 0.0;
  for (const TwoResourceItem& it : items) {
    first += it.first_s;
    second += it.second_s;
    largest = std::max({largest, it.first_s, it.second_s});
  }
  return std::max({first / buckets, second / buckets, largest});
}

StatusOr<BucketBalanceResult> TwoResourceLpt(std::span<const TwoResourceItem> items,
                                             const BucketBalanceOptions& options) {
  WEFT_RETURN_IF_ERROR(CheckInput(items, options));
  const int m = options.num_buckets;
  std::vector<double> first(m, 0.0), second(m, 0.0);
  // (load, item count, bucket): the smallest on top.
  using Entry = std::tuple<double, int, int>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  for (int b = 0; b < m; ++b) heap.push({0.0, 0, b});
  std::vector<int> bucket_of_item(items.size(), 0);
  for (int i : DecreasingOrder(
           items, [](const TwoResourceItem& it) { return std::max(it.first_s, it.second_s); })) {
    auto [load, count, b] = heap.top();
    heap.pop();
    bucket_of_item[i] = b;
    first[b] += items[i].first_s;
    second[b] += items[i].second_s;
    heap.push({std::max(first[b], second[b]), count + 1, b});
  }
  return Finish(items, m, std::move(bucket_of_item), "lpt");
}

StatusOr<BucketBalanceResult> BalanceBucketsHeuristic(std::span<const TwoResourceItem> items,
                                                      const BucketBalanceOptions& options) {
  WEFT_RETURN_IF_ERROR(CheckInput(items, options));
  const int m = options.num_buckets;
  const int64_t budget = options.local_search_evaluations;
  // LPT is a start too, so the heuristic is never worse than it.
  WEFT_ASSIGN_OR_RETURN(BucketBalanceResult best, TwoResourceLpt(items, options));
  if (best.proven_optimal) return best;
  std::vector<std::vector<int>> starts = {best.bucket_of_item};
  // The greedy orders cost N x m evaluations each; they run when the four fit in a quarter of the
  // budget (small and medium instances), else the local search gets it all.
  const int64_t greedy_cost = static_cast<int64_t>(items.size()) * m;
  int64_t left = budget;
  if (4 * greedy_cost <= budget / 4) {
    using Key = double (*)(const TwoResourceItem&);
    const std::array<Key, 4> keys = {
        [](const TwoResourceItem& it) { return std::max(it.first_s, it.second_s); },
        [](const TwoResourceItem& it) { return it.first_s + it.second_s; },
        [](const TwoResourceItem& it) { return it.first_s; },
        [](const TwoResourceItem& it) { return it.second_s; },
    };
    for (Key key : keys) {
      const std::vector<int> order = DecreasingOrder(items, key);
      BucketBalanceResult r =
          Finish(items, m, GreedyPlace(items, order, m, options.nonempty_buckets), "greedy");
      left -= greedy_cost;
      if (r.proven_optimal) return r;
      if (r.makespan_s < best.makespan_s) best = r;
      starts.push_back(std::move(r.bucket_of_item));
    }
  }
  // The local search from every start, each with an equal share of what is left.
  const int64_t share = left / static_cast<int64_t>(starts.size());
  for (std::vector<int>& start : starts) {
    left -= LocalSearch(items, m, options.nonempty_buckets, share, start);
    BucketBalanceResult r = Finish(items, m, std::move(start), "heuristic");
    if (r.makespan_s < best.makespan_s) best = std::move(r);
    if (best.proven_optimal) return best;
  }
  // Iterated local search on what is left: perturb the best assignment by 1-3 random swaps (the
  // first one out of the critical bucket; swaps keep every bucket's item count), search again,
  // keep the result if it is better. A fixed seed keeps it deterministic.
  const int n = static_cast<int>(items.size());
  std::mt19937_64 rng(0x5eed);
  while (left > 0 && m >= 2 && !best.proven_optimal) {
    std::vector<int> x = best.bucket_of_item;
    int critical = 0;
    for (int b = 1; b < m; ++b) {
      if (std::max(best.first_load_s[b], best.second_load_s[b]) >
          std::max(best.first_load_s[critical], best.second_load_s[critical])) {
        critical = b;
      }
    }
    const int swaps = 1 + static_cast<int>(rng() % 3);
    for (int s = 0; s < swaps; ++s) {
      // i: an item of the critical bucket for the first swap (found by a scan from a random
      // start), else any item; j: any item of another bucket (n tries at most).
      int i = static_cast<int>(rng() % n);
      if (s == 0) {
        for (int t = 0; t < n && x[i] != critical; ++t) i = (i + 1) % n;
      }
      for (int t = 0; t < n; ++t) {
        const int j = static_cast<int>(rng() % n);
        if (x[j] != x[i]) {
          std::swap(x[i], x[j]);
          break;
        }
      }
    }
    left -= 2 * static_cast<int64_t>(n) + m;  // perturbation and Finish
    left -= LocalSearch(items, m, options.nonempty_buckets, left, x);
    BucketBalanceResult r = Finish(items, m, std::move(x), "heuristic");
    if (r.makespan_s < best.makespan_s) best = std::move(r);
  }
  return best;
}

StatusOr<BucketBalanceResult> BalanceBucketsExact(std::span<const TwoResourceItem> items,
                                                  const BucketBalanceOptions& options) {
  WEFT_RETURN_IF_ERROR(CheckInput(items, options));
  const int64_t variables = static_cast<int64_t>(items.size()) * options.num_buckets;
  if (variables > options.max_milp_variables) {
    return FailedPreconditionError(
        fmt::format("BalanceBucketsExact: {} items x {} buckets = {} variables; exceeds "
                    "max_milp_variables ({})",
                    items.size(), options.num_buckets, variables, options.max_milp_variables));
  }
  WEFT_ASSIGN_OR_RETURN(BucketBalanceResult heuristic, BalanceBucketsHeuristic(items, options));
  return SolveExact(items, options, std::move(heuristic));
}

StatusOr<BucketBalanceResult> BalanceBuckets(std::span<const TwoResourceItem> items,
                                             const BucketBalanceOptions& options) {
  WEFT_ASSIGN_OR_RETURN(BucketBalanceResult heuristic, BalanceBucketsHeuristic(items, options));
  const int64_t variables = static_cast<int64_t>(items.size()) * options.num_buckets;
  if (heuristic.proven_optimal || variables > options.max_milp_variables ||
      options.milp_time_limit_s <= 0) {
    return heuristic;
  }
  return SolveExact(items, options, std::move(heuristic));
}

}  // namespace weft::algo
