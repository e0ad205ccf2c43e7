#pragma once
// JSON form of an ExecutionPlan, schema "weft.plan/v1" (docs/plan_schema.md).
// Reading checks the schema id and every field's presence and type, and stops at the first
// problem with a one-line message naming the field path:
//   "ranks[1].actions[4].op = \"fwd\"; must be one of forward, backward, ..."
// ReadPlanFile prefixes the file name: "plan.json: schema = \"weft.plan/v2\"; expected ...".
// Reading does not validate the plan's semantics (matching, deadlock, memory): ValidatePlan does.
// Thread-safety: pure functions.
#include <string>
#include <string_view>

#include "weft/common/status.h"
#include "weft/plan/plan.h"

namespace weft::plan {

// Compact per action (one action per line) so large plans stay diff-able; deterministic.
std::string PlanToJson(const ExecutionPlan& plan);
StatusOr<ExecutionPlan> PlanFromJson(std::string_view text);

// NotFound if the file cannot be read; InvalidArgument (prefixed "<path>: ") if malformed.
StatusOr<ExecutionPlan> ReadPlanFile(const std::string& path);

}  // namespace weft::plan
