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

// How one module was laid out and run by a strategy (filled by planning::DescribeConfiguration).
struct ModuleConfiguration {
  std::string module = {};  // module name in the model spec
  int tp = 1;               // tensor-parallel size
  int cp = 1;               // context-parallel size
  int pp = 1;               // pipeline stages (device groups) one replica of the module spans
  int dp = 1;               // data-parallel replicas
  // Layers of each chunk of one replica in layer order (pp · chunks_per_rank entries; one entry,
  // the whole module, when it is replicated).
  std::vector<int> layers_per_stage = {};
  // The most chunks of the module on one device group (> 1: interleaved / virtual pipeline
  // chunks, or FSDP's units).
  int chunks_per_rank = 1;
  int copies = 1;  // > 1: a full copy of the module on each of `copies` groups
  // Recomputation the planned stages used: "none", "selective", "full", "offload", or several
  // joined by "+" when stages, layers or iterations differ ("" = unknown).
  std::string recompute = {};
};

// The parallel configuration a strategy ran: per module, then the microbatches per replica.
struct StrategyConfiguration {
  std::vector<ModuleConfiguration> modules = {};  // model order; empty = not recorded
  // Microbatches per data-parallel replica of the backbone, the fewest and most over replicas
  // and iterations (0 = unknown).
  int microbatches_min = 0;
  int microbatches_max = 0;

  bool empty() const { return modules.empty(); }
  // One line for tables: "vision tp1 pp1 dp2 [24] | llm tp4 pp2 dp2 [16,16] | mb 8 | recompute
  // none" (cp shown when > 1, "N chunks/rank" when chunks_per_rank > 1, "xN copies" when
  // replicated; recompute per module when the modules differ; a layer list of more than 8
  // entries writes runs of 3 or more equal values as "value x count": [1x63]). "" when empty.
  std::string Brief() const;
};

struct StrategyResult {
  std::string name = {};         // e.g. "megatron-1f1b", "dip"
  std::string description = {};  // one line for reports
  std::vector<IterationResult> iterations = {};
  // Set when the strategy failed or does not apply to this input; iterations are then usually
  // empty and the reports print the message instead of numbers.
  std::optional<std::string> error = std::nullopt;
  StrategyConfiguration configuration = {};  // what ran; empty = not recorded

  bool ok() const { return !error.has_value() && !iterations.empty(); }
  // ok() and no iteration ran out of memory: a result the strategy could actually run.
  bool feasible() const;
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
  // nullopt when there is no usable baseline or the strategy has no result, and when either ran
  // out of memory (an OOM time is not a run anyone can have: reports print "oom" instead).
  std::optional<double> SpeedupVsBaseline(const StrategyResult& strategy) const;
  // Indices of `strategies` in report order: feasible results by mean iteration time, then
  // out-of-memory results by mean time, then failed ones (each group stable: ties keep the run
  // order).
  std::vector<int> RankedOrder() const;
  // Index of the fastest feasible strategy (the one reports mark best), or -1 if none.
  int BestStrategy() const;
};

}  // namespace weft::report
