#pragma once
// One-dimensional bin packing of integer item sizes (e.g. sequence lengths in tokens, bytes) into
// bins of a fixed integer capacity (e.g. a microbatch's max tokens). Used to pack variable-length
// sequences into microbatches (FlowTrain §3.4, DFLOP) with little padding.
// Thread-safety: pure functions, no shared state.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "weft/common/status.h"

namespace weft::algo {

struct BinPacking {
  // bin_of_item[i] = bin (0-based, in order of opening) holding item i.
  std::vector<int> bin_of_item;
  // bin_used[b] = sum of the sizes in bin b (<= capacity).
  std::vector<int64_t> bin_used;
  int64_t capacity = 0;
  // BestFit / BestFitLinearScan: the most bins open (offered to later items) at once; the closing
  // rules of BestFitOptions keep it below num_bins(). 0 for the other algorithms.
  int max_open_bins = 0;

  int num_bins() const { return static_cast<int>(bin_used.size()); }
  // num_bins * capacity - sum of sizes: the padding if every bin is padded to capacity.
  int64_t wasted() const;
  // items_of_bin[b] = the items of bin b, in increasing item index.
  std::vector<std::vector<int>> ItemsOfBins() const;
  // "10 items in 4 bins of 8192 (fill 87.5%)"
  std::string BriefReport() const;
};

// Next fit, items in the given order: keep one open bin, open a new one when the item does not fit.
// Uses at most 2 * optimum - 1 bins. O(n).
StatusOr<BinPacking> NextFit(std::span<const int64_t> sizes, int64_t capacity);

// First fit decreasing: items by decreasing size (ties: lower index first), each into the
// lowest-index bin with room, found by a max segment tree over bins. Uses at most
// 11/9 * optimum + 6/9 bins. O(n log n).
StatusOr<BinPacking> FirstFitDecreasing(std::span<const int64_t> sizes, int64_t capacity);

struct BestFitOptions {
  // Sort items by decreasing size first (best fit decreasing); false = online, in the given order.
  bool sort_decreasing = false;
  // A bin whose residual capacity falls below this is closed (never offered again), as FlowTrain
  // does with bins that cannot take even the shortest sequence. 0 = never close.
  int64_t close_below_residual = 0;
  // Algorithm 1's dynamic rule (FlowTrain §3.4, lines 10-11): after each placement, every open
  // bin whose residual is below the smallest size still PENDING (items not yet placed, in the
  // processing order) is closed. No pending item could enter such a bin, so the packing is the
  // same as without the rule; only the open set (and the tree the queries walk) shrinks. Combines
  // with close_below_residual (a bin closes under either rule).
  bool close_below_pending_min = false;
};

// Largest capacity BestFit() accepts: its segment tree has one leaf per residual value 0..capacity.
inline constexpr int64_t kMaxSegmentTreeCapacity = int64_t{1} << 22;

// Best fit (FlowTrain §3.4): each item goes into the open bin with the SMALLEST residual capacity
// >= its size (ties: lowest bin index), else into a new bin. The query runs on a segment tree over
// residual values 0..capacity (each leaf = the open bins with that residual; internal nodes say
// whether their range holds any), descending to the leftmost non-empty leaf >= size: O(log C) per
// item, O(C) memory. Requires capacity <= kMaxSegmentTreeCapacity (else FailedPrecondition: use
// BestFitLinearScan or scale the sizes). Uses at most 1.7 * optimum bins.
StatusOr<BinPacking> BestFit(std::span<const int64_t> sizes,
                             int64_t capacity,
                             const BestFitOptions& options = {});

// Same contract and results as BestFit, by scanning every open bin per item: O(n * bins), no limit
// on capacity. The baseline for benchmarks and tests.
StatusOr<BinPacking> BestFitLinearScan(std::span<const int64_t> sizes,
                                       int64_t capacity,
                                       const BestFitOptions& options = {});

}  // namespace weft::algo
