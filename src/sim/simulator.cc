#include "weft/sim/simulator.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <unordered_map>

#include <fmt/format.h>

#include "weft/sim/buffer_slots.h"

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
                     const std::vector<int32_t>& cursor) {
  // A stage is done when it lies before its group's cursor.
  std::vector<uint8_t> done(graph.num_stages(), 0);
  for (int g = 0; g < graph.num_groups(); ++g) {
    for (int j = 0; j < cursor[g]; ++j) done[schedule.order[g][j]] = 1;
  }
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
// its j-th compute, slot |order| = after the last one), placed by the rule CompilePlan places
// them by (include/weft/sim/buffer_slots.h: FreeSlot, WaitSendSlot, IrecvSlot and
// KeepChannelOrder; the channel order binds only at ties here, since a channel's sends leave in
// time order).
// Inside a slot the plan runs irecvs, then frees (and wait_sends with their frees).
// The event loop counts the outputs and the frees after each reader (sums: their order does
// not matter) and lists the transfers; PlaceTransfers places the wait_sends and irecvs, which
// need the compute times of later slots.
struct SlotBytes {
  int64_t received = 0;  // allocated by the slot's irecvs
  int64_t freed = 0;     // freed by the slot's frees
  int64_t produced = 0;  // local and send buffers the slot's compute produces
};

struct BufferSlots {
  std::vector<int32_t> slot_begin;        // per group: index of its slot 0
  // Filled by the event loop for every stage and every compute slot before anything reads
  // them (a slot after a group's last compute has no timing); zero-filled first all the same
  // (MakeBufferSlots).
  struct Timing {
    double start_s, end_s;
  };
  std::unique_ptr<int32_t[]> slot_of;  // per stage: its slot
  std::unique_ptr<Timing[]> slot_timing;  // per compute slot: its compute
  std::vector<SlotBytes> slots;
  std::vector<double> send_free_s;        // per slot: latest arrival of a send freed there (curves)
  // One per cross-group edge, in the order the event loop sends them: on each channel (link)
  // the order of the producers' slots, then of their out-edges.
  struct Send {
    double arrival_s;
    int64_t bytes;       // whole elements
    int32_t slot;        // the producer's
    int32_t last_slot;   // the producer group's slot after its last compute
    // The reader group's first slot whose compute had not ended when the producer ended: no
    // earlier one ends after the producer (events end in time order).
    int32_t first_open_slot;
    int32_t link;
    StageId to;
  };
  std::vector<Send> sends;
};

BufferSlots MakeBufferSlots(const sched::Schedule& schedule, int num_stages) {
  BufferSlots b;
  const int num_groups = static_cast<int>(schedule.order.size());
  b.slot_begin.resize(num_groups + 1);
  for (GroupId g = 0; g < num_groups; ++g) {
    b.slot_begin[g + 1] = b.slot_begin[g] + static_cast<int32_t>(schedule.order[g].size()) + 1;
  }
  const int32_t num_slots = b.slot_begin[num_groups];
  // Zero-filled, not left for the event loop to fill: with validate_schedule off (DIP's search
  // loops) an invalid order could leave a stage unstarted, and its reads must stay in bounds.
  b.slot_of = std::make_unique<int32_t[]>(num_stages);
  b.slot_timing = std::make_unique<BufferSlots::Timing[]>(num_slots);
  b.slots.resize(num_slots);
  return b;
}

// Whole elements: ceil(bytes / element_bytes) · element_bytes (a mask for powers of two; the
// mask of 1 byte, or less, keeps every byte).
class BufferRounding {
 public:
  explicit BufferRounding(int64_t element_bytes)
      : masked_(element_bytes <= 1 || (element_bytes & (element_bytes - 1)) == 0),
        round_up_(element_bytes > 1 ? element_bytes - 1 : 0),
        element_bytes_(element_bytes) {}
  int64_t operator()(int64_t bytes) const {
    if (masked_) return (bytes + round_up_) & ~round_up_;
    return (bytes + round_up_) / element_bytes_ * element_bytes_;
  }

 private:
  bool masked_;
  int64_t round_up_, element_bytes_;
};

// The wait_send and irecv slots of the event loop's sends. Walking them backwards visits each
// channel's sends in reverse (producer position, edge id) order, the compiler's matching
// order: per channel, the smallest irecv slot of the sends after the current one.
void PlaceTransfers(int num_links, bool record_times, BufferSlots& b) {
  const BufferSlots::Timing* slot_timing = b.slot_timing.get();
  const int32_t* slot_of = b.slot_of.get();
  SlotBytes* slots = b.slots.data();
  if (record_times) b.send_free_s.assign(b.slots.size(), 0.0);
  std::vector<int32_t> channel_slot(num_links, std::numeric_limits<int32_t>::max());
  for (size_t k = b.sends.size(); k-- > 0;) {
    const BufferSlots::Send& send = b.sends[k];
    const int32_t j = send.slot;
    // Send buffer: wait_send in the first later slot whose compute starts at/after arrival.
    const int32_t ws = WaitSendSlot(j + 1, send.last_slot, send.arrival_s,
                                    [&](int32_t q) { return slot_timing[q].start_s; });
    slots[ws].freed += send.bytes;
    if (record_times) b.send_free_s[ws] = std::max(b.send_free_s[ws], send.arrival_s);
    // Receive buffer: irecv in the first slot whose compute ends after the sender posts, in the
    // channel's order.
    const int32_t slot = KeepChannelOrder(
        IrecvSlot(send.first_open_slot, slot_of[send.to], slot_timing[j].end_s,
                  [&](int32_t q) { return slot_timing[q].end_s; }),
        channel_slot[send.link]);
    slots[slot].received += send.bytes;
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
  // One per offloaded forward, in stage id order: its backward (-1 if none) and its copies.
  struct Item {
    StageId forward, backward;
    double d2h_start_s = -1, d2h_end_s = -1, h2d_end_s = -1;  // -1 = not yet
    double prefetch_from_s = -1;  // the backward's prefetch window opened; -1 = not yet
  };
  std::vector<Item> items;
  // Per stage: the item of an offloaded forward or of the backward paired with one; else -1.
  // (One array, not per-stage copy times: most stages offload nothing.)
  std::vector<int32_t> item_of;
  std::vector<double> stream_free_s;  // per group
  // Nodes that hold the same groups with the same GPU counts (e.g. the DP replicas of a
  // pipeline, one node each) see the same copies: they form one class, whose copies are kept
  // once. Per group: (class, GPUs of the group on each node of the class), over all its DP
  // replicas; per node: its class.
  std::vector<std::vector<std::pair<int, int>>> classes_of;
  std::vector<int> class_of_node;
  struct Copy {
    double start_s, end_s;
    int gpus;
  };
  struct NodeCopies {
    std::vector<Copy> list;  // copies that may still run (and some that ended)
    size_t prune_at = 16;    // drop the ended ones when the list grows past this
  };
  std::vector<NodeCopies> node_copies;  // per node class
  double now_s = 0;  // the event loop's time; no later copy starts before it

  // The item whose backward is `s`, or nullptr.
  Item* BackwardItem(StageId s) {
    const int32_t k = item_of[s];
    return k >= 0 && items[k].backward == s ? &items[k] : nullptr;
  }
  // The item whose forward is `s`, or nullptr.
  Item* ForwardItem(StageId s) {
    const int32_t k = item_of[s];
    return k >= 0 && items[k].forward == s ? &items[k] : nullptr;
  }

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
    for (const auto& [node, gpus] : classes_of[g]) {
      const auto& list = node_copies[node].list;
      int copying = gpus;
      for (const Copy& c : list) {
        if (c.start_s <= start_s && c.end_s > start_s) copying += c.gpus;
      }
      rate = std::min(rate, cluster.SharedHostBandwidthBytesPerS(link, copying));
    }
    const double end_s = start_s + static_cast<double>(bytes) / rate;
    for (const auto& [node, gpus] : classes_of[g]) {
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
  void IssueD2h(Item& item, double t, const StageGraph& graph, const spec::ClusterSpec& cluster,
                const std::vector<double>& egress_free_s,
                const std::vector<double>& ingress_free_s) {
    const graph::Stage& st = graph.stage(item.forward);
    item.d2h_start_s = std::max(t, stream_free_s[st.group]);
    item.d2h_end_s = Issue(st.group, st.offload_bytes, cluster.HostD2hBandwidthBytesPerS(), t,
                           cluster, egress_free_s, ingress_free_s);
  }
  void IssueH2d(Item& item, double t, const StageGraph& graph, const spec::ClusterSpec& cluster,
                const std::vector<double>& egress_free_s,
                const std::vector<double>& ingress_free_s) {
    const graph::Stage& st = graph.stage(item.backward);
    item.h2d_end_s = Issue(st.group, st.offload_bytes, cluster.host_link_bandwidth_bytes_per_s,
                           std::max(t, item.d2h_end_s), cluster, egress_free_s, ingress_free_s);
  }
  // Offloaded bytes held on each node's host from D2H start to H2D end (to the iteration's
  // end without a backward); a node over its host memory is out of memory.
  void CheckHostMemory(const StageGraph& graph, const spec::ClusterSpec& cluster,
                       Timeline& timeline) const {
    std::vector<std::vector<std::pair<double, int64_t>>> changes(node_copies.size());  // per class
    for (const Item& item : items) {
      if (item.d2h_start_s < 0) continue;
      const graph::Stage& st = graph.stage(item.forward);
      const double end_s = item.backward >= 0 && item.h2d_end_s >= 0
                               ? item.h2d_end_s
                               : std::numeric_limits<double>::infinity();
      timeline.groups[st.group].offload_bytes += st.offload_bytes;
      for (const auto& [k, gpus] : classes_of[st.group]) {
        changes[k].push_back({item.d2h_start_s, st.offload_bytes * gpus});
        changes[k].push_back({end_s, -st.offload_bytes * gpus});
      }
    }
    const int64_t capacity = cluster.HostMemoryBytesPerNode();
    timeline.host_capacity_bytes_per_node = capacity;
    // Per class: its peak (-1: no copies) and the first group with offloaded bytes on it.
    std::vector<int64_t> peak_of(changes.size(), -1);
    std::vector<GroupId> first_of(changes.size(), 0);
    for (size_t k = 0; k < changes.size(); ++k) {
      auto& c = changes[k];
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
      peak_of[k] = peak;
      timeline.host_peak_bytes_per_node = std::max(timeline.host_peak_bytes_per_node, peak);
      for (GroupId g = graph.num_groups() - 1; g >= 0; --g) {
        if (timeline.groups[g].offload_bytes == 0) continue;
        for (const auto& [n, gpus] : classes_of[g]) {
          if (n == static_cast<int>(k)) first_of[k] = g;
        }
      }
    }
    for (size_t node = 0; node < class_of_node.size(); ++node) {
      const int k = class_of_node[node];
      if (k >= 0 && peak_of[k] > capacity) {
        timeline.oom.push_back(
            OutOfMemory{first_of[k], peak_of[k], capacity, static_cast<int>(node)});
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
  const auto stages = graph.stages();
  for (StageId f = 0; f < n; ++f) {
    const graph::Stage& fs = stages[f];
    if (fs.offload_bytes <= 0) continue;
    if (!c.any) c.item_of.assign(n, -1);
    c.any = true;
    if (fs.pass != graph::Pass::kForward) continue;
    const int32_t k = static_cast<int32_t>(c.items.size());
    c.items.push_back({f, -1});
    c.item_of[f] = k;
    for (EdgeId e : graph.out_edges(f)) {
      const StageId b = graph.edge(e).to;
      const graph::Stage& bs = stages[b];
      if (graph::IsBackward(bs.pass) && bs.group == fs.group && bs.module == fs.module &&
          bs.chunk == fs.chunk && bs.microbatch == fs.microbatch &&
          bs.sub_microbatch == fs.sub_microbatch && bs.offload_bytes > 0 && c.item_of[b] < 0) {
        c.items[k].backward = b;
        c.item_of[b] = k;
        break;
      }
    }
  }
  if (!c.any) return c;
  c.stream_free_s.assign(graph.num_groups(), 0.0);
  int num_nodes = std::max(1, cluster.num_nodes);
  // Per group: (node, GPUs of the group in it) over all its DP replicas.
  std::vector<std::vector<std::pair<int, int>>> nodes_of(graph.num_groups());
  for (GroupId g = 0; g < graph.num_groups(); ++g) {
    const graph::DeviceGroup& group = graph.group(g);
    // Replica r holds GPUs [first_gpu + r·stride, + num_gpus): count them a node at a time,
    // in ascending node order.
    auto& nodes = nodes_of[g];
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
  // Nodes whose (group, GPUs) lists, in group order, are equal share a class. The lists are
  // numbered as they grow, group by group: (number of the list so far, group, GPUs) -> number of
  // the longer list (0: the empty list). A node no group uses has no class (-1).
  std::vector<int> list_of(num_nodes, 0);
  std::map<std::array<int, 3>, int> longer;
  for (GroupId g = 0; g < graph.num_groups(); ++g) {
    for (const auto& [node, gpus] : nodes_of[g]) {
      const auto [it, added] =
          longer.try_emplace(std::array<int, 3>{list_of[node], g, gpus}, longer.size() + 1);
      list_of[node] = it->second;
    }
  }
  std::map<int, int> class_of_list;  // numbered in node order
  c.class_of_node.assign(num_nodes, -1);
  for (int node = 0; node < num_nodes; ++node) {
    if (list_of[node] == 0) continue;
    const auto [it, added] = class_of_list.try_emplace(list_of[node], class_of_list.size());
    c.class_of_node[node] = it->second;
  }
  c.classes_of.resize(graph.num_groups());
  for (GroupId g = 0; g < graph.num_groups(); ++g) {
    for (const auto& [node, gpus] : nodes_of[g]) {
      const int k = c.class_of_node[node];
      auto& classes = c.classes_of[g];
      if (std::none_of(classes.begin(), classes.end(),
                       [&](const auto& e) { return e.first == k; })) {
        classes.push_back({k, gpus});
      }
    }
  }
  c.node_copies.resize(class_of_list.size());
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

namespace {

// Bytes per second of a link at the cluster's network efficiency.
double LinkRateBytesPerS(const spec::LinkSpec& spec, const spec::ClusterSpec& cluster) {
  return spec.bandwidth_bytes_per_s * cluster.efficiency.network;
}

// One transfer over a link of `rate_bytes_per_s` (LinkRateBytesPerS, computed once per link
// kind in the event loop): the one formula for every transfer time.
double LinkTransferTimeS(int64_t bytes, const spec::LinkSpec& spec, double rate_bytes_per_s) {
  return spec.latency_s + static_cast<double>(bytes) / rate_bytes_per_s;
}

}  // namespace

double TransferTimeS(int64_t bytes, LinkKind link, const spec::ClusterSpec& cluster) {
  if (link == LinkKind::kSameGroup) return 0.0;
  const spec::LinkSpec& spec = link == LinkKind::kIntraNode ? cluster.intra_node : cluster.inter_node;
  return LinkTransferTimeS(bytes, spec, LinkRateBytesPerS(spec, cluster));
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

  // Links: one per directed group pair that carries a transfer, numbered as the event loop
  // first sends on it.
  std::vector<LinkKind> link_kind;   // per link: NVLink or network
  std::vector<double> link_free_s;   // per link: when its last transfer arrives
  const bool dense_links = num_groups <= 128;
  std::vector<int32_t> dense_link(dense_links ? num_groups * num_groups : 0, -1);
  std::unordered_map<int64_t, int32_t> sparse_link;
  auto link_between = [&](GroupId a, GroupId b) {
    int32_t* link;
    if (dense_links) {
      link = &dense_link[a * num_groups + b];
    } else {
      link = &sparse_link.try_emplace(int64_t{a} * num_groups + b, -1).first->second;
    }
    if (*link < 0) {
      *link = static_cast<int32_t>(link_kind.size());
      link_kind.push_back(LinkBetween(groups[a], groups[b], cluster));
      link_free_s.push_back(0.0);
    }
    return *link;
  };
  // TransferTimeS per link kind, its denominator computed once (the same product).
  const spec::LinkSpec* link_spec[2] = {&cluster.intra_node, &cluster.inter_node};
  const double link_rate[2] = {LinkRateBytesPerS(cluster.intra_node, cluster),
                                LinkRateBytesPerS(cluster.inter_node, cluster)};

  Timeline timeline;
  timeline.stages.resize(n);
  timeline.groups.resize(num_groups);
  if (options.record_transfers && num_groups > 1) timeline.transfers.reserve(edges.size());

  // Boundary buffers: the event loop records each stage's slot and the slots' compute times.
  BufferSlots buffers = MakeBufferSlots(schedule, n);

  // --- event simulation ---------------------------------------------------------------------
  // Per stage: inputs still to arrive, when the last one arrives, and (critical path: unloaded
  // transfers, no resource conflicts) when it could begin at the earliest. The critical path
  // is pushed along the out-edges as the event loop ends each stage (a topological order):
  // the same maxima and sums as a pass in topological order.
  // Per stage also the buffers of its inputs (freed in the slot after it). All set in the one
  // loop below (no fill before it).
  // Packed in one 32-byte record with the stage's group: an out-edge's target is one cache
  // line, not five (the event loop visits targets in time order, i.e. scattered).
  struct StageState {
    double ready_s;
    double unloaded_begin_s;
    int64_t freed_after;
    int32_t pending;
    GroupId group;
  };
  static_assert(sizeof(StageState) == 32);
  auto state = std::make_unique_for_overwrite<StageState[]>(n);
  for (int s = 0; s < n; ++s) {
    state[s] = StageState{.ready_s = 0.0,
                          .unloaded_begin_s = 0.0,
                          .freed_after = 0,
                          .pending = static_cast<int32_t>(graph.in_edges(s).size()),
                          .group = stages[s].group};
  }
  const BufferRounding buffer_bytes(options.buffer_element_bytes);
  if (num_groups > 1) buffers.sends.reserve(edges.size());
  std::vector<double> unloaded_finish_s(num_groups, 0.0);  // per group: latest on the path
  std::vector<int32_t> cursor(num_groups, 0);
  std::vector<uint8_t> running(num_groups, 0);
  std::vector<double> group_free_s(num_groups);
  std::vector<double> egress_free_s(2 * num_groups), ingress_free_s(2 * num_groups);

  // --- offload: per-group copy streams sharing the node's host bandwidth ---------------------
  OffloadCopies copies = MakeOffloadCopies(graph, cluster);

  EndQueue events(num_groups);

  // Starts stage s, group g's next one (the group is idle and the stage's inputs have
  // arrived). Copies of the group's position and order: the stores below could otherwise
  // alias them.
  auto start = [&](GroupId g, StageId s) {
    const std::vector<StageId>& order = schedule.order[g];
    const int32_t position = cursor[g];
    double start_s = std::max(group_free_s[g], state[s].ready_s);
    if (copies.any) {
      if (OffloadCopies::Item* item = copies.BackwardItem(s)) {
        // An offloaded backward waits for its prefetch (issued now at the latest).
        if (item->h2d_end_s < 0) {
          copies.IssueH2d(*item, start_s, graph, cluster, egress_free_s, ingress_free_s);
        }
        const double wait_s = item->h2d_end_s - start_s;
        if (wait_s > 0) {
          timeline.groups[g].offload_wait_s += wait_s;
          start_s = item->h2d_end_s;
        }
      }
    }
    const double end_s = start_s + stages[s].latency_s;
    timeline.stages[s] = StageTiming{start_s, end_s};
    const int32_t slot = buffers.slot_begin[g] + position;
    buffers.slot_of[s] = slot;
    buffers.slot_timing[slot] = {start_s, end_s};
    // Its inputs' buffers are freed in the slot after it (all of them have arrived).
    buffers.slots[FreeSlot(slot)].freed += state[s].freed_after;
    running[g] = 1;
    events.Set(g, end_s, s);
    // Prefetch the next stage's offloaded activations while this one runs.
    if (copies.any && position + 1 < static_cast<int32_t>(order.size())) {
      if (OffloadCopies::Item* next = copies.BackwardItem(order[position + 1])) {
        next->prefetch_from_s = start_s;
        if (next->h2d_end_s < 0 && next->d2h_end_s >= 0) {
          copies.IssueH2d(*next, start_s, graph, cluster, egress_free_s, ingress_free_s);
        }
      }
    }
  };
  // Starts group g's next stage if the group is idle and the stage ready (the common refusal
  // stays inline).
  auto try_start = [&](GroupId g) {
    if (running[g]) return;
    const std::vector<StageId>& order = schedule.order[g];
    const int32_t position = cursor[g];
    if (position >= static_cast<int32_t>(order.size())) return;
    const StageId s = order[position];
    if (state[s].pending == 0) start(g, s);
  };

  for (GroupId g = 0; g < num_groups; ++g) try_start(g);
  int completed = 0;
  while (!events.empty()) {
    const double t = events.top_end_s();
    const StageId s = events.top_stage();
    const GroupId g = events.top_group();
    copies.now_s = t;
    ++completed;
    running[g] = 0;
    group_free_s[g] = t;
    ++cursor[g];
    if (copies.any) {
      if (OffloadCopies::Item* item = copies.ForwardItem(s)) {
        copies.IssueD2h(*item, t, graph, cluster, egress_free_s, ingress_free_s);
        // A backward whose prefetch window opened before this copy was queued.
        if (item->backward >= 0 && item->h2d_end_s < 0 && item->prefetch_from_s >= 0) {
          copies.IssueH2d(*item, t, graph, cluster, egress_free_s, ingress_free_s);
        }
      }
    }
    const double unloaded_end_s = state[s].unloaded_begin_s + stages[s].latency_s;
    if (unloaded_end_s > unloaded_finish_s[g]) unloaded_finish_s[g] = unloaded_end_s;
    const int32_t slot = buffers.slot_of[s];
    int64_t produced = 0;  // the compute's output buffers
    for (EdgeId e : graph.out_edges(s)) {
      const StageId to = edges[e].to;
      StageState& target = state[to];
      const GroupId to_group = target.group;
      double arrival_s = t;
      double unloaded_s = unloaded_end_s;
      if (to_group == g) {
        if (edges[e].bytes != 0) {  // a local buffer (none for an ordering edge)
          const int64_t bytes = buffer_bytes(edges[e].bytes);
          produced += bytes;
          target.freed_after += bytes;
        }
      } else {
        // The dense table's hit stays inline; a new link or a sparse table goes out of line.
        int32_t link = dense_links ? dense_link[g * num_groups + to_group] : -1;
        if (link < 0) link = link_between(g, to_group);
        // Ports: the sender's egress and the receiver's ingress of the link's kind (NVLink or
        // network) carry one transfer at a time, whatever the peer.
        const LinkKind kind = link_kind[link];
        const int port = kind == LinkKind::kIntraNode ? 0 : 1;
        const double transfer_s =
            LinkTransferTimeS(edges[e].bytes, *link_spec[port], link_rate[port]);
        unloaded_s = unloaded_end_s + transfer_s;
        double& egress = egress_free_s[2 * g + port];
        double& ingress = ingress_free_s[2 * to_group + port];
        const double start_s = std::max(std::max(t, link_free_s[link]), std::max(egress, ingress));
        arrival_s = start_s + transfer_s;
        link_free_s[link] = arrival_s;
        egress = arrival_s;
        ingress = arrival_s;
        // A send buffer here and a receive buffer on the reader's group.
        const int64_t bytes = buffer_bytes(edges[e].bytes);
        produced += bytes;
        target.freed_after += bytes;
        buffers.sends.push_back({arrival_s, bytes, slot, buffers.slot_begin[g + 1] - 1,
                                 buffers.slot_begin[to_group] + cursor[to_group], link, to});
        if (options.record_transfers) {
          timeline.transfers.push_back(
              Transfer{e, s, to, g, to_group, start_s, arrival_s, edges[e].bytes, kind});
        }
      }
      if (unloaded_s > target.unloaded_begin_s) target.unloaded_begin_s = unloaded_s;
      if (arrival_s > target.ready_s) target.ready_s = arrival_s;
      if (--target.pending == 0) try_start(to_group);
    }
    buffers.slots[slot].produced = produced;
    try_start(g);
    if (!running[g]) events.Clear(g);
  }
  if (completed != n) return DeadlockError(graph, schedule, cursor);

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
  PlaceTransfers(static_cast<int>(link_kind.size()), options.record_memory_curves, buffers);
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
    const int32_t size = static_cast<int32_t>(order.size());
    const SlotBytes* slots = buffers.slots.data() + slot0;
    if (!options.record_memory_curves) {
      // Peaks only: noting after every irecv step (not only non-empty ones) changes nothing,
      // since frees never raise the live bytes.
      int64_t peak = live, peak_buffers = 0;
      double busy_s = 0;
      for (int32_t j = 0;; ++j) {
        live += slots[j].received;
        live_buffers += slots[j].received;
        peak = std::max(peak, live);
        peak_buffers = std::max(peak_buffers, live_buffers);
        if (j == size) break;
        live -= slots[j].freed;
        live_buffers -= slots[j].freed;
        const graph::Stage& st = stages[order[j]];
        busy_s += st.latency_s;
        live += st.activation_alloc_bytes + slots[j].produced;
        live_buffers += slots[j].produced;
        peak = std::max(peak, live);
        peak_buffers = std::max(peak_buffers, live_buffers);
        live -= st.activation_free_bytes;
      }
      gt.peak_bytes = peak;
      gt.peak_buffer_bytes = peak_buffers;
      gt.busy_s = busy_s;
    } else {
      auto note = [&] {
        gt.peak_bytes = std::max(gt.peak_bytes, live);
        gt.peak_buffer_bytes = std::max(gt.peak_buffer_bytes, live_buffers);
      };
      gt.memory.reserve(4 * order.size() + 2);
      gt.memory.push_back({0.0, live});
      for (int32_t j = 0; j <= size; ++j) {
        // Slot j runs when compute j − 1 ends.
        const double slot_s = j > 0 ? buffers.slot_timing[slot0 + j - 1].end_s : 0.0;
        const SlotBytes& slot = slots[j];
        if (slot.received != 0) {
          live += slot.received;
          live_buffers += slot.received;
          note();
          gt.memory.push_back({slot_s, live});
        }
        if (slot.freed != 0) {
          live -= slot.freed;
          live_buffers -= slot.freed;
          // After the last wait_send returns (before compute j starts).
          double t = std::max(slot_s, buffers.send_free_s[slot0 + j]);
          if (j < size) t = std::min(t, buffers.slot_timing[slot0 + j].start_s);
          gt.memory.push_back({t, live});
        }
        if (j == size) break;
        const graph::Stage& st = stages[order[j]];
        gt.busy_s += st.latency_s;
        const int64_t produced = slot.produced;
        live += st.activation_alloc_bytes + produced;
        live_buffers += produced;
        note();
        if (st.activation_alloc_bytes + produced != 0) {
          gt.memory.push_back({buffers.slot_timing[slot0 + j].start_s, live});
        }
        if (st.activation_free_bytes != 0) {
          live -= st.activation_free_bytes;
          gt.memory.push_back({buffers.slot_timing[slot0 + j].end_s, live});
        }
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
  // The latest unloaded end of each group's stages plus its tail (rounding is monotone: the
  // same maximum as over each stage's end plus the tail).
  {
    double critical = 0;
    for (GroupId g = 0; g < num_groups; ++g) {
      critical = std::max(critical, unloaded_finish_s[g] + tail_s[g]);
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
