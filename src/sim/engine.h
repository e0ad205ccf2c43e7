#pragma once
// The event engine behind Simulate and SimulateWindow (docs/simulator.md): runs K iterations
// (K = 1 for Simulate) of (StageGraph, Schedule) pairs on one cluster, with the window's
// carry and bounded buffers. Private to the sim module.
//
// Passes, per iteration: Prepare (per distinct graph and schedule: validation, slot layout,
// grad-sync sets) → InitRun (per-stage state, one pass over the stage array) → the event loop
// (shared by all iterations: stages, transfers, copies, buffers, tails) → Finalize (the
// stages' times from their slots, the plan's buffer slots, the memory replay, bounds and
// metrics). Scratch memory of finished
// iterations is reused by later ones, and by later calls on the same Engine.
// Thread-safety: an Engine is used by one thread at a time.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "weft/common/status.h"
#include "weft/graph/stage_graph.h"
#include "weft/sched/schedule.h"
#include "weft/sim/simulator.h"
#include "weft/sim/timeline.h"
#include "weft/sim/window.h"
#include "weft/spec/cluster.h"

namespace weft::sim::internal {

// Node of a GPU id.
inline int NodeOf(int gpu, const spec::ClusterSpec& cluster) {
  return gpu / cluster.gpus_per_node;
}

// True if GPUs [first, first + count) all lie in one node.
inline bool OneNode(int first, int count, const spec::ClusterSpec& cluster) {
  return NodeOf(first, cluster) == NodeOf(first + count - 1, cluster);
}

// Bytes per second of a link at the cluster's network efficiency.
inline double LinkRateBytesPerS(const spec::LinkSpec& spec, const spec::ClusterSpec& cluster) {
  return spec.bandwidth_bytes_per_s * cluster.efficiency.network;
}

// One transfer over a link of `rate_bytes_per_s` (LinkRateBytesPerS, computed once per link
// kind in the event loop): the one formula for every transfer time.
inline double LinkTransferTimeS(int64_t bytes,
                                const spec::LinkSpec& spec,
                                double rate_bytes_per_s) {
  return spec.latency_s + static_cast<double>(bytes) / rate_bytes_per_s;
}

// Ring all-reduce of `bytes` over d members whose GPUs span [first_gpu, first_gpu + span).
double RingAllReduceTimeS(int d,
                          int64_t bytes,
                          int first_gpu,
                          int span,
                          const spec::ClusterSpec& cluster);

// Ring all-reduce time of `sync.bytes` over the set's groups (NVLink if they share a node).
double GradSyncSetTimeS(const graph::StageGraph& graph,
                        const graph::GradSync& sync,
                        const spec::ClusterSpec& cluster);

Status CheckCluster(const spec::ClusterSpec& cluster);

struct EngineIteration {
  const graph::StageGraph* graph = nullptr;
  const sched::Schedule* schedule = nullptr;
  std::span<const BufferUse> buffer_uses = {};
  double samples = 0;  // Timeline::samples_per_iteration
  double tokens = 0;   // Timeline::tokens_per_iteration
};

struct EngineResult {
  // Per iteration: its Timeline with times relative to origin_s[k] (metrics too), the origin
  // (the smallest release over groups) and when every group had finished it (window clock).
  std::vector<Timeline> timelines;
  std::vector<double> origin_s;
  std::vector<double> end_s;
  std::vector<double> group_end_s;  // per group: its end in the last iteration (window clock)
  std::vector<BufferTimeline> buffers;
  // Per group: time it ran stages or its tail in [begin, ∞) over the iterations from
  // `warmup` on, where begin = end_s[warmup − 1] (or the carry's latest group_free_s).
  std::vector<double> steady_busy_s;
  double steady_begin_s = 0;
};

struct EngineRun;

class Engine {
 public:
  Engine();
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Runs the iterations. The caller has validated the window (same groups, buffer uses,
  // carry sizes); the schedules are validated here (options.validate_schedule). warmup < 0:
  // no steady-state busy time (Simulate).
  StatusOr<EngineResult> Run(std::span<const EngineIteration> iterations,
                             const spec::ClusterSpec& cluster,
                             const SimOptions& options,
                             std::span<const BoundedBuffer> buffers,
                             const WindowCarry& carry,
                             int warmup);

 private:
  // Scratch of iterations, kept for reuse (one per iteration in flight at once).
  std::vector<std::unique_ptr<EngineRun>> pool_;
};

}  // namespace weft::sim::internal
