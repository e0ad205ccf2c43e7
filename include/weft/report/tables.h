#pragma once
// A Comparison as a text table, CSV and JSON (formats: docs/report.md).
// Thread-safety: pure functions.
#include <string>

#include <nlohmann/json.hpp>

#include "weft/report/comparison.h"

namespace weft::report {

// Every format lists the strategies in Comparison::RankedOrder (feasible by mean time, then
// out-of-memory, then failed), marks Comparison::BestStrategy, and prints "oom" (never a number)
// as the speedup of an out-of-memory strategy.
//
// Aligned columns, one row per strategy: strategy (the best one followed by " *"), iteration
// time mean/p50/p90 (s), samples/s, MFU %, bubble %, peak memory GiB, gap to lower bound %, OOM,
// speedup vs baseline, configuration (StrategyConfiguration::Brief, left-aligned). A header line
// (model, cluster, GPUs, data, iterations) comes first; failed strategies print "-" cells and
// their error messages are listed under the table.
std::string TextTable(const Comparison& comparison);
// The line under the table that explains "gap LB %" (what the HTML report says in its caption).
inline constexpr const char* kGapLegend =
    "gap LB % = simulated time / lower bound - 1 (lower bound of the row's own placement: its "
    "busiest GPU group or critical path); 0 = no schedule of that placement can be faster "
    "(another placement may be)";

// The line under the table that explains the row order, the best mark and "oom" speedups.
inline constexpr const char* kRankLegend =
    "rows: fastest mean time first, out-of-memory rows after the feasible ones, failed last; "
    "* = fastest feasible (no OOM); speedup \"oom\" = ran out of GPU memory (no speedup)";

// RFC 4180 CSV, one row per strategy with the aggregates (header row first), then `best` (1/0),
// `configuration` (the Brief line) and `error`; speedup_vs_baseline is "oom" for an OOM row.
std::string SummaryCsv(const Comparison& comparison);
// RFC 4180 CSV, one row per (strategy, iteration) with every IterationResult field.
std::string IterationsCsv(const Comparison& comparison);

// The `schema` of ComparisonJson.
inline constexpr const char* kComparisonSchema = "weft.compare/v1";
// {"schema": "weft.compare/v1", "model", "cluster", "num_gpus", "data_profile",
//  "planning_budget", "num_iterations", "baseline", "best" (name or null),
//  "strategies": [{"name", "description", "rank" (1 = first row), "status" ("ok" | "oom" |
//  "error"), "best" (bool), "configuration" (null or {"modules": [{"module", "tp", "cp", "pp",
//  "dp", "layers_per_stage", "chunks_per_rank", "copies", "recompute"}], "microbatches_min",
//  "microbatches_max", "brief"}), "error" (string or null), "iteration_time_s" (mean),
//  "iteration_time_p50_s", "iteration_time_p90_s", "throughput_samples_per_s",
//  "throughput_tokens_per_s", "mfu", "bubble_ratio", "peak_memory_bytes", "lower_bound_s" (mean),
//  "gap_to_lower_bound", "oom", "plan_time_s" (mean), "speedup_vs_baseline" (number or null),
//  "iterations": {"iteration": [...], "iteration_time_s": [...], ... one array per field}}]}.
// Numbers that do not apply (a failed strategy; the speedup of an OOM one) are null.
nlohmann::json ComparisonJson(const Comparison& comparison);
// ComparisonJson(...) dumped with 2-space indentation; invalid UTF-8 is replaced, never thrown.
std::string ComparisonJsonString(const Comparison& comparison);

}  // namespace weft::report
