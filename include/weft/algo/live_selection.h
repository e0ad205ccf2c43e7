#pragma once
// Multiple-choice selection under live-set capacities (DIP §5.3, per rank): each item (an (F, B)
// stage pair) picks exactly one option (a memory candidate: time cost, bytes held); each
// checkpoint (the start of a stage on the rank) names the items live at that moment and a byte
// budget; minimize the total cost subject to every checkpoint's live bytes <= its budget.
// Solved greedily (lightest options first, then the best time saved per byte while every
// checkpoint still fits) and, optionally, with CBC warm-started by the greedy solution.
// Thread-safety: pure functions (CBC solves are serialized inside algo::SolveMilp).
#include <chrono>
#include <string>
#include <vector>

#include "weft/common/status.h"

namespace weft::algo {

struct LiveOption {
  double cost = 0.0;    // e.g. extra seconds of recomputation; finite
  double weight = 0.0;  // e.g. bytes held while live; finite, >= 0
};

struct LiveCheckpoint {
  std::vector<int> items;  // items live at this checkpoint (distinct indices)
  double budget = 0.0;     // the sum of their chosen weights must not exceed it
};

// The checkpoints first..last (inclusive) of an item; last < first: none.
struct LiveInterval {
  int first = 0;
  int last = -1;
};

struct LiveSelectionProblem {
  std::vector<std::vector<LiveOption>> items;  // options per item, each non-empty
  std::vector<LiveCheckpoint> checkpoints;
  // Interval form (optional; e.g. a rank's stage pairs, each live from its forward to its
  // backward): when non-empty, one entry per item, the item is live exactly at those
  // checkpoints, and every checkpoint's `items` is empty. The same problem as the list form
  // whose checkpoints name their live items in increasing order (and solved to the same answer),
  // built in O(items + checkpoints) instead of O(Σ live-set sizes); when the weights are
  // integers and weights and budgets are at most 2^50 (byte counts: the greedy's arithmetic is
  // then exact in any order) the greedy checks and updates an item's checkpoints on a segment
  // tree in O(log checkpoints).
  std::vector<LiveInterval> live;

  Status Validate() const;
};

enum class LiveSelectionMethod {
  kGreedy,  // greedy only
  kMilp,    // greedy, then CBC warm-started by it (relative gap, time limit below)
};

struct LiveSelectionOptions {
  LiveSelectionMethod method = LiveSelectionMethod::kMilp;
  double relative_gap = 0.05;  // CBC stops within this gap of its bound
  double time_limit_s = 0.05;  // CBC wall-clock limit (the greedy answer stands if it expires)
  // CBC is not started at or after this time, and its limit is cut to the time left (the greedy
  // answer stands). CBC checks its limit only between branch-and-bound nodes: one solve can still
  // run past it by its root's cost.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  int max_nodes = 2000;        // CBC node limit (deterministic)
  bool lightweight_milp = true;  // CBC without preprocessing / cuts / heuristics (MilpOptions)
};

struct LiveSelection {
  std::vector<int> choice;  // option per item
  double total_cost = 0.0;
  bool feasible = false;  // every checkpoint fits (false: the lightest options do not fit)
  // Lower bound on the optimal cost (CBC's bound; the greedy's own cost when it is provably
  // optimal, i.e. every item got its cheapest option; else the sum of cheapest options).
  double lower_bound = 0.0;
  std::string method;  // "greedy", "milp", "greedy (milp no better)"
};

// Errors: InvalidArgument for malformed problems. An infeasible problem is not an error: the
// result has feasible = false and every item at its lightest option.
StatusOr<LiveSelection> SolveLiveSelection(const LiveSelectionProblem& problem,
                                           const LiveSelectionOptions& options = {});

}  // namespace weft::algo
