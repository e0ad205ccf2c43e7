#pragma once
// Timeline: the result of simulating one iteration of (StageGraph, Schedule, ClusterSpec).
// Value type; reports itself (BriefReport). Times in seconds from the iteration start; bytes per
// GPU of the group.
#include <cstdint>
#include <string>
#include <vector>

#include "weft/graph/stage_graph.h"

namespace weft::sim {

enum class LinkKind : uint8_t { kSameGroup, kIntraNode, kInterNode };
std::string_view LinkKindName(LinkKind kind);  // "same-group", "intra-node", "inter-node"

struct StageTiming {
  double start_s = 0;
  double end_s = 0;
};

struct Transfer {  // one cross-group edge
  graph::EdgeId edge = 0;
  graph::StageId from = 0;
  graph::StageId to = 0;
  graph::GroupId src_group = 0;
  graph::GroupId dst_group = 0;
  double start_s = 0;  // >= end of `from` (later if the link was busy)
  double end_s = 0;    // arrival at `to`'s group
  int64_t bytes = 0;
  LinkKind link = LinkKind::kIntraNode;
};

struct MemoryPoint {
  double time_s = 0;
  int64_t bytes = 0;  // per GPU, after the change at time_s (static + activations + buffers)
};

struct GroupTimeline {
  double busy_s = 0;            // sum of stage latencies
  double first_start_s = 0;     // start of its first stage (0 if it has none)
  double last_end_s = 0;        // end of its last stage
  // DP gradient all-reduce: from grad_sync_start_s for grad_sync_s. A folded group starts at
  // last_end_s; a group in graph::GradSync sets starts when every member of its first set has
  // finished (grad_sync_s then spans its sets, waits between them included).
  double grad_sync_start_s = 0;
  double grad_sync_s = 0;
  double optimizer_s = 0;       // optimizer step, after the all-reduce
  double end_s = 0;             // grad_sync_start_s + grad_sync_s + optimizer_s
  int64_t static_bytes = 0;
  int64_t peak_bytes = 0;       // static + max of live activations + live boundary buffers
  int64_t peak_buffer_bytes = 0;  // max live boundary buffers (send, receive, local)
  // Offload (Stage::offload_bytes): bytes copied each way per GPU, and the time its backwards
  // waited for their H2D prefetch (the price of offload beyond the copy stream's overlap).
  int64_t offload_bytes = 0;
  double offload_wait_s = 0;
  std::vector<MemoryPoint> memory;  // starts with (0, static_bytes); empty if not recorded
};

struct OutOfMemory {
  graph::GroupId group = 0;   // host: the first offloading group on the node
  int64_t peak_bytes = 0;
  int64_t capacity_bytes = 0;
  int host_node = -1;         // >= 0: the offloaded bytes of this node exceed its host memory
};

struct Timeline {
  std::vector<StageTiming> stages;     // indexed by StageId
  std::vector<Transfer> transfers;     // in issue order (source finish time); empty if not recorded
  std::vector<GroupTimeline> groups;   // indexed by GroupId

  double iteration_time_s = 0;  // max over groups of end_s
  double pipeline_span_s = 0;   // max over stages of end_s (compute only, no DP sync/optimizer)
  // 1 − Σ_g gpus_g·busy_g / (Σ_g gpus_g · pipeline_span_s): idle GPU-time inside the pipeline
  // span, weighted by GPUs (num_gpus·dp). Equal stages under 1F1B give (p−1)/(m+p−1).
  double bubble_ratio = 0;

  // Lower bounds on iteration_time_s (no schedule can beat them):
  double busiest_group_work_s = 0;  // max_g busy_g + grad_sync_g + optimizer_g
  double critical_path_s = 0;       // longest dependency chain (stage latencies + unloaded
                                    // transfer times) + the tail of the group it ends on
  double lower_bound_s = 0;         // max of the two

  double model_flops = 0;    // per iteration, all replicas
  int num_gpus = 0;          // GPUs the iteration occupies
  double peak_flops_per_s = 0;  // per GPU
  double mfu = 0;            // model_flops / (num_gpus · peak_flops_per_s · iteration_time_s)
  double samples_per_iteration = 0;  // as given in SimOptions (0 = unknown)
  double tokens_per_iteration = 0;
  double samples_per_s = 0;
  double tokens_per_s = 0;

  int64_t capacity_bytes = 0;       // per GPU
  // Offloaded activations resident on the host, most of any node, against its host memory
  // (ClusterSpec::HostMemoryBytesPerNode); 0 when nothing is offloaded.
  int64_t host_peak_bytes_per_node = 0;
  int64_t host_capacity_bytes_per_node = 0;
  double offload_wait_s = 0;        // max over groups of GroupTimeline::offload_wait_s
  std::vector<OutOfMemory> oom;     // groups whose peak exceeds capacity, nodes whose host
                                    // memory overflows (host_node >= 0)

  // Gap to the physical limit: iteration_time_s / lower_bound_s − 1 (0 = optimal).
  double GapToLowerBound() const;
  // A few lines: iteration time, bounds and gap, bubble, MFU, throughput, peak memory, OOMs.
  std::string BriefReport() const;
};

}  // namespace weft::sim
