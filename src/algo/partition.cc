#include "weft/algo/partition.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace weft::algo {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

Status PartitionOptions::Validate(int parts) const {
  if (min_part_size < 1) {
    return InvalidArgumentError(
        fmt::format("partition_options.min_part_size = {}; must be >= 1", min_part_size));
  }
  if (max_part_size < 0) {
    return InvalidArgumentError(
        fmt::format("partition_options.max_part_size = {}; must be >= 0 (0 = unlimited)",
                    max_part_size));
  }
  if (max_part_size != 0 && max_part_size < min_part_size) {
    return InvalidArgumentError(fmt::format(
        "partition_options.max_part_size = {}; must be 0 (unlimited) or >= min_part_size ({})",
        max_part_size, min_part_size));
  }
  if (!part_overhead.empty() && static_cast<int>(part_overhead.size()) != parts) {
    return InvalidArgumentError(fmt::format(
        "partition_options.part_overhead has {} entries; must be empty or equal parts ({})",
        part_overhead.size(), parts));
  }
  for (size_t j = 0; j < part_overhead.size(); ++j) {
    if (!std::isfinite(part_overhead[j]) || part_overhead[j] < 0) {
      return InvalidArgumentError(fmt::format(
          "partition_options.part_overhead[{}] = {}; must be finite and >= 0", j, part_overhead[j]));
    }
  }
  return OkStatus();
}

std::string ContiguousPartition::BriefReport() const {
  const double imbalance = max_part_sum > 0 ? (max_part_sum - min_part_sum) / max_part_sum : 0.0;
  return fmt::format("{} parts, sizes [{}], sums [{}], max {:g}, min {:g} (imbalance {:.1f}%)",
                     part_sizes.size(), fmt::join(part_sizes, " "), fmt::join(part_sums, " "),
                     max_part_sum, min_part_sum, 100.0 * imbalance);
}

StatusOr<ContiguousPartition> MinMaxContiguousPartition(std::span<const double> weights,
                                                        int parts,
                                                        const PartitionOptions& options) {
  if (parts < 1) {
    return InvalidArgumentError(fmt::format("parts = {}; must be >= 1", parts));
  }
  WEFT_RETURN_IF_ERROR(options.Validate(parts));
  for (size_t i = 0; i < weights.size(); ++i) {
    if (!std::isfinite(weights[i]) || weights[i] < 0) {
      return InvalidArgumentError(
          fmt::format("weights[{}] = {}; must be finite and >= 0", i, weights[i]));
    }
  }
  const int n = static_cast<int>(weights.size());
  const int min_size = options.min_part_size;
  const int max_size = options.max_part_size == 0 ? n : options.max_part_size;
  if (static_cast<long long>(parts) * min_size > n ||
      static_cast<long long>(parts) * max_size < n) {
    return FailedPreconditionError(fmt::format(
        "cannot split {} items into {} contiguous parts of {}..{} items each", n, parts, min_size,
        max_size));
  }

  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + weights[i];
  auto overhead = [&](int j) { return options.part_overhead.empty() ? 0.0 : options.part_overhead[j]; };
  // Sum of part j covering items [p, i). Always computed the same way so that phase-2 comparisons
  // against the phase-1 optimum are exact.
  auto part_sum = [&](int j, int p, int i) { return (prefix[i] - prefix[p]) + overhead(j); };

  const int stride = n + 1;
  // Phase 1: best[j][i] = minimal max part sum of prefix [0, i) split into j parts.
  std::vector<double> best((parts + 1) * stride, kInf);
  best[0] = 0.0;
  for (int j = 1; j <= parts; ++j) {
    const double* prev = &best[(j - 1) * stride];
    double* cur = &best[j * stride];
    for (int i = j * min_size; i <= n; ++i) {
      double value = kInf;
      // p = start of part j-1 (0-based part index); scanning p downwards grows the part sum, so
      // stop once it alone is no better than the best found.
      for (int p = i - min_size; p >= 0 && i - p <= max_size; --p) {
        const double s = part_sum(j - 1, p, i);
        if (s >= value) break;
        if (prev[p] == kInf) continue;
        value = std::min(value, std::max(prev[p], s));
      }
      cur[i] = value;
    }
  }
  const double optimum = best[parts * stride + n];
  if (optimum == kInf) {
    return FailedPreconditionError(
        fmt::format("no partition of {} items into {} parts satisfies the size limits", n, parts));
  }

  // Phase 2: among partitions whose parts are all <= optimum, maximize the minimum part sum.
  // most[j][i] = max over such partitions of prefix [0, i) into j parts of the min part sum
  // (-inf = none).
  std::vector<double> most((parts + 1) * stride, -kInf);
  std::vector<int> choice((parts + 1) * stride, -1);
  most[0] = kInf;
  for (int j = 1; j <= parts; ++j) {
    const double* prev = &most[(j - 1) * stride];
    double* cur = &most[j * stride];
    int* arg = &choice[j * stride];
    for (int i = j * min_size; i <= n; ++i) {
      for (int p = i - min_size; p >= 0 && i - p <= max_size; --p) {
        const double s = part_sum(j - 1, p, i);
        if (s > optimum) break;
        if (prev[p] == -kInf) continue;
        const double candidate = std::min(prev[p], s);
        if (candidate > cur[i]) {  // strict: keeps the largest p among ties
          cur[i] = candidate;
          arg[i] = p;
        }
      }
    }
  }
  if (most[parts * stride + n] == -kInf) {
    return InternalError("MinMaxContiguousPartition: phase 2 found no partition under the optimum");
  }

  ContiguousPartition result;
  result.boundaries.assign(parts, 0);
  result.part_sizes.assign(parts, 0);
  result.part_sums.assign(parts, 0.0);
  int end = n;
  for (int j = parts; j >= 1; --j) {
    const int start = choice[j * stride + end];
    result.boundaries[j - 1] = start;
    result.part_sizes[j - 1] = end - start;
    result.part_sums[j - 1] = part_sum(j - 1, start, end);
    end = start;
  }
  result.max_part_sum = result.part_sums[0];
  result.min_part_sum = result.part_sums[0];
  for (double s : result.part_sums) {
    result.max_part_sum = std::max(result.max_part_sum, s);
    result.min_part_sum = std::min(result.min_part_sum, s);
  }
  return result;
}

StatusOr<ContiguousPartition> FewestPartsUnderBound(std::span<const double> weights, double bound,
                                                    int max_parts) {
  if (weights.empty()) return InvalidArgumentError("weights is empty; need at least one item");
  if (!std::isfinite(bound) || bound < 0) {
    return InvalidArgumentError(fmt::format("bound = {}; must be finite and >= 0", bound));
  }
  if (max_parts < 0) {
    return InvalidArgumentError(fmt::format("max_parts = {}; must be >= 0 (0 = unlimited)",
                                            max_parts));
  }
  int parts = 1;
  double sum = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const double w = weights[i];
    if (!std::isfinite(w) || w < 0) {
      return InvalidArgumentError(fmt::format("weights[{}] = {}; must be finite and >= 0", i, w));
    }
    if (w > bound) {
      return FailedPreconditionError(
          fmt::format("weights[{}] = {:g} exceeds the bound {:g}; no partition meets it", i, w,
                      bound));
    }
    if (sum + w > bound) {
      ++parts;
      sum = 0;
    }
    sum += w;
  }
  if (max_parts > 0 && parts > max_parts) {
    return FailedPreconditionError(fmt::format(
        "{} parts are needed to keep every part <= {:g}; at most {} allowed", parts, bound,
        max_parts));
  }
  return MinMaxContiguousPartition(weights, parts);
}

}  // namespace weft::algo
