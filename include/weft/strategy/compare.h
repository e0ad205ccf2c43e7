#pragma once
// Making a planner from names and running a strategy comparison: what `weft compare` and
// `weft simulate` do, as a library call (the job setup itself is planning/job_setup.h).
// Thread-safety: functions are reentrant; results are value types.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "weft/common/status.h"
#include "weft/cost/cost_model.h"
#include "weft/data/packing.h"
#include "weft/report/comparison.h"
#include "weft/sim/timeline.h"
#include "weft/sim/window.h"
#include "weft/spec/preset.h"
#include "weft/planning/job_setup.h"
#include "weft/planning/planner.h"
#include "weft/strategy/strategy.h"

namespace weft::strategy {

// Front ends and tests in this namespace see the planner by its short name.
using planning::MeasuredStage;
using planning::MemoryPolicy;
using planning::MemoryPolicyName;
using planning::PlannedStep;
using planning::Planner;
using planning::PlannerOptions;

// The strategy `name` for a job: a registered strategy, or `manual` built from
// options.placement (read and checked against the job's model and cluster).
StatusOr<std::unique_ptr<Strategy>> MakeStrategyForJob(std::string_view name,
                                                       const JobOptions& options, const Job& job);

// A planner for a job given by names and a strategy by name (a registered strategy, or `manual`
// with options.placement): MakeJobSetup + MakeStrategyForJob + planning::Planner::Create.
StatusOr<std::unique_ptr<planning::Planner>> MakePlanner(const JobOptions& job,
                                                         std::string_view strategy,
                                                         planning::PlannerOptions options = {});

struct CompareOptions {
  JobOptions job;
  int iterations = 10;
  std::vector<std::string> strategies;  // empty = all registered
  std::string baseline = "megatron-1f1b";
  PlanBudget budget;
  int keep_timeline_of_iteration = -1;  // iteration whose graph+timeline is kept (-1 = last)
  // Called after each (strategy, iteration) with a one-line progress message.
  std::function<void(const std::string&)> progress;

  // job (JobOptions::Validate), iterations >= 1, strategies non-empty names without repeats,
  // budget (PlanBudget::Validate), keep_timeline_of_iteration >= -1; else InvalidArgument
  // "<field> = <value>; <rule>". RunComparison checks it first.
  Status Validate() const;
};

// A kept graph + timeline of one iteration of one strategy (for traces and the HTML report).
struct KeptTimeline {
  std::string strategy;
  int iteration = 0;
  int replica = 0;       // the DP replica kept: the slowest one of the iteration
  int num_replicas = 1;
  graph::StageGraph graph;
  sim::Timeline timeline;
  // A streaming strategy's pool over its window, and the window's iterations (for the report).
  std::optional<sim::BufferTimeline> pool = std::nullopt;
  int pool_iterations = 0;
};

struct CompareRun {
  report::Comparison comparison;
  std::string data_warning;  // MakeIterationBatches' warning ("" = every sample used)
  std::string setup_notes;   // JobSetup::notes: given vs used (GPUs, DP, partial node)
  std::vector<KeptTimeline> timelines;  // one per strategy that succeeded
  // Per strategy whose memory peak (the table's peak GiB: the most of any group, iteration and
  // DP replica) is not in its kept timeline: the iteration and replica that holds it (the
  // first such on ties), so the report can draw that memory curve.
  std::vector<KeptTimeline> peak_memory_timelines;
  std::vector<std::string> static_plans;  // per strategy: its static plan description or error
};

// Runs every strategy on the same batches. A strategy that fails on this input gets an error
// entry (the run goes on); a bad job (unknown model, malformed file) fails the call.
StatusOr<CompareRun> RunComparison(const CompareOptions& options);

}  // namespace weft::strategy
