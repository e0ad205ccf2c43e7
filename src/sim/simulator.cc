#include "weft/sim/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>

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

Status SimOptions::Validate() const {
  auto bad = [](std::string_view field, auto value, std::string_view rule) {
    return InvalidArgumentError(fmt::format("{} = {}; {}", field, value, rule));
  };
  auto finite_non_negative = [](double v) { return v >= 0 && std::isfinite(v); };
  if (!finite_non_negative(model_flops)) {
    return bad("model_flops", model_flops, "must be finite and >= 0 (0 = the stages' FLOPs)");
  }
  if (num_gpus < 0) return bad("num_gpus", num_gpus, "must be >= 0 (0 = the groups' GPUs)");
  if (capacity_bytes < 0) {
    return bad("capacity_bytes", capacity_bytes, "must be >= 0 (0 = the cluster's GPU memory)");
  }
  if (!finite_non_negative(samples_per_iteration)) {
    return bad("samples_per_iteration", samples_per_iteration,
               "must be finite and >= 0 (0 = unknown)");
  }
  if (!finite_non_negative(tokens_per_iteration)) {
    return bad("tokens_per_iteration", tokens_per_iteration,
               "must be finite and >= 0 (0 = unknown)");
  }
  if (buffer_element_bytes < 1) {
    return bad("buffer_element_bytes", buffer_element_bytes, "must be >= 1 (1 = exact bytes)");
  }
  return OkStatus();
}

Simulator::Simulator() : engine_(std::make_unique<internal::Engine>()) {}
Simulator::~Simulator() = default;
Simulator::Simulator(Simulator&&) noexcept = default;
Simulator& Simulator::operator=(Simulator&&) noexcept = default;

StatusOr<Timeline> Simulator::Simulate(const StageGraph& graph,
                                       const sched::Schedule& schedule,
                                       const spec::ClusterSpec& cluster,
                                       const SimOptions& options) {
  WEFT_RETURN_IF_ERROR(options.Validate());
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
