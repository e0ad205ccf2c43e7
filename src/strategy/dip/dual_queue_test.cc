// Equivalence of DualQueueSchedule with its first, straightforward implementation (kept here
// verbatim as the reference): the fast version must produce the same orders on random graphs,
// with and without priority keys, memory caps and transfer times.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "weft/sched/generators.h"
#include "weft/sim/simulator.h"
#include "weft/strategy/dip/dip.h"

namespace weft::strategy::dip {
namespace {

// The reference: rescans the picked group's queue per rule and erases from the middle.
StatusOr<sched::Schedule> ReferenceDualQueueSchedule(const graph::StageGraph& g,
                                                     const DualQueueOptions& options) {
  if (!g.finalized()) return InvalidArgumentError("dual-queue: the stage graph is not finalized");
  const int n = g.num_stages();
  const int num_groups = g.num_groups();
  if (!options.priority_key.empty() && static_cast<int>(options.priority_key.size()) != n) {
    return InvalidArgumentError("dual-queue: priority_key has " +
                                std::to_string(options.priority_key.size()) +
                                " entries; the graph has " + std::to_string(n) + " stages");
  }
  auto key = [&](graph::StageId s) {
    return options.priority_key.empty() ? static_cast<double>(g.stage(s).microbatch)
                                        : options.priority_key[s];
  };
  // Lower = higher priority.
  auto before = [&](graph::StageId a, graph::StageId b) {
    const double ka = key(a), kb = key(b);
    if (ka != kb) return ka < kb;
    if (g.stage(a).sub_microbatch != g.stage(b).sub_microbatch) {
      return g.stage(a).sub_microbatch < g.stage(b).sub_microbatch;
    }
    return a < b;
  };
  auto cap_of = [&](int gi) {
    return gi < static_cast<int>(options.activation_cap_bytes.size())
               ? options.activation_cap_bytes[gi]
               : std::numeric_limits<int64_t>::max();
  };

  std::vector<int> preds_left(n, 0);
  std::vector<double> t_start(n, 0.0), end(n, 0.0);
  for (int s = 0; s < n; ++s) preds_left[s] = static_cast<int>(g.in_edges(s).size());
  std::vector<std::vector<graph::StageId>> ready(num_groups);
  for (int s = 0; s < n; ++s) {
    if (preds_left[s] == 0) ready[g.stage(s).group].push_back(s);
  }
  std::vector<double> t_last(num_groups, 0.0);
  std::vector<int64_t> held(num_groups, 0);
  std::vector<bool> last_forward(num_groups, false);

  sched::Schedule out;
  out.name = "dip-dual-queue";
  out.order.resize(num_groups);
  auto forward_allowed = [&](int gi, graph::StageId s) {
    return held[gi] + g.stage(s).activation_alloc_bytes <= cap_of(gi);
  };
  auto eligible = [&](int gi, graph::StageId s, bool ignore_cap) {
    return spec::IsBackward(g.stage(s).pass) || ignore_cap || forward_allowed(gi, s);
  };

  // Per group: the earliest start among its eligible ready stages (under the cap / ignoring it).
  // A ready stage's start time is final, so a group's minima change only when its queue or its
  // held bytes change: recomputed for those groups only.
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> min_capped(num_groups, kInf), min_any(num_groups, kInf);
  std::vector<char> dirty(num_groups, 1);
  const auto refresh = [&](int gi) {
    double capped = kInf, any = kInf;
    for (graph::StageId s : ready[gi]) {
      any = std::min(any, t_start[s]);
      if (eligible(gi, s, false)) capped = std::min(capped, t_start[s]);
    }
    min_capped[gi] = capped;
    min_any[gi] = any;
    dirty[gi] = 0;
  };
  for (int placed = 0; placed < n; ++placed) {
    // 1. The group with the smallest minimum start time among its enabled queues (the first
    // such group on ties).
    for (int gi = 0; gi < num_groups; ++gi) {
      if (dirty[gi]) refresh(gi);
    }
    int best_group = -1;
    double best_t = kInf;
    bool ignore_cap = false;
    for (int pass = 0; pass < 2 && best_group < 0; ++pass) {
      ignore_cap = pass == 1;  // memory caps block everything: let the earliest forward run
      const std::vector<double>& group_min = ignore_cap ? min_any : min_capped;
      for (int gi = 0; gi < num_groups; ++gi) {
        if (group_min[gi] < best_t) {
          best_t = group_min[gi];
          best_group = gi;
        }
      }
    }
    if (best_group < 0) {
      return InternalError("dual-queue: no ready stage with " + std::to_string(n - placed) +
                           " stages left (the graph has a cycle?)");
    }
    const int gi = best_group;
    auto& q = ready[gi];
    // 2–4. Compare the queues' earliest start times with t_last.
    double t_fw = std::numeric_limits<double>::infinity(), t_bw = t_fw;
    for (graph::StageId s : q) {
      if (!eligible(gi, s, ignore_cap)) continue;
      double& t = spec::IsBackward(g.stage(s).pass) ? t_bw : t_fw;
      t = std::min(t, t_start[s]);
    }
    int pick = -1;
    if (t_fw <= t_last[gi] && t_bw <= t_last[gi]) {
      // 1F1B alternation: the highest-priority stage of the other kind that is already ready.
      const bool want_backward = last_forward[gi];
      for (int idx = 0; idx < static_cast<int>(q.size()); ++idx) {
        const graph::StageId s = q[idx];
        if (!eligible(gi, s, ignore_cap) || t_start[s] > t_last[gi]) continue;
        if (spec::IsBackward(g.stage(s).pass) != want_backward) continue;
        if (pick < 0 || before(s, q[pick])) pick = idx;
      }
    }
    if (pick < 0) {
      // Stages that can start without idling the group: the highest priority among them.
      for (int idx = 0; idx < static_cast<int>(q.size()); ++idx) {
        const graph::StageId s = q[idx];
        if (!eligible(gi, s, ignore_cap) || t_start[s] > t_last[gi]) continue;
        if (pick < 0 || before(s, q[pick])) pick = idx;
      }
    }
    if (pick < 0) {
      // Greedy: the earliest start (ties: priority).
      for (int idx = 0; idx < static_cast<int>(q.size()); ++idx) {
        const graph::StageId s = q[idx];
        if (!eligible(gi, s, ignore_cap)) continue;
        if (pick < 0 || t_start[s] < t_start[q[pick]] ||
            (t_start[s] == t_start[q[pick]] && before(s, q[pick]))) {
          pick = idx;
        }
      }
    }
    const graph::StageId s = q[pick];
    q.erase(q.begin() + pick);
    const auto& st = g.stage(s);
    const double start = std::max(t_last[gi], t_start[s]);
    end[s] = start + st.latency_s;
    t_last[gi] = end[s];
    last_forward[gi] = !spec::IsBackward(st.pass);
    held[gi] += st.activation_alloc_bytes - st.activation_free_bytes;
    out.order[gi].push_back(s);
    dirty[gi] = 1;
    for (graph::EdgeId e : g.out_edges(s)) {
      const auto& edge = g.edge(e);
      const int to_group = g.stage(edge.to).group;
      double arrive = end[s];
      if (to_group != gi && options.cluster != nullptr) {
        const auto link = sim::LinkBetween(g.group(gi), g.group(to_group), *options.cluster);
        arrive += sim::TransferTimeS(edge.bytes, link, *options.cluster);
      }
      t_start[edge.to] = std::max(t_start[edge.to], arrive);
      if (--preds_left[edge.to] == 0) {
        ready[to_group].push_back(edge.to);
        dirty[to_group] = 1;
      }
    }
  }
  return out;
}

struct RandomCase {
  graph::StageGraph graph;
  DualQueueOptions options;
};

// A random DAG of forwards and backwards over `num_groups` groups (edges only from lower to
// higher ids), keys and sub-microbatches drawn from small ranges so that ties are common.
RandomCase MakeRandomCase(std::mt19937_64& rng, const spec::ClusterSpec* cluster) {
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  RandomCase c;
  const int num_groups = uniform(1, 6);
  for (int gi = 0; gi < num_groups; ++gi) {
    c.graph.AddGroup({.first_gpu = gi * uniform(1, 4), .num_gpus = uniform(1, 4)});
  }
  const int n = uniform(1, 120);
  for (int s = 0; s < n; ++s) {
    const auto pass = static_cast<spec::Pass>(uniform(0, 3));  // F, B, Bi or W
    const bool backward = spec::IsBackward(pass);
    c.graph.AddStage({
        .group = uniform(0, num_groups - 1),
        .microbatch = uniform(0, 5),
        .sub_microbatch = uniform(0, 2),
        .pass = pass,
        // Coarse latencies: equal start times (ties) are frequent.
        .latency_s = 0.5 * uniform(0, 4),
        .activation_alloc_bytes = backward ? 0 : 10 * uniform(0, 5),
        .activation_free_bytes = backward ? 10 * uniform(0, 5) : 0,
    });
  }
  for (int to = 1; to < n; ++to) {
    const int fan_in = uniform(0, 3);
    for (int k = 0; k < fan_in; ++k) c.graph.AddEdge(uniform(0, to - 1), to, 1000 * uniform(0, 3));
  }
  EXPECT_TRUE(c.graph.Finalize().ok());
  if (uniform(0, 1) == 1) {
    c.options.priority_key.resize(n);
    for (double& key : c.options.priority_key) key = uniform(0, 8);
  }
  if (uniform(0, 1) == 1) {
    // Some groups capped (tight caps force the "caps block everything" fallback), some not.
    c.options.activation_cap_bytes.resize(uniform(0, num_groups));
    for (int64_t& cap : c.options.activation_cap_bytes) cap = 10 * uniform(0, 8);
  }
  if (uniform(0, 1) == 1) c.options.cluster = cluster;
  return c;
}

TEST(DualQueueSchedule, MatchesTheReferenceOnRandomGraphs) {
  spec::ClusterSpec cluster;
  cluster.gpus_per_node = 4;
  cluster.intra_node = {.bandwidth_bytes_per_s = 1e6, .latency_s = 0.25};
  cluster.inter_node = {.bandwidth_bytes_per_s = 1e5, .latency_s = 0.5};
  std::mt19937_64 rng(20261124);
  for (int trial = 0; trial < 2000; ++trial) {
    const RandomCase c = MakeRandomCase(rng, &cluster);
    auto expected = ReferenceDualQueueSchedule(c.graph, c.options);
    auto actual = DualQueueSchedule(c.graph, c.options);
    ASSERT_EQ(expected.ok(), actual.ok()) << "trial " << trial;
    if (!expected.ok()) continue;
    EXPECT_EQ(actual->name, expected->name);
    ASSERT_EQ(actual->order, expected->order) << "trial " << trial;
  }
}

TEST(DualQueueSchedule, MatchesTheReferenceOnPipelines) {
  for (int groups : {2, 4, 8}) {
    for (int microbatches : {1, 3, 16}) {
      sched::PipelineShape shape;
      shape.num_groups = groups;
      shape.num_microbatches = microbatches;
      shape.chunks_per_group = microbatches % 2 == 0 ? 2 : 1;
      shape.split_backward = microbatches == 3;
      shape.costs = {{.forward_s = 1.0, .backward_input_s = 2.0, .activation_bytes = 100}};
      auto g = sched::BuildPipelineGraph(shape);
      ASSERT_TRUE(g.ok());
      for (int64_t cap : {int64_t{0}, int64_t{100}, int64_t{300},
                          std::numeric_limits<int64_t>::max()}) {
        DualQueueOptions options;
        options.activation_cap_bytes.assign(groups, cap);
        auto expected = ReferenceDualQueueSchedule(*g, options);
        auto actual = DualQueueSchedule(*g, options);
        ASSERT_TRUE(expected.ok());
        ASSERT_TRUE(actual.ok());
        EXPECT_EQ(actual->order, expected->order)
            << groups << " groups, " << microbatches << " microbatches, cap " << cap;
      }
    }
  }
}

}  // namespace
}  // namespace weft::strategy::dip
