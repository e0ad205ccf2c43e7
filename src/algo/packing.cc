#include "weft/algo/packing.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <numeric>

namespace weft::algo {
namespace {

Status CheckInput(std::span<const int64_t> sizes, int64_t capacity) {
  if (capacity < 1)
    return InvalidArgumentError(fmt::format("capacity = {}; must be >= 1", capacity));
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 0 || sizes[i] > capacity) {
      return InvalidArgumentError(
          fmt::format("sizes[{}] = {}; must be in [0, capacity = {}]", i, sizes[i], capacity));
    }
  }
  return OkStatus();
}

Status CheckOptions(const BestFitOptions& options, int64_t capacity) {
  if (options.close_below_residual < 0 || options.close_below_residual > capacity) {
    return InvalidArgumentError(
        fmt::format("best_fit_options.close_below_residual = {}; must be in [0, capacity = {}]",
                    options.close_below_residual, capacity));
  }
  return OkStatus();
}

std::vector<int> Order(std::span<const int64_t> sizes, bool decreasing) {
  std::vector<int> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  if (decreasing) {
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return sizes[a] > sizes[b]; });
  }
  return order;
}

// pending_min[k] = the smallest size among order[k..n-1]; capacity + 1 at k = n (nothing pending:
// every bin may close). Empty unless the dynamic rule is on.
std::vector<int64_t> PendingMin(std::span<const int64_t> sizes,
                                std::span<const int> order,
                                int64_t capacity,
                                const BestFitOptions& options) {
  if (!options.close_below_pending_min) return {};
  std::vector<int64_t> pending_min(order.size() + 1, capacity + 1);
  for (size_t k = order.size(); k-- > 0;) {
    pending_min[k] = std::min(pending_min[k + 1], sizes[order[k]]);
  }
  return pending_min;
}

BinPacking Start(std::span<const int64_t> sizes, int64_t capacity) {
  BinPacking p;
  p.capacity = capacity;
  p.bin_of_item.assign(sizes.size(), -1);
  return p;
}

// Open bins indexed by residual capacity 0..capacity. occupied_[node] counts the open bins whose
// residual lies in the node's range; a leaf's bins sit in a min-heap so that ties go to the lowest
// bin index.
class ResidualSegmentTree {
 public:
  explicit ResidualSegmentTree(int64_t capacity) {
    leaves_ = 1;
    while (leaves_ < capacity + 1) leaves_ *= 2;
    occupied_.assign(2 * leaves_, 0);
    heap_of_leaf_.assign(capacity + 1, -1);
  }

  void Insert(int64_t residual, int bin) {
    int& slot = heap_of_leaf_[residual];
    if (slot < 0) {
      if (free_heaps_.empty()) {
        slot = static_cast<int>(heaps_.size());
        heaps_.emplace_back();
      } else {
        slot = free_heaps_.back();
        free_heaps_.pop_back();
      }
    }
    auto& heap = heaps_[slot];
    heap.push_back(bin);
    std::push_heap(heap.begin(), heap.end(), std::greater<int>());
    for (int64_t node = leaves_ + residual; node >= 1; node /= 2) ++occupied_[node];
  }

  // Removes and returns the lowest-index bin with the smallest residual >= size, or -1.
  int TakeBestFit(int64_t size, int64_t* residual) {
    const int64_t leaf = FindFirstAtLeast(1, 0, leaves_ - 1, size);
    if (leaf < 0) return -1;
    auto& heap = heaps_[heap_of_leaf_[leaf]];
    std::pop_heap(heap.begin(), heap.end(), std::greater<int>());
    const int bin = heap.back();
    heap.pop_back();
    if (heap.empty()) Release(leaf);
    for (int64_t node = leaves_ + leaf; node >= 1; node /= 2) --occupied_[node];
    *residual = leaf;
    return bin;
  }

  // Removes every bin whose residual is < threshold; returns how many.
  int CloseBelow(int64_t threshold) {
    int closed = 0;
    for (int64_t leaf = FindFirstAtLeast(1, 0, leaves_ - 1, 0); leaf >= 0 && leaf < threshold;
         leaf = FindFirstAtLeast(1, 0, leaves_ - 1, 0)) {
      auto& heap = heaps_[heap_of_leaf_[leaf]];
      const int count = static_cast<int>(heap.size());
      heap.clear();
      Release(leaf);
      for (int64_t node = leaves_ + leaf; node >= 1; node /= 2) occupied_[node] -= count;
      closed += count;
    }
    return closed;
  }

  int open_bins() const { return occupied_[1]; }

 private:
  void Release(int64_t leaf) {
    free_heaps_.push_back(heap_of_leaf_[leaf]);
    heap_of_leaf_[leaf] = -1;
  }

  // Leftmost occupied leaf in [max(lo, size), hi] under `node`, or -1. Visits O(log C) nodes: a
  // subtree entirely >= size with occupied > 0 always yields a leaf.
  int64_t FindFirstAtLeast(int64_t node, int64_t lo, int64_t hi, int64_t size) const {
    if (hi < size || occupied_[node] == 0) return -1;
    if (lo == hi) return lo;
    const int64_t mid = lo + (hi - lo) / 2;
    const int64_t left = FindFirstAtLeast(2 * node, lo, mid, size);
    if (left >= 0) return left;
    return FindFirstAtLeast(2 * node + 1, mid + 1, hi, size);
  }

  int64_t leaves_ = 1;
  std::vector<int> occupied_;
  // The open bins of each occupied leaf: a min-heap from a pool (heap_of_leaf_[r] = its index, -1
  // when the leaf is empty; emptied heaps are reused), so building the tree costs two flat O(C)
  // arrays rather than C + 1 vectors.
  std::vector<int> heap_of_leaf_;
  std::vector<std::vector<int>> heaps_;
  std::vector<int> free_heaps_;
};

}  // namespace

int64_t BinPacking::wasted() const {
  int64_t used = 0;
  for (int64_t u : bin_used) used += u;
  return static_cast<int64_t>(bin_used.size()) * capacity - used;
}

std::vector<std::vector<int>> BinPacking::ItemsOfBins() const {
  std::vector<std::vector<int>> items(bin_used.size());
  for (size_t i = 0; i < bin_of_item.size(); ++i)
    items[bin_of_item[i]].push_back(static_cast<int>(i));
  return items;
}

std::string BinPacking::BriefReport() const {
  const double total = static_cast<double>(num_bins()) * static_cast<double>(capacity);
  return fmt::format("{} items in {} bins of {} (fill {:.1f}%)", bin_of_item.size(), num_bins(),
                     capacity, total > 0 ? 100.0 * (total - wasted()) / total : 0.0);
}

StatusOr<BinPacking> NextFit(std::span<const int64_t> sizes, int64_t capacity) {
  WEFT_RETURN_IF_ERROR(CheckInput(sizes, capacity));
  BinPacking p = Start(sizes, capacity);
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (p.bin_used.empty() || p.bin_used.back() + sizes[i] > capacity) p.bin_used.push_back(0);
    p.bin_used.back() += sizes[i];
    p.bin_of_item[i] = p.num_bins() - 1;
  }
  return p;
}

StatusOr<BinPacking> FirstFitDecreasing(std::span<const int64_t> sizes, int64_t capacity) {
  WEFT_RETURN_IF_ERROR(CheckInput(sizes, capacity));
  BinPacking p = Start(sizes, capacity);
  const int n = static_cast<int>(sizes.size());
  if (n == 0) return p;
  // Max segment tree over (at most n) bins; unopened bins have full residual, so the leftmost bin
  // with room is an open one when one fits, else the next unopened one.
  int leaves = 1;
  while (leaves < n) leaves *= 2;
  std::vector<int64_t> max_residual(2 * leaves, capacity);
  for (int i : Order(sizes, /*decreasing=*/true)) {
    int node = 1;
    while (node < leaves) {
      node = max_residual[2 * node] >= sizes[i] ? 2 * node : 2 * node + 1;
    }
    const int bin = node - leaves;
    max_residual[node] -= sizes[i];
    for (node /= 2; node >= 1; node /= 2) {
      max_residual[node] = std::max(max_residual[2 * node], max_residual[2 * node + 1]);
    }
    if (bin >= p.num_bins()) p.bin_used.resize(bin + 1, 0);
    p.bin_used[bin] += sizes[i];
    p.bin_of_item[i] = bin;
  }
  return p;
}

StatusOr<BinPacking> BestFit(std::span<const int64_t> sizes,
                             int64_t capacity,
                             const BestFitOptions& options) {
  WEFT_RETURN_IF_ERROR(CheckInput(sizes, capacity));
  WEFT_RETURN_IF_ERROR(CheckOptions(options, capacity));
  if (capacity > kMaxSegmentTreeCapacity) {
    return FailedPreconditionError(fmt::format(
        "BestFit: capacity = {}; must be <= {} for the segment tree (use BestFitLinearScan or "
        "scale the sizes)",
        capacity, kMaxSegmentTreeCapacity));
  }
  BinPacking p = Start(sizes, capacity);
  ResidualSegmentTree tree(capacity);
  const std::vector<int> order = Order(sizes, options.sort_decreasing);
  const std::vector<int64_t> pending_min = PendingMin(sizes, order, capacity, options);
  for (size_t k = 0; k < order.size(); ++k) {
    const int i = order[k];
    int64_t residual = 0;
    int bin = tree.TakeBestFit(sizes[i], &residual);
    if (bin < 0) {
      bin = p.num_bins();
      p.bin_used.push_back(0);
      residual = capacity;
    }
    p.bin_used[bin] += sizes[i];
    p.bin_of_item[i] = bin;
    residual -= sizes[i];
    const int64_t floor = pending_min.empty()
                              ? options.close_below_residual
                              : std::max(options.close_below_residual, pending_min[k + 1]);
    if (residual >= floor) tree.Insert(residual, bin);
    // The open bins count before the closing rules run on the bins already in the tree.
    p.max_open_bins = std::max(p.max_open_bins, tree.open_bins() + (residual >= floor ? 0 : 1));
    if (!pending_min.empty() && pending_min[k + 1] > pending_min[k]) {
      tree.CloseBelow(pending_min[k + 1]);
    }
  }
  return p;
}

StatusOr<BinPacking> BestFitLinearScan(std::span<const int64_t> sizes,
                                       int64_t capacity,
                                       const BestFitOptions& options) {
  WEFT_RETURN_IF_ERROR(CheckInput(sizes, capacity));
  WEFT_RETURN_IF_ERROR(CheckOptions(options, capacity));
  BinPacking p = Start(sizes, capacity);
  std::vector<char> open;
  const std::vector<int> order = Order(sizes, options.sort_decreasing);
  const std::vector<int64_t> pending_min = PendingMin(sizes, order, capacity, options);
  for (size_t k = 0; k < order.size(); ++k) {
    const int i = order[k];
    int bin = -1;
    int64_t best_residual = capacity + 1;
    for (int b = 0; b < p.num_bins(); ++b) {
      const int64_t residual = capacity - p.bin_used[b];
      if (open[b] && residual >= sizes[i] && residual < best_residual) {
        best_residual = residual;
        bin = b;
      }
    }
    if (bin < 0) {
      bin = p.num_bins();
      p.bin_used.push_back(0);
      open.push_back(1);
    }
    p.bin_used[bin] += sizes[i];
    p.bin_of_item[i] = bin;
    p.max_open_bins =
        std::max(p.max_open_bins, static_cast<int>(std::count(open.begin(), open.end(), 1)));
    if (capacity - p.bin_used[bin] < options.close_below_residual) open[bin] = 0;
    if (!pending_min.empty()) {
      for (int b = 0; b < p.num_bins(); ++b) {
        if (capacity - p.bin_used[b] < pending_min[k + 1]) open[b] = 0;
      }
    }
  }
  return p;
}

}  // namespace weft::algo
