#include "weft/plan/compiler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

#include "weft/sim/buffer_slots.h"

namespace weft::plan {

namespace {

struct PendingRecv {
  BufferId buffer = 0;
  int src = 0;            // sending group
  double t_post_s = 0;    // when the sender posts the isend (end of the producer)
  double t_key_s = 0;     // t_post made non-decreasing along the channel
  std::pair<int, int> seq;  // (producer position on src, edge id): the sender's isend order
  int slot = 0;
  graph::StageId consumer = 0;
};

// The non-compute actions of a rank by slot (slot j = just before compute j), in their order
// inside a slot: the isends of compute j - 1 (right after it), then irecvs, frees, wait_sends
// (each followed by a free of its buffer), wait_recvs.
enum SlotEventKind : int { kSlotIsend, kSlotIrecv, kSlotFree, kSlotWaitSend, kSlotWaitRecv };
constexpr int kNumSlotEventKinds = 5;

struct SlotEvent {
  int key = 0;  // slot * kNumSlotEventKinds + kind: the order of the rank's list
  BufferId buffer = 0;
  int peer = -1;
  graph::StageId stage = 0;  // the stage the action belongs to
};

// Sorts `events` by key, keeping the order of equal keys (keys in [0, num_keys)): a counting
// sort, one pass each way instead of a vector per slot.
void SortByKey(std::vector<SlotEvent>& events, int num_keys) {
  std::vector<int> begin(num_keys + 1, 0);
  for (const SlotEvent& e : events) ++begin[e.key + 1];
  for (int k = 0; k < num_keys; ++k) begin[k + 1] += begin[k];
  std::vector<SlotEvent> sorted(events.size());
  for (const SlotEvent& e : events) sorted[begin[e.key]++] = e;
  events = std::move(sorted);
}

StageRef RefOf(const graph::Stage& s) {
  return StageRef{.module = s.module,
                  .chunk = s.chunk,
                  .microbatch = s.microbatch,
                  .sub_microbatch = s.sub_microbatch,
                  .pass = s.pass};
}

TensorSpec ShapeFor(int64_t bytes, int module, const CompileOptions& options) {
  TensorSpec t;
  t.dtype = options.dtype;
  const int64_t size = DTypeBytes(options.dtype);
  const int64_t elements = (bytes + size - 1) / size;
  int64_t hidden = 0;
  if (module >= 0 && module < static_cast<int>(options.hidden_size_by_module.size())) {
    hidden = options.hidden_size_by_module[module];
  }
  if (hidden > 0 && elements > 0 && elements % hidden == 0) {
    t.shape = {elements / hidden, hidden};
  } else {
    t.shape = {elements};
  }
  return t;
}

std::vector<int32_t> SamplesOf(const graph::StageGraph& graph, graph::SampleSetId id) {
  const auto set = graph.sample_set(id);
  return std::vector<int32_t>(set.begin(), set.end());
}

// Splits `total` over `weights` (>= 0, not all 0) in proportion, rounding by largest remainder
// (ties to the lower index) so the parts add up to `total` exactly.
std::vector<int64_t> SplitByWeight(int64_t total, const std::vector<double>& weights) {
  double sum = 0;
  for (double w : weights) sum += w;
  std::vector<int64_t> parts(weights.size(), 0);
  std::vector<std::pair<double, size_t>> remainders;
  int64_t assigned = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const long double exact = static_cast<long double>(total) * weights[i] / sum;
    parts[i] = static_cast<int64_t>(std::floor(exact));
    assigned += parts[i];
    remainders.push_back({static_cast<double>(exact - parts[i]), i});
  }
  std::stable_sort(remainders.begin(), remainders.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t k = 0; assigned < total && k < remainders.size(); ++k, ++assigned) {
    ++parts[remainders[k].second];
  }
  return parts;
}

// The all_reduce_grads of one rank: per module with a weight-gradient compute on the group, the
// schedule position of its last one and its gradient bytes.
struct GradReduce {
  int module = 0;
  int last_position = -1;
  int64_t bytes = 0;
};

std::vector<GradReduce> GradReducesOf(const graph::StageGraph& graph,
                                      const std::vector<graph::StageId>& order, int group,
                                      const CompileOptions& options) {
  std::map<int, GradReduce> by_module;
  std::map<int, std::pair<double, double>> work;  // module -> (flops, latency_s)
  for (int j = 0; j < static_cast<int>(order.size()); ++j) {
    const graph::Stage& st = graph.stage(order[j]);
    if (!IsWeightGradient(ComputeKindOf(st.pass))) continue;
    GradReduce& r = by_module[st.module];
    r.module = st.module;
    r.last_position = j;
    work[st.module].first += st.flops;
    work[st.module].second += st.latency_s;
  }
  std::vector<GradReduce> out;
  for (const auto& [module, r] : by_module) out.push_back(r);
  if (out.empty()) return out;
  if (!options.grad_sync_bytes_by_rank_module.empty()) {
    const auto& row = options.grad_sync_bytes_by_rank_module[group];
    for (GradReduce& r : out) {
      r.bytes = r.module < static_cast<int>(row.size()) ? row[r.module] : 0;
    }
    return out;
  }
  std::vector<double> flops, latency;
  double flops_sum = 0, latency_sum = 0;
  for (const GradReduce& r : out) {
    flops.push_back(work[r.module].first);
    latency.push_back(work[r.module].second);
    flops_sum += flops.back();
    latency_sum += latency.back();
  }
  std::vector<double> weights = flops_sum > 0     ? flops
                                : latency_sum > 0 ? latency
                                                  : std::vector<double>(out.size(), 1.0);
  const std::vector<int64_t> parts = SplitByWeight(graph.group(group).grad_sync_bytes, weights);
  for (size_t i = 0; i < out.size(); ++i) out[i].bytes = parts[i];
  return out;
}

}  // namespace

Status CompileOptions::Validate() const {
  if (iteration < 0) {
    return InvalidArgumentError(fmt::format("options.iteration = {}; must be >= 0", iteration));
  }
  if (dtype != DType::kBf16 && dtype != DType::kFp32) {
    return InvalidArgumentError(
        fmt::format("options.dtype = {}; must be bf16 or fp32", static_cast<int>(dtype)));
  }
  for (size_t m = 0; m < hidden_size_by_module.size(); ++m) {
    if (hidden_size_by_module[m] < 0) {
      return InvalidArgumentError(fmt::format(
          "options.hidden_size_by_module[{}] = {}; must be >= 0", m, hidden_size_by_module[m]));
    }
  }
  if (memory_capacity_bytes < 0) {
    return InvalidArgumentError(
        fmt::format("options.memory_capacity_bytes = {}; must be >= 0 (0 = the timeline's)",
                    memory_capacity_bytes));
  }
  if (num_replicas < 1 || replica < 0 || replica >= num_replicas) {
    return InvalidArgumentError(fmt::format(
        "options.replica = {}, options.num_replicas = {}; need 0 <= replica < num_replicas",
        replica, num_replicas));
  }
  for (size_t g = 0; g < grad_sync_bytes_by_rank_module.size(); ++g) {
    for (size_t m = 0; m < grad_sync_bytes_by_rank_module[g].size(); ++m) {
      if (grad_sync_bytes_by_rank_module[g][m] < 0) {
        return InvalidArgumentError(
            fmt::format("options.grad_sync_bytes_by_rank_module[{}][{}] = {}; must be >= 0", g, m,
                        grad_sync_bytes_by_rank_module[g][m]));
      }
    }
  }
  return OkStatus();
}

StatusOr<ExecutionPlan> CompilePlan(const graph::StageGraph& graph,
                                    const sched::Schedule& schedule,
                                    const sim::Timeline& timeline,
                                    const CompileOptions& options) {
  if (!graph.finalized()) return FailedPreconditionError("CompilePlan: graph is not finalized");
  WEFT_RETURN_IF_ERROR(schedule.Validate(graph).WithPrefix("CompilePlan: schedule"));
  if (static_cast<int>(timeline.stages.size()) != graph.num_stages()) {
    return FailedPreconditionError(fmt::format(
        "CompilePlan: timeline.stages has {} entries; the graph has {} stages (simulate this "
        "graph and schedule first)",
        timeline.stages.size(), graph.num_stages()));
  }
  WEFT_RETURN_IF_ERROR(options.Validate());
  const auto& table = options.grad_sync_bytes_by_rank_module;
  if (!table.empty() && static_cast<int>(table.size()) != graph.num_groups()) {
    return InvalidArgumentError(
        fmt::format("options.grad_sync_bytes_by_rank_module has {} rows; the graph has {} groups",
                    table.size(), graph.num_groups()));
  }

  const int num_groups = graph.num_groups();
  // Position of every stage in its group's order, and per group the (monotone) start/end times.
  std::vector<int> pos(graph.num_stages(), -1);
  std::vector<std::vector<double>> starts(num_groups), ends(num_groups);
  for (int g = 0; g < num_groups; ++g) {
    const auto& order = schedule.order[g];
    double run_start = 0, run_end = 0;
    for (int j = 0; j < static_cast<int>(order.size()); ++j) {
      pos[order[j]] = j;
      run_start = std::max(run_start, timeline.stages[order[j]].start_s);
      run_end = std::max(run_end, timeline.stages[order[j]].end_s);
      starts[g].push_back(run_start);
      ends[g].push_back(run_end);
    }
  }
  // Per edge the end of its transfer (the last one listed wins), and whether it has one (a
  // flag, not a NaN sentinel: any end_s a caller's timeline holds is taken as it is). One
  // sequential pass: looking transfers up per edge missed the cache on most of them.
  std::vector<double> transfer_end_s(graph.num_edges(), 0.0);
  std::vector<uint8_t> has_transfer(graph.num_edges(), 0);
  for (const sim::Transfer& t : timeline.transfers) {
    if (t.edge >= 0 && t.edge < graph.num_edges()) {
      transfer_end_s[t.edge] = t.end_s;
      has_transfer[t.edge] = 1;
    }
  }

  ExecutionPlan plan;
  plan.model = options.model;
  plan.strategy = options.strategy.empty() ? schedule.name : options.strategy;
  plan.iteration = options.iteration;
  plan.replica = options.replica;
  plan.num_replicas = options.num_replicas;
  plan.module_names = graph.module_names();
  // Every action's module must index module_names: name the unnamed ones "m<i>".
  for (const graph::Stage& st : graph.stages()) {
    while (static_cast<int>(plan.module_names.size()) <= st.module) {
      plan.module_names.push_back(fmt::format("m{}", plan.module_names.size()));
    }
  }
  plan.ranks.resize(num_groups);
  const int64_t capacity =
      options.memory_capacity_bytes > 0 ? options.memory_capacity_bytes : timeline.capacity_bytes;
  for (int g = 0; g < num_groups; ++g) {
    RankPlan& rank = plan.ranks[g];
    rank.label = graph.group(g).label.empty() ? fmt::format("g{}", g) : graph.group(g).label;
    rank.memory_capacity_bytes = capacity;
    rank.static_bytes = graph.group(g).static_bytes;
  }

  // Buffers per rank: one per same-group edge with bytes, one on each end of a cross-group edge;
  // per stage the buffers its compute writes / reads (moved into the compute action). Counted
  // first so that every list is allocated once.
  std::vector<size_t> num_buffers(num_groups, 0);
  std::vector<std::vector<BufferId>> inputs(graph.num_stages()), outputs(graph.num_stages());
  std::vector<std::vector<SlotEvent>> events(num_groups);  // per rank, sorted below
  {
    std::vector<int> num_inputs(graph.num_stages(), 0), num_outputs(graph.num_stages(), 0);
    // Events: a free per local buffer; isend + wait_send on the sender, irecv + wait_recv + free
    // on the receiver of a cross-group edge.
    std::vector<size_t> num_events(num_groups, 0);
    for (const graph::Edge& edge : graph.edges()) {
      const int gu = graph.stage(edge.from).group, gv = graph.stage(edge.to).group;
      if (gu == gv && edge.bytes == 0) continue;
      ++num_buffers[gu];
      ++num_events[gv];
      if (gu != gv) {
        ++num_buffers[gv];
        num_events[gu] += 2;
        num_events[gv] += 2;
      }
      ++num_outputs[edge.from];
      ++num_inputs[edge.to];
    }
    for (int g = 0; g < num_groups; ++g) {
      plan.ranks[g].buffers.reserve(num_buffers[g]);
      events[g].reserve(num_events[g]);
    }
    for (graph::StageId s = 0; s < graph.num_stages(); ++s) {
      inputs[s].reserve(num_inputs[s]);
      outputs[s].reserve(num_outputs[s]);
    }
  }

  auto add_event = [&](int group, int slot, SlotEventKind kind, BufferId buffer, int peer,
                       graph::StageId stage) {
    events[group].push_back(SlotEvent{.key = slot * kNumSlotEventKinds + kind,
                                      .buffer = buffer,
                                      .peer = peer,
                                      .stage = stage});
  };
  std::map<std::pair<int, int>, std::vector<PendingRecv>> channels;  // (src, dst) -> receives
  BufferId next_buffer = 0;
  auto new_buffer = [&](int group, const graph::Edge& edge, TensorSpec tensor, std::string name,
                        std::vector<int32_t> samples) {
    const BufferId id = next_buffer++;
    const graph::Stage& from = graph.stage(edge.from);
    const graph::Stage& to = graph.stage(edge.to);
    plan.ranks[group].buffers.push_back(Buffer{.id = id,
                                               .tensor = std::move(tensor),
                                               .name = std::move(name),
                                               .producer = {from.group, RefOf(from)},
                                               .consumer = {to.group, RefOf(to)},
                                               .samples = std::move(samples),
                                               .rows = edge.rows});
    return id;
  };

  // StageName of each stage, formatted once (a stage ends several edges); empty = not yet.
  std::vector<std::string> stage_names(graph.num_stages());
  auto stage_name = [&](graph::StageId s) -> const std::string& {
    if (stage_names[s].empty()) stage_names[s] = graph.StageName(s);
    return stage_names[s];
  };
  for (graph::EdgeId e = 0; e < graph.num_edges(); ++e) {
    const graph::Edge& edge = graph.edge(e);
    const graph::Stage& from = graph.stage(edge.from);
    const graph::Stage& to = graph.stage(edge.to);
    const int gu = from.group, gv = to.group;
    if (gu == gv && edge.bytes == 0) continue;  // ordering only; the schedule order implies it
    const std::string& from_name = stage_name(edge.from);
    const std::string& to_name = stage_name(edge.to);
    std::string name;
    name.reserve(from_name.size() + 4 + to_name.size());
    name.append(from_name).append(" -> ").append(to_name);
    TensorSpec tensor = ShapeFor(edge.bytes, from.module, options);
    std::vector<int32_t> samples = SamplesOf(graph, edge.samples);
    if (gu == gv) {
      const BufferId b =
          new_buffer(gu, edge, std::move(tensor), std::move(name), std::move(samples));
      outputs[edge.from].push_back(b);
      inputs[edge.to].push_back(b);
      add_event(gv, sim::FreeSlot(pos[edge.to]), kSlotFree, b, -1, edge.to);
      continue;
    }
    const BufferId send = new_buffer(gu, edge, tensor, name, samples);
    const BufferId recv =
        new_buffer(gv, edge, std::move(tensor), std::move(name), std::move(samples));
    outputs[edge.from].push_back(send);
    add_event(gu, pos[edge.from] + 1, kSlotIsend, send, gv, edge.from);
    inputs[edge.to].push_back(recv);
    add_event(gv, pos[edge.to], kSlotWaitRecv, recv, gu, edge.to);
    add_event(gv, sim::FreeSlot(pos[edge.to]), kSlotFree, recv, -1, edge.to);

    const double t_post = timeline.stages[edge.from].end_s;
    const double t_arrive =
        has_transfer[e] ? transfer_end_s[e] : timeline.stages[edge.to].start_s;
    // wait_send and irecv slots: the rule of sim/buffer_slots.h (the simulator's memory replay
    // counts the buffers at the same slots).
    const std::vector<double>& starts_u = starts[gu];
    const int ws_slot =
        sim::WaitSendSlot(pos[edge.from] + 1, static_cast<int>(schedule.order[gu].size()),
                          t_arrive, [&](int32_t q) { return starts_u[q]; });
    add_event(gu, ws_slot, kSlotWaitSend, send, gv, edge.from);
    const std::vector<double>& ends_v = ends[gv];
    const int slot =
        sim::IrecvSlot(0, pos[edge.to], t_post, [&](int32_t q) { return ends_v[q]; });
    channels[{gu, gv}].push_back(PendingRecv{.buffer = recv,
                                             .src = gu,
                                             .t_post_s = t_post,
                                             .t_key_s = t_post,
                                             .seq = {pos[edge.from], e},
                                             .slot = slot,
                                             .consumer = edge.to});
  }

  // Keep each channel's receives in the sender's order: t_key non-decreasing, slots suffix-min.
  std::vector<std::vector<PendingRecv>> irecvs(num_groups);  // per receiving rank
  for (auto& [channel, recvs] : channels) {
    std::sort(recvs.begin(), recvs.end(),
              [](const PendingRecv& a, const PendingRecv& b) { return a.seq < b.seq; });
    for (size_t k = 1; k < recvs.size(); ++k) {
      recvs[k].t_key_s = std::max(recvs[k].t_key_s, recvs[k - 1].t_key_s);
    }
    int32_t later_slot = std::numeric_limits<int32_t>::max();
    for (size_t k = recvs.size(); k-- > 0;) {
      recvs[k].slot = sim::KeepChannelOrder(recvs[k].slot, later_slot);
    }
    irecvs[channel.second].insert(irecvs[channel.second].end(), recvs.begin(), recvs.end());
  }
  for (int g = 0; g < num_groups; ++g) {
    // Within a slot the irecvs go by t_key, then sender rank, then the sender's order (SortByKey
    // keeps this order).
    std::sort(irecvs[g].begin(), irecvs[g].end(), [](const PendingRecv& a, const PendingRecv& b) {
      return std::tie(a.slot, a.t_key_s, a.src, a.seq) < std::tie(b.slot, b.t_key_s, b.src, b.seq);
    });
    for (const PendingRecv& r : irecvs[g]) {
      add_event(g, r.slot, kSlotIrecv, r.buffer, r.src, r.consumer);
    }
    SortByKey(events[g],
              (static_cast<int>(schedule.order[g].size()) + 1) * kNumSlotEventKinds);
  }

  for (int g = 0; g < num_groups; ++g) {
    RankPlan& rank = plan.ranks[g];
    const auto& order = schedule.order[g];
    // The rank's all_reduce_grads, ascending by module (GradReducesOf's order), at the end.
    const std::vector<GradReduce> reduces = GradReducesOf(graph, order, g, options);
    size_t num_actions = order.size() + reduces.size() + events[g].size();
    for (const SlotEvent& e : events[g]) num_actions += e.key % kNumSlotEventKinds == kSlotWaitSend;
    rank.actions.reserve(num_actions);
    auto buffer_action = [&](ActionKind kind, BufferId b, int peer, graph::StageId s) {
      Action& a = rank.actions.emplace_back();
      a.kind = kind;
      a.stage = RefOf(graph.stage(s));
      a.buffer = b;
      a.peer = peer;
    };
    size_t next_event = 0;
    for (int j = 0; j <= static_cast<int>(order.size()); ++j) {
      // Slot j: the isends of compute j - 1, irecvs, frees, wait_sends (+ frees), wait_recvs.
      for (; next_event < events[g].size() &&
             events[g][next_event].key < (j + 1) * kNumSlotEventKinds;
           ++next_event) {
        const SlotEvent& e = events[g][next_event];
        switch (e.key % kNumSlotEventKinds) {
          case kSlotIsend:
            buffer_action(ActionKind::kIsend, e.buffer, e.peer, e.stage);
            break;
          case kSlotIrecv:
            buffer_action(ActionKind::kIrecv, e.buffer, e.peer, e.stage);
            break;
          case kSlotFree:
            buffer_action(ActionKind::kFree, e.buffer, -1, e.stage);
            break;
          case kSlotWaitSend:
            buffer_action(ActionKind::kWaitSend, e.buffer, e.peer, e.stage);
            buffer_action(ActionKind::kFree, e.buffer, -1, e.stage);
            break;
          case kSlotWaitRecv:
            buffer_action(ActionKind::kWaitRecv, e.buffer, e.peer, e.stage);
            break;
        }
      }
      if (j == static_cast<int>(order.size())) {
        for (const GradReduce& r : reduces) {
          Action& reduce = rank.actions.emplace_back();
          reduce.kind = ActionKind::kAllReduceGrads;
          reduce.stage = StageRef{.module = r.module};
          reduce.bytes = r.bytes;
          reduce.dp = std::max(1, graph.group(g).dp);
          if (reduce.dp == 1) reduce.ranks = {g};
          for (const graph::GradSync& sync : graph.grad_syncs()) {
            if (sync.module == r.module &&
                std::binary_search(sync.groups.begin(), sync.groups.end(), g)) {
              reduce.ranks.assign(sync.groups.begin(), sync.groups.end());
              reduce.dp = static_cast<int>(sync.groups.size());
              reduce.bytes = sync.bytes;
              break;
            }
          }
        }
        break;
      }
      const graph::StageId s = order[j];
      const graph::Stage& stage = graph.stage(s);
      Action& compute = rank.actions.emplace_back();
      compute.kind = ComputeKindOf(stage.pass);
      compute.stage = RefOf(stage);
      // Each stage is computed once: its buffer lists move into the action.
      compute.inputs = std::move(inputs[s]);
      compute.outputs = std::move(outputs[s]);
      compute.recompute = stage.recompute;
      compute.recompute_layers = stage.recompute_layers;
      compute.activation_alloc_bytes = stage.activation_alloc_bytes;
      compute.activation_free_bytes = stage.activation_free_bytes;
      compute.latency_s = stage.latency_s;
      compute.samples = SamplesOf(graph, stage.samples);
      compute.instance_begin = stage.instance_begin;
      compute.instance_end = stage.instance_end;
    }
    if (options.batch_p2p) {
      int next_group = 0;
      const int n = static_cast<int>(rank.actions.size());
      for (int i = 0; i < n;) {
        int k = i;
        while (k < n && IsP2pPost(rank.actions[k].kind)) ++k;
        if (k - i >= 2) {
          for (int t = i; t < k; ++t) rank.actions[t].group = next_group;
          ++next_group;
        }
        i = std::max(k, i + 1);
      }
    }
  }
  return plan;
}

}  // namespace weft::plan
