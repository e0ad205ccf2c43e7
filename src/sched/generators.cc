#include "weft/sched/generators.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

namespace weft::sched {
namespace {

using graph::GroupId;
using graph::StageGraph;
using graph::StageId;
using spec::Pass;

// Slot kinds. Under ZB-H1 weight-gradient stages form their own slots; otherwise they are appended
// to the backward slot of the same (microbatch, chunk).
constexpr int kFwd = 0;
constexpr int kBwd = 1;
constexpr int kWgt = 2;
constexpr int kNumKinds = 3;

// The slots of every group: stages of (microbatch index, chunk, kind), in run order.
class SlotTable {
 public:
  // Builds the table; each group's microbatch ids are mapped to dense indices in increasing order.
  SlotTable(const StageGraph& graph, bool separate_weight_slots) {
    const int n = graph.num_stages();
    // Per group: the microbatch ids it runs, dense in increasing id order — a rule's "i-th
    // microbatch" is the i-th one that passes the group (a group of one DP replica in an
    // unfolded graph runs every R-th microbatch of the iteration).
    std::vector<std::vector<int>> mb_ids(graph.num_groups());
    num_chunks_ = 1;
    for (const graph::Stage& s : graph.stages()) {
      // A run of one microbatch's stages adds it once (sorted and made unique below).
      std::vector<int>& ids = mb_ids[s.group];
      if (ids.empty() || ids.back() != s.microbatch) ids.push_back(s.microbatch);
      num_chunks_ = std::max(num_chunks_, s.chunk + 1);
    }
    num_microbatches_ = 0;
    for (auto& ids : mb_ids) {
      std::sort(ids.begin(), ids.end());
      ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
      num_microbatches_ = std::max(num_microbatches_, static_cast<int>(ids.size()));
    }
    auto mb_index = [&](GroupId g, int id) {
      const auto& ids = mb_ids[g];
      return static_cast<int>(std::lower_bound(ids.begin(), ids.end(), id) - ids.begin());
    };
    // Stages in order of (group, slot, W-after-B, topological position): a counting sort by
    // bucket (group, slot, W-after-B), filled in topological order.
    const int slots_per_group = num_microbatches_ * num_chunks_ * kNumKinds;
    const int num_groups = graph.num_groups();
    const int64_t num_buckets = int64_t{num_groups} * slots_per_group * 2;
    std::vector<int64_t> bucket(n);
    std::vector<int32_t> next(num_buckets + 1, 0);  // counts, then each bucket's next position
    mb_ids_ = mb_ids;
    for (int s = 0; s < n; ++s) {
      const graph::Stage& st = graph.stage(s);
      int kind = st.pass == Pass::kForward ? kFwd : kBwd;
      const bool weight = st.pass == Pass::kBackwardWeight;
      if (weight) {
        has_weight_stages_ = true;
        if (separate_weight_slots) kind = kWgt;
      }
      if (st.pass == Pass::kBackwardInput) has_input_stages_ = true;
      const int64_t slot = Slot(mb_index(st.group, st.microbatch), st.chunk, kind);
      bucket[s] = (int64_t{st.group} * slots_per_group + slot) * 2 + (weight ? 1 : 0);
      ++next[bucket[s] + 1];
    }
    for (int64_t b = 0; b < num_buckets; ++b) next[b + 1] += next[b];
    // Slot ranges per group: a slot is its two buckets.
    begin_.resize(int64_t{num_groups} * slots_per_group + 1);
    for (size_t i = 0; i < begin_.size(); ++i) begin_[i] = next[2 * i];
    sorted_.resize(n);
    for (StageId s : graph.topological_order()) sorted_[next[bucket[s]]++] = s;
    slots_per_group_ = slots_per_group;
  }

  int num_microbatches() const { return num_microbatches_; }
  // The microbatch ids group g runs, increasing (its dense index i is ids[i]).
  const std::vector<int>& microbatch_ids(GroupId g) const { return mb_ids_[g]; }
  int num_chunks() const { return num_chunks_; }
  bool has_weight_stages() const { return has_weight_stages_; }
  bool has_input_stages() const { return has_input_stages_; }

  // Appends the stages of slot (group, microbatch index, chunk, kind) to `order` (none if absent).
  void Append(GroupId g, int mb, int chunk, int kind, std::vector<StageId>& order) const {
    const int64_t i = int64_t{g} * slots_per_group_ + Slot(mb, chunk, kind);
    order.insert(order.end(), sorted_.begin() + begin_[i], sorted_.begin() + begin_[i + 1]);
  }
  // All chunks of one microbatch: forward in chunk order, backward/weight in reverse.
  void AppendUnit(GroupId g, int mb, int kind, std::vector<StageId>& order) const {
    if (kind == kFwd) {
      for (int c = 0; c < num_chunks_; ++c) Append(g, mb, c, kind, order);
    } else {
      for (int c = num_chunks_ - 1; c >= 0; --c) Append(g, mb, c, kind, order);
    }
  }

 private:
  int64_t Slot(int mb, int chunk, int kind) const {
    return (int64_t{mb} * num_chunks_ + chunk) * kNumKinds + kind;
  }

  int num_microbatches_ = 0;
  int num_chunks_ = 1;
  int slots_per_group_ = 0;
  bool has_weight_stages_ = false;
  bool has_input_stages_ = false;
  std::vector<StageId> sorted_;
  std::vector<int64_t> begin_;
  std::vector<std::vector<int>> mb_ids_;
};

// Rank of each group for the rules' warm-up (Cornstarch §4.1, cross-modality 1F1B): a group
// warms up as many microbatches as the longest path of stages after it, i.e. its height = the
// largest number of cross-group forward hops from a forward stage of its last chunk to a graph
// sink; rank = P − 1 − height with P = 1 + the largest height, so that the rules' P − rank − 1
// is the height. On a chain of P groups (and on interleaved chains, whose last chunk on rank r
// is P − 1 − r hops from the sink) this is Megatron's rank r. On a fan-in graph a short branch
// beside a long one (a 1-stage audio encoder beside a 3-stage vision encoder) gets the warm-up
// of its own path to the sink, not the longest branch's: counting hops from a source instead
// would give it the vision encoder's first stage's warm-up and as much activation memory.
// Heights come from every microbatch's stages (the largest), so a microbatch that skips a
// branch does not lower them. Groups without forward stages get height 0.
std::vector<int> GroupRanks(const StageGraph& graph) {
  const int n = graph.num_stages();
  std::vector<int> height(n, 0);
  const auto topo = graph.topological_order();
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    const StageId s = *it;
    if (graph.stage(s).pass != Pass::kForward) continue;
    for (graph::EdgeId e : graph.out_edges(s)) {
      const StageId to = graph.edge(e).to;
      if (graph.stage(to).pass != Pass::kForward) continue;
      const int hop = graph.stage(to).group != graph.stage(s).group ? 1 : 0;
      height[s] = std::max(height[s], height[to] + hop);
    }
  }
  const int num_groups = graph.num_groups();
  std::vector<int> last_chunk(num_groups, -1), group_height(num_groups, 0);
  for (int s = 0; s < n; ++s) {
    const graph::Stage& st = graph.stage(s);
    if (st.pass == Pass::kForward) last_chunk[st.group] = std::max(last_chunk[st.group], st.chunk);
  }
  for (int s = 0; s < n; ++s) {
    const graph::Stage& st = graph.stage(s);
    if (st.pass != Pass::kForward || st.chunk != last_chunk[st.group]) continue;
    group_height[st.group] = std::max(group_height[st.group], height[s]);
  }
  const int p =
      num_groups == 0 ? 1 : *std::max_element(group_height.begin(), group_height.end()) + 1;
  std::vector<int> rank(num_groups, 0);
  for (int g = 0; g < num_groups; ++g) rank[g] = p - 1 - group_height[g];
  return rank;
}

std::vector<StageId> GPipeOrder(const SlotTable& t, GroupId g) {
  std::vector<StageId> order;
  for (int mb = 0; mb < t.num_microbatches(); ++mb) t.AppendUnit(g, mb, kFwd, order);
  for (int mb = 0; mb < t.num_microbatches(); ++mb) t.AppendUnit(g, mb, kBwd, order);
  return order;
}

// 1F1B warm-ups from the data flow, for graphs whose groups run different microbatch sets (an
// unfolded placement whose encoder replica feeds several LLM replicas, microbatches that skip a
// module): 1F1B on group g runs F(0..w-1), then F(w+i) B(i); its first backward (of its first
// microbatch id) waits for every consumer's backward of that id, which comes after the consumer
// forwarded ids_c[0 .. pos + w_c]. So g warms up over every id of its own up to the largest of
// those (w_g = their count), consumers first (reverse topological order of the group graph). On a
// chain with the same microbatches everywhere this is Megatron's P − rank − 1, on fan-in graphs
// each branch's height (GroupRanks); the caller takes the larger of the two per group. Empty when
// the group graph has a cycle (chunks revisiting groups: the rank rule alone applies).
std::vector<int> DataFlowWarmups(const StageGraph& graph, const SlotTable& t) {
  const int num_groups = graph.num_groups();
  std::vector<std::vector<char>> consumer(num_groups, std::vector<char>(num_groups, 0));
  std::vector<int> indegree(num_groups, 0);
  for (graph::EdgeId e = 0; e < graph.num_edges(); ++e) {
    const graph::Stage& from = graph.stage(graph.edge(e).from);
    const graph::Stage& to = graph.stage(graph.edge(e).to);
    if (from.pass != Pass::kForward || to.pass != Pass::kForward || from.group == to.group)
      continue;
    if (!consumer[from.group][to.group]) {
      consumer[from.group][to.group] = 1;
      ++indegree[to.group];
    }
  }
  // Topological order of groups (Kahn); a cycle -> no data-flow warm-ups.
  std::vector<int> order;
  std::vector<int> ready;
  for (int g = 0; g < num_groups; ++g) {
    if (indegree[g] == 0) ready.push_back(g);
  }
  while (!ready.empty()) {
    const int g = ready.back();
    ready.pop_back();
    order.push_back(g);
    for (int c = 0; c < num_groups; ++c) {
      if (consumer[g][c] && --indegree[c] == 0) ready.push_back(c);
    }
  }
  if (static_cast<int>(order.size()) != num_groups) return {};
  std::vector<int> warmup(num_groups, 0);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const int g = *it;
    const auto& ids = t.microbatch_ids(g);
    if (ids.empty()) continue;
    int needed_id = -1;
    for (int c = 0; c < num_groups; ++c) {
      if (!consumer[g][c]) continue;
      const auto& cids = t.microbatch_ids(c);
      // The first id of g that c also runs.
      int pos = -1;
      for (int id : ids) {
        auto at = std::lower_bound(cids.begin(), cids.end(), id);
        if (at != cids.end() && *at == id) {
          pos = static_cast<int>(at - cids.begin());
          break;
        }
      }
      if (pos < 0) continue;
      const int last = std::min(pos + warmup[c], static_cast<int>(cids.size()) - 1);
      needed_id = std::max(needed_id, cids[last]);
    }
    warmup[g] = static_cast<int>(std::upper_bound(ids.begin(), ids.end(), needed_id) - ids.begin());
  }
  return warmup;
}

std::vector<StageId> OneFOneBOrder(
    const SlotTable& t, GroupId g, int rank, int p, int data_flow_warmup = 0) {
  const int m = t.num_microbatches();
  const int warmup = std::min(std::max(p - rank - 1, data_flow_warmup), m);
  std::vector<StageId> order;
  for (int i = 0; i < warmup; ++i) t.AppendUnit(g, i, kFwd, order);
  for (int i = 0; i < m - warmup; ++i) {
    t.AppendUnit(g, warmup + i, kFwd, order);
    t.AppendUnit(g, i, kBwd, order);
  }
  for (int i = m - warmup; i < m; ++i) t.AppendUnit(g, i, kBwd, order);
  return order;
}

// ZB-H1: 1F1B on F and B (input gradient); the weight gradient W(i) is deferred by r
// microbatches on rank r (it runs after B(i + r)), the remaining W's after the last B. Later
// ranks, whose 1F1B memory is lowest, hold the deferred W's, so the critical chain of B's reaches
// rank 0 early and no rank exceeds rank 0's 1F1B peak (p microbatches in flight).
std::vector<StageId> ZeroBubbleH1Order(const SlotTable& t, GroupId g, int rank, int p) {
  const int m = t.num_microbatches();
  const int warmup = std::min(p - rank - 1, m);
  const int defer = rank;
  std::vector<StageId> order;
  int next_w = 0;
  auto after_b = [&](int i) {
    if (i - defer >= 0) t.AppendUnit(g, next_w++, kWgt, order);
  };
  for (int i = 0; i < warmup; ++i) t.AppendUnit(g, i, kFwd, order);
  for (int i = 0; i < m - warmup; ++i) {
    t.AppendUnit(g, warmup + i, kFwd, order);
    t.AppendUnit(g, i, kBwd, order);
    after_b(i);
  }
  for (int i = m - warmup; i < m; ++i) {
    t.AppendUnit(g, i, kBwd, order);
    after_b(i);
  }
  while (next_w < m) t.AppendUnit(g, next_w++, kWgt, order);
  return order;
}

// Megatron's interleaved schedule: virtual microbatch k maps to chunk (k / P) % v (reversed for
// backward) and microbatch (k / (P·v))·P + k % P; warmup (P − r − 1)·2 + (v − 1)·P.
std::vector<StageId> InterleavedOrder(const SlotTable& t, GroupId g, int rank, int p) {
  const int m = t.num_microbatches();
  const int v = t.num_chunks();
  const int total = m * v;
  const int warmup = std::min((p - rank - 1) * 2 + (v - 1) * p, total);
  auto mb_of = [&](int k) { return (k / (p * v)) * p + k % p; };
  auto fwd = [&](int k, std::vector<StageId>& order) {
    t.Append(g, mb_of(k), (k / p) % v, kFwd, order);
  };
  auto bwd = [&](int k, std::vector<StageId>& order) {
    t.Append(g, mb_of(k), v - 1 - (k / p) % v, kBwd, order);
  };
  std::vector<StageId> order;
  for (int k = 0; k < warmup; ++k) fwd(k, order);
  for (int i = 0; i < total - warmup; ++i) {
    fwd(warmup + i, order);
    bwd(i, order);
  }
  for (int k = total - warmup; k < total; ++k) bwd(k, order);
  return order;
}

}  // namespace

std::string_view ScheduleKindName(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kGPipe:
      return "gpipe";
    case ScheduleKind::kOneFOneB:
      return "1f1b";
    case ScheduleKind::kInterleavedOneFOneB:
      return "interleaved-1f1b";
    case ScheduleKind::kZeroBubbleH1:
      return "zb-h1";
  }
  return "?";
}

StatusOr<ScheduleKind> ParseScheduleKind(std::string_view name) {
  for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB,
                            ScheduleKind::kInterleavedOneFOneB, ScheduleKind::kZeroBubbleH1}) {
    if (name == ScheduleKindName(kind)) return kind;
  }
  return InvalidArgumentError(
      fmt::format("schedule = '{}'; must be one of gpipe, 1f1b, interleaved-1f1b, zb-h1", name));
}

StatusOr<Schedule> MakeSchedule(ScheduleKind kind, const StageGraph& graph) {
  if (!graph.finalized()) {
    return FailedPreconditionError("schedule generators need a finalized stage graph");
  }
  const SlotTable table(graph, kind == ScheduleKind::kZeroBubbleH1);
  const std::vector<int> rank = GroupRanks(graph);
  const int p = graph.num_groups() == 0 ? 1 : *std::max_element(rank.begin(), rank.end()) + 1;
  Schedule schedule;
  schedule.order.resize(graph.num_groups());
  schedule.name = std::string(ScheduleKindName(kind));
  const int v = table.num_chunks();
  const int m = table.num_microbatches();
  if (kind == ScheduleKind::kInterleavedOneFOneB) {
    if (v == 1) {
      kind = ScheduleKind::kOneFOneB;  // Megatron runs plain 1F1B for one chunk per rank
    } else {
      if (m % p != 0) {
        return FailedPreconditionError(fmt::format(
            "interleaved 1F1B needs num_microbatches ({}) divisible by the pipeline size P ({})", m,
            p));
      }
      schedule.name += fmt::format("(v={})", v);
    }
  }
  if (kind == ScheduleKind::kZeroBubbleH1 && !table.has_input_stages()) {
    return FailedPreconditionError(
        "zb-h1 needs backward split into kBackwardInput and kBackwardWeight stages; the graph has "
        "no kBackwardInput stage");
  }
  const std::vector<int> flow_warmup =
      kind == ScheduleKind::kOneFOneB ? DataFlowWarmups(graph, table) : std::vector<int>{};
  for (GroupId g = 0; g < graph.num_groups(); ++g) {
    switch (kind) {
      case ScheduleKind::kGPipe:
        schedule.order[g] = GPipeOrder(table, g);
        break;
      case ScheduleKind::kOneFOneB:
        schedule.order[g] =
            OneFOneBOrder(table, g, rank[g], p, flow_warmup.empty() ? 0 : flow_warmup[g]);
        break;
      case ScheduleKind::kInterleavedOneFOneB:
        schedule.order[g] = InterleavedOrder(table, g, rank[g], p);
        break;
      case ScheduleKind::kZeroBubbleH1:
        schedule.order[g] = ZeroBubbleH1Order(table, g, rank[g], p);
        break;
    }
  }
  // Say what the obstacle is: a non-interleaved rule on a graph that revisits groups, or a rule
  // whose fixed warm-up assumes every microbatch passes the ranks in order (rank 0 .. P-1, slot
  // by slot) on a graph whose data flow does not (branches of a fan-in model placed one after
  // the other in the chain, or a producer on a later rank than its consumer).
  const std::string why =
      kind != ScheduleKind::kInterleavedOneFOneB && kind != ScheduleKind::kGPipe && v > 1
          ? fmt::format("{} chunks per group: a chunk that revisits groups needs interleaved-1f1b",
                        v)
          : fmt::format(
                "its warm-up assumes each microbatch flows through the ranks in order{}; this "
                "graph's data flow does not (parallel branches placed one after the other, or a "
                "producer on a later rank than its consumer)",
                v > 1 ? ", slot by slot" : "");
  WEFT_RETURN_IF_ERROR(schedule.CheckDeadlockFree(graph).WithPrefix(
      fmt::format("{} cannot order this graph ({})", ScheduleKindName(kind), why)));
  return schedule;
}

Status PipelineShape::Validate() const {
  if (num_groups < 1)
    return InvalidArgumentError(fmt::format("num_groups = {}; must be >= 1", num_groups));
  if (chunks_per_group < 1) {
    return InvalidArgumentError(
        fmt::format("chunks_per_group = {}; must be >= 1", chunks_per_group));
  }
  if (num_microbatches < 1) {
    return InvalidArgumentError(
        fmt::format("num_microbatches = {}; must be >= 1", num_microbatches));
  }
  const size_t virtual_stages = static_cast<size_t>(num_groups) * chunks_per_group;
  if (costs.size() != 1 && costs.size() != virtual_stages) {
    return InvalidArgumentError(
        fmt::format("costs.size() = {}; must be 1 or num_groups × chunks_per_group ({})",
                    costs.size(), virtual_stages));
  }
  for (size_t k = 0; k < costs.size(); ++k) {
    const VirtualStageCost& c = costs[k];
    if (!(c.forward_s >= 0) || !(c.backward_input_s >= 0) || !(c.backward_weight_s >= 0) ||
        !std::isfinite(c.forward_s + c.backward_input_s + c.backward_weight_s)) {
      return InvalidArgumentError(fmt::format("costs[{}]: latencies must be finite and >= 0", k));
    }
    if (c.activation_bytes < 0 || c.send_bytes < 0 || c.weight_grad_activation_bytes < 0 ||
        c.weight_grad_activation_bytes > c.activation_bytes) {
      return InvalidArgumentError(fmt::format(
          "costs[{}]: activation_bytes = {}, weight_grad_activation_bytes = {}, send_bytes = {}; "
          "must be >= 0 with weight_grad_activation_bytes <= activation_bytes",
          k, c.activation_bytes, c.weight_grad_activation_bytes, c.send_bytes));
    }
  }
  if (gpus_per_group < 1) {
    return InvalidArgumentError(fmt::format("gpus_per_group = {}; must be >= 1", gpus_per_group));
  }
  if (dp < 1) return InvalidArgumentError(fmt::format("dp = {}; must be >= 1", dp));
  return OkStatus();
}

StatusOr<StageGraph> BuildPipelineGraph(const PipelineShape& shape) {
  WEFT_RETURN_IF_ERROR(shape.Validate().WithPrefix("pipeline shape"));
  const int p = shape.num_groups;
  const int num_virtual = p * shape.chunks_per_group;
  const int m = shape.num_microbatches;
  const int per_mb = num_virtual * (shape.split_backward ? 3 : 2);
  StageGraph graph;
  graph.Reserve(m * per_mb, m * (per_mb + num_virtual));
  for (int g = 0; g < p; ++g) {
    graph.AddGroup(graph::DeviceGroup{.first_gpu = g * shape.gpus_per_group,
                                      .num_gpus = shape.gpus_per_group,
                                      .dp = shape.dp,
                                      .dp_stride_gpus = p * shape.gpus_per_group,
                                      .static_bytes = shape.static_bytes_per_group,
                                      .grad_sync_bytes = shape.grad_sync_bytes_per_group,
                                      .optimizer_bytes = shape.optimizer_bytes_per_group,
                                      .label = fmt::format("pp{}", g)});
  }
  auto cost = [&](int k) -> const VirtualStageCost& {
    return shape.costs.size() == 1 ? shape.costs[0] : shape.costs[k];
  };
  std::vector<StageId> fwd(num_virtual), bwd(num_virtual);
  for (int mb = 0; mb < m; ++mb) {
    for (int k = 0; k < num_virtual; ++k) {
      const VirtualStageCost& c = cost(k);
      fwd[k] = graph.AddStage(graph::Stage{.group = k % p,
                                           .chunk = k / p,
                                           .microbatch = mb,
                                           .pass = Pass::kForward,
                                           .latency_s = c.forward_s,
                                           .flops = c.forward_flops,
                                           .activation_alloc_bytes = c.activation_bytes});
      if (k > 0) graph.AddEdge(fwd[k - 1], fwd[k], cost(k - 1).send_bytes);
    }
    for (int k = num_virtual - 1; k >= 0; --k) {
      const VirtualStageCost& c = cost(k);
      graph::Stage b{.group = k % p, .chunk = k / p, .microbatch = mb};
      if (shape.split_backward) {
        b.pass = Pass::kBackwardInput;
        b.latency_s = c.backward_input_s;
        b.flops = c.forward_flops;
        b.activation_free_bytes = c.activation_bytes - c.weight_grad_activation_bytes;
      } else {
        b.pass = Pass::kBackward;
        b.latency_s = c.backward_input_s + c.backward_weight_s;
        b.flops = 2 * c.forward_flops;
        b.activation_free_bytes = c.activation_bytes;
      }
      bwd[k] = graph.AddStage(b);
      graph.AddEdge(fwd[k], bwd[k], 0);
      if (k + 1 < num_virtual) graph.AddEdge(bwd[k + 1], bwd[k], c.send_bytes);
      if (shape.split_backward) {
        graph::Stage w = b;
        w.pass = Pass::kBackwardWeight;
        w.latency_s = c.backward_weight_s;
        w.flops = c.forward_flops;
        w.activation_free_bytes = c.weight_grad_activation_bytes;
        const StageId wid = graph.AddStage(w);
        graph.AddEdge(bwd[k], wid, 0);
      }
    }
  }
  WEFT_RETURN_IF_ERROR(graph.Finalize());
  return graph;
}

}  // namespace weft::sched
