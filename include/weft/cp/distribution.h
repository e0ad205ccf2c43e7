#pragma once
// Token distribution over G context-parallel ranks at block granularity (Cornstarch §4.3.2,
// §5.3, Appendix A): which rank computes the attention rows of which block, and each rank's load.
// Thread-safety: pure functions of value types.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"

namespace weft::cp {

enum class Method {
  kLpt,     // longest processing time first: blocks by workload desc, each to the least-loaded rank
  kZigzag,  // 2G contiguous chunks; rank r takes chunks r and 2G−1−r (balanced for one causal text)
  kRing,    // naive ring attention: G contiguous chunks, rank r takes chunk r
  kRandom,  // a seeded random permutation of the blocks dealt in equal-count chunks
};
std::string_view MethodName(Method method);  // "lpt", "zigzag", "ring", "random"
StatusOr<Method> ParseMethod(std::string_view name);
// "lpt,zigzag" → {kLpt, kZigzag}; names the bad entry.
StatusOr<std::vector<Method>> ParseMethods(std::string_view comma_list);

struct DistributionOptions {
  int ranks = 1;                // G (>= 1, <= blocks)
  Method method = Method::kLpt;
  uint64_t seed = 0;            // kRandom only
};

struct Distribution {
  Method method = Method::kLpt;
  std::vector<int> rank_of_block;                 // one entry per block
  std::vector<std::vector<int64_t>> blocks_of_rank;  // ascending block indices per rank
  std::vector<int64_t> load_of_rank;              // Σ workload of the rank's blocks
  int64_t MaxLoad() const;
  double MeanLoad() const;
  // max / mean load (1 when every load is 0): the attention slowdown against perfect balance.
  double Imbalance() const;
};

// Distributes blocks with the given workloads (>= 0 each). Chunked methods (ring, zigzag, random)
// cut into chunks whose sizes differ by at most one block, larger chunks first. LPT breaks ties by
// lower block index first and then by lower rank. Fails when ranks < 1 or ranks > blocks.
StatusOr<Distribution> Distribute(std::span<const int64_t> block_workloads,
                                  const DistributionOptions& options);

}  // namespace weft::cp
