#pragma once
// MeasuredIteration: what a runtime measured while it executed one iteration of an
// ExecutionPlan, in the plan's own terms, so that a planner can set it beside its prediction
// (schema "weft.measured/v1", docs/plan_schema.md "Measured iterations"):
//  - per executed compute action: where it is in the plan (rank, action index), the stage it
//    computed as the plan names it (module, chunk, microbatch, sub-microbatch, pass) with the
//    rank's replica and placement group from the plan's data tables — (replica, group, stage)
//    names one stage of replica `replica`'s stage graph: the stage of device group `group` with
//    that module, chunk, microbatch, sub-microbatch and pass (plan::CompilePlan's StageRef) —
//    its shape from the plan's tables (instances [begin, end) of the module in that microbatch
//    and their tokens, Σ of every segment), the plan's expected seconds (the action's
//    latency_s) and the measured seconds (wall clock around the action);
//  - per rank: the wall time of the iteration on that rank.
// A file holds a list of iterations: {"schema": "weft.measured/v1", "iterations": [...]}.
// Reading is hardened like the plan reader (plan_json.h: size, depth, ranges, one-line errors
// naming the field path). CheckMeasuredAgainstPlan ties a record to the plan it measured.
// Thread-safety: value types and pure functions.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"
#include "weft/plan/plan.h"
#include "weft/plan/plan_json.h"

namespace weft::plan {

inline constexpr std::string_view kMeasuredSchemaVersion = "weft.measured/v1";

struct MeasuredStage {
  int rank = 0;     // rank of the plan
  int action = 0;   // index into ranks[rank].actions (a compute action)
  int replica = 0;  // data.ranks[rank].replica
  int group = 0;    // data.ranks[rank].group
  StageRef stage;   // the action's stage; stage.pass is its compute pass
  int32_t instance_begin = 0;  // the action's instances of stage.module in its microbatch
  int32_t instance_end = 0;
  int64_t tokens = 0;     // Σ tokens of those instances (plan::InstanceTokens)
  double planned_s = 0;   // the action's latency_s
  double measured_s = 0;  // measured wall time of the action
  friend bool operator==(const MeasuredStage&, const MeasuredStage&) = default;
};

struct MeasuredRank {
  int rank = 0;
  double wall_s = 0;  // the iteration on this rank: first action to the end of its update
  friend bool operator==(const MeasuredRank&, const MeasuredRank&) = default;
};

struct MeasuredIteration {
  std::string model;     // the plan's model
  std::string strategy;  // the plan's strategy
  int64_t iteration = 0;
  std::vector<std::string> module_names;  // the plan's modules; stage.module indexes it
  std::vector<MeasuredStage> stages;      // sorted by (rank, action)
  std::vector<MeasuredRank> ranks;        // one per rank of the plan, in rank order
  friend bool operator==(const MeasuredIteration&, const MeasuredIteration&) = default;
};

// {"schema": "weft.measured/v1", "iterations": [...]}, one stage a line; deterministic.
std::string MeasuredToJson(const std::vector<MeasuredIteration>& iterations);
// InvalidArgument naming the first problem (one line): schema, unknown keys, ranges (ranks,
// actions, instances and ids >= 0, instance_begin <= instance_end, stage.module < len(modules),
// times finite and >= 0), stages sorted by (rank, action) without repeats, one `ranks` entry
// per rank in order.
StatusOr<std::vector<MeasuredIteration>> MeasuredFromJson(std::string_view text,
                                                          const ReadOptions& options = {});
// NotFound if the file cannot be read; InvalidArgument (prefixed "<path>: ") if malformed.
StatusOr<std::vector<MeasuredIteration>> ReadMeasuredFile(const std::string& path,
                                                          const ReadOptions& options = {});

// The record's stage for compute action `action` of `rank` (measured_s = 0): its stage,
// replica, group, instances and tokens as `plan` gives them. InvalidArgument if the action is
// not a compute action of the plan.
StatusOr<MeasuredStage> MeasuredStageOf(const ExecutionPlan& plan, int rank, int action);

// OK when `measured` describes an execution of `plan`: same modules and ranks, and every stage
// names a compute action of the plan with the same stage, replica, group, instances and tokens
// (MeasuredStageOf); else InvalidArgument naming the first stage that differs.
Status CheckMeasuredAgainstPlan(const MeasuredIteration& measured, const ExecutionPlan& plan);

}  // namespace weft::plan
