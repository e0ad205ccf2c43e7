#pragma once
// Layer partitioners: split a chain of layers into contiguous pipeline stages.
// Thread-safety: pure functions.
#include <span>
#include <vector>

#include "weft/common/status.h"

namespace weft::sched {

struct LayerPartition {
  // Stage i holds layers [boundaries[i], boundaries[i+1]); boundaries.size() == num_stages + 1,
  // boundaries.front() == 0, boundaries.back() == num_layers. Every stage holds >= 1 layer.
  std::vector<int> boundaries;
  std::vector<double> stage_costs;  // Σ cost of the layers of each stage (in the input's unit)
  double max_stage_cost = 0;
  double min_stage_cost = 0;

  int num_stages() const { return static_cast<int>(boundaries.size()) - 1; }
  int LayersOf(int stage) const { return boundaries[stage + 1] - boundaries[stage]; }
};

// Megatron's default: equal layer counts; when num_layers % num_stages != 0 the first
// (num_layers % num_stages) stages get one extra layer. `costs` only fills stage_costs.
StatusOr<LayerPartition> PartitionEqualLayers(std::span<const double> costs, int num_stages);

// Exact min–max contiguous partition of `costs` into num_stages non-empty stages; among the
// optimal partitions, the one with the largest minimum stage (so the reported spread is the
// smallest possible). O(num_stages · n²) dynamic programme. Use it with parameter counts per
// layer (Megatron-style balance by parameters) or with fwd+bwd latency per layer.
StatusOr<LayerPartition> PartitionMinMax(std::span<const double> costs, int num_stages);

}  // namespace weft::sched
