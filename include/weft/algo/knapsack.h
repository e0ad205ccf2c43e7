#pragma once
// Multiple-choice knapsack: pick exactly one option per group (e.g. one parallelization / recompute
// strategy per layer) minimizing the total cost (e.g. latency_s) subject to a capacity on the total
// weight (e.g. memory bytes). Also the Pareto frontier of (total weight, total cost) and DIP §5.3's
// candidate selection (fastest, most memory-efficient, and the best in S-2 memory buckets).
// Thread-safety: pure functions, no shared state.
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "weft/common/status.h"

namespace weft::algo {

struct KnapsackOption {
  double cost = 0.0;    // any unit (e.g. seconds); finite
  double weight = 0.0;  // any unit (e.g. bytes); finite and >= 0
};
using KnapsackGroup = std::vector<KnapsackOption>;

struct KnapsackOptions {
  // Weights are rounded UP to multiples of this quantum (and the capacity DOWN), so the returned
  // selection always fits the true capacity. 0 = automatic: capacity / max_weight_cells, or 1 when
  // all weights and the capacity are integers and the capacity fits in max_weight_cells.
  double weight_quantum = 0.0;
  // Upper bound on the number of weight cells of the DP table (memory: groups x cells ints).
  int max_weight_cells = 1 << 16;

  Status Validate() const;
};

struct KnapsackSelection {
  // choice[g] = index of the option picked in group g.
  std::vector<int> choice;
  double total_cost = 0.0;
  double total_weight = 0.0;  // true (unrounded) weight
  // True when every weight is a multiple of the quantum used, so the DP optimum is the true one;
  // false means optimal for the rounded-up weights (feasible, possibly not optimal).
  bool exact = false;
};

// Exact DP over discretized weights: O(groups x options x cells) time, O(groups x cells) memory.
// Ties: the lowest cost, then the lowest rounded weight, then the lowest option indices.
// Errors: InvalidArgument for bad numbers or an empty group; ResourceExhausted when even the
// lightest option of every group exceeds the capacity.
StatusOr<KnapsackSelection> SolveMultipleChoiceKnapsack(std::span<const KnapsackGroup> groups,
                                                        double capacity,
                                                        const KnapsackOptions& options = {});

struct ParetoOptions {
  // Keep at most this many points per intermediate frontier (evenly thinned, always keeping both
  // ends); 0 = unlimited (exact, but the frontier may grow as the product of the group sizes).
  int max_points = 0;
  // Drop selections heavier than this (infinity = no capacity).
  double max_total_weight = std::numeric_limits<double>::infinity();
};

struct ParetoFrontier {
  // Non-dominated selections by increasing total weight and strictly decreasing total cost.
  // Among selections with equal (weight, cost) the one with the lowest option indices is kept.
  std::vector<KnapsackSelection> points;
  // False when max_points thinned an intermediate frontier.
  bool exact = true;
};

// Pareto frontier of (total weight, total cost) over all selections, built group by group with
// dominance pruning: O(sum over groups of |frontier| x options x log) time.
StatusOr<ParetoFrontier> MultipleChoiceParetoFrontier(std::span<const KnapsackGroup> groups,
                                                      const ParetoOptions& options = {});

// DIP §5.3 candidate selection, at most `num_candidates` (S >= 2) distinct selections by increasing
// weight: the most memory-efficient (lightest; cheapest among the lightest), the fastest (cheapest;
// lightest among the cheapest), and for each of S-2 equal-width weight buckets splitting
// (lightest weight, fastest weight) the cheapest selection whose weight lies in the bucket (a
// bucket with no frontier point adds nothing: every selection in it is dominated by a lighter one).
StatusOr<std::vector<KnapsackSelection>> SelectMemoryBucketCandidates(
    std::span<const KnapsackGroup> groups,
    int num_candidates,
    const ParetoOptions& options = {});

}  // namespace weft::algo
