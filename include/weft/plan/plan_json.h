#pragma once
// JSON form of an ExecutionPlan, schema "weft.plan/v3" (docs/plan_schema.md): the ranks' actions
// and buffers, and the data tables (plan_data.h) under "data".
// Reading is hardened against hostile or corrupt files: the size and the nesting depth are
// checked before the JSON tree is built, every integer must fit its field's range (nothing is
// wrapped or truncated; byte counts <= 2^50), counts are limited (ReadOptions), module indices
// must name a module, and the first problem stops reading with a one-line message naming the
// field path and the rule:
//   "ranks[1].actions[4].op = \"fwd\"; must be one of forward, backward, ..."
// ReadPlanFile prefixes the file name: "plan.json: schema = \"weft.plan/v9\"; expected ...".
// weft.plan/v1 and v2 files are refused with a message that says how to regenerate them.
// Reading does not validate the plan's semantics (matching, deadlock, memory): ValidatePlan does.
// Thread-safety: pure functions.
#include <cstdint>
#include <string>
#include <string_view>

#include "weft/common/status.h"
#include "weft/plan/plan.h"

namespace weft::plan {

// Upper bound of every byte count (and row count, buffer id, iteration) read from a plan: 2^50
// bytes = 1 PiB, far above any GPU, and low enough that sums of thousands of them fit int64.
inline constexpr int64_t kMaxPlanBytes = int64_t{1} << 50;
// Size of a plan file or text (1 GiB).
inline constexpr int64_t kMaxPlanFileBytes = int64_t{1} << 30;

// Limits of the reader; a plan beyond one is refused naming the limit.
struct ReadOptions {
  int64_t max_file_bytes = kMaxPlanFileBytes;  // size of the file / text
  int max_depth = 32;                         // JSON nesting of arrays and objects (a plan needs 8)
  int max_ranks = 4096;                       // entries of `ranks`
  int max_modules = 4096;                     // entries of `modules`
  int64_t max_buffers_per_rank = int64_t{1} << 24;
  int64_t max_actions_per_rank = int64_t{1} << 24;
  // Entries of inputs / outputs / samples / shape and of each data table and instance list.
  int64_t max_list_length = int64_t{1} << 20;
};

// Compact per action (one action per line) so large plans stay diff-able; deterministic.
std::string PlanToJson(const ExecutionPlan& plan);
// InvalidArgument naming the first problem (one line).
StatusOr<ExecutionPlan> PlanFromJson(std::string_view text, const ReadOptions& options = {});

// NotFound if the file cannot be read; InvalidArgument (prefixed "<path>: ") if malformed or
// beyond a limit.
StatusOr<ExecutionPlan> ReadPlanFile(const std::string& path, const ReadOptions& options = {});

}  // namespace weft::plan
