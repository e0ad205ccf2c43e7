// DIP §5.2: dual-queue interleaving of forward and backward stages, plus the §4 formulas.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "weft/sim/simulator.h"
#include "weft/strategy/dip/dip.h"

namespace weft::strategy::dip {

StatusOr<int> SmallestEfficientSize(std::span<const int> sizes, std::span<const double> efficiency,
                                    double threshold) {
  if (sizes.empty() || sizes.size() != efficiency.size()) {
    return InvalidArgumentError("sizes (" + std::to_string(sizes.size()) + ") and efficiency (" +
                                std::to_string(efficiency.size()) +
                                ") must be non-empty and of equal length");
  }
  const double best = *std::max_element(efficiency.begin(), efficiency.end());
  for (size_t j = 0; j < sizes.size(); ++j) {
    if (efficiency[j] >= threshold * best) return static_cast<int>(j);
  }
  return static_cast<int>(sizes.size()) - 1;
}

std::vector<int> SegmentCounts(std::span<const double> latency_s, std::span<const int> max_segments) {
  double t_min = std::numeric_limits<double>::infinity();
  for (double t : latency_s) {
    if (t > 0) t_min = std::min(t_min, t);
  }
  std::vector<int> k(latency_s.size(), 1);
  for (size_t i = 0; i < latency_s.size(); ++i) {
    if (latency_s[i] > 0 && std::isfinite(t_min)) {
      k[i] = std::max(1, static_cast<int>(std::floor(latency_s[i] / t_min + 1e-9)));
    }
    if (i < max_segments.size() && max_segments[i] > 0) k[i] = std::min(k[i], max_segments[i]);
  }
  return k;
}

namespace {

// A ready stage with everything the picking rules read, copied once when it becomes ready: its
// start time is final then (all its predecessors are placed), so the record never changes.
// Compact records keep the per-step queue scans in cache and off the (large) graph::Stage.
struct ReadyStage {
  double t_start_s = 0;
  double key = 0;              // priority key; lower runs first
  int64_t alloc_bytes = 0;     // activation bytes allocated when it starts (cap check)
  int32_t sub_microbatch = 0;  // first tie-break of the key
  graph::StageId id = 0;       // second tie-break
};

// Lower = higher priority: (key, sub-microbatch, stage id), a strict total order.
bool Before(const ReadyStage& a, const ReadyStage& b) {
  if (a.key != b.key) return a.key < b.key;
  if (a.sub_microbatch != b.sub_microbatch) return a.sub_microbatch < b.sub_microbatch;
  return a.id < b.id;
}

// Earliest start first, then priority.
bool StartsBefore(const ReadyStage& a, const ReadyStage& b) {
  if (a.t_start_s != b.t_start_s) return a.t_start_s < b.t_start_s;
  return Before(a, b);
}

// A group's ready stages: the forward and the backward queue. The rules pick by strict total
// orders (Before, StartsBefore), so the order inside a queue does not matter: each is an
// unordered bag (removal swaps in the last element).
struct ReadyQueues {
  std::vector<ReadyStage> forward, backward;
};

// The index of the smallest finite value (the first on ties) under point updates: a winner
// tree, O(log size) per update. The scheduler picks a group every step while only one or two
// groups' minima change.
class FirstMinTree {
 public:
  explicit FirstMinTree(int size) {
    while (leaves_ < size) leaves_ *= 2;
    values_.assign(leaves_, std::numeric_limits<double>::infinity());
    winner_.resize(2 * leaves_);
    for (int i = 0; i < leaves_; ++i) winner_[leaves_ + i] = i;
    for (int k = leaves_ - 1; k >= 1; --k) winner_[k] = Better(winner_[2 * k], winner_[2 * k + 1]);
  }
  double value(int i) const { return values_[i]; }
  void Set(int i, double value) {
    if (value == values_[i]) return;
    values_[i] = value;
    for (unsigned k = (leaves_ + i) >> 1; k >= 1; k >>= 1) {
      winner_[k] = Better(winner_[2 * k], winner_[2 * k + 1]);
    }
  }
  // -1 when every value is infinite.
  int FirstMin() const {
    const int best = winner_[1];
    return values_[best] < std::numeric_limits<double>::infinity() ? best : -1;
  }

 private:
  // The left subtree holds the smaller indices: it wins ties.
  int Better(int left, int right) const { return values_[right] < values_[left] ? right : left; }

  int leaves_ = 1;
  std::vector<double> values_;
  std::vector<int> winner_;  // winner_[k]: the first smallest leaf under node k (root 1)
};

}  // namespace

StatusOr<sched::Schedule> DualQueueSchedule(const graph::StageGraph& g,
                                            const DualQueueOptions& options) {
  if (!g.finalized()) return InvalidArgumentError("dual-queue: the stage graph is not finalized");
  const int n = g.num_stages();
  const int num_groups = g.num_groups();
  if (!options.priority_key.empty() && static_cast<int>(options.priority_key.size()) != n) {
    return InvalidArgumentError("dual-queue: priority_key has " +
                                std::to_string(options.priority_key.size()) +
                                " entries; the graph has " + std::to_string(n) + " stages");
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<int64_t> cap_bytes(num_groups, std::numeric_limits<int64_t>::max());
  for (int gi = 0; gi < num_groups && gi < static_cast<int>(options.activation_cap_bytes.size());
       ++gi) {
    cap_bytes[gi] = options.activation_cap_bytes[gi];
  }
  std::vector<int64_t> held_bytes(num_groups, 0);
  // A forward may start while its group's held activations plus its own stay within the cap.
  const auto fits = [&](int gi, const ReadyStage& forward) {
    return held_bytes[gi] + forward.alloc_bytes <= cap_bytes[gi];
  };
  // Per group: at least the largest allocation of a queued forward (exact after each scan of
  // the queue, raised by arrivals), to skip the per-stage cap checks while everything fits.
  std::vector<int64_t> forward_alloc_bound_bytes(num_groups, 0);

  std::vector<ReadyQueues> ready(num_groups);
  std::vector<int32_t> preds_left(n);
  std::vector<double> t_start_s(n, 0.0);  // of stages not yet ready: the latest arrival so far
  // Queues stage s of group `gi`; returns whether it is a forward.
  const auto make_ready = [&](graph::StageId s, int gi) {
    const graph::Stage& st = g.stage(s);
    const bool forward = st.pass == spec::Pass::kForward;
    const double key = options.priority_key.empty() ? static_cast<double>(st.microbatch)
                                                    : options.priority_key[s];
    if (forward) {
      forward_alloc_bound_bytes[gi] =
          std::max(forward_alloc_bound_bytes[gi], st.activation_alloc_bytes);
    }
    (forward ? ready[gi].forward : ready[gi].backward)
        .push_back({t_start_s[s], key, st.activation_alloc_bytes, st.sub_microbatch, s});
    return forward;
  };
  std::vector<int> group_stages(num_groups, 0);
  for (const graph::Stage& st : g.stages()) ++group_stages[st.group];
  for (int s = 0; s < n; ++s) {
    preds_left[s] = static_cast<int32_t>(g.in_edges(s).size());
    if (preds_left[s] == 0) make_ready(s, g.stage(s).group);
  }

  sched::Schedule out;
  out.name = "dip-dual-queue";
  out.order.resize(num_groups);
  for (int gi = 0; gi < num_groups; ++gi) out.order[gi].reserve(group_stages[gi]);

  // Per group: the earliest start among its ready stages under the cap (min_capped) and
  // ignoring it (min_any). Arriving stages lower them by min; the placing group (its queue lost
  // a stage, its held bytes changed) updates them from its pick scan or, when a forward may no
  // longer fit (or fit again), rescans its forwards for the capped minimum.
  FirstMinTree min_capped(num_groups);
  std::vector<double> min_any(num_groups, kInf);
  const auto capped_min = [&](int gi) {
    double capped = kInf;
    for (const ReadyStage& r : ready[gi].backward) capped = std::min(capped, r.t_start_s);
    for (const ReadyStage& r : ready[gi].forward) {
      if (fits(gi, r)) capped = std::min(capped, r.t_start_s);
    }
    return capped;
  };
  for (int gi = 0; gi < num_groups; ++gi) {
    double any = kInf;
    for (const auto* q : {&ready[gi].forward, &ready[gi].backward}) {
      for (const ReadyStage& r : *q) any = std::min(any, r.t_start_s);
    }
    min_any[gi] = any;
    min_capped.Set(gi, capped_min(gi));
  }

  std::vector<double> t_last_s(num_groups, 0.0);
  std::vector<char> last_forward(num_groups, 0);
  // Link kinds between group pairs, looked up on first use (kUnknownLink until then).
  constexpr int8_t kUnknownLink = -1;
  std::vector<int8_t> link_kind;
  if (options.cluster != nullptr) {
    link_kind.assign(static_cast<size_t>(num_groups) * num_groups, kUnknownLink);
  }

  for (int placed = 0; placed < n; ++placed) {
    // 1. The group with the smallest minimum start time among its enabled queues (the first
    // such group on ties); if memory caps block everything, let the earliest forward run.
    int gi = min_capped.FirstMin();
    const bool ignore_cap = gi < 0;
    if (ignore_cap) {
      double best_t = kInf;
      for (int other = 0; other < num_groups; ++other) {
        if (min_any[other] < best_t) {
          best_t = min_any[other];
          gi = other;
        }
      }
    }
    if (gi < 0) {
      return InternalError("dual-queue: no ready stage with " + std::to_string(n - placed) +
                           " stages left (the graph has a cycle?)");
    }
    ReadyQueues& queues = ready[gi];
    const double t_last = t_last_s[gi];
    // 2–4. In one scan of each queue: the highest-priority eligible forward and backward that
    // can start by t_last (no idling), and the earliest-starting eligible stage (ties:
    // priority). Besides, for the group's minima after the pick: the two smallest start times
    // over both queues (where the first smallest is) and the largest forward allocation.
    const ReadyStage* best_fw = nullptr;
    const ReadyStage* best_bw = nullptr;
    const ReadyStage* earliest = nullptr;
    const ReadyStage* first = nullptr;
    double first_t = kInf, second_t = kInf;
    const auto track_min = [&](const ReadyStage& r) {
      if (r.t_start_s < first_t) {
        second_t = first_t;
        first_t = r.t_start_s;
        first = &r;
      } else if (r.t_start_s < second_t) {
        second_t = r.t_start_s;
      }
    };
    const auto track_earliest = [&](const ReadyStage& r) {
      // Only used when no eligible stage can start by t_last (then all start later): not
      // tracked once one can.
      if (best_fw != nullptr || best_bw != nullptr) return;
      if (earliest == nullptr || StartsBefore(r, *earliest)) earliest = &r;
    };
    for (const ReadyStage& r : queues.backward) {
      track_min(r);
      if (r.t_start_s <= t_last) {
        if (best_bw == nullptr || Before(r, *best_bw)) best_bw = &r;
      } else {
        track_earliest(r);
      }
    }
    int64_t max_forward_alloc_bytes = 0;
    const bool all_fit =
        ignore_cap || held_bytes[gi] + forward_alloc_bound_bytes[gi] <= cap_bytes[gi];
    for (const ReadyStage& r : queues.forward) {
      track_min(r);
      max_forward_alloc_bytes = std::max(max_forward_alloc_bytes, r.alloc_bytes);
      if (!all_fit && !fits(gi, r)) continue;
      if (r.t_start_s <= t_last) {
        if (best_fw == nullptr || Before(r, *best_fw)) best_fw = &r;
      } else {
        track_earliest(r);
      }
    }
    forward_alloc_bound_bytes[gi] = max_forward_alloc_bytes;
    const ReadyStage* pick;
    if (best_fw != nullptr && best_bw != nullptr) {
      // Both kinds ready by t_last: 1F1B alternation, the other kind than the last one.
      pick = last_forward[gi] ? best_bw : best_fw;
    } else if (best_fw != nullptr || best_bw != nullptr) {
      pick = best_fw != nullptr ? best_fw : best_bw;  // starts without idling the group
    } else {
      pick = earliest;  // greedy: the earliest start
    }
    // The group's earliest remaining start.
    min_any[gi] = pick == first ? second_t : first_t;
    const graph::StageId s = pick->id;
    const double start = std::max(t_last, pick->t_start_s);
    const graph::Stage& st = g.stage(s);
    last_forward[gi] = st.pass == spec::Pass::kForward;
    std::vector<ReadyStage>& q = last_forward[gi] ? queues.forward : queues.backward;
    q[pick - q.data()] = q.back();
    q.pop_back();
    const double end = start + st.latency_s;
    t_last_s[gi] = end;
    held_bytes[gi] += st.activation_alloc_bytes - st.activation_free_bytes;
    out.order[gi].push_back(s);
    // Its earliest remaining start under the cap: when every remaining forward fits under the
    // new held bytes, the earliest remaining start; otherwise rescan.
    min_capped.Set(gi, held_bytes[gi] + max_forward_alloc_bytes <= cap_bytes[gi]
                           ? min_any[gi]
                           : capped_min(gi));
    for (graph::EdgeId e : g.out_edges(s)) {
      const graph::Edge& edge = g.edge(e);
      const int to_group = g.stage(edge.to).group;
      double arrive = end;
      if (to_group != gi && options.cluster != nullptr) {
        int8_t& link = link_kind[static_cast<size_t>(gi) * num_groups + to_group];
        if (link == kUnknownLink) {
          link = static_cast<int8_t>(
              sim::LinkBetween(g.group(gi), g.group(to_group), *options.cluster));
        }
        arrive += sim::TransferTimeS(edge.bytes, static_cast<sim::LinkKind>(link),
                                     *options.cluster);
      }
      t_start_s[edge.to] = std::max(t_start_s[edge.to], arrive);
      if (--preds_left[edge.to] == 0) {
        const bool forward = make_ready(edge.to, to_group);
        const ReadyStage& r =
            forward ? ready[to_group].forward.back() : ready[to_group].backward.back();
        min_any[to_group] = std::min(min_any[to_group], r.t_start_s);
        if ((!forward || fits(to_group, r)) && r.t_start_s < min_capped.value(to_group)) {
          min_capped.Set(to_group, r.t_start_s);
        }
      }
    }
  }
  return out;
}

}  // namespace weft::strategy::dip
