#include "weft/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <unordered_map>

#include <fmt/format.h>

namespace weft::sim {
namespace {

using graph::EdgeId;
using graph::GroupId;
using graph::StageGraph;
using graph::StageId;

Status CheckCluster(const spec::ClusterSpec& cluster) {
  if (cluster.gpus_per_node <= 0) {
    return InvalidArgumentError(
        fmt::format("cluster.gpus_per_node = {}; must be > 0", cluster.gpus_per_node));
  }
  if (!(cluster.intra_node.bandwidth_bytes_per_s > 0)) {
    return InvalidArgumentError(fmt::format("cluster.intra_node.bandwidth_bytes_per_s = {}; must be > 0",
                                            cluster.intra_node.bandwidth_bytes_per_s));
  }
  if (!(cluster.inter_node.bandwidth_bytes_per_s > 0)) {
    return InvalidArgumentError(fmt::format("cluster.inter_node.bandwidth_bytes_per_s = {}; must be > 0",
                                            cluster.inter_node.bandwidth_bytes_per_s));
  }
  if (!(cluster.efficiency.network > 0) || !(cluster.efficiency.memory > 0)) {
    return InvalidArgumentError(fmt::format(
        "cluster.efficiency.network = {}, memory = {}; must be > 0", cluster.efficiency.network,
        cluster.efficiency.memory));
  }
  return OkStatus();
}

// Node of a GPU id.
int NodeOf(int gpu, const spec::ClusterSpec& cluster) { return gpu / cluster.gpus_per_node; }

// True if GPUs [first, first + count) all lie in one node.
bool OneNode(int first, int count, const spec::ClusterSpec& cluster) {
  return NodeOf(first, cluster) == NodeOf(first + count - 1, cluster);
}

// Deadlock report: every group that still has work names where it waits and for what.
Status DeadlockError(const StageGraph& graph,
                     const sched::Schedule& schedule,
                     const std::vector<int32_t>& cursor,
                     const std::vector<uint8_t>& done) {
  std::string message = "deadlock: the schedule's orders contradict cross-group dependencies;";
  int listed = 0;
  for (int g = 0; g < graph.num_groups() && listed < 4; ++g) {
    if (cursor[g] >= static_cast<int>(schedule.order[g].size())) continue;
    StageId s = schedule.order[g][cursor[g]];
    StageId waits_for = -1;
    for (EdgeId e : graph.in_edges(s)) {
      if (!done[graph.edge(e).from]) {
        waits_for = graph.edge(e).from;
        break;
      }
    }
    message += fmt::format(" group {} waits at order[{}][{}] = stage {} ({})", g, g, cursor[g], s,
                           graph.StageName(s));
    if (waits_for >= 0) {
      message += fmt::format(" for stage {} ({}) of group {}", waits_for,
                             graph.StageName(waits_for), graph.stage(waits_for).group);
    }
    message += ";";
    ++listed;
  }
  message.pop_back();
  return FailedPreconditionError(std::move(message));
}


// Match tolerance of the plan compiler's slot placement (src/plan/compiler.cc, kTimeEpsS).
constexpr double kSlotEpsS = 1e-12;

// First position in [lo, hi) of a monotone predicate (false … false true … true), or hi.
template <typename Pred>
int32_t FirstPosition(int32_t lo, int32_t hi, Pred pred) {
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo) / 2;
    if (pred(mid)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

// The same, probing from lo upwards in doubling steps (cost log of the distance to the answer).
template <typename Pred>
int32_t FirstPositionFromLow(int32_t lo, int32_t hi, Pred pred) {
  int32_t probe = lo, step = 1;
  while (probe < hi && !pred(probe)) {
    lo = probe + 1;
    probe += step;
    step *= 2;
  }
  return FirstPosition(lo, std::min(probe, hi), pred);
}

// The same, probing from hi downwards in doubling steps.
template <typename Pred>
int32_t FirstPositionFromHigh(int32_t lo, int32_t hi, Pred pred) {
  int32_t probe = hi - 1, step = 1;
  while (probe >= lo && pred(probe)) {
    hi = probe;
    probe -= step;
    step *= 2;
  }
  return FirstPosition(std::max(probe + 1, lo), hi, pred);
}

// Boundary buffers of the compiled plan, per group and slot (slot j of a group = just before
// its j-th compute, slot |order| = after the last one), placed by CompilePlan's rules
// (include/weft/plan/compiler.h):
//  - a local buffer (same-group edge, bytes > 0) and a send buffer (cross-group edge) are
//    outputs of the producing compute; the local one is freed in the slot after its reader, the
//    send one (wait_send + free) in the first slot after the producer whose compute starts at or
//    after the transfer's arrival, else the last slot;
//  - a receive buffer is allocated by its irecv in the first slot whose compute ends after the
//    producer ends (at the latest the reader's slot), made non-decreasing along each channel's
//    send order (binding only at ties), and freed in the slot after its reader.
// Inside a slot the plan runs irecvs, then frees (and wait_sends with their frees).
struct SlotBytes {
  int64_t received = 0;  // allocated by the slot's irecvs
  int64_t freed = 0;     // freed by the slot's frees
  int64_t produced = 0;  // local and send buffers the slot's compute produces
};

struct BufferSlots {
  std::vector<int32_t> slot_begin;        // per group: index of its slot 0
  std::vector<int32_t> slot_of;           // per stage: its slot (filled by the event loop)
  std::vector<StageTiming> slot_timing;   // per slot: its compute (filled by the event loop)
  std::vector<SlotBytes> slots;
  std::vector<double> send_free_s;        // per slot: latest arrival of a send freed there (curves)
};

BufferSlots MakeBufferSlots(const sched::Schedule& schedule, int num_stages) {
  BufferSlots b;
  const int num_groups = static_cast<int>(schedule.order.size());
  b.slot_begin.resize(num_groups + 1);
  for (GroupId g = 0; g < num_groups; ++g) {
    b.slot_begin[g + 1] = b.slot_begin[g] + static_cast<int32_t>(schedule.order[g].size()) + 1;
  }
  b.slot_of.resize(num_stages);
  b.slot_timing.resize(b.slot_begin[num_groups]);
  return b;
}

void PlaceBuffers(const StageGraph& graph,
                  const std::vector<double>& edge_arrival_s,
                  const std::vector<int32_t>& edge_link,
                  const std::vector<GroupId>& link_dst,
                  int64_t element_bytes,
                  bool record_times,
                  BufferSlots& b) {
  const int num_groups = graph.num_groups();
  const auto edges = graph.edges();
  const int32_t num_slots = b.slot_begin[num_groups];
  const std::vector<StageTiming>& slot_timing = b.slot_timing;
  b.slots.resize(num_slots);
  if (record_times) b.send_free_s.assign(num_slots, 0.0);
  // Whole elements: ceil(bytes / element_bytes) · element_bytes (a mask for powers of two).
  const bool power_of_two = element_bytes > 0 && (element_bytes & (element_bytes - 1)) == 0;
  auto buffer_bytes = [&](int64_t bytes) {
    if (element_bytes <= 1) return bytes;
    if (power_of_two) return (bytes + element_bytes - 1) & ~(element_bytes - 1);
    return (bytes + element_bytes - 1) / element_bytes * element_bytes;
  };
  // Per channel (directed group pair = link), the smallest irecv slot of the sends after the
  // current one: walking each sender's order and out-edges backwards visits a channel's sends
  // in reverse (producer position, edge id) order, the compiler's matching order.
  std::vector<int32_t> channel_slot(link_dst.size(), std::numeric_limits<int32_t>::max());
  std::vector<StageId> stage_of(num_slots);
  for (StageId s = 0; s < graph.num_stages(); ++s) stage_of[b.slot_of[s]] = s;
  for (GroupId gu = 0; gu < num_groups; ++gu) {
    const int32_t u0 = b.slot_begin[gu];
    const int32_t u_last = b.slot_begin[gu + 1] - 1;  // the slot after the last compute
    for (int32_t j = u_last; j-- > u0;) {
      const StageId s = stage_of[j];
      const auto out = graph.out_edges(s);
      for (size_t k = out.size(); k-- > 0;) {
        const EdgeId e = out[k];
        const graph::Edge& edge = edges[e];
        const int32_t link = edge_link[e];
        if (edge.bytes == 0 && link < 0) continue;  // same-group ordering edge
        const int64_t bytes = buffer_bytes(edge.bytes);
        const int32_t to_slot = b.slot_of[edge.to];
        b.slots[j].produced += bytes;
        b.slots[to_slot + 1].freed += bytes;
        if (link < 0) continue;  // local buffer
        // Send buffer: wait_send in the first later slot whose compute starts at/after arrival.
        const double arrival_s = edge_arrival_s[e];
        const int32_t ws = FirstPositionFromLow(j + 1, u_last, [&](int32_t q) {
          return slot_timing[q].start_s >= arrival_s - kSlotEpsS;
        });
        b.slots[ws].freed += bytes;
        if (record_times) b.send_free_s[ws] = std::max(b.send_free_s[ws], arrival_s);
        // Receive buffer: irecv in the first slot whose compute ends after the sender posts.
        const double post_s = slot_timing[j].end_s;
        const int32_t v0 = b.slot_begin[link_dst[link]];
        int32_t slot = FirstPositionFromHigh(v0, to_slot, [&](int32_t q) {
          return slot_timing[q].end_s > post_s + kSlotEpsS;
        });
        int32_t& later = channel_slot[link];
        slot = std::min(slot, later);
        later = slot;
        b.slots[slot].received += bytes;
      }
    }
  }
}

}  // namespace

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
  return OneNode(lo, hi - lo, cluster) ? LinkKind::kIntraNode : LinkKind::kInterNode;
}

double TransferTimeS(int64_t bytes, LinkKind link, const spec::ClusterSpec& cluster) {
  if (link == LinkKind::kSameGroup) return 0.0;
  const spec::LinkSpec& spec = link == LinkKind::kIntraNode ? cluster.intra_node : cluster.inter_node;
  return spec.latency_s +
         static_cast<double>(bytes) / (spec.bandwidth_bytes_per_s * cluster.efficiency.network);
}

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

double GradSyncTimeS(const graph::DeviceGroup& group, const spec::ClusterSpec& cluster) {
  const int d = group.dp;
  const int span = (d - 1) * group.DpStrideGpus() + group.num_gpus;
  return RingAllReduceTimeS(d, group.grad_sync_bytes, group.first_gpu, span, cluster);
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

double OptimizerStepTimeS(const graph::DeviceGroup& group, const spec::ClusterSpec& cluster) {
  if (group.optimizer_bytes <= 0) return 0.0;
  const double bw = cluster.gpu.hbm_bandwidth_bytes_per_s * cluster.efficiency.memory;
  if (!(bw > 0)) return 0.0;
  return static_cast<double>(group.optimizer_bytes) / bw;
}

StatusOr<Timeline> Simulate(const StageGraph& graph,
                            const sched::Schedule& schedule,
                            const spec::ClusterSpec& cluster,
                            const SimOptions& options) {
  if (!graph.finalized()) {
    return InvalidArgumentError("Simulate needs a finalized stage graph (call Finalize())");
  }
  WEFT_RETURN_IF_ERROR(CheckCluster(cluster));
  if (options.validate_schedule) {
    WEFT_RETURN_IF_ERROR(schedule.Validate(graph).WithPrefix("schedule"));
  } else if (static_cast<int>(schedule.order.size()) != graph.num_groups()) {
    return InvalidArgumentError(fmt::format("schedule.order.size() = {}; must equal the number of groups ({})",
                                            schedule.order.size(), graph.num_groups()));
  }
  const int n = graph.num_stages();
  const int num_groups = graph.num_groups();
  const auto stages = graph.stages();
  const auto edges = graph.edges();
  const auto groups = graph.groups();

  // Per-edge link and unloaded transfer time; per directed group pair a link slot.
  std::vector<double> edge_time_s(edges.size(), 0.0);
  std::vector<int32_t> edge_link(edges.size(), -1);
  std::vector<LinkKind> edge_kind(edges.size(), LinkKind::kSameGroup);
  int num_links = 0;
  std::vector<GroupId> link_dst;  // per link: its destination group
  {
    const bool dense = num_groups <= 128;
    std::vector<int32_t> dense_slot(dense ? num_groups * num_groups : 0, -1);
    std::unordered_map<int64_t, int32_t> sparse_slot;
    std::vector<LinkKind> pair_kind;
    for (size_t e = 0; e < edges.size(); ++e) {
      const GroupId a = stages[edges[e].from].group;
      const GroupId b = stages[edges[e].to].group;
      if (a == b) continue;
      int32_t* slot;
      if (dense) {
        slot = &dense_slot[a * num_groups + b];
      } else {
        auto [it, inserted] = sparse_slot.try_emplace(int64_t{a} * num_groups + b, -1);
        slot = &it->second;
      }
      if (*slot < 0) {
        *slot = num_links++;
        pair_kind.push_back(LinkBetween(groups[a], groups[b], cluster));
        link_dst.push_back(b);
      }
      edge_link[e] = *slot;
      edge_kind[e] = pair_kind[*slot];
      edge_time_s[e] = TransferTimeS(edges[e].bytes, edge_kind[e], cluster);
    }
  }

  Timeline timeline;
  timeline.stages.resize(n);
  timeline.groups.resize(num_groups);
  if (options.record_transfers) timeline.transfers.reserve(num_links > 0 ? edges.size() : 0);

  // Boundary buffers: the event loop records each stage's slot and the slots' compute times.
  BufferSlots buffers = MakeBufferSlots(schedule, n);

  // --- event simulation ---------------------------------------------------------------------
  std::vector<int32_t> pending(n);
  std::vector<double> ready_s(n, 0.0);
  std::vector<uint8_t> done(n, 0);
  for (int s = 0; s < n; ++s) pending[s] = static_cast<int32_t>(graph.in_edges(s).size());
  std::vector<int32_t> cursor(num_groups, 0);
  std::vector<uint8_t> running(num_groups, 0);
  std::vector<double> group_free_s(num_groups, 0.0);
  std::vector<double> link_free_s(num_links, 0.0);
  std::vector<double> egress_free_s(2 * num_groups, 0.0), ingress_free_s(2 * num_groups, 0.0);
  std::vector<double> edge_arrival_s(num_links > 0 ? edges.size() : 0, 0.0);

  using Event = std::pair<double, StageId>;  // (end time, stage); ties by stage id
  std::vector<Event> heap_storage;
  heap_storage.reserve(num_groups + 1);
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events(std::greater<>{},
                                                                        std::move(heap_storage));

  auto try_start = [&](GroupId g) {
    if (running[g]) return;
    const auto& order = schedule.order[g];
    if (cursor[g] >= static_cast<int>(order.size())) return;
    const StageId s = order[cursor[g]];
    if (pending[s] > 0) return;
    const double start_s = std::max(group_free_s[g], ready_s[s]);
    const double end_s = start_s + stages[s].latency_s;
    timeline.stages[s] = StageTiming{start_s, end_s};
    const int32_t slot = buffers.slot_begin[g] + cursor[g];
    buffers.slot_of[s] = slot;
    buffers.slot_timing[slot] = StageTiming{start_s, end_s};
    running[g] = 1;
    events.push({end_s, s});
  };

  for (GroupId g = 0; g < num_groups; ++g) try_start(g);
  int completed = 0;
  while (!events.empty()) {
    const auto [t, s] = events.top();
    events.pop();
    const GroupId g = stages[s].group;
    done[s] = 1;
    ++completed;
    running[g] = 0;
    group_free_s[g] = t;
    ++cursor[g];
    for (EdgeId e : graph.out_edges(s)) {
      const StageId to = edges[e].to;
      double arrival_s = t;
      const int32_t link = edge_link[e];
      if (link >= 0) {
        // Ports: the sender's egress and the receiver's ingress of the link's kind (NVLink or
        // network) carry one transfer at a time, whatever the peer.
        const int kind = edge_kind[e] == LinkKind::kIntraNode ? 0 : 1;
        double& egress = egress_free_s[2 * g + kind];
        double& ingress = ingress_free_s[2 * stages[to].group + kind];
        const double start_s = std::max({t, link_free_s[link], egress, ingress});
        arrival_s = start_s + edge_time_s[e];
        link_free_s[link] = arrival_s;
        egress = arrival_s;
        ingress = arrival_s;
        edge_arrival_s[e] = arrival_s;
        if (options.record_transfers) {
          timeline.transfers.push_back(Transfer{e, s, to, g, stages[to].group, start_s, arrival_s,
                                                edges[e].bytes, edge_kind[e]});
        }
      }
      if (arrival_s > ready_s[to]) ready_s[to] = arrival_s;
      if (--pending[to] == 0) try_start(stages[to].group);
    }
    try_start(g);
  }
  if (completed != n) return DeadlockError(graph, schedule, cursor, done);

  // --- per group: busy time, tail, memory -------------------------------------------------
  const int64_t capacity_bytes =
      options.capacity_bytes > 0 ? options.capacity_bytes : cluster.gpu.UsableMemoryBytes();
  timeline.capacity_bytes = capacity_bytes;
  double weighted_busy = 0, weighted_gpus = 0;
  std::vector<double> tail_s(num_groups, 0.0);
  std::vector<uint8_t> in_sync_set(num_groups, 0);
  for (const graph::GradSync& sync : graph.grad_syncs()) {
    for (GroupId g : sync.groups) in_sync_set[g] = 1;
  }
  PlaceBuffers(graph, edge_arrival_s, edge_link, link_dst, options.buffer_element_bytes,
               options.record_memory_curves, buffers);
  for (GroupId g = 0; g < num_groups; ++g) {
    GroupTimeline& gt = timeline.groups[g];
    const graph::DeviceGroup& group = groups[g];
    const auto& order = schedule.order[g];
    const int32_t slot0 = buffers.slot_begin[g];
    gt.static_bytes = group.static_bytes;
    // The plan validator's replay (src/plan/validator.cc): memory is noted after each irecv and
    // after each compute (its activation allocation and output buffers counted, its activation
    // free not yet).
    int64_t live = group.static_bytes, live_buffers = 0;
    gt.peak_bytes = live;
    auto note = [&] {
      gt.peak_bytes = std::max(gt.peak_bytes, live);
      gt.peak_buffer_bytes = std::max(gt.peak_buffer_bytes, live_buffers);
    };
    const bool curves = options.record_memory_curves;
    if (curves) {
      gt.memory.reserve(4 * order.size() + 2);
      gt.memory.push_back({0.0, live});
    }
    const int32_t size = static_cast<int32_t>(order.size());
    for (int32_t j = 0; j <= size; ++j) {
      // Slot j runs when compute j − 1 ends.
      const double slot_s = j > 0 ? buffers.slot_timing[slot0 + j - 1].end_s : 0.0;
      const SlotBytes& slot = buffers.slots[slot0 + j];
      if (slot.received != 0) {
        live += slot.received;
        live_buffers += slot.received;
        note();
        if (curves) gt.memory.push_back({slot_s, live});
      }
      if (slot.freed != 0) {
        live -= slot.freed;
        live_buffers -= slot.freed;
        if (curves) {  // after the last wait_send returns (before compute j starts)
          double t = std::max(slot_s, buffers.send_free_s[slot0 + j]);
          if (j < size) t = std::min(t, buffers.slot_timing[slot0 + j].start_s);
          gt.memory.push_back({t, live});
        }
      }
      if (j == size) break;
      const graph::Stage& st = stages[order[j]];
      gt.busy_s += st.latency_s;
      const int64_t produced = slot.produced;
      live += st.activation_alloc_bytes + produced;
      live_buffers += produced;
      note();
      if (curves && st.activation_alloc_bytes + produced != 0) {
        gt.memory.push_back({buffers.slot_timing[slot0 + j].start_s, live});
      }
      if (st.activation_free_bytes != 0) {
        live -= st.activation_free_bytes;
        if (curves) gt.memory.push_back({buffers.slot_timing[slot0 + j].end_s, live});
      }
    }
    if (!order.empty()) {
      gt.first_start_s = timeline.stages[order.front()].start_s;
      gt.last_end_s = timeline.stages[order.back()].end_s;
    }
    gt.optimizer_s = options.include_optimizer_step ? OptimizerStepTimeS(group, cluster) : 0.0;
    gt.grad_sync_start_s = gt.last_end_s;
    if (!in_sync_set[g]) {
      gt.grad_sync_s = options.include_grad_sync ? GradSyncTimeS(group, cluster) : 0.0;
      tail_s[g] = gt.grad_sync_s + gt.optimizer_s;
      gt.end_s = gt.last_end_s + tail_s[g];
    }
    timeline.pipeline_span_s = std::max(timeline.pipeline_span_s, gt.last_end_s);
    const double gpus = group.TotalGpus();
    weighted_busy += gpus * gt.busy_s;
    weighted_gpus += gpus;
    if (capacity_bytes > 0 && gt.peak_bytes > capacity_bytes) {
      timeline.oom.push_back(OutOfMemory{g, gt.peak_bytes, capacity_bytes});
    }
  }
  // Unfolded DP: each set starts when all its members are ready (their last stage, or their
  // previous set), in ascending (module, first group) order — the compiled plan's collective
  // order — and takes the ring time over the members' span.
  if (!graph.grad_syncs().empty()) {
    std::vector<const graph::GradSync*> syncs;
    for (const graph::GradSync& sync : graph.grad_syncs()) syncs.push_back(&sync);
    std::sort(syncs.begin(), syncs.end(), [](const graph::GradSync* a, const graph::GradSync* b) {
      return std::tie(a->module, a->groups.front()) < std::tie(b->module, b->groups.front());
    });
    std::vector<double> ready_s(num_groups), first_start_s(num_groups, -1.0);
    for (GroupId g = 0; g < num_groups; ++g) ready_s[g] = timeline.groups[g].last_end_s;
    for (const graph::GradSync* sync : syncs) {
      double start_s = 0;
      for (GroupId g : sync->groups) start_s = std::max(start_s, ready_s[g]);
      const double sync_s = options.include_grad_sync ? GradSyncSetTimeS(graph, *sync, cluster) : 0.0;
      for (GroupId g : sync->groups) {
        if (first_start_s[g] < 0) first_start_s[g] = start_s;
        ready_s[g] = start_s + sync_s;
        tail_s[g] += sync_s;
      }
    }
    for (GroupId g = 0; g < num_groups; ++g) {
      if (!in_sync_set[g]) continue;
      GroupTimeline& gt = timeline.groups[g];
      gt.grad_sync_start_s = first_start_s[g];
      gt.grad_sync_s = ready_s[g] - first_start_s[g];
      tail_s[g] += gt.optimizer_s;
      gt.end_s = ready_s[g] + gt.optimizer_s;
    }
  }
  for (GroupId g = 0; g < num_groups; ++g) {
    timeline.iteration_time_s = std::max(timeline.iteration_time_s, timeline.groups[g].end_s);
    timeline.busiest_group_work_s =
        std::max(timeline.busiest_group_work_s, timeline.groups[g].busy_s + tail_s[g]);
  }
  if (options.fail_on_oom && !timeline.oom.empty()) {
    const OutOfMemory& o = timeline.oom.front();
    return ResourceExhaustedError(fmt::format(
        "group {} ({}) peaks at {:.2f} GiB per GPU; capacity is {:.2f} GiB ({} group(s) out of "
        "memory)",
        o.group, groups[o.group].label, o.peak_bytes / 1073741824.0,
        o.capacity_bytes / 1073741824.0, timeline.oom.size()));
  }
  timeline.bubble_ratio =
      timeline.pipeline_span_s > 0 && weighted_gpus > 0
          ? 1.0 - weighted_busy / (weighted_gpus * timeline.pipeline_span_s)
          : 0.0;

  // --- critical path (unloaded transfers, no resource conflicts) ----------------------------
  {
    std::vector<double> finish_s(n, 0.0);
    double critical = 0;
    for (StageId s : graph.topological_order()) {
      double begin_s = 0;
      for (EdgeId e : graph.in_edges(s)) {
        begin_s = std::max(begin_s, finish_s[edges[e].from] + edge_time_s[e]);
      }
      finish_s[s] = begin_s + stages[s].latency_s;
      critical = std::max(critical, finish_s[s] + tail_s[stages[s].group]);
    }
    for (GroupId g = 0; g < num_groups; ++g) critical = std::max(critical, tail_s[g]);
    timeline.critical_path_s = critical;
  }
  timeline.lower_bound_s = std::max(timeline.busiest_group_work_s, timeline.critical_path_s);

  // --- throughput and MFU -------------------------------------------------------------------
  if (options.model_flops > 0) {
    timeline.model_flops = options.model_flops;
  } else {
    for (const graph::Stage& st : stages) timeline.model_flops += st.flops * groups[st.group].dp;
  }
  if (options.num_gpus > 0) {
    timeline.num_gpus = options.num_gpus;
  } else {
    for (const graph::DeviceGroup& group : groups) timeline.num_gpus += group.TotalGpus();
  }
  timeline.peak_flops_per_s = cluster.gpu.peak_bf16_flops_per_s;
  const double denom =
      timeline.num_gpus * timeline.peak_flops_per_s * timeline.iteration_time_s;
  timeline.mfu = denom > 0 ? timeline.model_flops / denom : 0.0;
  timeline.samples_per_iteration = options.samples_per_iteration;
  timeline.tokens_per_iteration = options.tokens_per_iteration;
  if (timeline.iteration_time_s > 0) {
    timeline.samples_per_s = options.samples_per_iteration / timeline.iteration_time_s;
    timeline.tokens_per_s = options.tokens_per_iteration / timeline.iteration_time_s;
  }
  return timeline;
}

}  // namespace weft::sim
