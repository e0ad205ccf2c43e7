#pragma once
// Two-resource bucket balancing (DFLOP §3.4, eq. 6): partition N items into m buckets
// (microbatches; m = N_mb x L_dp in DFLOP) where item i costs first_s (e.g. modality-encoder stage
// time) and second_s (e.g. LLM stage time), minimizing
//   C_max = max over buckets j of max(sum_{i in j} first_s_i, sum_{i in j} second_s_i).
// Every result reports C_max, the lower bound max(sum first / m, sum second / m, max_i max(first_i,
// second_i)), the gap to it and whether optimality is proven.
//
// Algorithms: TwoResourceLpt (DFLOP's fallback as the paper describes it), BalanceBucketsHeuristic
// (several greedy orders with a two-resource placement rule, then a local search of moves and swaps
// out of the critical bucket), BalanceBucketsExact (MILP on CBC warm-started by the heuristic) and
// BalanceBuckets (the hybrid default: heuristic, then the MILP when the gap is not closed and the
// model is small enough).
// Determinism: TwoResourceLpt and BalanceBucketsHeuristic are pure functions of their inputs (work
// budgets count evaluations, not time). The MILP stops at a wall-clock limit, so
// BalanceBucketsExact and BalanceBuckets may return a different (never worse than the heuristic)
// assignment from run to run when that limit is hit; with milp_max_nodes set and the time limit not
// reached they are deterministic too. Thread-safety: pure functions, no shared state (CBC solves
// are serialized inside SolveMilp).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "weft/common/status.h"

namespace weft::algo {

struct TwoResourceItem {
  double first_s = 0.0;   // e.g. encoder stage seconds
  double second_s = 0.0;  // e.g. LLM stage seconds
};

struct BucketBalanceOptions {
  // m, the number of buckets (microbatches).
  int num_buckets = 1;
  // Every bucket gets at least one item (needs N >= m): microbatches cannot be empty.
  bool nonempty_buckets = true;
  // Work budget of the heuristic, in evaluations (one = one item-to-bucket placement, move or
  // item-item swap examined; setup and bookkeeping count one per item). Deterministic; 0 = the
  // best start (LPT / greedy) without local search. The default takes about 1-1.5 ms at N = 2048.
  int64_t local_search_evaluations = 150'000;
  // Wall-clock limit of the MILP (BalanceBucketsExact: 0 = none; BalanceBuckets: 0 = skip the
  // MILP step).
  double milp_time_limit_s = 0.05;
  // Branch-and-bound node limit of the MILP (0 = none). Deterministic, unlike the time limit.
  int milp_max_nodes = 0;
  // The MILP is skipped (hybrid) or refused (exact) above this many item x bucket variables.
  int max_milp_variables = 4000;

  // One-line InvalidArgument naming the field, its value and the rule.
  Status Validate() const;
};

struct BucketBalanceResult {
  // bucket_of_item[i] = bucket (0-based) of item i.
  std::vector<int> bucket_of_item;
  // Per-bucket sums of first_s and second_s.
  std::vector<double> first_load_s;
  std::vector<double> second_load_s;
  // C_max = max over buckets of max(first_load_s, second_load_s).
  double makespan_s = 0.0;
  // TwoResourceLowerBound of the instance: no assignment can do better.
  double lower_bound_s = 0.0;
  // makespan_s / lower_bound_s - 1 (0 when lower_bound_s == 0).
  double gap_to_lower_bound = 0.0;
  // True when makespan_s meets the lower bound or the MILP proved it optimal.
  bool proven_optimal = false;
  // Which algorithm produced the assignment: "lpt", "greedy", "heuristic" (greedy + local search),
  // "milp".
  std::string method;

  // "2048 items in 128 buckets: makespan 1.234 s (lower bound 1.23 s, gap 0.3%, heuristic)"
  std::string BriefReport() const;
};

// max(sum first_s / buckets, sum second_s / buckets, max_i max(first_s_i, second_s_i)); 0 for no
// items. buckets must be >= 1.
double TwoResourceLowerBound(std::span<const TwoResourceItem> items, int buckets);

// DFLOP's fallback (§3.4.2): "sorts the data items in descending order of duration and iteratively
// assigns each item to the microbatch with the lowest current accumulated load". DFLOP's public
// code has no LPT (it runs CP-SAT only), so for two resources we read "duration" as the item's own
// C_max contribution max(first_s, second_s) and "accumulated load" as the bucket's
// max(first_load, second_load). Ties: lower item index first; least-loaded bucket, then the one
// with fewer items (so N >= m fills every bucket), then the lowest index. O(N log N + N log m).
StatusOr<BucketBalanceResult> TwoResourceLpt(std::span<const TwoResourceItem> items,
                                             const BucketBalanceOptions& options);

// Ours, deterministic, within local_search_evaluations:
// (1) Starts: TwoResourceLpt, and when their N x m evaluations each fit in a quarter of the budget,
//     greedy from four orders (decreasing max(first, second), first + second, first, second): with
//     nonempty_buckets the first m items of the order open the m buckets, then each item goes to
//     the bucket minimizing max(first_load + first_s, second_load + second_s), ties broken by the
//     smaller resulting first_load + second_load, then the lower index.
// (2) Local search from every start (equal shares of the budget): repeatedly take the critical
//     bucket c (largest max(first_load, second_load)) and the other buckets from the least loaded
//     up; for the first bucket k that admits a move of an item of c to k, or a swap of an item of
//     c with an item of k, bringing both buckets strictly below the current makespan, apply the
//     best such move or swap (smallest max of the two new costs). Ends when none exists.
// (3) Iterated local search on the budget left: perturb the best assignment by 1-3 random swaps
//     (the first out of the critical bucket; fixed seed), local search, keep it if better.
// Never worse than TwoResourceLpt; stops early at the lower bound.
StatusOr<BucketBalanceResult> BalanceBucketsHeuristic(std::span<const TwoResourceItem> items,
                                                      const BucketBalanceOptions& options);

// Exact MILP (binary x[i][b], C_max >= both loads of every bucket, at least one item per bucket
// when nonempty_buckets; symmetry broken by "item i uses a bucket <= i") warm-started with the
// heuristic, solved by CBC within milp_time_limit_s / milp_max_nodes. proven_optimal is false when
// a limit stopped the search (the result is then the best assignment found, never worse than the
// heuristic). FailedPrecondition above max_milp_variables. For small N (tens of items).
StatusOr<BucketBalanceResult> BalanceBucketsExact(std::span<const TwoResourceItem> items,
                                                  const BucketBalanceOptions& options);

// Hybrid default: the heuristic; if its gap to the lower bound is not closed and N x m <=
// max_milp_variables, the MILP warm-started with it within milp_time_limit_s; the better of the
// two.
StatusOr<BucketBalanceResult> BalanceBuckets(std::span<const TwoResourceItem> items,
                                             const BucketBalanceOptions& options);

}  // namespace weft::algo
