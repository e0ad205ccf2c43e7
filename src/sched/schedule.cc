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

}  // namespace weft::sched
