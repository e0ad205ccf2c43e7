#include "weft/sched/schedule.h"

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
  std::vector<int32_t> position(n, -1);
  int seen = 0;
  for (int g = 0; g < static_cast<int>(order.size()); ++g) {
    for (int i = 0; i < static_cast<int>(order[g].size()); ++i) {
      graph::StageId s = order[g][i];
      if (s < 0 || s >= n) {
        return InvalidArgumentError(
            fmt::format("order[{}][{}] = {}; stage ids must be in [0, {})", g, i, s, n));
      }
      if (graph.stage(s).group != g) {
        return InvalidArgumentError(fmt::format("order[{}][{}] = stage {} ({}); belongs to group {}",
                                                g, i, s, graph.StageName(s), graph.stage(s).group));
      }
      if (position[s] >= 0) {
        return InvalidArgumentError(fmt::format(
            "order[{}][{}] = stage {} ({}); already listed at order[{}][{}]", g, i, s,
            graph.StageName(s), g, position[s]));
      }
      position[s] = i;
      ++seen;
    }
  }
  if (seen != n) {
    for (int s = 0; s < n; ++s) {
      if (position[s] < 0) {
        return InvalidArgumentError(
            fmt::format("order[{}] misses stage {} ({}); every stage must be scheduled once",
                        graph.stage(s).group, s, graph.StageName(s)));
      }
    }
  }
  for (const graph::Edge& e : graph.edges()) {
    const int g = graph.stage(e.from).group;
    if (g == graph.stage(e.to).group && position[e.from] > position[e.to]) {
      return InvalidArgumentError(fmt::format(
          "order[{}][{}] = stage {} ({}) runs before its input order[{}][{}] = stage {} ({}); "
          "same-group dependencies must follow the order",
          g, position[e.to], e.to, graph.StageName(e.to), g, position[e.from], e.from,
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
