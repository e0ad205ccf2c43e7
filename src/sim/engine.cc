#include "engine.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <unordered_map>

#include <fmt/format.h>

#include "weft/sim/buffer_slots.h"

namespace weft::sim::internal {

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

namespace {


// The groups' next events, earliest first and ties by key (the order of std::greater on
// (end_s, key) pairs; times are never NaN). A key is the stage's id in the window's numbering
// (EngineRun::key_base + stage id: iterations in order), so one iteration orders as Simulate. Each group has at most one (its running stage's
// end, or the start of a stage that gets from a buffer), so this is a winner tree over the
// groups: a group's update replays its path to the root, log2(groups) comparisons, where a
// binary heap of events cost a push and a pop per stage.
class EndQueue {
 public:
  explicit EndQueue(int num_groups) {
    while (leaves_ < num_groups) leaves_ *= 2;
    node_.assign(2 * leaves_, Node{std::numeric_limits<double>::infinity(), kIdle, 0});
    for (int k = 0; k < leaves_; ++k) node_[leaves_ + k].group = k;
  }
  bool empty() const { return node_[1].key == kIdle; }
  // The earliest event: its group, time and key.
  GroupId top_group() const { return node_[1].group; }
  double top_end_s() const { return node_[1].end_s; }
  int32_t top_key() const { return node_[1].key; }
  // Group g's next event is at end_s.
  void Set(GroupId g, double end_s, int32_t key) {
    Node carried{end_s, key, g};
    int i = leaves_ + g;
    node_[i] = carried;
    for (; i > 1; i /= 2) {
      const Node& sibling = node_[i ^ 1];
      if (sibling.end_s < carried.end_s ||
          (sibling.end_s == carried.end_s && sibling.key < carried.key)) {
        carried = sibling;
      }
      node_[i / 2] = carried;
    }
  }
  // Group g has no event.
  void Clear(GroupId g) { Set(g, std::numeric_limits<double>::infinity(), kIdle); }

 private:
  static constexpr int32_t kIdle = std::numeric_limits<int32_t>::max();
  struct Node {  // the earliest event below this node
    double end_s;
    int32_t key;
    GroupId group;
  };
  int leaves_ = 2;          // a power of two >= 2, so that the root is an inner node
  std::vector<Node> node_;  // [1, leaves): inner nodes; [leaves, 2·leaves): group k at leaves + k
};

// An array reused across iterations and calls: grown, never shrunk, never zero-filled (every
// entry a pass reads is written first in that pass).
template <typename T>
class Scratch {
 public:
  T* Reserve(size_t n) {
    if (n > capacity_) {
      data_ = std::make_unique_for_overwrite<T[]>(n);
      capacity_ = n;
    }
    return data_.get();
  }
  T* get() const { return data_.get(); }
  T& operator[](size_t i) const { return data_[i]; }

 private:
  std::unique_ptr<T[]> data_;
  size_t capacity_ = 0;
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
struct SlotAccum {  // sums, zeroed per iteration
  int64_t received;  // allocated by the slot's irecvs
  int64_t freed;     // freed by the slot's frees
};
struct SlotCompute {  // the slot's compute, written by the event loop
  int64_t produced;  // local and send buffers the compute produces
  // Its stage's activation_alloc_bytes and activation_free_bytes, copied by the event loop:
  // the replay then reads the slots in order and not the stages in each group's order
  // (scattered over the stage array).
  int64_t activation_alloc_bytes;
  int64_t activation_free_bytes;
};
struct SlotTiming {
  double start_s, end_s;
};

struct BufferSlots {
  const int32_t* slot_begin = nullptr;  // per group: index of its slot 0 (Prepared)
  // Written by the event loop for every stage and every compute slot before anything reads
  // them (a slot after a group's last compute has no timing or compute).
  Scratch<int32_t> slot_of;  // per stage: its slot
  Scratch<SlotTiming> slot_timing;  // per slot: its compute
  Scratch<SlotCompute> compute;
  Scratch<SlotAccum> accum;
  std::vector<double> send_free_s;  // per slot: latest arrival of a send freed there (curves)
  // One per cross-group edge, in the order the event loop sends them: on each channel (link)
  // the order of the producers' slots, then of their out-edges.
  struct Send {  // 32 bytes
    double arrival_s;
    int64_t bytes;       // whole elements
    int32_t slot;        // the producer's
    // The reader group's first slot whose compute had not ended when the producer ended: no
    // earlier one ends after the producer (events end in time order).
    int32_t first_open_slot;
    int32_t link;        // its producer group is the link's source
    StageId to;
  };
  std::vector<Send> sends;
};

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
void PlaceTransfers(int num_slots, std::span<const GroupId> link_source, bool record_times,
                    BufferSlots& b) {
  const SlotTiming* slot_timing = b.slot_timing.get();
  const int32_t* slot_of = b.slot_of.get();
  SlotAccum* slots = b.accum.get();
  if (record_times) b.send_free_s.assign(num_slots, 0.0);
  std::vector<int32_t> channel_slot(link_source.size(), std::numeric_limits<int32_t>::max());
  for (size_t k = b.sends.size(); k-- > 0;) {
    const BufferSlots::Send& send = b.sends[k];
    const int32_t j = send.slot;
    // Send buffer: wait_send in the first later slot whose compute starts at/after arrival.
    const int32_t last_slot = b.slot_begin[link_source[send.link] + 1] - 1;
    const int32_t ws = WaitSendSlot(j + 1, last_slot, send.arrival_s,
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
//
// One per offloaded forward of an iteration, in stage id order: its backward (-1 if none) and
// its copies.
struct OffloadItem {
  StageId forward, backward;
  double d2h_start_s = -1, d2h_end_s = -1, h2d_end_s = -1;  // -1 = not yet
  double prefetch_from_s = -1;  // the backward's prefetch window opened; -1 = not yet
};

// The items of one iteration.
struct OffloadItems {
  bool any = false;  // some stage offloads
  std::vector<OffloadItem> items;
  // Per stage: the item of an offloaded forward or of the backward paired with one; else -1.
  // (One array, not per-stage copy times: most stages offload nothing.)
  std::vector<int32_t> item_of;

  // The item whose backward is `s`, or nullptr.
  OffloadItem* BackwardItem(StageId s) {
    const int32_t k = item_of[s];
    return k >= 0 && items[k].backward == s ? &items[k] : nullptr;
  }
  // The item whose forward is `s`, or nullptr.
  OffloadItem* ForwardItem(StageId s) {
    const int32_t k = item_of[s];
    return k >= 0 && items[k].forward == s ? &items[k] : nullptr;
  }
};

void MakeOffloadItems(const StageGraph& graph, OffloadItems& c) {
  c.any = false;
  c.items.clear();
  const int n = graph.num_stages();
  const auto stages = graph.stages();
  for (StageId f = 0; f < n; ++f) {
    const graph::Stage& fs = stages[f];
    if (fs.offload_bytes <= 0) continue;
    if (!c.any) c.item_of.assign(n, -1);
    c.any = true;
    if (fs.pass != spec::Pass::kForward) continue;
    const int32_t k = static_cast<int32_t>(c.items.size());
    c.items.push_back({f, -1});
    c.item_of[f] = k;
    for (EdgeId e : graph.out_edges(f)) {
      const StageId b = graph.edge(e).to;
      const graph::Stage& bs = stages[b];
      if (spec::IsBackward(bs.pass) && bs.group == fs.group && bs.module == fs.module &&
          bs.chunk == fs.chunk && bs.microbatch == fs.microbatch &&
          bs.sub_microbatch == fs.sub_microbatch && bs.offload_bytes > 0 && c.item_of[b] < 0) {
        c.items[k].backward = b;
        c.item_of[b] = k;
        break;
      }
    }
  }
}

// The copy streams and the nodes' host bandwidth, shared by all iterations.
struct OffloadStreams {
  bool any = false;
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
  void IssueD2h(OffloadItem& item, double t, const StageGraph& graph,
                const spec::ClusterSpec& cluster, const std::vector<double>& egress_free_s,
                const std::vector<double>& ingress_free_s) {
    const graph::Stage& st = graph.stage(item.forward);
    item.d2h_start_s = std::max(t, stream_free_s[st.group]);
    item.d2h_end_s = Issue(st.group, st.offload_bytes, cluster.HostD2hBandwidthBytesPerS(), t,
                           cluster, egress_free_s, ingress_free_s);
  }
  void IssueH2d(OffloadItem& item, double t, const StageGraph& graph,
                const spec::ClusterSpec& cluster, const std::vector<double>& egress_free_s,
                const std::vector<double>& ingress_free_s) {
    const graph::Stage& st = graph.stage(item.backward);
    item.h2d_end_s = Issue(st.group, st.offload_bytes, cluster.host_link_bandwidth_bytes_per_s,
                           std::max(t, item.d2h_end_s), cluster, egress_free_s, ingress_free_s);
  }
  // Offloaded bytes of one iteration held on each node's host from D2H start to H2D end (to
  // the iteration's end without a backward); a node over its host memory is out of memory.
  void CheckHostMemory(const OffloadItems& c, const StageGraph& graph,
                       const spec::ClusterSpec& cluster, Timeline& timeline) const {
    std::vector<std::vector<std::pair<double, int64_t>>> changes(node_copies.size());  // per class
    for (const OffloadItem& item : c.items) {
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
      auto& ch = changes[k];
      if (ch.empty()) continue;
      // Frees before allocations at equal times (pair order; times are never NaN).
      std::sort(ch.begin(), ch.end(), [](const auto& a, const auto& b) {
        return a.first < b.first || (a.first == b.first && a.second < b.second);
      });
      int64_t live = 0, peak = 0;
      for (const auto& [time_s, bytes] : ch) {
        live += bytes;
        peak = std::max(peak, live);
      }
      peak_of[k] = peak;
      timeline.host_peak_bytes_per_node = std::max(timeline.host_peak_bytes_per_node, peak);
      for (GroupId g = graph.num_groups() - 1; g >= 0; --g) {
        if (timeline.groups[g].offload_bytes == 0) continue;
        for (const auto& [node, gpus] : classes_of[g]) {
          if (node == static_cast<int>(k)) first_of[k] = g;
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

OffloadStreams MakeOffloadStreams(const StageGraph& graph, const spec::ClusterSpec& cluster) {
  OffloadStreams c;
  c.any = true;
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

// What one (graph, schedule) pair needs in every iteration that runs it, computed once.
struct Prepared {
  const StageGraph* graph = nullptr;
  const sched::Schedule* schedule = nullptr;
  std::vector<int32_t> slot_begin;  // per group + 1: slot layout (|order[g]| + 1 slots each)
  // From one pass over the stages (folded into the first run's state initialization).
  bool scanned = false;
  bool any_offload = false;
  double stage_flops = 0;  // Σ stage.flops × dp, in stage order
  // Tails: per group its folded grad sync and optimizer step; the graph's GradSync sets in the
  // compiled plan's collective order (ascending (module, first group)), their ring times, and
  // per group the sets it belongs to, in that order.
  std::vector<double> folded_grad_sync_s, optimizer_s;
  std::vector<uint8_t> in_sync_set;
  std::vector<const graph::GradSync*> syncs;
  std::vector<double> sync_s;
  std::vector<std::vector<int32_t>> sets_of;
};

// Per stage, packed in one 64-byte record (one cache line) with the stage's group and the
// fields of its graph::Stage that the event loop reads (latency, activation bytes; copied by
// InitRun, which streams the stage array anyway): a stage's start and end, and an out-edge's
// target, read one line, not the state and two lines of the 96-byte Stage (the event loop
// visits stages in time order, i.e. scattered).
//  - pending: inputs still to arrive; -1 once started (an unvalidated order that lists a stage
//    twice stalls there instead of running it twice);
//  - ready_s: when the last input arrived;
//  - unloaded_begin_s: (critical path: unloaded transfers, no resource conflicts) when it could
//    begin at the earliest, pushed along the out-edges as the event loop ends each stage (a
//    topological order: the same maxima and sums as a pass in topological order);
//  - freed_after: the buffers of its inputs (freed in the slot after it).
struct alignas(64) StageState {
  double ready_s;
  double unloaded_begin_s;
  int64_t freed_after;
  double latency_s;                // graph::Stage's
  int64_t activation_alloc_bytes;  // graph::Stage's
  int64_t activation_free_bytes;   // graph::Stage's
  int32_t pending;
  GroupId group;
};
static_assert(sizeof(StageState) == 64);
static_assert(sizeof(BufferSlots::Send) == 32);

}  // namespace

// One iteration in flight: its scratch (reused) and its Timeline (moved out when finished).
struct EngineRun {
  int index = -1;
  int32_t key_base = 0;  // event keys: key_base + stage id (the stages of earlier iterations)
  const Prepared* prep = nullptr;
  const EngineIteration* iteration = nullptr;
  int n = 0;
  Scratch<StageState> state;
  BufferSlots buffers;
  OffloadItems offload;
  std::vector<int32_t> use_of;  // per stage: its buffer use (index into buffer_uses), else -1
  bool has_uses = false;
  int completed = 0;
  int groups_finished = 0;
  // Per group: when it could start (release), when its last stage ended, the latest unloaded
  // end of its stages (critical path), and its tail: grad sync start and span, optimizer,
  // tail (grad sync + optimizer, for the bounds), end; sets: its readiness for its next set.
  std::vector<double> release_s, last_end_s, unloaded_finish_s;
  std::vector<double> grad_sync_start_s, grad_sync_s, tail_s, end_s;
  std::vector<double> member_ready_s, first_sync_start_s;
  std::vector<int32_t> next_set;
  std::vector<int32_t> set_remaining;  // per set: members not yet ready for it
  Timeline timeline;
  // Raw views of the arrays above and of the graph for the event loop (set by InitRun): one
  // load each per event, where the containers would cost two or three.
  struct View {
    const graph::Edge* edges;
    const std::vector<StageId>* orders;
    const int32_t* slot_begin;
    const int32_t* use_of;  // nullptr: no buffer uses
    StageState* state;
    GroupTimeline* groups;
    int32_t* slot_of;
    SlotTiming* slot_timing;
    SlotCompute* compute;
    SlotAccum* accum;
  } view;
};

namespace {

enum Phase : uint8_t {
  kIdle,        // may start its next stage (none ready yet, or none left before its tail)
  kRunning,     // a stage runs; its event is the stage's end
  kPutServed,   // a stage's delayed put was made; its event is the stage's (new) end
  kGetPending,  // its next stage gets from a buffer; its event is the stage's earliest start
  kPutBlocked,  // a stage's put waits for room (no event)
  kGetBlocked,  // its next stage's get waits for bytes (no event)
  kTailWait,    // finished its stages of an iteration; waits for its grad sync sets
  kDone,        // finished the window
};
bool HasEvent(uint8_t phase) {
  return phase == kRunning || phase == kPutServed || phase == kGetPending;
}

struct BufferWaiter {
  GroupId group;
  int iteration;
  StageId stage;
  int64_t bytes;
  double since_s;  // compute end (put) or earliest start (get)
};

struct BufferState {
  int64_t capacity_bytes = 0;
  int64_t bytes = 0;
  std::deque<BufferWaiter> puts, gets;  // waiting, first in first out
  BufferTimeline* out = nullptr;
};

// The event loop over all iterations: per-group state shared by the iterations (the group's
// position, links, ports, copy streams, buffers), per-iteration state in EngineRun.
class Loop {
 public:
  Loop(std::span<const EngineIteration> iterations, std::span<Prepared* const> prep_of,
       const spec::ClusterSpec& cluster, const SimOptions& options,
       std::span<const BoundedBuffer> buffers, const WindowCarry& carry, int warmup,
       std::vector<std::unique_ptr<EngineRun>>& pool, EngineResult& result)
      : iterations_(iterations),
        prep_of_(prep_of),
        cluster_(cluster),
        options_(options),
        warmup_(warmup),
        pool_(pool),
        result_(result),
        graph0_(*iterations[0].graph),
        num_groups_(graph0_.num_groups()),
        num_iterations_(static_cast<int>(iterations.size())),
        groups0_(graph0_.groups()),
        buffer_bytes_(options.buffer_element_bytes),
        events_(num_groups_) {
    dense_links_ = num_groups_ <= 128;
    dense_link_.assign(dense_links_ ? num_groups_ * num_groups_ : 0, -1);
    link_spec_[0] = &cluster.intra_node;
    link_spec_[1] = &cluster.inter_node;
    link_rate_[0] = LinkRateBytesPerS(cluster.intra_node, cluster);
    link_rate_[1] = LinkRateBytesPerS(cluster.inter_node, cluster);
    runs_.assign(num_iterations_, nullptr);
    key_base_.assign(num_iterations_, 0);
    for (int k = 1; k < num_iterations_; ++k) {
      key_base_[k] = key_base_[k - 1] + iterations[k - 1].graph->num_stages();
    }
    run_of_.assign(num_groups_, 0);
    cursor_.assign(num_groups_, 0);
    phase_.assign(num_groups_, kIdle);
    group_free_s_.assign(num_groups_, 0.0);
    egress_free_s_.assign(2 * num_groups_, 0.0);
    ingress_free_s_.assign(2 * num_groups_, 0.0);
    carry_free_s_.assign(num_groups_, 0.0);
    for (size_t g = 0; g < carry.group_free_s.size() && g < carry_free_s_.size(); ++g) {
      carry_free_s_[g] = carry.group_free_s[g];
    }
    result_.buffers.resize(buffers.size());
    buffers_.resize(buffers.size());
    const double window_start_s =
        carry_free_s_.empty() ? 0.0
                              : *std::min_element(carry_free_s_.begin(), carry_free_s_.end());
    for (size_t b = 0; b < buffers.size(); ++b) {
      BufferTimeline& out = result_.buffers[b];
      out.name = buffers[b].name;
      out.capacity_bytes = buffers[b].capacity_bytes;
      out.initial_bytes = b < carry.buffer_bytes.size() ? carry.buffer_bytes[b] : 0;
      out.peak_bytes = out.initial_bytes;
      out.occupancy.push_back({window_start_s, out.initial_bytes});
      buffers_[b].capacity_bytes = buffers[b].capacity_bytes;
      buffers_[b].bytes = out.initial_bytes;
      buffers_[b].out = &out;
    }
    result_.timelines.resize(num_iterations_);
    result_.origin_s.assign(num_iterations_, 0.0);
    result_.end_s.assign(num_iterations_, 0.0);
    result_.group_end_s.assign(num_groups_, 0.0);
    result_.steady_busy_s.assign(num_groups_, 0.0);
    result_.steady_begin_s =
        carry_free_s_.empty() ? 0.0
                              : *std::max_element(carry_free_s_.begin(), carry_free_s_.end());
  }

  // Scratch of iterations still in flight (after an error) goes back to the pool.
  ~Loop() {
    for (EngineRun* run : runs_) {
      if (run != nullptr) pool_.push_back(std::unique_ptr<EngineRun>(run));
    }
  }

  Status Run();

 private:
  EngineRun& OpenRun(int k);
  void InitRun(EngineRun& run);
  void EnterIteration(GroupId g, int k, double t);
  void TryStart(GroupId g);
  void Start(GroupId g, EngineRun& run, StageId s, double earliest_s);
  void Complete(GroupId g, double t, int32_t key);
  void HandleGet(GroupId g, double t, int32_t key);
  void GroupFinished(EngineRun& run, GroupId g, double t);
  void ReadyForSet(EngineRun& run, int32_t set);
  void Release(EngineRun& run, GroupId g, double end_s);
  void ServeBuffer(int b, double t);
  void NotePut(BufferState& buf, int64_t bytes, double t);
  void NoteGet(BufferState& buf, int64_t bytes, double t);
  Status Finalize(EngineRun& run);
  Status DeadlockError(const EngineRun& run) const;
  int32_t LinkBetweenGroups(GroupId a, GroupId b);

  std::span<const EngineIteration> iterations_;
  std::span<Prepared* const> prep_of_;
  const spec::ClusterSpec& cluster_;
  const SimOptions& options_;
  const int warmup_;
  std::vector<std::unique_ptr<EngineRun>>& pool_;
  EngineResult& result_;
  const StageGraph& graph0_;
  const int num_groups_;
  const int num_iterations_;
  const std::span<const graph::DeviceGroup> groups0_;
  const BufferRounding buffer_bytes_;

  // Links: one per directed group pair that carries a transfer, numbered as the event loop
  // first sends on it.
  std::vector<LinkKind> link_kind_;  // per link: NVLink or network
  std::vector<GroupId> link_source_;  // per link: the sending group
  std::vector<double> link_free_s_;  // per link: when its last transfer arrives
  bool dense_links_ = true;
  std::vector<int32_t> dense_link_;
  std::unordered_map<int64_t, int32_t> sparse_link_;
  // TransferTimeS per link kind, its denominator computed once (the same product).
  const spec::LinkSpec* link_spec_[2];
  double link_rate_[2];

  EndQueue events_;
  std::vector<EngineRun*> runs_;       // per iteration, while it runs
  std::vector<int32_t> key_base_;      // per iteration: stages of the iterations before it
  std::vector<int> run_of_;            // per group: its iteration
  std::vector<int32_t> cursor_;        // per group: its position in that iteration's order
  std::vector<uint8_t> phase_;         // per group
  std::vector<double> group_free_s_;   // per group: its last stage's end (or its release)
  std::vector<double> egress_free_s_, ingress_free_s_;  // per group and link kind
  std::vector<double> carry_free_s_;
  OffloadStreams copies_;
  std::vector<BufferState> buffers_;
  std::vector<int> to_finalize_;       // iterations whose groups have all finished
  int finalized_ = 0;                  // iterations finalized (in order)
};

int32_t Loop::LinkBetweenGroups(GroupId a, GroupId b) {
  int32_t* link;
  if (dense_links_) {
    link = &dense_link_[a * num_groups_ + b];
  } else {
    link = &sparse_link_.try_emplace(int64_t{a} * num_groups_ + b, -1).first->second;
  }
  if (*link < 0) {
    *link = static_cast<int32_t>(link_kind_.size());
    link_kind_.push_back(LinkBetween(groups0_[a], groups0_[b], cluster_));
    link_source_.push_back(a);
    link_free_s_.push_back(0.0);
  }
  return *link;
}

EngineRun& Loop::OpenRun(int k) {
  if (runs_[k] == nullptr) {
    if (pool_.empty()) pool_.push_back(std::make_unique<EngineRun>());
    std::unique_ptr<EngineRun> owned = std::move(pool_.back());
    pool_.pop_back();
    EngineRun* run = owned.release();
    runs_[k] = run;
    run->index = k;
    run->key_base = key_base_[k];
    run->prep = prep_of_[k];
    run->iteration = &iterations_[k];
    InitRun(*run);
  }
  return *runs_[k];
}

// The per-iteration state: one pass over the stage array (at 32k stages it is megabytes: each
// pass streams it from beyond the L2 cache), which also finds offloading stages and sums the
// model FLOPs (in stage order, as the metrics would) the first time a graph runs.
void Loop::InitRun(EngineRun& run) {
  Prepared& prep = *const_cast<Prepared*>(run.prep);
  const StageGraph& graph = *prep.graph;
  const int n = graph.num_stages();
  const int num_slots = prep.slot_begin[num_groups_];
  run.n = n;
  run.completed = 0;
  run.groups_finished = 0;
  const auto stages = graph.stages();
  const auto groups = graph.groups();
  StageState* state = run.state.Reserve(n);
  const bool scan = !prep.scanned;
  bool any_offload = false;
  double stage_flops = 0;
  const bool sum_flops = scan && !(options_.model_flops > 0);
  for (int s = 0; s < n; ++s) {
    const graph::Stage& st = stages[s];
    state[s] = StageState{.ready_s = 0.0,
                          .unloaded_begin_s = 0.0,
                          .freed_after = 0,
                          .latency_s = st.latency_s,
                          .activation_alloc_bytes = st.activation_alloc_bytes,
                          .activation_free_bytes = st.activation_free_bytes,
                          .pending = static_cast<int32_t>(graph.in_edges(s).size()),
                          .group = st.group};
    if (scan) any_offload |= st.offload_bytes > 0;
    if (sum_flops) stage_flops += st.flops * groups[st.group].dp;
  }
  if (scan) {
    prep.scanned = true;
    prep.any_offload = any_offload;
    prep.stage_flops = stage_flops;
  }
  BufferSlots& b = run.buffers;
  b.slot_begin = prep.slot_begin.data();
  b.slot_of.Reserve(n);
  b.slot_timing.Reserve(num_slots);
  b.compute.Reserve(num_slots);
  std::fill_n(b.accum.Reserve(num_slots), num_slots, SlotAccum{0, 0});
  b.sends.clear();
  if (num_groups_ > 1) b.sends.reserve(graph.num_edges());
  if (prep.any_offload) {
    MakeOffloadItems(graph, run.offload);
    // The copy streams start with the first iteration that offloads (no copy ran before it).
    if (!copies_.any) copies_ = MakeOffloadStreams(graph0_, cluster_);
  } else {
    run.offload.any = false;
  }
  const auto uses = run.iteration->buffer_uses;
  run.has_uses = !uses.empty();
  if (run.has_uses) {
    run.use_of.assign(n, -1);
    for (size_t u = 0; u < uses.size(); ++u) run.use_of[uses[u].stage] = static_cast<int32_t>(u);
  }
  run.release_s.assign(num_groups_, 0.0);
  run.last_end_s.assign(num_groups_, 0.0);
  run.unloaded_finish_s.assign(num_groups_, 0.0);
  run.grad_sync_start_s.assign(num_groups_, 0.0);
  run.grad_sync_s.assign(num_groups_, 0.0);
  run.tail_s.assign(num_groups_, 0.0);
  run.end_s.assign(num_groups_, 0.0);
  run.member_ready_s.assign(num_groups_, 0.0);
  run.first_sync_start_s.assign(num_groups_, -1.0);
  run.next_set.assign(num_groups_, 0);
  run.set_remaining.resize(prep.syncs.size());
  for (size_t i = 0; i < prep.syncs.size(); ++i) {
    run.set_remaining[i] = static_cast<int32_t>(prep.syncs[i]->groups.size());
  }
  run.timeline = Timeline{};
  run.timeline.stages.resize(n);
  run.timeline.groups.resize(num_groups_);
  if (options_.record_transfers && num_groups_ > 1) {
    run.timeline.transfers.reserve(graph.num_edges());
  }
  run.view = EngineRun::View{.edges = graph.edges().data(),
                             .orders = prep.schedule->order.data(),
                             .slot_begin = b.slot_begin,
                             .use_of = run.has_uses ? run.use_of.data() : nullptr,
                             .state = state,
                             .groups = run.timeline.groups.data(),
                             .slot_of = b.slot_of.get(),
                             .slot_timing = b.slot_timing.get(),
                             .compute = b.compute.get(),
                             .accum = b.accum.get()};
}

// Group g enters iteration k at time t (its release): its first stage may start then.
void Loop::EnterIteration(GroupId g, int k, double t) {
  EngineRun& run = OpenRun(k);
  run_of_[g] = k;
  cursor_[g] = 0;
  group_free_s_[g] = t;
  run.release_s[g] = t;
  phase_[g] = kIdle;
  if (run.prep->schedule->order[g].empty()) {
    GroupFinished(run, g, t);
    return;
  }
  TryStart(g);
}

// Starts group g's next stage if the group is idle and the stage ready (the common refusal
// stays inline). A stage that gets from a buffer first waits for its earliest start as an event.
inline void Loop::TryStart(GroupId g) {
  if (phase_[g] != kIdle) return;
  EngineRun& run = *runs_[run_of_[g]];
  const EngineRun::View& v = run.view;
  const std::vector<StageId>& order = v.orders[g];
  const int32_t position = cursor_[g];
  if (position >= static_cast<int32_t>(order.size())) return;
  const StageId s = order[position];
  const StageState& st = v.state[s];
  if (st.pending != 0) return;
  if (v.use_of != nullptr) {
    const int32_t u = v.use_of[s];
    if (u >= 0 && run.iteration->buffer_uses[u].action == BufferAction::kGet) {
      phase_[g] = kGetPending;
      events_.Set(g, std::max(group_free_s_[g], st.ready_s), run.key_base + s);
      return;
    }
  }
  Start(g, run, s, -std::numeric_limits<double>::infinity());
}

// Starts stage s, group g's next one (the group is idle and the stage's inputs have arrived;
// `earliest_s`: a get made then). Copies of the group's position and order: the stores below
// could otherwise alias them.
void Loop::Start(GroupId g, EngineRun& run, StageId s, double earliest_s) {
  const EngineRun::View& v = run.view;
  const int32_t position = cursor_[g];
  StageState& state = v.state[s];
  double start_s = std::max(group_free_s_[g], state.ready_s);
  if (earliest_s > start_s) start_s = earliest_s;
  if (run.offload.any) {
    if (OffloadItem* item = run.offload.BackwardItem(s)) {
      // An offloaded backward waits for its prefetch (issued now at the latest).
      if (item->h2d_end_s < 0) {
        copies_.IssueH2d(*item, start_s, *run.prep->graph, cluster_, egress_free_s_,
                         ingress_free_s_);
      }
      const double wait_s = item->h2d_end_s - start_s;
      if (wait_s > 0) {
        v.groups[g].offload_wait_s += wait_s;
        start_s = item->h2d_end_s;
      }
    }
  }
  const double end_s = start_s + state.latency_s;
  v.groups[g].busy_s += state.latency_s;  // in the group's order
  const int32_t slot = v.slot_begin[g] + position;
  v.slot_of[s] = slot;
  v.slot_timing[slot] = {start_s, end_s};
  v.compute[slot].activation_alloc_bytes = state.activation_alloc_bytes;
  v.compute[slot].activation_free_bytes = state.activation_free_bytes;
  // Its inputs' buffers are freed in the slot after it (all of them have arrived).
  v.accum[FreeSlot(slot)].freed += state.freed_after;
  state.pending = -1;
  phase_[g] = kRunning;
  events_.Set(g, end_s, run.key_base + s);
  // While other groups' events run, fetch what this stage's end reads (its out-edges' targets'
  // state; the edges were fetched when the group's previous stage started) and what the group's
  // next stage reads (its state and its out-edges): in a large graph these lie beyond the L2
  // cache, and the event loop's time order scatters them.
  const StageGraph& graph = *run.prep->graph;
  for (EdgeId e : graph.out_edges(s)) __builtin_prefetch(&v.state[v.edges[e].to]);
  if (position + 1 < static_cast<int32_t>(v.orders[g].size())) {
    const StageId next = v.orders[g][position + 1];
    __builtin_prefetch(&v.state[next]);
    for (EdgeId e : graph.out_edges(next)) __builtin_prefetch(&v.edges[e]);
  }
  // Prefetch the next stage's offloaded activations while this one runs.
  if (run.offload.any && position + 1 < static_cast<int32_t>(v.orders[g].size())) {
    if (OffloadItem* next = run.offload.BackwardItem(v.orders[g][position + 1])) {
      next->prefetch_from_s = start_s;
      if (next->h2d_end_s < 0 && next->d2h_end_s >= 0) {
        copies_.IssueH2d(*next, start_s, *run.prep->graph, cluster_, egress_free_s_,
                         ingress_free_s_);
      }
    }
  }
}

void Loop::NotePut(BufferState& buf, int64_t bytes, double t) {
  buf.bytes += bytes;
  BufferTimeline& out = *buf.out;
  ++out.puts;
  out.put_bytes += bytes;
  out.peak_bytes = std::max(out.peak_bytes, buf.bytes);
  out.occupancy.push_back({t, buf.bytes});
}

void Loop::NoteGet(BufferState& buf, int64_t bytes, double t) {
  buf.bytes -= bytes;
  BufferTimeline& out = *buf.out;
  ++out.gets;
  out.get_bytes += bytes;
  out.occupancy.push_back({t, buf.bytes});
}

// Serves the waiting puts and gets of buffer b at time t, each side first in first out, until
// neither head can be served. A served put ends its stage now (its group's event); a served get
// starts its stage now.
void Loop::ServeBuffer(int b, double t) {
  BufferState& buf = buffers_[b];
  for (bool progress = true; progress;) {
    progress = false;
    while (!buf.puts.empty() && buf.bytes + buf.puts.front().bytes <= buf.capacity_bytes) {
      const BufferWaiter w = buf.puts.front();
      buf.puts.pop_front();
      NotePut(buf, w.bytes, t);
      buf.out->producer_stall_s += t - w.since_s;
      EngineRun& run = *runs_[w.iteration];
      run.buffers.slot_timing[run.buffers.slot_of[w.stage]].end_s = t;
      phase_[w.group] = kPutServed;
      events_.Set(w.group, t, runs_[w.iteration]->key_base + w.stage);
      progress = true;
    }
    while (!buf.gets.empty() && buf.bytes >= buf.gets.front().bytes) {
      const BufferWaiter w = buf.gets.front();
      buf.gets.pop_front();
      NoteGet(buf, w.bytes, t);
      buf.out->consumer_starvation_s += t - w.since_s;
      phase_[w.group] = kIdle;
      Start(w.group, *runs_[w.iteration], w.stage, t);
      progress = true;
    }
  }
}

// The pending get of group g's next stage at its earliest start t.
void Loop::HandleGet(GroupId g, double t, int32_t key) {
  EngineRun& run = *runs_[run_of_[g]];
  const StageId s = key - run.key_base;
  const BufferUse& use = run.iteration->buffer_uses[run.use_of[s]];
  BufferState& buf = buffers_[use.buffer];
  copies_.now_s = t;
  if (buf.gets.empty() && buf.bytes >= use.bytes) {
    NoteGet(buf, use.bytes, t);
    phase_[g] = kIdle;
    Start(g, run, s, t);
    ServeBuffer(use.buffer, t);
    return;
  }
  buf.gets.push_back({g, run.index, s, use.bytes, t});
  phase_[g] = kGetBlocked;
  events_.Clear(g);
}

// The end of group g's running stage at t.
void Loop::Complete(GroupId g, double t, int32_t key) {
  EngineRun& run = *runs_[run_of_[g]];
  const EngineRun::View& v = run.view;
  const StageId s = key - run.key_base;
  if (v.use_of != nullptr && phase_[g] == kRunning) {
    const int32_t u = v.use_of[s];
    if (u >= 0 && run.iteration->buffer_uses[u].action == BufferAction::kPut) {
      const BufferUse& use = run.iteration->buffer_uses[u];
      BufferState& buf = buffers_[use.buffer];
      if (!buf.puts.empty() || buf.bytes + use.bytes > buf.capacity_bytes) {
        buf.puts.push_back({g, run.index, s, use.bytes, t});
        phase_[g] = kPutBlocked;
        events_.Clear(g);
        return;
      }
      NotePut(buf, use.bytes, t);
      ServeBuffer(use.buffer, t);
    }
  }
  const StageGraph& graph = *run.prep->graph;
  const graph::Edge* edges = v.edges;
  StageState* state = v.state;
  copies_.now_s = t;
  ++run.completed;
  phase_[g] = kIdle;
  group_free_s_[g] = t;
  ++cursor_[g];
  if (run.offload.any) {
    if (OffloadItem* item = run.offload.ForwardItem(s)) {
      copies_.IssueD2h(*item, t, graph, cluster_, egress_free_s_, ingress_free_s_);
      // A backward whose prefetch window opened before this copy was queued.
      if (item->backward >= 0 && item->h2d_end_s < 0 && item->prefetch_from_s >= 0) {
        copies_.IssueH2d(*item, t, graph, cluster_, egress_free_s_, ingress_free_s_);
      }
    }
  }
  const double unloaded_end_s = state[s].unloaded_begin_s + state[s].latency_s;
  if (unloaded_end_s > run.unloaded_finish_s[g]) run.unloaded_finish_s[g] = unloaded_end_s;
  const int32_t slot = v.slot_of[s];
  const bool one_iteration = num_iterations_ == 1;
  int64_t produced = 0;  // the compute's output buffers
  for (EdgeId e : graph.out_edges(s)) {
    const graph::Edge& edge = edges[e];
    StageState& target = state[edge.to];
    const GroupId to_group = target.group;
    double arrival_s = t;
    double unloaded_s = unloaded_end_s;
    if (to_group == g) {
      if (edge.bytes != 0) {  // a local buffer (none for an ordering edge)
        const int64_t bytes = buffer_bytes_(edge.bytes);
        produced += bytes;
        target.freed_after += bytes;
      }
    } else {
      // The dense table's hit stays inline; a new link or a sparse table goes out of line.
      int32_t link = dense_links_ ? dense_link_[g * num_groups_ + to_group] : -1;
      if (link < 0) link = LinkBetweenGroups(g, to_group);
      // Ports: the sender's egress and the receiver's ingress of the link's kind (NVLink or
      // network) carry one transfer at a time, whatever the peer.
      const LinkKind kind = link_kind_[link];
      const int port = kind == LinkKind::kIntraNode ? 0 : 1;
      const double transfer_s = LinkTransferTimeS(edge.bytes, *link_spec_[port], link_rate_[port]);
      unloaded_s = unloaded_end_s + transfer_s;
      double& egress = egress_free_s_[2 * g + port];
      double& ingress = ingress_free_s_[2 * to_group + port];
      const double start_s = std::max(std::max(t, link_free_s_[link]), std::max(egress, ingress));
      arrival_s = start_s + transfer_s;
      link_free_s_[link] = arrival_s;
      egress = arrival_s;
      ingress = arrival_s;
      // A send buffer here and a receive buffer on the reader's group (whose first open slot
      // is its position if it runs this iteration, else its slot 0).
      const int64_t bytes = buffer_bytes_(edge.bytes);
      produced += bytes;
      target.freed_after += bytes;
      const int32_t reader_position =
          one_iteration || run_of_[to_group] == run.index ? cursor_[to_group] : 0;
      run.buffers.sends.push_back(
          {arrival_s, bytes, slot, v.slot_begin[to_group] + reader_position, link, edge.to});
      if (options_.record_transfers) {
        std::vector<Transfer>& transfers = run.timeline.transfers;
        // Fetch the list's line a few records ahead for writing (within its reserved capacity:
        // one per edge), so that appending does not wait for its lines.
        __builtin_prefetch(transfers.data() + transfers.size() + 8, 1);
        transfers.push_back(
            Transfer{e, s, edge.to, g, to_group, start_s, arrival_s, edge.bytes, kind});
      }
    }
    if (unloaded_s > target.unloaded_begin_s) target.unloaded_begin_s = unloaded_s;
    if (arrival_s > target.ready_s) target.ready_s = arrival_s;
    if (--target.pending == 0 && (one_iteration || run_of_[to_group] == run.index)) {
      TryStart(to_group);
    }
  }
  v.compute[slot].produced = produced;
  if (cursor_[g] == static_cast<int32_t>(v.orders[g].size())) GroupFinished(run, g, t);
  TryStart(g);
  if (!HasEvent(phase_[g])) events_.Clear(g);
}

// Group g ran its last stage of `run` at t (or has none, t = its release): its tail. A folded
// group's grad sync starts at once; a group in GradSync sets waits for their members.
void Loop::GroupFinished(EngineRun& run, GroupId g, double t) {
  const Prepared& prep = *run.prep;
  run.last_end_s[g] = t;
  phase_[g] = kTailWait;
  if (++run.groups_finished == num_groups_) to_finalize_.push_back(run.index);
  if (!prep.in_sync_set[g]) {
    run.grad_sync_start_s[g] = t;
    run.grad_sync_s[g] = prep.folded_grad_sync_s[g];
    run.tail_s[g] = run.grad_sync_s[g] + prep.optimizer_s[g];
    Release(run, g, t + run.tail_s[g]);
    return;
  }
  run.member_ready_s[g] = t;
  ReadyForSet(run, prep.sets_of[g][0]);
}

// One more member of `set` is ready for it; the last one starts it: at the latest member's
// readiness, for the ring time over its members, each of which then moves to its next set or,
// after its last, to its optimizer step. Members' chains follow the sets' order, so the times
// are those of a pass over the sets in that order.
void Loop::ReadyForSet(EngineRun& run, int32_t set) {
  if (--run.set_remaining[set] > 0) return;
  const Prepared& prep = *run.prep;
  const graph::GradSync& sync = *prep.syncs[set];
  double start_s = 0;
  for (GroupId g : sync.groups) start_s = std::max(start_s, run.member_ready_s[g]);
  const double sync_s = prep.sync_s[set];
  for (GroupId g : sync.groups) {
    if (run.first_sync_start_s[g] < 0) run.first_sync_start_s[g] = start_s;
    run.member_ready_s[g] = start_s + sync_s;
    run.tail_s[g] += sync_s;
  }
  for (GroupId g : sync.groups) {
    const auto& sets = prep.sets_of[g];
    if (++run.next_set[g] < static_cast<int32_t>(sets.size())) {
      ReadyForSet(run, sets[run.next_set[g]]);
      continue;
    }
    run.grad_sync_start_s[g] = run.first_sync_start_s[g];
    run.grad_sync_s[g] = run.member_ready_s[g] - run.first_sync_start_s[g];
    run.tail_s[g] += prep.optimizer_s[g];
    Release(run, g, run.member_ready_s[g] + prep.optimizer_s[g]);
  }
}

// Group g's tail of `run` ends at end_s: it moves to the next iteration, or stops.
void Loop::Release(EngineRun& run, GroupId g, double end_s) {
  run.end_s[g] = end_s;
  if (run.index + 1 == num_iterations_) {
    phase_[g] = kDone;
    result_.group_end_s[g] = end_s;
    return;
  }
  EnterIteration(g, run.index + 1, end_s);
}

Status Loop::Run() {
  for (GroupId g = 0; g < num_groups_; ++g) EnterIteration(g, 0, carry_free_s_[g]);
  if (num_groups_ == 0) to_finalize_.push_back(0);
  // Iterations whose groups all finished at their release (no stages) finalize first.
  while (true) {
    for (size_t i = 0; i < to_finalize_.size(); ++i) {
      WEFT_RETURN_IF_ERROR(Finalize(*runs_[to_finalize_[i]]));
    }
    to_finalize_.clear();
    if (events_.empty()) break;
    const double t = events_.top_end_s();
    const int32_t key = events_.top_key();
    const GroupId g = events_.top_group();
    if (phase_[g] == kGetPending) {
      HandleGet(g, t, key);
    } else {
      Complete(g, t, key);
    }
  }
  if (finalized_ < num_iterations_) return DeadlockError(*runs_[finalized_]);
  return OkStatus();
}

// Deadlock report: every group that still has work in the iteration names where it waits and
// for what.
Status Loop::DeadlockError(const EngineRun& run) const {
  const StageGraph& graph = *run.prep->graph;
  const sched::Schedule& schedule = *run.prep->schedule;
  // The group's position in this iteration (its end if it moved past it).
  std::vector<int32_t> cursor(num_groups_);
  for (GroupId g = 0; g < num_groups_; ++g) {
    cursor[g] = run_of_[g] == run.index ? cursor_[g]
                                        : static_cast<int32_t>(schedule.order[g].size());
  }
  // A stage is done when it lies before its group's cursor.
  std::vector<uint8_t> done(graph.num_stages(), 0);
  for (int g = 0; g < graph.num_groups(); ++g) {
    for (int j = 0; j < cursor[g]; ++j) done[schedule.order[g][j]] = 1;
  }
  const bool window = num_iterations_ > 1 || !buffers_.empty();
  std::string message =
      window ? fmt::format("deadlock: iteration {}:", run.index)
             : std::string("deadlock: the schedule's orders contradict cross-group dependencies;");
  int listed = 0;
  for (int g = 0; g < graph.num_groups() && listed < 4; ++g) {
    if (cursor[g] >= static_cast<int>(schedule.order[g].size())) continue;
    StageId s = schedule.order[g][cursor[g]];
    message += fmt::format(" group {} waits at order[{}][{}] = stage {} ({})", g, g, cursor[g], s,
                           graph.StageName(s));
    const int32_t u = run.has_uses ? run.use_of[s] : -1;
    if (u >= 0 && (phase_[g] == kPutBlocked || phase_[g] == kGetBlocked)) {
      const BufferUse& use = run.iteration->buffer_uses[u];
      const BufferState& buf = buffers_[use.buffer];
      message += use.action == BufferAction::kPut
                     ? fmt::format(" to put {} bytes into buffer '{}' (holds {} of {} bytes)",
                                   use.bytes, buf.out->name, buf.bytes, buf.capacity_bytes)
                     : fmt::format(" to get {} bytes from buffer '{}' (holds {} bytes)",
                                   use.bytes, buf.out->name, buf.bytes);
    } else {
      StageId waits_for = -1;
      for (EdgeId e : graph.in_edges(s)) {
        if (!done[graph.edge(e).from]) {
          waits_for = graph.edge(e).from;
          break;
        }
      }
      if (waits_for >= 0) {
        message += fmt::format(" for stage {} ({}) of group {}", waits_for,
                               graph.StageName(waits_for), graph.stage(waits_for).group);
      }
    }
    message += ";";
    ++listed;
  }
  message.pop_back();
  return FailedPreconditionError(std::move(message));
}

// The iteration's Timeline once all its groups finished: the plan's buffer slots, the memory
// replay, tails, bounds and metrics (relative to the iteration's origin); its scratch goes back
// to the pool.
Status Loop::Finalize(EngineRun& run) {
  if (run.completed != run.n) return DeadlockError(run);
  const Prepared& prep = *run.prep;
  const StageGraph& graph = *prep.graph;
  const sched::Schedule& schedule = *prep.schedule;
  const auto groups = graph.groups();
  const int num_groups = num_groups_;
  Timeline& timeline = run.timeline;
  BufferSlots& buffers = run.buffers;
  const int num_slots = prep.slot_begin[num_groups];
  double origin_s = num_groups > 0 ? run.release_s[0] : 0.0;
  for (GroupId g = 1; g < num_groups; ++g) origin_s = std::min(origin_s, run.release_s[g]);

  // --- per group: memory, tail ------------------------------------------------------------
  const int64_t capacity_bytes =
      options_.capacity_bytes > 0 ? options_.capacity_bytes : cluster_.gpu.UsableMemoryBytes();
  timeline.capacity_bytes = capacity_bytes;
  double weighted_busy = 0, weighted_gpus = 0;
  PlaceTransfers(num_slots, link_source_, options_.record_memory_curves, buffers);
  for (GroupId g = 0; g < num_groups; ++g) {
    GroupTimeline& gt = timeline.groups[g];
    const graph::DeviceGroup& group = groups[g];
    const auto& order = schedule.order[g];
    const int32_t slot0 = buffers.slot_begin[g];
    const double release_s = run.release_s[g];
    gt.static_bytes = group.static_bytes;
    // The plan validator's replay (src/plan/validator.cc): memory is noted after each irecv and
    // after each compute (its activation allocation and output buffers counted, its activation
    // free not yet).
    int64_t live = group.static_bytes, live_buffers = 0;
    gt.peak_bytes = live;
    const int32_t size = static_cast<int32_t>(order.size());
    const SlotAccum* accum = buffers.accum.get() + slot0;
    const SlotCompute* compute = buffers.compute.get() + slot0;
    const SlotTiming* timing = buffers.slot_timing.get() + slot0;
    // The stages' times, from their slots (the event loop records a compute's times once, in
    // its slot; a scattered store per stage here, in a loop of independent stores, not in the
    // event loop).
    for (int32_t j = 0; j < size; ++j) {
      timeline.stages[order[j]] = StageTiming{timing[j].start_s, timing[j].end_s};
    }
    if (!options_.record_memory_curves) {
      // Peaks only: noting after every irecv step (not only non-empty ones) changes nothing,
      // since frees never raise the live bytes.
      int64_t peak = live, peak_buffers = 0;
      for (int32_t j = 0;; ++j) {
        live += accum[j].received;
        live_buffers += accum[j].received;
        peak = std::max(peak, live);
        peak_buffers = std::max(peak_buffers, live_buffers);
        if (j == size) break;
        live -= accum[j].freed;
        live_buffers -= accum[j].freed;
        live += compute[j].activation_alloc_bytes + compute[j].produced;
        live_buffers += compute[j].produced;
        peak = std::max(peak, live);
        peak_buffers = std::max(peak_buffers, live_buffers);
        live -= compute[j].activation_free_bytes;
      }
      gt.peak_bytes = peak;
      gt.peak_buffer_bytes = peak_buffers;
    } else {
      auto note = [&] {
        gt.peak_bytes = std::max(gt.peak_bytes, live);
        gt.peak_buffer_bytes = std::max(gt.peak_buffer_bytes, live_buffers);
      };
      const double* send_free_s = buffers.send_free_s.data() + slot0;
      // The curve's points, counted first: reserving exactly keeps the iteration's memory (and
      // a window's, which keeps every iteration's curves) as small as its content.
      size_t points = 1;
      for (int32_t j = 0; j <= size; ++j) {
        points += (accum[j].received != 0) + (accum[j].freed != 0);
        if (j < size) {
          points += (compute[j].activation_alloc_bytes + compute[j].produced != 0) +
                    (compute[j].activation_free_bytes != 0);
        }
      }
      gt.memory.reserve(points);
      gt.memory.push_back({release_s, live});
      for (int32_t j = 0; j <= size; ++j) {
        // Slot j runs when compute j − 1 ends.
        const double slot_s = j > 0 ? timing[j - 1].end_s : release_s;
        const SlotAccum& slot = accum[j];
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
          double t = std::max(slot_s, send_free_s[j]);
          if (j < size) t = std::min(t, timing[j].start_s);
          gt.memory.push_back({t, live});
        }
        if (j == size) break;
        const int64_t produced = compute[j].produced;
        const int64_t alloc = compute[j].activation_alloc_bytes;
        live += alloc + produced;
        live_buffers += produced;
        note();
        if (alloc + produced != 0) gt.memory.push_back({timing[j].start_s, live});
        if (compute[j].activation_free_bytes != 0) {
          live -= compute[j].activation_free_bytes;
          gt.memory.push_back({timing[j].end_s, live});
        }
      }
    }
    if (!order.empty()) {
      gt.first_start_s = timeline.stages[order.front()].start_s;
      gt.last_end_s = timeline.stages[order.back()].end_s;
    } else {
      gt.first_start_s = release_s;
      gt.last_end_s = release_s;
    }
    gt.optimizer_s = prep.optimizer_s[g];
    gt.grad_sync_start_s = run.grad_sync_start_s[g];
    gt.grad_sync_s = run.grad_sync_s[g];
    gt.end_s = run.end_s[g];
    timeline.pipeline_span_s = std::max(timeline.pipeline_span_s, gt.last_end_s - origin_s);
    const double gpus = group.TotalGpus();
    weighted_busy += gpus * gt.busy_s;
    weighted_gpus += gpus;
    if (capacity_bytes > 0 && gt.peak_bytes > capacity_bytes) {
      timeline.oom.push_back(OutOfMemory{g, gt.peak_bytes, capacity_bytes});
    }
  }
  if (run.offload.any) copies_.CheckHostMemory(run.offload, graph, cluster_, timeline);
  for (GroupId g = 0; g < num_groups; ++g) {
    timeline.iteration_time_s =
        std::max(timeline.iteration_time_s, timeline.groups[g].end_s - origin_s);
    timeline.busiest_group_work_s =
        std::max(timeline.busiest_group_work_s, timeline.groups[g].busy_s + run.tail_s[g]);
  }
  if (options_.fail_on_oom && !timeline.oom.empty()) {
    const OutOfMemory& o = timeline.oom.front();
    return ResourceExhaustedError(fmt::format(
        "{}group {} ({}) peaks at {:.2f} GiB per GPU; capacity is {:.2f} GiB ({} group(s) out of "
        "memory)",
        num_iterations_ > 1 ? fmt::format("iteration {}: ", run.index) : std::string(), o.group,
        groups[o.group].label, o.peak_bytes / 1073741824.0, o.capacity_bytes / 1073741824.0,
        timeline.oom.size()));
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
      critical = std::max(critical, run.unloaded_finish_s[g] + run.tail_s[g]);
    }
    for (GroupId g = 0; g < num_groups; ++g) critical = std::max(critical, run.tail_s[g]);
    timeline.critical_path_s = critical;
  }
  timeline.lower_bound_s = std::max(timeline.busiest_group_work_s, timeline.critical_path_s);

  // --- throughput and MFU -------------------------------------------------------------------
  timeline.model_flops = options_.model_flops > 0 ? options_.model_flops : prep.stage_flops;
  if (options_.num_gpus > 0) {
    timeline.num_gpus = options_.num_gpus;
  } else {
    for (const graph::DeviceGroup& group : groups) timeline.num_gpus += group.TotalGpus();
  }
  timeline.peak_flops_per_s = cluster_.gpu.peak_bf16_flops_per_s;
  const double denom =
      timeline.num_gpus * timeline.peak_flops_per_s * timeline.iteration_time_s;
  timeline.mfu = denom > 0 ? timeline.model_flops / denom : 0.0;
  timeline.samples_per_iteration = run.iteration->samples;
  timeline.tokens_per_iteration = run.iteration->tokens;
  if (timeline.iteration_time_s > 0) {
    timeline.samples_per_s = run.iteration->samples / timeline.iteration_time_s;
    timeline.tokens_per_s = run.iteration->tokens / timeline.iteration_time_s;
  }

  // --- the window: the iteration's end, steady-state busy time, times from its origin -------
  double end_s = 0;
  for (GroupId g = 0; g < num_groups; ++g) end_s = std::max(end_s, run.end_s[g]);
  result_.origin_s[run.index] = origin_s;
  result_.end_s[run.index] = end_s;
  if (run.index + 1 == warmup_) result_.steady_begin_s = end_s;
  if (warmup_ >= 0 && run.index >= warmup_) {
    // Busy time from begin_s on: all of it but the part before begin_s of the stages (and the
    // tail) that started before it, which lead the group's order.
    const double begin_s = result_.steady_begin_s;
    for (GroupId g = 0; g < num_groups; ++g) {
      const GroupTimeline& gt = timeline.groups[g];
      double busy_s = gt.busy_s + (gt.end_s - gt.grad_sync_start_s);
      for (StageId s : schedule.order[g]) {
        const StageTiming& t = timeline.stages[s];
        if (t.start_s >= begin_s) break;
        busy_s -= std::min(graph.stage(s).latency_s, begin_s - t.start_s);
      }
      if (gt.grad_sync_start_s < begin_s) {
        busy_s -= std::min(gt.end_s - gt.grad_sync_start_s, begin_s - gt.grad_sync_start_s);
      }
      result_.steady_busy_s[g] += busy_s;
    }
  }
  if (origin_s != 0) {
    for (StageTiming& t : timeline.stages) {
      t.start_s -= origin_s;
      t.end_s -= origin_s;
    }
    for (Transfer& t : timeline.transfers) {
      t.start_s -= origin_s;
      t.end_s -= origin_s;
    }
    for (GroupTimeline& gt : timeline.groups) {
      gt.first_start_s -= origin_s;
      gt.last_end_s -= origin_s;
      gt.grad_sync_start_s -= origin_s;
      gt.end_s -= origin_s;
      for (MemoryPoint& p : gt.memory) p.time_s -= origin_s;
    }
  }
  result_.timelines[run.index] = std::move(run.timeline);
  ++finalized_;
  runs_[run.index] = nullptr;
  pool_.push_back(std::unique_ptr<EngineRun>(&run));
  return OkStatus();
}

}  // namespace

Engine::Engine() = default;
Engine::~Engine() = default;

StatusOr<EngineResult> Engine::Run(std::span<const EngineIteration> iterations,
                                   const spec::ClusterSpec& cluster,
                                   const SimOptions& options,
                                   std::span<const BoundedBuffer> buffers,
                                   const WindowCarry& carry,
                                   int warmup) {
  if (iterations.empty()) return InvalidArgumentError("no iterations to simulate");
  for (const EngineIteration& it : iterations) {
    if (!it.graph->finalized()) {
      return InvalidArgumentError("Simulate needs a finalized stage graph (call Finalize())");
    }
  }
  WEFT_RETURN_IF_ERROR(CheckCluster(cluster));
  int64_t total_stages = 0;  // event keys number the window's stages in int32
  for (const EngineIteration& it : iterations) total_stages += it.graph->num_stages();
  if (total_stages >= std::numeric_limits<int32_t>::max()) {
    return InvalidArgumentError(fmt::format(
        "the window has {} stages; at most {} (split it, carrying one window into the next)",
        total_stages, std::numeric_limits<int32_t>::max() - 1));
  }
  // Prepare each distinct (graph, schedule) pair once.
  std::vector<std::unique_ptr<Prepared>> prepared;
  std::vector<Prepared*> prep_of(iterations.size());
  for (size_t k = 0; k < iterations.size(); ++k) {
    const EngineIteration& it = iterations[k];
    for (const auto& p : prepared) {
      if (p->graph == it.graph && p->schedule == it.schedule) prep_of[k] = p.get();
    }
    if (prep_of[k] != nullptr) continue;
    const StageGraph& graph = *it.graph;
    const sched::Schedule& schedule = *it.schedule;
    const std::string where =
        iterations.size() > 1 ? fmt::format("iteration {}: schedule", k) : "schedule";
    if (options.validate_schedule) {
      WEFT_RETURN_IF_ERROR(schedule.Validate(graph).WithPrefix(where));
    } else if (static_cast<int>(schedule.order.size()) != graph.num_groups()) {
      return InvalidArgumentError(
          fmt::format("{}.order.size() = {}; must equal the number of groups ({})",
                      iterations.size() > 1 ? where : std::string("schedule"),
                      schedule.order.size(), graph.num_groups()));
    }
    auto p = std::make_unique<Prepared>();
    p->graph = &graph;
    p->schedule = &schedule;
    const int num_groups = graph.num_groups();
    p->slot_begin.resize(num_groups + 1);
    for (GroupId g = 0; g < num_groups; ++g) {
      p->slot_begin[g + 1] =
          p->slot_begin[g] + static_cast<int32_t>(schedule.order[g].size()) + 1;
    }
    p->folded_grad_sync_s.resize(num_groups);
    p->optimizer_s.resize(num_groups);
    for (GroupId g = 0; g < num_groups; ++g) {
      p->folded_grad_sync_s[g] =
          options.include_grad_sync ? GradSyncTimeS(graph.group(g), cluster) : 0.0;
      p->optimizer_s[g] =
          options.include_optimizer_step ? OptimizerStepTimeS(graph.group(g), cluster) : 0.0;
    }
    p->in_sync_set.assign(num_groups, 0);
    p->sets_of.resize(num_groups);
    if (!graph.grad_syncs().empty()) {
      // The compiled plan's collective order: ascending (module, first group).
      for (const graph::GradSync& sync : graph.grad_syncs()) p->syncs.push_back(&sync);
      std::sort(p->syncs.begin(), p->syncs.end(),
                [](const graph::GradSync* a, const graph::GradSync* b) {
                  return std::tie(a->module, a->groups.front()) <
                         std::tie(b->module, b->groups.front());
                });
      for (size_t i = 0; i < p->syncs.size(); ++i) {
        p->sync_s.push_back(options.include_grad_sync
                                ? GradSyncSetTimeS(graph, *p->syncs[i], cluster)
                                : 0.0);
        for (GroupId g : p->syncs[i]->groups) {
          p->in_sync_set[g] = 1;
          p->sets_of[g].push_back(static_cast<int32_t>(i));
        }
      }
    }
    prep_of[k] = p.get();
    prepared.push_back(std::move(p));
  }
  EngineResult result;
  Loop loop(iterations, prep_of, cluster, options, buffers, carry, warmup, pool_, result);
  const Status status = loop.Run();
  if (!status.ok()) return status;
  return result;
}

}  // namespace weft::sim::internal
