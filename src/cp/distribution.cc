#include "weft/cp/distribution.h"

#include <algorithm>
#include <numeric>
#include <queue>
#include <random>
#include <utility>

#include <fmt/format.h>

namespace weft::cp {
namespace internal {
namespace {

// Sizes of `parts` contiguous chunks of `n` items that differ by at most one, larger first.
std::vector<int64_t> ChunkSizes(int64_t n, int64_t parts) {
  std::vector<int64_t> sizes(parts, n / parts);
  for (int64_t i = 0; i < n % parts; ++i) ++sizes[i];
  return sizes;
}

// Assigns items order[0..n) chunk by chunk: chunk c goes to rank_of_chunk[c].
void AssignChunks(std::span<const int64_t> order, std::span<const int64_t> sizes,
                  std::span<const int> rank_of_chunk, std::vector<int>& rank_of_block) {
  size_t at = 0;
  for (size_t c = 0; c < sizes.size(); ++c) {
    for (int64_t i = 0; i < sizes[c]; ++i) rank_of_block[order[at++]] = rank_of_chunk[c];
  }
}

}  // namespace
}  // namespace internal

std::string_view MethodName(Method method) {
  switch (method) {
    case Method::kLpt: return "lpt";
    case Method::kZigzag: return "zigzag";
    case Method::kRing: return "ring";
    case Method::kRandom: return "random";
  }
  return "?";
}

StatusOr<Method> ParseMethod(std::string_view name) {
  for (Method m : {Method::kLpt, Method::kZigzag, Method::kRing, Method::kRandom}) {
    if (name == MethodName(m)) return m;
  }
  return InvalidArgumentError(
      fmt::format("method = \"{}\"; must be one of lpt, zigzag, ring, random", name));
}

StatusOr<std::vector<Method>> ParseMethods(std::string_view comma_list) {
  std::vector<Method> out;
  size_t start = 0;
  while (start <= comma_list.size()) {
    const size_t end = std::min(comma_list.find(',', start), comma_list.size());
    WEFT_ASSIGN_OR_RETURN(Method m, ParseMethod(comma_list.substr(start, end - start)));
    out.push_back(m);
    start = end + 1;
  }
  return out;
}

int64_t Distribution::MaxLoad() const {
  return load_of_rank.empty() ? 0 : *std::max_element(load_of_rank.begin(), load_of_rank.end());
}

double Distribution::MeanLoad() const {
  if (load_of_rank.empty()) return 0;
  return static_cast<double>(std::accumulate(load_of_rank.begin(), load_of_rank.end(), int64_t{0})) /
         static_cast<double>(load_of_rank.size());
}

double Distribution::Imbalance() const {
  const double mean = MeanLoad();
  return mean > 0 ? static_cast<double>(MaxLoad()) / mean : 1.0;
}

StatusOr<Distribution> Distribute(std::span<const int64_t> w, const DistributionOptions& o) {
  const int64_t n = static_cast<int64_t>(w.size());
  if (o.ranks < 1) return InvalidArgumentError(fmt::format("ranks = {}; must be >= 1", o.ranks));
  if (o.ranks > n) {
    return InvalidArgumentError(fmt::format(
        "ranks = {}; must be <= blocks ({}): every rank needs at least one block", o.ranks, n));
  }
  for (int64_t b = 0; b < n; ++b) {
    if (w[b] < 0) {
      return InvalidArgumentError(fmt::format("block_workloads[{}] = {}; must be >= 0", b, w[b]));
    }
  }
  const int g = o.ranks;
  Distribution d;
  d.method = o.method;
  d.rank_of_block.assign(n, 0);
  std::vector<int64_t> identity(n);
  std::iota(identity.begin(), identity.end(), 0);
  switch (o.method) {
    case Method::kRing: {
      std::vector<int> ranks(g);
      std::iota(ranks.begin(), ranks.end(), 0);
      internal::AssignChunks(identity, internal::ChunkSizes(n, g), ranks, d.rank_of_block);
      break;
    }
    case Method::kZigzag: {
      // 2G chunks (fewer blocks than 2G: some chunks are empty); chunk c → rank min(c, 2G−1−c).
      std::vector<int> ranks(2 * g);
      for (int c = 0; c < 2 * g; ++c) ranks[c] = std::min(c, 2 * g - 1 - c);
      internal::AssignChunks(identity, internal::ChunkSizes(n, 2 * g), ranks, d.rank_of_block);
      break;
    }
    case Method::kRandom: {
      std::mt19937_64 rng(o.seed);
      std::vector<int64_t> order = identity;
      for (int64_t i = n - 1; i > 0; --i) {  // Fisher–Yates with a portable draw
        std::swap(order[i], order[static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1))]);
      }
      std::vector<int> ranks(g);
      std::iota(ranks.begin(), ranks.end(), 0);
      internal::AssignChunks(order, internal::ChunkSizes(n, g), ranks, d.rank_of_block);
      break;
    }
    case Method::kLpt: {
      std::vector<int64_t> order = identity;
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t a, int64_t b) { return w[a] > w[b]; });
      using Entry = std::pair<int64_t, int>;  // (load, rank): the smallest pops first
      std::vector<Entry> heap_storage;
      heap_storage.reserve(g);
      for (int r = 0; r < g; ++r) heap_storage.emplace_back(0, r);
      std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap(
          std::greater<>{}, std::move(heap_storage));
      for (int64_t b : order) {
        auto [load, r] = heap.top();
        heap.pop();
        d.rank_of_block[b] = r;
        heap.emplace(load + w[b], r);
      }
      break;
    }
  }
  d.blocks_of_rank.assign(g, {});
  d.load_of_rank.assign(g, 0);
  for (int64_t b = 0; b < n; ++b) {
    d.blocks_of_rank[d.rank_of_block[b]].push_back(b);
    d.load_of_rank[d.rank_of_block[b]] += w[b];
  }
  return d;
}

}  // namespace weft::cp
