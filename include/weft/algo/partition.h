#pragma once
// Exact contiguous partitioning ("linear partition"): split a sequence of non-negative weights
// (e.g. per-layer latencies) into exactly `parts` non-empty contiguous parts so that the largest
// part sum is minimal. Used for pipeline stage partitioning (DIP §2.2, Cornstarch, FlowTrain).
// Thread-safety: pure functions, no shared state.
#include <span>
#include <string>
#include <vector>

#include "weft/common/status.h"

namespace weft::algo {

struct PartitionOptions {
  // Every part holds at least this many items (>= 1).
  int min_part_size = 1;
  // Every part holds at most this many items (0 = unlimited).
  int max_part_size = 0;
  // Fixed cost added to the sum of part j (same unit as the weights), e.g. the embedding on the
  // first pipeline stage or the LM head on the last. Empty = no overheads; else size == parts,
  // every entry finite and >= 0.
  std::vector<double> part_overhead = {};

  Status Validate(int parts) const;
};

struct ContiguousPartition {
  // boundaries[j] = index of the first item of part j; boundaries[0] == 0, strictly increasing.
  std::vector<int> boundaries;
  // part_sizes[j] = number of items in part j.
  std::vector<int> part_sizes;
  // part_sums[j] = sum of the weights in part j plus part_overhead[j] (same unit as the weights).
  std::vector<double> part_sums;
  double max_part_sum = 0.0;
  double min_part_sum = 0.0;

  // "4 parts, sizes [3 2 2 1], sums [...], max 7.5, min 6 (imbalance 25.0%)"
  std::string BriefReport() const;
};

// Minimizes the maximum part sum over all partitions of `weights` into exactly `parts` non-empty
// contiguous parts (respecting the size limits and overheads of `options`). Exact.
// Tie-break: among partitions with the optimal maximum, returns one that MAXIMIZES the minimum part
// sum (the most balanced one); remaining ties are broken deterministically (the last part starts
// as late as possible, then recursively the same rule on the remaining prefix).
// Complexity: O(n^2 * parts) time worst case (O(n * w * parts) where w is the number of items that
// fit under the optimal maximum), O(n * parts) memory.
// Errors: InvalidArgument for parts < 1, negative / non-finite weights, invalid options;
// FailedPrecondition when no partition satisfies the size limits (e.g. parts > n).
StatusOr<ContiguousPartition> MinMaxContiguousPartition(std::span<const double> weights,
                                                        int parts,
                                                        const PartitionOptions& options = {});

// Fewest non-empty contiguous parts whose sums are all <= `bound` (Cornstarch Algorithm 1: the
// fewest encoder stages meeting the LLM's per-stage time). The count comes from the greedy
// furthest-fit scan (optimal for contiguous parts under an upper bound); the parts are then the
// min-max partition into that many parts (so the result is as balanced as the count allows, and
// its max part sum is <= bound). `max_parts` caps the count (0 = unlimited).
// Complexity: O(n) for the count plus MinMaxContiguousPartition's.
// Errors: InvalidArgument for empty or negative / non-finite weights, a negative or non-finite
// bound, max_parts < 0; FailedPrecondition when one weight alone exceeds the bound or more than
// max_parts parts would be needed (the message names the count needed).
StatusOr<ContiguousPartition> FewestPartsUnderBound(std::span<const double> weights, double bound,
                                                    int max_parts = 0);

}  // namespace weft::algo
