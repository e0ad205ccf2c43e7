#pragma once
// Shared by weft.plan and weft.PlannerService: compiling replica 0 (or the world plan: every
// replica) of a planned iteration and turning it into the dict both return.
#include <cstdint>
#include <string>
#include <vector>

#include "bindings.h"
#include "weft/strategy/common.h"
#include "weft/strategy/compare.h"
#include "weft/planning/planner.h"

namespace weft::python {

// Job options from the keyword arguments every planning binding takes.
planning::JobOptions MakeJobOptions(const std::string& model, const std::string& cluster,
                                    int gpus, const std::string& data, int num_microbatches,
                                    int sequences_per_batch, uint64_t seed,
                                    int pipeline_size = 0, const std::string& placement = "");

// Replica 0 of an iteration, compiled into a validated ExecutionPlan (Planner::Compile), or the
// world plan of every replica (Planner::CompileWorld).
struct CompiledReplica {
  // Sequence indices per microbatch, as planned: replica 0's, or for a world plan every
  // replica's in replica order (the iteration's microbatches). For reading only: the plan's
  // data tables carry them for the runtime (plan::PlanData).
  std::vector<std::vector<int>> microbatches;
  std::string plan_json;
  std::string validation;  // the validator's brief report
  bool world = false;
  int num_ranks = 0;          // ranks of plan_json
  int ranks_per_replica = 0;  // = the placement's groups: rank r runs group r % this
};

// Compiles and validates replica 0 of `planned` (call without the GIL). The microbatches are
// the plan's own data assignment (ReplicaPlan::microbatches).
Status CompileReplica0(const planning::Planner& planner, int64_t iteration,
                       const planning::PlannedIteration& planned, CompiledReplica& out);

// Compiles and validates the world plan of `planned` (every rank of every replica; call without
// the GIL).
Status CompileWorldPlan(const planning::Planner& planner, int64_t iteration,
                        const planning::PlannedIteration& planned, CompiledReplica& out);

// The simulated summary of an iteration (iteration_time_s, mfu, ...).
void FillSummary(py::dict& d, const planning::PlannedIteration& p);

// The factors of a state's cost correction, one dict each: module, pass, tokens_bucket,
// segment_bucket, factor, observations (FeedbackPlanner.correction, PlannerService.correction).
py::list CorrectionList(const planning::Planner& planner, const planning::PlanState& state);

// The dict weft.plan returns: summary, plan_json (weft.plan/v3: the runtime needs nothing else),
// and for reading the placement chunks, the batch and the microbatches.
py::dict PlannedIterationDict(const planning::Planner& planner, int64_t iteration,
                              const planning::PlannedIteration& planned, const spec::Batch& batch,
                              const CompiledReplica& compiled);

}  // namespace weft::python
