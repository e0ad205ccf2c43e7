#pragma once
// Shared by weft.plan and weft.PlannerService: compiling replica 0 of a planned iteration and
// turning it into the dict both return.
#include <cstdint>
#include <string>
#include <vector>

#include "bindings.h"
#include "weft/strategy/common.h"
#include "weft/strategy/compare.h"
#include "weft/strategy/planner.h"

namespace weft::python {

// Job options from the keyword arguments every planning binding takes.
strategy::JobOptions MakeJobOptions(const std::string& model, const std::string& cluster,
                                    int gpus, const std::string& data, int num_microbatches,
                                    int sequences_per_batch, uint64_t seed,
                                    int pipeline_size = 0);

// Replica 0 of an iteration, compiled into a validated ExecutionPlan (Planner::Compile).
struct CompiledReplica {
  std::vector<std::vector<int>> microbatches;  // sequence indices per microbatch, as planned
  std::string plan_json;
  std::string validation;  // the validator's brief report
};

// Compiles and validates replica 0 of `planned` (call without the GIL). The microbatches are
// the plan's own data assignment (ReplicaPlan::microbatches).
Status CompileReplica0(const strategy::Planner& planner, int64_t iteration,
                       const strategy::PlannedIteration& planned, CompiledReplica& out);

// The simulated summary of an iteration (iteration_time_s, mfu, ...).
void FillSummary(py::dict& d, const strategy::PlannedIteration& p);

// The dict weft.plan returns: summary, plan_json, placement chunks, batch, microbatches.
py::dict PlannedIterationDict(const strategy::Planner& planner, int64_t iteration,
                              const strategy::PlannedIteration& planned, const spec::Batch& batch,
                              const CompiledReplica& compiled);

}  // namespace weft::python
