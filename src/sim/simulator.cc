#include "weft/sim/simulator.h"

#include <algorithm>
#include <limits>

#include "engine.h"
#include "weft/sim/window.h"

namespace weft::sim {

using graph::GroupId;
using graph::StageGraph;

std::string_view LinkKindName(LinkKind kind) {
  switch (kind) {
    case LinkKind::kSameGroup:
      return "same-group";
    case LinkKind::kIntraNode:
      return "intra-node";
    case LinkKind::kInterNode:
      return "inter-node";
  }
  return "?";
}

LinkKind LinkBetween(const graph::DeviceGroup& a,
                     const graph::DeviceGroup& b,
                     const spec::ClusterSpec& cluster) {
  if (&a == &b) return LinkKind::kSameGroup;
  if (cluster.gpus_per_node <= 0) return LinkKind::kInterNode;
  const int lo = std::min(a.first_gpu, b.first_gpu);
  const int hi = std::max(a.first_gpu + a.num_gpus, b.first_gpu + b.num_gpus);
  return internal::OneNode(lo, hi - lo, cluster) ? LinkKind::kIntraNode : LinkKind::kInterNode;
}

double TransferTimeS(int64_t bytes, LinkKind link, const spec::ClusterSpec& cluster) {
  if (link == LinkKind::kSameGroup) return 0.0;
  const spec::LinkSpec& spec = link == LinkKind::kIntraNode ? cluster.intra_node : cluster.inter_node;
  return internal::LinkTransferTimeS(bytes, spec, internal::LinkRateBytesPerS(spec, cluster));
}

namespace internal {

// Ring all-reduce of `bytes` over d members whose GPUs span [first_gpu, first_gpu + span):
// reduce-scatter + all-gather, each (d−1) steps of bytes/d, on NVLink if the span is one node.
double RingAllReduceTimeS(int d, int64_t bytes, int first_gpu, int span,
                          const spec::ClusterSpec& cluster) {
  if (d <= 1 || bytes <= 0) return 0.0;
  const bool intra = cluster.gpus_per_node > 0 && OneNode(first_gpu, span, cluster);
  const spec::LinkSpec& spec = intra ? cluster.intra_node : cluster.inter_node;
  return 2.0 * (d - 1) * spec.latency_s +
         2.0 * (d - 1) / d * static_cast<double>(bytes) /
             (spec.bandwidth_bytes_per_s * cluster.efficiency.network);
}

// Ring all-reduce of `sync.bytes` over the set's groups: NVLink if they all share one node.
double GradSyncSetTimeS(const graph::StageGraph& graph, const graph::GradSync& sync,
                        const spec::ClusterSpec& cluster) {
  int lo = std::numeric_limits<int>::max(), hi = 0;
  for (GroupId g : sync.groups) {
    lo = std::min(lo, graph.group(g).first_gpu);
    hi = std::max(hi, graph.group(g).first_gpu + graph.group(g).num_gpus);
  }
  return RingAllReduceTimeS(static_cast<int>(sync.groups.size()), sync.bytes, lo, hi - lo,
                            cluster);
}

}  // namespace internal

double GradSyncTimeS(const graph::DeviceGroup& group, const spec::ClusterSpec& cluster) {
  const int d = group.dp;
  const int span = (d - 1) * group.DpStrideGpus() + group.num_gpus;
  return internal::RingAllReduceTimeS(d, group.grad_sync_bytes, group.first_gpu, span, cluster);
}

double OptimizerStepTimeS(const graph::DeviceGroup& group, const spec::ClusterSpec& cluster) {
  if (group.optimizer_bytes <= 0) return 0.0;
  const double bw = cluster.gpu.hbm_bandwidth_bytes_per_s * cluster.efficiency.memory;
  if (!(bw > 0)) return 0.0;
  return static_cast<double>(group.optimizer_bytes) / bw;
}

Simulator::Simulator() : engine_(std::make_unique<internal::Engine>()) {}
Simulator::~Simulator() = default;
Simulator::Simulator(Simulator&&) noexcept = default;
Simulator& Simulator::operator=(Simulator&&) noexcept = default;

StatusOr<Timeline> Simulator::Simulate(const StageGraph& graph,
                                       const sched::Schedule& schedule,
                                       const spec::ClusterSpec& cluster,
                                       const SimOptions& options) {
  const internal::EngineIteration iteration{.graph = &graph,
                                            .schedule = &schedule,
                                            .samples = options.samples_per_iteration,
                                            .tokens = options.tokens_per_iteration};
  WEFT_ASSIGN_OR_RETURN(internal::EngineResult result,
                        engine_->Run({&iteration, 1}, cluster, options, {}, {}, -1));
  return std::move(result.timelines.front());
}

StatusOr<Timeline> Simulate(const StageGraph& graph,
                            const sched::Schedule& schedule,
                            const spec::ClusterSpec& cluster,
                            const SimOptions& options) {
  return Simulator().Simulate(graph, schedule, cluster, options);
}

}  // namespace weft::sim
