#include "weft/sched/schedule.h"

#include <span>
#include <vector>

#include <fmt/format.h>

namespace weft::sched {

Status Schedule::Validate(const graph::StageGraph& graph) const {
  if (!graph.finalized()) {
    return FailedPreconditionError("schedule validation needs a finalized stage graph");
  }
  if (static_cast<int>(order.size()) != graph.num_groups()) {
    return InvalidArgumentError(fmt::format("order.size() = {}; must equal the number of groups ({})",
                                            order.size(), graph.num_groups()));
  }
  const int n = graph.num_stages();
  // Per stage: its position in its group's order and that group, in one 8-byte entry: the
  // edge check below reads these, not two stage records per edge (scattered over megabytes
  // in a large graph).
  struct Listed {
    int32_t position;
    graph::GroupId group;
  };
  std::vector<Listed> listed(n, Listed{-1, -1});
  const std::span<const graph::Stage> stages = graph.stages();
  int seen = 0;
  for (int g = 0; g < static_cast<int>(order.size()); ++g) {
    const graph::StageId* order_g = order[g].data();
    const int size = static_cast<int>(order[g].size());
    for (int i = 0; i < size; ++i) {
      const graph::StageId s = order_g[i];
      if (s < 0 || s >= n) {
        return InvalidArgumentError(
            fmt::format("order[{}][{}] = {}; stage ids must be in [0, {})", g, i, s, n));
      }
      if (stages[s].group != g) {
        return InvalidArgumentError(
            fmt::format("order[{}][{}] = stage {} ({}); belongs to group {}", g, i, s,
                        graph.StageName(s), stages[s].group));
      }
      if (listed[s].position >= 0) {
        return InvalidArgumentError(
            fmt::format("order[{}][{}] = stage {} ({}); already listed at order[{}][{}]", g, i, s,
                        graph.StageName(s), g, listed[s].position));
      }
      listed[s] = Listed{i, g};
      ++seen;
    }
  }
  if (seen != n) {
    for (int s = 0; s < n; ++s) {
      if (listed[s].position < 0) {
        return InvalidArgumentError(
            fmt::format("order[{}] misses stage {} ({}); every stage must be scheduled once",
                        stages[s].group, s, graph.StageName(s)));
      }
    }
  }
  // Every stage is listed once, in its own group: listed[s].group is stage s's group.
  for (const graph::Edge& e : graph.edges()) {
    const Listed from = listed[e.from];
    const Listed to = listed[e.to];
    if (from.group == to.group && from.position > to.position) {
      const int g = from.group;
      return InvalidArgumentError(fmt::format(
          "order[{}][{}] = stage {} ({}) runs before its input order[{}][{}] = stage {} ({}); "
          "same-group dependencies must follow the order",
          g, to.position, e.to, graph.StageName(e.to), g, from.position, e.from,
          graph.StageName(e.from)));
    }
  }
  return OkStatus();
}

Status Schedule::CheckDeadlockFree(const graph::StageGraph& graph) const {
  const int n = graph.num_stages();
  const int num_groups = static_cast<int>(order.size());
  std::vector<int32_t> pending(n);
  for (int s = 0; s < n; ++s) pending[s] = static_cast<int32_t>(graph.in_edges(s).size());
  std::vector<int32_t> cursor(num_groups, 0);
  std::vector<uint8_t> done(n, 0);
  std::vector<int32_t> worklist;
  worklist.reserve(num_groups);
  for (int g = 0; g < num_groups; ++g) worklist.push_back(g);
  int completed = 0;
  while (!worklist.empty()) {
    const int g = worklist.back();
    worklist.pop_back();
    // Run group g as far as it can go.
    while (cursor[g] < static_cast<int>(order[g].size()) && pending[order[g][cursor[g]]] == 0) {
      const graph::StageId s = order[g][cursor[g]++];
      done[s] = 1;
      ++completed;
      for (graph::EdgeId e : graph.out_edges(s)) {
        const graph::StageId to = graph.edge(e).to;
        if (--pending[to] == 0) {
          const int h = graph.stage(to).group;
          if (h != g && cursor[h] < static_cast<int>(order[h].size()) &&
              order[h][cursor[h]] == to) {
            worklist.push_back(h);
          }
        }
      }
    }
  }
  if (completed == n) return OkStatus();
  std::string message = "deadlock: the orders contradict cross-group dependencies;";
  int listed = 0;
  for (int g = 0; g < num_groups && listed < 4; ++g) {
    if (cursor[g] >= static_cast<int>(order[g].size())) continue;
    const graph::StageId s = order[g][cursor[g]];
    message += fmt::format(" group {} waits at order[{}][{}] = stage {} ({})", g, g, cursor[g], s,
                           graph.StageName(s));
    for (graph::EdgeId e : graph.in_edges(s)) {
      const graph::StageId from = graph.edge(e).from;
      if (!done[from]) {
        message += fmt::format(" for stage {} ({}) of group {}", from, graph.StageName(from),
                               graph.stage(from).group);
        break;
      }
    }
    message += ";";
    ++listed;
  }
  message.pop_back();
  return FailedPreconditionError(std::move(message));
}

}  // namespace weft::sched
