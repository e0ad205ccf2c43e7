#include "weft/sched/partition.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "weft/algo/partition.h"

namespace weft::sched {
namespace {

Status CheckInput(std::span<const double> costs, int num_stages) {
  if (num_stages < 1) {
    return InvalidArgumentError(fmt::format("num_stages = {}; must be >= 1", num_stages));
  }
  if (static_cast<int>(costs.size()) < num_stages) {
    return FailedPreconditionError(fmt::format(
        "{} layers cannot fill num_stages = {}; every stage needs >= 1 layer", costs.size(),
        num_stages));
  }
  for (size_t i = 0; i < costs.size(); ++i) {
    if (!(costs[i] >= 0) || !std::isfinite(costs[i])) {
      return InvalidArgumentError(
          fmt::format("costs[{}] = {}; must be finite and >= 0", i, costs[i]));
    }
  }
  return OkStatus();
}

LayerPartition FromBoundaries(std::span<const double> costs, std::vector<int> boundaries) {
  LayerPartition out;
  out.boundaries = std::move(boundaries);
  const int k = out.num_stages();
  out.stage_costs.assign(k, 0.0);
  for (int s = 0; s < k; ++s) {
    for (int i = out.boundaries[s]; i < out.boundaries[s + 1]; ++i) out.stage_costs[s] += costs[i];
  }
  out.max_stage_cost = *std::max_element(out.stage_costs.begin(), out.stage_costs.end());
  out.min_stage_cost = *std::min_element(out.stage_costs.begin(), out.stage_costs.end());
  return out;
}

}  // namespace

StatusOr<LayerPartition> PartitionEqualLayers(std::span<const double> costs, int num_stages) {
  WEFT_RETURN_IF_ERROR(CheckInput(costs, num_stages));
  const int n = static_cast<int>(costs.size());
  std::vector<int> boundaries(num_stages + 1, 0);
  const int base = n / num_stages, extra = n % num_stages;
  for (int s = 0; s < num_stages; ++s) {
    boundaries[s + 1] = boundaries[s] + base + (s < extra ? 1 : 0);
  }
  return FromBoundaries(costs, std::move(boundaries));
}

StatusOr<LayerPartition> PartitionMinMax(std::span<const double> costs, int num_stages) {
  WEFT_RETURN_IF_ERROR(CheckInput(costs, num_stages));
  // The exact DP (min–max, then max–min among the optima) lives in algo.
  WEFT_ASSIGN_OR_RETURN(algo::ContiguousPartition part,
                        algo::MinMaxContiguousPartition(costs, num_stages));
  std::vector<int> boundaries = part.boundaries;
  boundaries.push_back(static_cast<int>(costs.size()));
  return FromBoundaries(costs, std::move(boundaries));
}

}  // namespace weft::sched
