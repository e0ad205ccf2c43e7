#pragma once
// Schedule: per device group, the order in which that group runs its stages.
// Value type; thread-compatible.
#include <string>
#include <vector>

#include "weft/common/status.h"
#include "weft/graph/stage_graph.h"

namespace weft::sched {

struct Schedule {
  std::string name = {};  // e.g. "1f1b", "interleaved-1f1b(v=2)", "dip-mcts"; for reports
  // order[g] lists the stages of group g in execution order. order.size() == graph.num_groups().
  std::vector<std::vector<graph::StageId>> order = {};

  // Checks against a finalized graph: one list per group; every stage appears exactly once, on
  // the list of its own group; same-group dependencies respect the order. (Cross-group
  // inconsistencies — a deadlock — are reported by sim::Simulate.)
  // Messages name the field: "order[2][5] = stage 17 (g1 F mb3.0 c0 llm); belongs to group 1".
  Status Validate(const graph::StageGraph& graph) const;

  // Checks, in O(stages + edges) without timing, that running the orders can never deadlock
  // (every group eventually reaches the end of its list). Assumes Validate() passed.
  // FailedPrecondition "deadlock: group 1 waits at order[1][4] = stage 9 (...) for stage 7 (...)
  // of group 2; ...".
  Status CheckDeadlockFree(const graph::StageGraph& graph) const;
};

}  // namespace weft::sched
