#pragma once
// The event simulator: (StageGraph, Schedule, ClusterSpec) → Timeline.
//
// Model (details in docs/simulator.md):
//  - each group runs its stages one at a time in schedule order; a stage starts when the group
//    is free and all its inputs have arrived;
//  - an edge between stages of the same group is free; an edge between groups is a transfer of
//    latency_s + bytes / (bandwidth · efficiency.network) on NVLink when both groups lie in one
//    node (decided by first_gpu, num_gpus and gpus_per_node), on the network otherwise; transfers
//    overlap compute; transfers serialize in the order their sources finish on each directed
//    (src group, dst group) pair and on each group's ports: one egress and one ingress per link
//    kind (NVLink, network), so a gather from 8 groups into one queues on its ingress and a
//    group sending to two peers at once sends one after the other;
//  - after its last stage each group all-reduces its gradients over its DP replicas (ring:
//    2(d−1)/d · bytes / bandwidth + 2(d−1) · latency, on NVLink if all replicas share a node)
//    then runs the optimizer step (optimizer_bytes / (HBM bandwidth · efficiency.memory));
//  - memory per group: static bytes, + activation_alloc_bytes at each stage start, −
//    activation_free_bytes at each stage end, + the boundary buffers of the plan that
//    plan::CompilePlan would make from this timeline (local buffers of same-group edges with
//    bytes > 0, send buffers on the producer's group and receive buffers on the consumer's
//    group of cross-group edges), allocated and freed at CompilePlan's slots; the peak equals
//    plan::ValidatePlan's replay of that plan per rank, byte for byte
//    (src/plan/sim_plan_memory_property_test.cc).
// Thread-safety: Simulate is a pure function; call it concurrently on shared inputs. A
// Simulator object (below) is used by one thread at a time.
#include <cstdint>
#include <memory>
#include <span>

#include "weft/common/status.h"
#include "weft/graph/stage_graph.h"
#include "weft/sched/schedule.h"
#include "weft/sim/timeline.h"
#include "weft/spec/cluster.h"

namespace weft::sim {

namespace internal {
class Engine;
}  // namespace internal
struct WindowIteration;
struct WindowOptions;
struct WindowCarry;
struct WindowResult;

struct SimOptions {
  bool record_transfers = true;       // fill Timeline::transfers (off in search loops)
  bool record_memory_curves = true;   // fill GroupTimeline::memory (off in search loops)
  bool include_grad_sync = true;      // DP all-reduce at the end of each group
  bool include_optimizer_step = true; // optimizer step after the all-reduce
  bool validate_schedule = true;      // run Schedule::Validate first (O(stages + edges))
  double model_flops = 0;             // per iteration; 0 = Σ stage.flops × group.dp
  int num_gpus = 0;                   // 0 = Σ group.num_gpus × group.dp
  int64_t capacity_bytes = 0;         // per GPU; 0 = cluster.gpu.memory_capacity_bytes
  bool fail_on_oom = false;           // return ResourceExhausted instead of listing OOMs
  double samples_per_iteration = 0;   // for throughput; 0 = unknown
  double tokens_per_iteration = 0;    // for throughput; 0 = unknown
  // Boundary buffers hold whole elements of this size (the compiled plan's dtype, bf16): an
  // edge of `bytes` occupies ceil(bytes / size) · size. 1 = exact bytes.
  int64_t buffer_element_bytes = 2;

  // model_flops, samples_per_iteration and tokens_per_iteration finite and >= 0, num_gpus and
  // capacity_bytes >= 0, buffer_element_bytes >= 1; else InvalidArgument "<field> = <value>;
  // <rule>". Simulate and SimulateWindow (WindowOptions::Validate) check it first.
  Status Validate() const;
};

// Fails with InvalidArgument if the options are invalid (SimOptions::Validate), the graph is not
// finalized or the schedule is invalid, with
// FailedPrecondition "deadlock: group 1 waits at order[1][4] = <stage> for <pred> (group 2), ..."
// if the orders are inconsistent with cross-group dependencies.
StatusOr<Timeline> Simulate(const graph::StageGraph& graph,
                            const sched::Schedule& schedule,
                            const spec::ClusterSpec& cluster,
                            const SimOptions& options = {});

// A simulator that keeps its scratch memory (per-stage state, the plan's slot tables, send
// lists) between calls, for a thread that simulates many graphs (a search, a benchmark): the
// same results as Simulate and SimulateWindow, without allocating and first-touching that
// memory on every call. Not thread-safe: one per thread; it owns its scratch. Movable.
class Simulator {
 public:
  Simulator();
  ~Simulator();
  Simulator(Simulator&&) noexcept;
  Simulator& operator=(Simulator&&) noexcept;

  StatusOr<Timeline> Simulate(const graph::StageGraph& graph,
                              const sched::Schedule& schedule,
                              const spec::ClusterSpec& cluster,
                              const SimOptions& options = {});
  // See weft/sim/window.h.
  StatusOr<WindowResult> SimulateWindow(std::span<const WindowIteration> iterations,
                                        const spec::ClusterSpec& cluster,
                                        const WindowOptions& options,
                                        const WindowCarry& carry);

 private:
  std::unique_ptr<internal::Engine> engine_;
};

// Link and time of one transfer of `bytes` between two groups (exposed for cost estimates and
// tests). The same DeviceGroup object → (kSameGroup, 0).
LinkKind LinkBetween(const graph::DeviceGroup& a,
                     const graph::DeviceGroup& b,
                     const spec::ClusterSpec& cluster);
double TransferTimeS(int64_t bytes, LinkKind link, const spec::ClusterSpec& cluster);
// Ring all-reduce time of a group's grad_sync_bytes over its dp replicas (0 if dp == 1).
double GradSyncTimeS(const graph::DeviceGroup& group, const spec::ClusterSpec& cluster);
double OptimizerStepTimeS(const graph::DeviceGroup& group, const spec::ClusterSpec& cluster);

}  // namespace weft::sim
