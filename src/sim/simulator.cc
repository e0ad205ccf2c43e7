#include "weft/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
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

// The running stages' ends, earliest first and ties by stage id (the order of std::greater on
// (end_s, stage) pairs; times are never NaN). Each group runs at most one stage, so this is a
// winner tree over the groups: a group's update replays its path to the root, log2(groups)
// comparisons, where a binary heap of events cost a push and a pop per stage.
class EndQueue {
 public:
  explicit EndQueue(int num_groups) {
    while (leaves_ < num_groups) leaves_ *= 2;
    node_.assign(2 * leaves_, Node{std::numeric_limits<double>::infinity(), kIdle, 0});
    for (int k = 0; k < leaves_; ++k) node_[leaves_ + k].group = k;
  }
  bool empty() const { return node_[1].stage == kIdle; }
  // The earliest end: its group, time and stage.
  GroupId top_group() const { return node_[1].group; }
  double top_end_s() const { return node_[1].end_s; }
  StageId top_stage() const { return node_[1].stage; }
  // Group g runs stage s until end_s.
  void Set(GroupId g, double end_s, StageId s) {
    Node carried{end_s, s, g};
    int i = leaves_ + g;
    node_[i] = carried;
    for (; i > 1; i /= 2) {
      const Node& sibling = node_[i ^ 1];
      if (sibling.end_s < carried.end_s ||
          (sibling.end_s == carried.end_s && sibling.stage < carried.stage)) {
        carried = sibling;
      }
      node_[i / 2] = carried;
    }
  }
  // Group g runs nothing.
  void Clear(GroupId g) { Set(g, std::numeric_limits<double>::infinity(), kIdle); }

 private:
  static constexpr StageId kIdle = std::numeric_limits<StageId>::max();
  struct Node {  // the earliest end below this node
    double end_s;
    StageId stage;
    GroupId group;
  };
  int leaves_ = 2;          // a power of two >= 2, so that the root is an inner node
  std::vector<Node> node_;  // [1, leaves): inner nodes; [leaves, 2·leaves): group k at leaves + k
};

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
  // Filled by the event loop for every stage and every compute slot before anything reads
  // them (a slot after a group's last compute has no stage nor timing): no zero fill.
  struct Timing {
    double start_s, end_s;
  };
  std::unique_ptr<int32_t[]> slot_of;  // per stage: its slot
  std::unique_ptr<StageId[]> stage_of;  // per compute slot: its stage
  std::unique_ptr<Timing[]> slot_timing;  // per compute slot: its compute
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
  const int32_t num_slots = b.slot_begin[num_groups];
  b.slot_of = std::make_unique_for_overwrite<int32_t[]>(num_stages);
  b.stage_of = std::make_unique_for_overwrite<StageId[]>(num_slots);
  b.slot_timing = std::make_unique_for_overwrite<BufferSlots::Timing[]>(num_slots);
  return b;
}

void PlaceBuffers(const StageGraph& graph,
                  const double* edge_arrival_s,  // per edge; set for cross-group edges
                  const std::vector<int32_t>& edge_link,
                  const std::vector<GroupId>& link_dst,
                  int64_t element_bytes,
                  bool record_times,
                  BufferSlots& b) {
  const int num_groups = graph.num_groups();
  const auto edges = graph.edges();
  const int32_t num_slots = b.slot_begin[num_groups];
  const BufferSlots::Timing* slot_timing = b.slot_timing.get();
  b.slots.resize(num_slots);
  if (record_times) b.send_free_s.assign(num_slots, 0.0);
  // Whole elements: ceil(bytes / element_bytes) · element_bytes (a mask for powers of two;
  // the mask of 1 byte, or less, keeps every byte).
  const bool masked = element_bytes <= 1 || (element_bytes & (element_bytes - 1)) == 0;
  const int64_t round_up = element_bytes > 1 ? element_bytes - 1 : 0;
  // By value: the slot sums below are int64 stores the compiler would otherwise assume alias
  // these and reload them every edge.
  auto buffer_bytes = [masked, round_up, element_bytes](int64_t bytes) {
    if (masked) return (bytes + round_up) & ~round_up;
    return (bytes + round_up) / element_bytes * element_bytes;
  };
  // Per channel (directed group pair = link), the smallest irecv slot of the sends after the
  // current one: walking each sender's order and out-edges backwards visits a channel's sends
  // in reverse (producer position, edge id) order, the compiler's matching order.
  std::vector<int32_t> channel_slot(link_dst.size(), std::numeric_limits<int32_t>::max());
  const StageId* stage_of = b.stage_of.get();
  const int32_t* slot_of = b.slot_of.get();
  SlotBytes* slots = b.slots.data();
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
        const int32_t to_slot = slot_of[edge.to];
        slots[j].produced += bytes;
        slots[to_slot + 1].freed += bytes;
        if (link < 0) continue;  // local buffer
        // Send buffer: wait_send in the first later slot whose compute starts at/after arrival.
        const double arrival_s = edge_arrival_s[e];
        const double arrived_s = arrival_s - kSlotEpsS;
        const int32_t ws = FirstPositionFromLow(j + 1, u_last, [&](int32_t q) {
          return slot_timing[q].start_s >= arrived_s;
        });
        slots[ws].freed += bytes;
        if (record_times) b.send_free_s[ws] = std::max(b.send_free_s[ws], arrival_s);
        // Receive buffer: irecv in the first slot whose compute ends after the sender posts.
        const double posted_s = slot_timing[j].end_s + kSlotEpsS;
        const int32_t v0 = b.slot_begin[link_dst[link]];
        int32_t slot = FirstPositionFromHigh(v0, to_slot, [&](int32_t q) {
          return slot_timing[q].end_s > posted_s;
        });
        int32_t& later = channel_slot[link];
        slot = std::min(slot, later);
        later = slot;
        slots[slot].received += bytes;
      }
    }
  }
}

// Offload copies (docs/simulator.md "Offload"). Each group has one copy stream (its GPUs copy
// alike): the D2H of an offloaded forward is queued when the forward ends; the H2D of its
// backward when the stage before that backward (in the group's order) starts and the D2H is
// queued, and the backward starts only when it has arrived. A copy's per-GPU rate is fixed when
// it starts: the link's bandwidth (H2D or D2H; halved while the group's inter-node traffic runs
// when the NIC shares the link), at most the node's host bandwidth divided by the GPUs of the
// node copying at that moment (this copy's included).
struct OffloadCopies {
  bool any = false;
  std::vector<StageId> forward_of;    // per offloaded backward: its forward; else -1
  std::vector<StageId> backward_of;   // per offloaded forward: its backward; else -1
  std::vector<double> d2h_start_s, d2h_end_s, h2d_end_s, prefetch_from_s;  // -1 = not yet
  std::vector<double> stream_free_s;  // per group
  // Per group: (node, GPUs of the group in it) over all its DP replicas.
  std::vector<std::vector<std::pair<int, int>>> nodes_of;
  struct Copy {
    double start_s, end_s;
    int gpus;
  };
  struct NodeCopies {
    std::vector<Copy> list;  // copies that may still run (and some that ended)
    size_t prune_at = 16;    // drop the ended ones when the list grows past this
  };
  std::vector<NodeCopies> node_copies;  // per node
  double now_s = 0;  // the event loop's time; no later copy starts before it

  double Issue(GroupId g, int64_t bytes, double link_bytes_per_s, double earliest_s,
               const spec::ClusterSpec& cluster, const std::vector<double>& egress_free_s,
               const std::vector<double>& ingress_free_s) {
    const double start_s = std::max(earliest_s, stream_free_s[g]);
    double link = link_bytes_per_s;
    if (cluster.nic_shares_host_link &&
        (egress_free_s[2 * g + 1] > start_s || ingress_free_s[2 * g + 1] > start_s)) {
      link /= 2;
    }
    double rate = link;
    for (const auto& [node, gpus] : nodes_of[g]) {
      const auto& list = node_copies[node].list;
      int copying = gpus;
      for (const Copy& c : list) {
        if (c.start_s <= start_s && c.end_s > start_s) copying += c.gpus;
      }
      rate = std::min(rate, cluster.SharedHostBandwidthBytesPerS(link, copying));
    }
    const double end_s = start_s + static_cast<double>(bytes) / rate;
    for (const auto& [node, gpus] : nodes_of[g]) {
      NodeCopies& copies = node_copies[node];
      // Copies start at or after the event loop's time, which only grows: one that ended by
      // then overlaps no later copy. Pruned when the list doubled since the last pruning (the
      // scans above stay short; the pruning costs as much as the scans it saves).
      if (copies.list.size() > copies.prune_at) {
        std::erase_if(copies.list, [&](const Copy& c) { return c.end_s <= now_s; });
        copies.prune_at = std::max<size_t>(16, 2 * copies.list.size());
      }
      copies.list.push_back({start_s, end_s, gpus});
    }
    stream_free_s[g] = end_s;
    return end_s;
  }
  void IssueD2h(StageId f, double t, const StageGraph& graph, const spec::ClusterSpec& cluster,
                const std::vector<double>& egress_free_s,
                const std::vector<double>& ingress_free_s) {
    const graph::Stage& st = graph.stage(f);
    d2h_start_s[f] = std::max(t, stream_free_s[st.group]);
    d2h_end_s[f] = Issue(st.group, st.offload_bytes, cluster.HostD2hBandwidthBytesPerS(), t,
                         cluster, egress_free_s, ingress_free_s);
  }
  void IssueH2d(StageId b, double t, const StageGraph& graph, const spec::ClusterSpec& cluster,
                const std::vector<double>& egress_free_s,
                const std::vector<double>& ingress_free_s) {
    const graph::Stage& st = graph.stage(b);
    const StageId f = forward_of[b];
    h2d_end_s[b] = Issue(st.group, st.offload_bytes, cluster.host_link_bandwidth_bytes_per_s,
                         std::max(t, d2h_end_s[f]), cluster, egress_free_s, ingress_free_s);
  }
  // Offloaded bytes held on each node's host from D2H start to H2D end (to the iteration's
  // end without a backward); a node over its host memory is out of memory.
  void CheckHostMemory(const StageGraph& graph, const spec::ClusterSpec& cluster,
                       Timeline& timeline) const {
    std::vector<std::vector<std::pair<double, int64_t>>> changes(node_copies.size());
    for (StageId f = 0; f < graph.num_stages(); ++f) {
      if (d2h_start_s[f] < 0) continue;
      const graph::Stage& st = graph.stage(f);
      const StageId b = backward_of[f];
      const double end_s = b >= 0 && h2d_end_s[b] >= 0 ? h2d_end_s[b]
                                                       : std::numeric_limits<double>::infinity();
      timeline.groups[st.group].offload_bytes += st.offload_bytes;
      for (const auto& [node, gpus] : nodes_of[st.group]) {
        changes[node].push_back({d2h_start_s[f], st.offload_bytes * gpus});
        changes[node].push_back({end_s, -st.offload_bytes * gpus});
      }
    }
    const int64_t capacity = cluster.HostMemoryBytesPerNode();
    timeline.host_capacity_bytes_per_node = capacity;
    for (size_t node = 0; node < changes.size(); ++node) {
      auto& c = changes[node];
      if (c.empty()) continue;
      // Frees before allocations at equal times (pair order; times are never NaN).
      std::sort(c.begin(), c.end(), [](const auto& a, const auto& b) {
        return a.first < b.first || (a.first == b.first && a.second < b.second);
      });
      int64_t live = 0, peak = 0;
      for (const auto& [time_s, bytes] : c) {
        live += bytes;
        peak = std::max(peak, live);
      }
      timeline.host_peak_bytes_per_node = std::max(timeline.host_peak_bytes_per_node, peak);
      if (peak > capacity) {
        GroupId first = 0;
        for (GroupId g = 0; g < graph.num_groups(); ++g) {
          if (timeline.groups[g].offload_bytes == 0) continue;
          bool here = false;
          for (const auto& [n, gpus] : nodes_of[g]) here = here || n == static_cast<int>(node);
          if (here) {
            first = g;
            break;
          }
        }
        timeline.oom.push_back(OutOfMemory{first, peak, capacity, static_cast<int>(node)});
      }
    }
    for (const GroupTimeline& gt : timeline.groups) {
      timeline.offload_wait_s = std::max(timeline.offload_wait_s, gt.offload_wait_s);
    }
  }
};

OffloadCopies MakeOffloadCopies(const StageGraph& graph, const spec::ClusterSpec& cluster) {
  OffloadCopies c;
  const int n = graph.num_stages();
  c.any = std::any_of(graph.stages().begin(), graph.stages().end(),
                      [](const graph::Stage& st) { return st.offload_bytes > 0; });
  if (!c.any) return c;
  c.forward_of.assign(n, -1);
  c.backward_of.assign(n, -1);
  c.d2h_start_s.assign(n, -1.0);
  c.d2h_end_s.assign(n, -1.0);
  c.h2d_end_s.assign(n, -1.0);
  c.prefetch_from_s.assign(n, -1.0);
  c.stream_free_s.assign(graph.num_groups(), 0.0);
  for (StageId f = 0; f < n; ++f) {
    const graph::Stage& fs = graph.stage(f);
    if (fs.pass != graph::Pass::kForward || fs.offload_bytes <= 0) continue;
    for (EdgeId e : graph.out_edges(f)) {
      const StageId b = graph.edge(e).to;
      const graph::Stage& bs = graph.stage(b);
      if (graph::IsBackward(bs.pass) && bs.group == fs.group && bs.module == fs.module &&
          bs.chunk == fs.chunk && bs.microbatch == fs.microbatch &&
          bs.sub_microbatch == fs.sub_microbatch && bs.offload_bytes > 0 &&
          c.forward_of[b] < 0) {
        c.forward_of[b] = f;
        c.backward_of[f] = b;
        break;
      }
    }
  }
  int num_nodes = std::max(1, cluster.num_nodes);
  c.nodes_of.resize(graph.num_groups());
  for (GroupId g = 0; g < graph.num_groups(); ++g) {
    const graph::DeviceGroup& group = graph.group(g);
    // Replica r holds GPUs [first_gpu + r·stride, + num_gpus): count them a node at a time,
    // in ascending node order.
    auto& nodes = c.nodes_of[g];
    for (int r = 0; r < group.dp; ++r) {
      const int first = group.first_gpu + r * group.DpStrideGpus();
      const int end = first + group.num_gpus;
      for (int gpu = first; gpu < end;) {
        const int node = NodeOf(gpu, cluster);
        const int node_end = std::min(end, (node + 1) * cluster.gpus_per_node);
        auto it = std::lower_bound(nodes.begin(), nodes.end(), node,
                                   [](const std::pair<int, int>& a, int b) { return a.first < b; });
        if (it != nodes.end() && it->first == node) {
          it->second += node_end - gpu;
        } else {
          nodes.insert(it, {node, node_end - gpu});
        }
        gpu = node_end;
      }
    }
    for (const auto& [node, gpus] : nodes) num_nodes = std::max(num_nodes, node + 1);
  }
  c.node_copies.resize(num_nodes);
  return c;
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
  // Per-edge arrays are written in full before they are read: no zero fill (it cost more than
  // the loop that writes them).
  auto edge_time_s = std::make_unique_for_overwrite<double[]>(edges.size());  // 0: same group
  std::vector<int32_t> edge_link(edges.size(), -1);
  int num_links = 0;
  std::vector<GroupId> link_dst;    // per link: its destination group
  std::vector<LinkKind> link_kind;  // per link: NVLink or network
  {
    const bool dense = num_groups <= 128;
    std::vector<int32_t> dense_slot(dense ? num_groups * num_groups : 0, -1);
    std::unordered_map<int64_t, int32_t> sparse_slot;
    // TransferTimeS per link kind, its denominator computed once (the same product).
    const spec::LinkSpec* link_spec[2] = {&cluster.intra_node, &cluster.inter_node};
    const double link_rate[2] = {
        cluster.intra_node.bandwidth_bytes_per_s * cluster.efficiency.network,
        cluster.inter_node.bandwidth_bytes_per_s * cluster.efficiency.network};
    for (size_t e = 0; e < edges.size(); ++e) {
      const GroupId a = stages[edges[e].from].group;
      const GroupId b = stages[edges[e].to].group;
      if (a == b) {
        edge_time_s[e] = 0.0;
        continue;
      }
      int32_t* slot;
      if (dense) {
        slot = &dense_slot[a * num_groups + b];
      } else {
        auto [it, inserted] = sparse_slot.try_emplace(int64_t{a} * num_groups + b, -1);
        slot = &it->second;
      }
      if (*slot < 0) {
        *slot = num_links++;
        link_kind.push_back(LinkBetween(groups[a], groups[b], cluster));
        link_dst.push_back(b);
      }
      edge_link[e] = *slot;
      const int port = link_kind[*slot] == LinkKind::kIntraNode ? 0 : 1;
      edge_time_s[e] =
          link_spec[port]->latency_s + static_cast<double>(edges[e].bytes) / link_rate[port];
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
  auto ready_s = std::make_unique_for_overwrite<double[]>(n);  // zeroed with `pending`
  std::vector<uint8_t> done(n, 0);
  for (int s = 0; s < n; ++s) {
    pending[s] = static_cast<int32_t>(graph.in_edges(s).size());
    ready_s[s] = 0.0;
  }
  std::vector<int32_t> cursor(num_groups, 0);
  std::vector<uint8_t> running(num_groups, 0);
  std::vector<double> group_free_s(num_groups);
  std::vector<double> link_free_s(num_links);
  std::vector<double> egress_free_s(2 * num_groups), ingress_free_s(2 * num_groups);
  // Written for every cross-group edge (the only ones PlaceBuffers reads).
  auto edge_arrival_s = std::make_unique_for_overwrite<double[]>(num_links > 0 ? edges.size() : 0);

  // --- offload: per-group copy streams sharing the node's host bandwidth ---------------------
  OffloadCopies copies = MakeOffloadCopies(graph, cluster);

  EndQueue events(num_groups);

  // Starts group g's next stage (it is idle and that stage's inputs have arrived).
  auto start = [&](GroupId g) {
    const auto& order = schedule.order[g];
    const StageId s = order[cursor[g]];
    double start_s = std::max(group_free_s[g], ready_s[s]);
    if (copies.any && copies.forward_of[s] >= 0) {
      // An offloaded backward waits for its prefetch (issued now at the latest).
      if (copies.h2d_end_s[s] < 0) {
        copies.IssueH2d(s, start_s, graph, cluster, egress_free_s, ingress_free_s);
      }
      const double wait_s = copies.h2d_end_s[s] - start_s;
      if (wait_s > 0) {
        timeline.groups[g].offload_wait_s += wait_s;
        start_s = copies.h2d_end_s[s];
      }
    }
    const double end_s = start_s + stages[s].latency_s;
    timeline.stages[s] = StageTiming{start_s, end_s};
    const int32_t slot = buffers.slot_begin[g] + cursor[g];
    buffers.slot_of[s] = slot;
    buffers.stage_of[slot] = s;
    buffers.slot_timing[slot] = {start_s, end_s};
    running[g] = 1;
    events.Set(g, end_s, s);
    // Prefetch the next stage's offloaded activations while this one runs.
    if (copies.any && cursor[g] + 1 < static_cast<int>(order.size())) {
      const StageId next = order[cursor[g] + 1];
      copies.prefetch_from_s[next] = start_s;
      if (copies.forward_of[next] >= 0 && copies.h2d_end_s[next] < 0 &&
          copies.d2h_end_s[copies.forward_of[next]] >= 0) {
        copies.IssueH2d(next, start_s, graph, cluster, egress_free_s, ingress_free_s);
      }
    }
  };
  // Starts group g's next stage if the group is idle and the stage ready (the common refusal
  // stays inline).
  auto try_start = [&](GroupId g) {
    if (running[g]) return;
    const auto& order = schedule.order[g];
    if (cursor[g] >= static_cast<int>(order.size()) || pending[order[cursor[g]]] > 0) return;
    start(g);
  };

  for (GroupId g = 0; g < num_groups; ++g) try_start(g);
  int completed = 0;
  while (!events.empty()) {
    const double t = events.top_end_s();
    const StageId s = events.top_stage();
    const GroupId g = events.top_group();
    copies.now_s = t;
    done[s] = 1;
    ++completed;
    running[g] = 0;
    group_free_s[g] = t;
    ++cursor[g];
    if (copies.any && stages[s].pass == graph::Pass::kForward && stages[s].offload_bytes > 0) {
      copies.IssueD2h(s, t, graph, cluster, egress_free_s, ingress_free_s);
      // A backward whose prefetch window opened before this copy was queued.
      const StageId b = copies.backward_of[s];
      if (b >= 0 && copies.h2d_end_s[b] < 0 && copies.prefetch_from_s[b] >= 0) {
        copies.IssueH2d(b, t, graph, cluster, egress_free_s, ingress_free_s);
      }
    }
    for (EdgeId e : graph.out_edges(s)) {
      const StageId to = edges[e].to;
      double arrival_s = t;
      const int32_t link = edge_link[e];
      if (link >= 0) {
        // Ports: the sender's egress and the receiver's ingress of the link's kind (NVLink or
        // network) carry one transfer at a time, whatever the peer.
        const LinkKind kind = link_kind[link];
        const int port = kind == LinkKind::kIntraNode ? 0 : 1;
        double& egress = egress_free_s[2 * g + port];
        double& ingress = ingress_free_s[2 * stages[to].group + port];
        const double start_s = std::max(std::max(t, link_free_s[link]), std::max(egress, ingress));
        arrival_s = start_s + edge_time_s[e];
        link_free_s[link] = arrival_s;
        egress = arrival_s;
        ingress = arrival_s;
        edge_arrival_s[e] = arrival_s;
        if (options.record_transfers) {
          timeline.transfers.push_back(Transfer{e, s, to, g, stages[to].group, start_s, arrival_s,
                                                edges[e].bytes, kind});
        }
      }
      if (arrival_s > ready_s[to]) ready_s[to] = arrival_s;
      if (--pending[to] == 0) try_start(stages[to].group);
    }
    try_start(g);
    if (!running[g]) events.Clear(g);
  }
  if (completed != n) return DeadlockError(graph, schedule, cursor, done);

  // --- per group: busy time, tail, memory -------------------------------------------------
  const int64_t capacity_bytes =
      options.capacity_bytes > 0 ? options.capacity_bytes : cluster.gpu.UsableMemoryBytes();
  timeline.capacity_bytes = capacity_bytes;
  double weighted_busy = 0, weighted_gpus = 0;
  std::vector<double> tail_s(num_groups);
  std::vector<uint8_t> in_sync_set(num_groups, 0);
  for (const graph::GradSync& sync : graph.grad_syncs()) {
    for (GroupId g : sync.groups) in_sync_set[g] = 1;
  }
  PlaceBuffers(graph, edge_arrival_s.get(), edge_link, link_dst, options.buffer_element_bytes,
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
  if (copies.any) copies.CheckHostMemory(graph, cluster, timeline);
  // Unfolded DP: each set starts when all its members are ready (their last stage, or their
  // previous set), in ascending (module, first group) order — the compiled plan's collective
  // order — and takes the ring time over the members' span.
  if (!graph.grad_syncs().empty()) {
    std::vector<const graph::GradSync*> syncs;
    for (const graph::GradSync& sync : graph.grad_syncs()) syncs.push_back(&sync);
    std::sort(syncs.begin(), syncs.end(), [](const graph::GradSync* a, const graph::GradSync* b) {
      return std::tie(a->module, a->groups.front()) < std::tie(b->module, b->groups.front());
    });
    std::vector<double> member_ready_s(num_groups), first_start_s(num_groups, -1.0);
    for (GroupId g = 0; g < num_groups; ++g) member_ready_s[g] = timeline.groups[g].last_end_s;
    for (const graph::GradSync* sync : syncs) {
      double start_s = 0;
      for (GroupId g : sync->groups) start_s = std::max(start_s, member_ready_s[g]);
      const double sync_s = options.include_grad_sync ? GradSyncSetTimeS(graph, *sync, cluster) : 0.0;
      for (GroupId g : sync->groups) {
        if (first_start_s[g] < 0) first_start_s[g] = start_s;
        member_ready_s[g] = start_s + sync_s;
        tail_s[g] += sync_s;
      }
    }
    for (GroupId g = 0; g < num_groups; ++g) {
      if (!in_sync_set[g]) continue;
      GroupTimeline& gt = timeline.groups[g];
      gt.grad_sync_start_s = first_start_s[g];
      gt.grad_sync_s = member_ready_s[g] - first_start_s[g];
      tail_s[g] += gt.optimizer_s;
      gt.end_s = member_ready_s[g] + gt.optimizer_s;
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
    // Written in topological order before any successor reads it: no zero fill.
    auto finish_s = std::make_unique_for_overwrite<double[]>(n);
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
