#pragma once
// Comparison results: what `weft compare` measures for each strategy over a run of iterations,
// and the aggregates every report format (text table, CSV, JSON, HTML) prints.
//
// Value types; thread-compatible. Aggregates are computed on demand from the iterations, so they
// never go stale when iterations are edited.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "weft/common/status.h"
#include "weft/sim/timeline.h"

namespace weft::report {

// One simulated (or executed) iteration of one strategy.
struct IterationResult {
  int iteration = 0;                 // index of the iteration in the run (0-based)
  double iteration_time_s = 0;       // wall time of the iteration
  double samples_per_s = 0;          // throughput; 0 = unknown
  double tokens_per_s = 0;           // throughput; 0 = unknown
  double mfu = 0;                    // model FLOPs utilization in [0, 1]; 0 = unknown
  double bubble_ratio = 0;           // idle GPU-time fraction inside the pipeline span, [0, 1]
  int64_t peak_memory_bytes = 0;     // per GPU, max over device groups
  double lower_bound_s = 0;          // no schedule can beat it; 0 = unknown
  bool oom = false;                  // some group's peak exceeds the GPU capacity
  double plan_time_s = 0;            // wall time the strategy spent searching/planning it

  // time / lower bound − 1 (0 = optimal); 0 when the bound is unknown.
  double GapToLowerBound() const;
};

// Copies the metrics of a simulated timeline.
IterationResult IterationResultFromTimeline(int iteration,
                                            const sim::Timeline& timeline,
                                            double plan_time_s = 0);

// Aggregates over the iterations of one strategy. Throughput and MFU are time-weighted
// (Σ rate·time / Σ time = total work / total time), the rest are plain statistics.
struct StrategySummary {
  int num_iterations = 0;
  double iteration_time_mean_s = 0;
  double iteration_time_p50_s = 0;   // median (linear interpolation between closest ranks)
  double iteration_time_p90_s = 0;   // 90th percentile (same interpolation)
  double samples_per_s = 0;          // Σ samples / Σ time
  double tokens_per_s = 0;           // Σ tokens / Σ time
  double mfu = 0;                    // time-weighted mean
  double bubble_ratio = 0;           // mean
  int64_t peak_memory_bytes = 0;     // max over iterations
  double lower_bound_mean_s = 0;     // mean of the known (> 0) bounds; 0 if none
  double gap_to_lower_bound = 0;     // mean(time / lb − 1) over iterations with a known bound
  bool any_oom = false;
  double plan_time_mean_s = 0;
};

// Linear-interpolation percentile (numpy's default) of `values`, q in [0, 1]; 0 if empty.
double Percentile(std::span<const double> values, double q);

struct StrategyResult {
  std::string name = {};         // e.g. "megatron-1f1b", "dip"
  std::string description = {};  // one line for reports
  std::vector<IterationResult> iterations = {};
  // Set when the strategy failed or does not apply to this input; iterations are then usually
  // empty and the reports print the message instead of numbers.
  std::optional<std::string> error = std::nullopt;

  bool ok() const { return !error.has_value() && !iterations.empty(); }
  StrategySummary Summary() const;
};

struct Comparison {
  std::string model = {};         // preset name or file
  std::string cluster = {};       // preset name or file
  int num_gpus = 0;
  std::string data_profile = {};  // dataset / profile the batches came from
  int num_iterations = 0;         // iterations asked for
  std::vector<StrategyResult> strategies = {};
  std::string baseline = {};      // name of the strategy speedups are relative to; "" = none
  // The search strategies' planning budget, e.g. "work 100 units (deterministic)" or "wall
  // clock 1000 ms" ("" = not recorded).
  std::string planning_budget = {};

  // Names are non-empty and unique; the baseline (if set) names a strategy; iteration indices of
  // each strategy are strictly increasing; times are finite and >= 0. Messages name the field:
  // "strategies[2].name = \"dip\"; must be unique (also strategies[0])".
  Status Validate() const;

  // Index of the strategy called `name`, or -1.
  int FindStrategy(std::string_view name) const;
  // Baseline mean iteration time / this strategy's mean (> 1 = faster than the baseline).
  // nullopt when there is no usable baseline or the strategy has no result.
  std::optional<double> SpeedupVsBaseline(const StrategyResult& strategy) const;
};

}  // namespace weft::report
