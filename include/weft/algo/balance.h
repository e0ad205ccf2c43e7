#pragma once
// Multiway number partitioning ("makespan balancing"): assign items with non-negative sizes (e.g.
// per-microbatch latencies, per-sample FLOPs) to `bins` bins so that the largest bin load (the
// makespan) is small. Heuristics (LPT, Karmarkar-Karp) and an exact MILP for small instances.
// Every result reports its gap to the trivial lower bound max(max item, sum / bins).
// Thread-safety: pure functions, no shared state.
#include <span>
#include <string>
#include <vector>

#include "weft/algo/milp.h"
#include "weft/common/status.h"

namespace weft::algo {

struct BalanceResult {
  // bin_of_item[i] = bin (0-based) that item i is assigned to.
  std::vector<int> bin_of_item;
  // bin_load[b] = sum of the sizes of the items in bin b (same unit as the sizes).
  std::vector<double> bin_load;
  // max(bin_load).
  double makespan = 0.0;
  // max(max item, sum / bins): no assignment can do better.
  double lower_bound = 0.0;
  // makespan / lower_bound - 1 (0 when lower_bound == 0).
  double gap_to_lower_bound = 0.0;
  // True when the makespan is proven optimal (it meets the lower bound, or the MILP proved it).
  bool proven_optimal = false;

  // "8 items on 3 bins: makespan 12 (lower bound 11.7, gap 2.6%, optimal)"
  std::string BriefReport() const;
};

// Longest processing time first: items by decreasing size (ties: lower index first), each onto the
// least-loaded bin (ties: lowest bin). Makespan <= (4/3 - 1/(3 bins)) * optimum.
// O(n log n + n log bins).
StatusOr<BalanceResult> LongestProcessingTimeFirst(std::span<const double> sizes, int bins);

// LPT where item i may go only to the bins eligible[i] names (an empty list: every bin): items by
// decreasing size (ties: lower index first), each onto its least-loaded eligible bin (ties: lowest
// bin). With every bin eligible it is LongestProcessingTimeFirst. The lower bound stays
// max(max item, sum / bins). Used to dispatch encoder work over the replicas that may serve each
// microbatch (planning/graph_builder.cc) and FlowTrain's producers. O(n log n + sum |eligible|).
// Errors: as LongestProcessingTimeFirst, plus eligible.size() != sizes.size() or a bin outside
// [0, bins).
// `initial_loads` (empty: zeros; else one finite value >= 0 per bin) is work the bins already
// hold: list scheduling that carries loads from one batch of items to the next (bin_load and the
// makespan then count the items only).
StatusOr<BalanceResult> LongestProcessingTimeFirstEligible(
    std::span<const double> sizes, int bins, std::span<const std::vector<int>> eligible,
    std::span<const double> initial_loads = {});

// Karmarkar-Karp largest differencing method, k-way: every item starts as a k-tuple of bins
// (item, 0, ..., 0); repeatedly the two tuples with the largest spread (max - min bin) are merged,
// pairing the heaviest bin of one with the lightest bin of the other. Deterministic tie-breaks.
// Usually better than LPT on many small items. O(n log n * bins log bins + n * bins) time.
StatusOr<BalanceResult> KarmarkarKarp(std::span<const double> sizes, int bins);

struct ExactBalanceOptions {
  // Limits of the MILP (time limit, gap...). The warm start is filled in from the heuristics.
  MilpOptions milp = {};
  // Refuse instances with more than this many item x bin variables (the MILP grows as n * bins).
  int max_variables = 20000;
};

// Exact minimum makespan via a MILP (x[i][b] binary, symmetry broken by "item i uses a bin <= i"),
// warm-started with the better of LPT and Karmarkar-Karp; skips the MILP when a heuristic already
// meets the lower bound. proven_optimal is false when a MILP limit stopped the search (the result
// is then the best assignment found). For small n (tens of items).
StatusOr<BalanceResult> ExactBalance(std::span<const double> sizes,
                                     int bins,
                                     const ExactBalanceOptions& options = {});

}  // namespace weft::algo
