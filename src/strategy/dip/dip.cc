// DIP strategies: modality-aware partitioner (Prepare), dual-queue interleaving, MCTS segment
// reordering and the §5.3 per-layer memory optimization (memory.h) (PlanIteration).
#include "weft/strategy/dip/dip.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <tuple>

#include "weft/algo/mcts.h"
#include "weft/common/parallel.h"
#include "weft/data/workload.h"
#include "weft/planning/graph_builder.h"
#include "weft/sched/generators.h"
#include "weft/sched/partition.h"
#include "weft/sim/simulator.h"
#include "weft/strategy/common.h"
#include "weft/strategy/dip/memory.h"

namespace weft::strategy::dip {
namespace internal {
namespace {

std::vector<int64_t> ActivationCaps(const graph::StageGraph& g, const spec::ClusterSpec& cluster) {
  std::vector<int64_t> caps;
  for (const auto& group : g.groups()) {
    caps.push_back(std::max<int64_t>(0, cluster.gpu.UsableMemoryBytes() - group.static_bytes));
  }
  return caps;
}

struct Score {
  double time_s = std::numeric_limits<double>::infinity();
  bool oom = true;
  // Out of memory: the largest peak / capacity over the groups and hosts that overflow (+inf when
  // not simulated); 0 when the plan fits.
  double overflow_ratio = std::numeric_limits<double>::infinity();
  double Cost() const { return oom ? time_s * 10 : time_s; }
};

double OverflowRatio(const sim::Timeline& t) {
  double ratio = 0;
  for (const auto& o : t.oom) {
    ratio = std::max(ratio, static_cast<double>(o.peak_bytes) /
                                static_cast<double>(std::max<int64_t>(1, o.capacity_bytes)));
  }
  return ratio;
}

Score ScoreOf(const sim::Timeline& t) {
  return {t.iteration_time_s, !t.oom.empty(), OverflowRatio(t)};
}

// Choosing among finished candidates (recompute levels, memory selections): one that fits beats
// one that does not; when none fits, the one that overflows least (the fastest would keep the
// plan that is furthest out of memory); otherwise the faster. The searches keep Cost().
bool BetterChoice(const Score& a, const Score& b) {
  if (a.oom != b.oom) return !a.oom;
  if (a.oom && a.overflow_ratio != b.overflow_ratio) return a.overflow_ratio < b.overflow_ratio;
  return a.time_s < b.time_s;
}

Score Evaluate(const graph::StageGraph& g, const sched::Schedule& s,
               const spec::ClusterSpec& cluster) {
  sim::SimOptions o;
  o.record_transfers = false;
  o.record_memory_curves = false;
  o.validate_schedule = false;
  auto t = sim::Simulate(g, s, cluster, o);
  if (!t.ok()) return {};
  return ScoreOf(*t);
}

// Segment groups: (microbatch, module), in microbatch order then the model's topological order.
struct Segments {
  std::vector<int> of_stage;               // segment of each stage
  std::vector<int> microbatch;             // per segment
  std::vector<std::vector<int>> by_mb;     // per microbatch: its segments in flow order
};

Segments MakeSegments(const graph::StageGraph& g, const std::vector<int>& topo_rank) {
  std::map<std::pair<int, int>, int> index;  // (mb, topo rank) -> segment
  for (const auto& st : g.stages()) index[{st.microbatch, topo_rank[st.module]}] = 0;
  Segments seg;
  int next = 0;
  int max_mb = -1;
  for (auto& [k, v] : index) {
    v = next++;
    seg.microbatch.push_back(k.first);
    max_mb = std::max(max_mb, k.first);
  }
  seg.by_mb.resize(max_mb + 1);
  for (auto& [k, v] : index) seg.by_mb[k.first].push_back(v);
  for (const auto& st : g.stages()) seg.of_stage.push_back(index[{st.microbatch, topo_rank[st.module]}]);
  return seg;
}

std::vector<double> KeysFromOrder(const Segments& seg, std::span<const int> order) {
  std::vector<double> pos(seg.microbatch.size(), 0);
  for (size_t i = 0; i < order.size(); ++i) pos[order[i]] = static_cast<double>(i);
  std::vector<double> key(seg.of_stage.size());
  for (size_t s = 0; s < key.size(); ++s) key[s] = pos[seg.of_stage[s]];
  return key;
}

// The 1F1B rules' answer for one graph shape (stages and edges; the rules and the deadlock check
// read neither latencies nor bytes), shared by graphs that differ only in those (a replica's
// recompute variants).
struct RuleAttempt {
  bool known = false;
  std::optional<sched::Schedule> rule;  // nullopt: no 1F1B rule is deadlock-free
};

// The 1F1B-like rule order of dip-partition-only: Megatron 1F1B (or interleaved 1F1B) when the
// rule applies to the graph without deadlock, else the dual-queue order with FIFO priorities.
// `*fell_back` (if given) says whether the dual-queue order was used. `shape` (optional): the
// rules' answer for this graph's shape, used when known, else filled.
StatusOr<sched::Schedule> RuleSchedule(const graph::StageGraph& g, bool* fell_back = nullptr,
                                       RuleAttempt* shape = nullptr) {
  if (fell_back != nullptr) *fell_back = false;
  if (shape == nullptr || !shape->known) {
    std::optional<sched::Schedule> found;
    for (auto kind : {sched::ScheduleKind::kOneFOneB, sched::ScheduleKind::kInterleavedOneFOneB}) {
      auto s = sched::MakeSchedule(kind, g);
      if (s.ok() && s->CheckDeadlockFree(g).ok()) {
        found = std::move(*s);
        break;
      }
    }
    if (shape == nullptr) {
      if (found) return std::move(*found);
    } else {
      shape->known = true;
      shape->rule = std::move(found);
    }
  }
  if (shape != nullptr && shape->rule) return *shape->rule;
  if (fell_back != nullptr) *fell_back = true;
  return DualQueueSchedule(g, {});
}

struct SearchResult {
  sched::Schedule schedule;
  Score score;
  double search_s = 0;  // wall time of the search proper (MCTS + polish); 0 without one
};

// Scores a schedule of the graph being searched (default: simulate it as it is).
using Evaluator = std::function<Score(const sched::Schedule&)>;

std::vector<int> TopoRank(const spec::ModelSpec& model) {
  std::vector<int> topo_rank(model.modules.size(), 0);
  const auto topo = model.TopologicalOrder();
  for (size_t i = 0; i < topo.size(); ++i) topo_rank[topo[i]] = static_cast<int>(i);
  return topo_rank;
}

// The §5.1 search space: orders of the segment groups that keep each microbatch's flow order;
// cost = the evaluated dual-queue schedule with those priorities. `g` must outlive the problem.
algo::MctsProblem SegmentOrderProblem(std::shared_ptr<const Segments> seg,
                                      std::shared_ptr<const DualQueueOptions> dq,
                                      const graph::StageGraph* g, Evaluator evaluate) {
  algo::MctsProblem problem;
  problem.legal_actions = [seg](std::span<const int> partial, std::vector<int>& actions) {
    actions.clear();
    std::vector<int> placed(seg->by_mb.size(), 0);
    for (int a : partial) ++placed[seg->microbatch[a]];
    for (size_t mb = 0; mb < seg->by_mb.size(); ++mb) {
      if (placed[mb] < static_cast<int>(seg->by_mb[mb].size())) {
        actions.push_back(seg->by_mb[mb][placed[mb]]);
      }
    }
  };
  problem.cost = [seg, dq, g, evaluate = std::move(evaluate)](std::span<const int> complete) {
    DualQueueOptions o = *dq;
    o.priority_key = KeysFromOrder(*seg, complete);
    auto s = DualQueueSchedule(*g, o);
    if (!s.ok()) return std::numeric_limits<double>::infinity();
    return evaluate(*s).Cost();
  };
  return problem;
}

// Local polish of a searched order (beyond the paper), in two phases on the per-group stage
// orders, which reach orders the dual-queue decoder cannot express (it starts the earliest-ready
// stage):
//  1. descent: move one stage of a group's order by up to kPolishWindow positions and keep the
//     move when the evaluated cost drops (first improvement, groups in turn, repeated while
//     something improves);
//  2. annealing with what is left of the budget: a random such move is kept when it lowers the
//     cost or, with probability exp(-Δ/T), raises it; T falls geometrically from 1% to 0.01% of the
//     starting cost over the budget (the evaluation cap, or the deadline when that binds first);
//     the best order seen is kept. Deterministic given `seed` under an evaluation cap.
// A move that breaks a dependency fails to simulate (infinite cost) and is rejected. Stops after
// `max_evaluations` evaluations or at `deadline`.
constexpr int kPolishWindow = 6;

// Moves order[i] to position j (rotates the range between them); MoveStage(order, j, i) undoes it.
void MoveStage(std::vector<int>& order, int i, int j) {
  if (j > i) {
    std::rotate(order.begin() + i, order.begin() + i + 1, order.begin() + j + 1);
  } else if (j < i) {
    std::rotate(order.begin() + j, order.begin() + i, order.begin() + i + 1);
  }
}

void PolishOrder(SearchResult& best, const Evaluator& evaluate, int64_t max_evaluations,
                 std::chrono::steady_clock::time_point deadline, uint64_t seed) {
  int64_t evaluations = 0;
  auto spent = [&] {
    return evaluations >= max_evaluations || std::chrono::steady_clock::now() >= deadline;
  };
  bool improved = true;
  while (improved) {
    improved = false;
    for (size_t gi = 0; gi < best.schedule.order.size(); ++gi) {
      auto& order = best.schedule.order[gi];
      const int len = static_cast<int>(order.size());
      for (int i = 0; i < len; ++i) {
        for (int d = 1; d <= kPolishWindow; ++d) {
          for (int j : {i + d, i - d}) {
            if (j < 0 || j >= len) continue;
            if (spent()) return;
            MoveStage(order, i, j);
            const Score score = evaluate(best.schedule);
            ++evaluations;
            if (score.Cost() < best.score.Cost() * (1 - 1e-9)) {
              best.score = score;
              improved = true;
            } else {
              MoveStage(order, j, i);
            }
          }
        }
      }
    }
  }
  // Annealing from the local optimum.
  std::vector<size_t> movable;
  for (size_t gi = 0; gi < best.schedule.order.size(); ++gi) {
    if (best.schedule.order[gi].size() > 1) movable.push_back(gi);
  }
  const double start_cost = best.score.Cost();
  if (movable.empty() || !std::isfinite(start_cost) || start_cost <= 0) return;
  const int64_t anneal_evaluations = max_evaluations - evaluations;
  const auto anneal_start = std::chrono::steady_clock::now();
  const double anneal_s =
      deadline == std::chrono::steady_clock::time_point::max()
          ? 0
          : std::chrono::duration<double>(deadline - anneal_start).count();
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ULL);
  sched::Schedule current = best.schedule;
  double current_cost = start_cost;
  int64_t step = 0;
  while (!spent()) {
    // Progress through the annealing budget: the binding one of evaluations and time.
    double progress = anneal_evaluations > 0
                          ? static_cast<double>(step) / static_cast<double>(anneal_evaluations)
                          : 0;
    if (anneal_s > 0) {
      progress = std::max(progress, std::chrono::duration<double>(
                                        std::chrono::steady_clock::now() - anneal_start)
                                            .count() /
                                        anneal_s);
    }
    const double temperature = start_cost * 1e-2 * std::pow(1e-2, std::min(1.0, progress));
    ++step;
    auto& order = current.order[movable[rng() % movable.size()]];
    const int len = static_cast<int>(order.size());
    const int i = static_cast<int>(rng() % len);
    const int d = 1 + static_cast<int>(rng() % kPolishWindow);
    const int j = (rng() & 1) ? i + d : i - d;
    if (j < 0 || j >= len) continue;
    MoveStage(order, i, j);
    const Score score = evaluate(current);
    ++evaluations;
    const double delta = score.Cost() - current_cost;
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    if (std::isfinite(score.Cost()) && (delta <= 0 || u < std::exp(-delta / temperature))) {
      current_cost = score.Cost();
      if (current_cost < best.score.Cost() * (1 - 1e-9)) {
        best.schedule.order = current.order;
        best.score = score;
      }
    } else {
      MoveStage(order, j, i);
    }
  }
}

// §5.1 + §5.2: the default dual-queue schedule, improved by MCTS over segment priorities, then
// polished by adjacent swaps.
// `evaluate` scores a schedule of `g` (nullptr: simulate `g` as it is).
// The orders a search starts from: the dual-queue order and the rule order of one graph. Both
// depend only on the graph, so searches of the same graph with different evaluators share them.
struct StartOrders {
  std::optional<sched::Schedule> dual_queue;
  std::optional<sched::Schedule> rule;  // nullopt: no rule order for this graph
  double dual_queue_decode_s = 0;
};

// `start_orders`: the graph's start orders, filled on first use (nullptr: not kept).
// `rule_shape`: the 1F1B rules' answer for the graph's shape (RuleSchedule; nullptr: not kept).
StatusOr<SearchResult> SearchSchedule(const Job& job, const graph::StageGraph& g, bool search,
                                      const PlanBudget& budget, double time_share,
                                      const DipOptions& options, Evaluator evaluate = nullptr,
                                      StartOrders* start_orders = nullptr,
                                      RuleAttempt* rule_shape = nullptr) {
  const bool custom_evaluator = static_cast<bool>(evaluate);
  if (!evaluate) {
    evaluate = [&](const sched::Schedule& s) { return Evaluate(g, s, job.cluster); };
  }
  auto dq = std::make_shared<DualQueueOptions>();
  dq->activation_cap_bytes = ActivationCaps(g, job.cluster);
  dq->cluster = &job.cluster;
  StartOrders local;
  StartOrders* orders = start_orders != nullptr ? start_orders : &local;
  if (!orders->dual_queue) {
    const auto decode_start = std::chrono::steady_clock::now();
    WEFT_ASSIGN_OR_RETURN(orders->dual_queue, DualQueueSchedule(g, *dq));
    orders->dual_queue_decode_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - decode_start).count();
    if (auto rule = RuleSchedule(g, nullptr, rule_shape); rule.ok()) orders->rule = std::move(*rule);
  }
  SearchResult best;
  best.schedule = *orders->dual_queue;
  const auto evaluate_start = std::chrono::steady_clock::now();
  best.score = evaluate(best.schedule);
  // Wall time of one decode + evaluation: what each MCTS rollout costs.
  const double evaluation_s =
      orders->dual_queue_decode_s +
      std::chrono::duration<double>(std::chrono::steady_clock::now() - evaluate_start).count();
  best.schedule.name = "dip-interleave";
  // Keep the best seen: the rule order is a candidate too (the dual-queue rules are a heuristic
  // and can lose a fraction of a percent to 1F1B on balanced graphs).
  if (orders->rule) {
    const Score score = evaluate(*orders->rule);
    if (score.Cost() < best.score.Cost()) {
      best.schedule = *orders->rule;
      best.score = score;
    }
  }
  if (!search) return best;

  auto seg = std::make_shared<const Segments>(MakeSegments(g, TopoRank(job.model)));
  const int num_segments = static_cast<int>(seg->microbatch.size());
  if (num_segments <= 1) return best;
  const algo::MctsProblem problem = SegmentOrderProblem(seg, dq, &g, evaluate);
  algo::MctsOptions mo;
  mo.alpha = options.mcts_alpha;
  mo.beta = options.mcts_beta;
  mo.rollouts_per_expansion = options.mcts_rollouts;
  mo.incumbent_rollout_probability = options.mcts_incumbent_rollouts;
  mo.seed = budget.seed != 0 ? budget.seed : job.seed;
  mo.cancel = budget.interrupt;
  mo.threads = std::max(1, budget.threads);
  mo.max_iterations = budget.work_budget > 0 ? budget.work_budget : 0;
  // Three quarters of the time for MCTS, the rest for the polish.
  const double time_s = std::max(0.0, budget.time_budget_s * time_share);
  mo.time_budget_s = 0.75 * time_s;
  if (mo.max_iterations == 0 && mo.time_budget_s <= 0) mo.max_iterations = 50;
  const auto start = std::chrono::steady_clock::now();
  // Under a time budget only: each MCTS worker does at least one synchronization batch
  // (expansions_per_sync × rollouts evaluations) before it checks the clock. When the share cannot
  // pay for that (many DP replicas of a large graph), search on one thread with one expansion per
  // batch, and not at all when even one expansion's rollouts do not fit: the budget holds.
  bool run_mcts = true;
  if (mo.max_iterations == 0 && mo.time_budget_s > 0) {
    const double batch_s = mo.expansions_per_sync * mo.rollouts_per_expansion * evaluation_s;
    if (mo.time_budget_s < batch_s) {
      mo.threads = 1;
      mo.expansions_per_sync = 1;
    }
    run_mcts = mo.time_budget_s >= mo.rollouts_per_expansion * evaluation_s;
  }
  StatusOr<algo::MctsResult> result =
      run_mcts ? algo::MctsSearch(problem, mo)
               : StatusOr<algo::MctsResult>(DeadlineExceededError("search budget too small"));
  if (result.ok()) {  // else keep the default (never worse than dual-queue)
    DualQueueOptions o = *dq;
    o.priority_key = KeysFromOrder(*seg, result->best_assignment);
    WEFT_ASSIGN_OR_RETURN(sched::Schedule s, DualQueueSchedule(g, o));
    const Score score = evaluate(s);
    if (score.Cost() < best.score.Cost()) {
      best.schedule = std::move(s);
      best.schedule.name = "dip-mcts";
      best.score = score;
    }
  }
  if (options.polish && !(budget.interrupt != nullptr && budget.interrupt->load())) {
    const int64_t n = g.num_stages();
    // Under a work budget (deterministic): with a custom evaluator (it runs the per-rank memory
    // selection each time) 1 evaluation per stage, at most 2000 and 20 per work unit; else up to
    // 200 per stage while the simulated stages stay within 10^4 per work unit (an evaluation
    // simulates n stages), and never fewer than min(2000, 4 n, 20 per work unit). Under a time
    // budget: 200 per stage, the deadline binds.
    const int64_t per_unit = 20 * budget.work_budget;
    const int64_t work_cap =
        std::max(std::min<int64_t>({2000, 4 * n, per_unit}),
                 std::min<int64_t>(200 * n, budget.work_budget * 10000 / std::max<int64_t>(1, n)));
    const int64_t max_evaluations =
        budget.work_budget > 0
            ? (custom_evaluator ? std::min<int64_t>({2000, n, per_unit}) : work_cap)
            : 200 * n;
    const auto deadline =
        time_s > 0 && budget.work_budget <= 0
            ? start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                          std::chrono::duration<double>(time_s))
            : std::chrono::steady_clock::time_point::max();
    PolishOrder(best, evaluate, max_evaluations, deadline,
                budget.seed != 0 ? budget.seed : job.seed);
  }
  best.search_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return best;
}

// A schedule with its graph (per-layer memory options chosen by `choice` when per_layer).
struct MemoryCandidate {
  graph::StageGraph graph;
  sched::Schedule schedule;
  Score score;
  MemoryChoice choice;
  bool per_layer = false;
};

// A per-rank selection for a schedule and its simulated score.
struct FittedChoice {
  MemoryChoice choice;
  Score score;
  // (group, simulated P2P buffer peak) of every group that ran out of memory.
  std::vector<std::pair<int, int64_t>> oom_buffers;
};

// What dip's memory step did over the replicas of an iteration (the iteration's notes).
struct MemoryTally {
  int memory_replicas = 0;   // replicas on per-layer memory options
  int uniform_replicas = 0;  // replicas on a uniform recompute level
  int milp_ranks = 0;        // ranks where CBC improved on the greedy selection
  int skipped_replicas = 0;  // budget spent and the no-recompute plan fits: not tried
  int hurried_replicas = 0;  // budget spent and it does not fit: no search, no CBC
  double extra_s = 0, bound_s = 0;
  std::array<int64_t, 4> layers_by_option{};

  // Counts a replica whose plan became `chosen`.
  void Add(const MemoryCandidate& chosen) {
    if (!chosen.per_layer) {
      ++uniform_replicas;
      return;
    }
    ++memory_replicas;
    milp_ranks += chosen.choice.milp_ranks;
    extra_s += chosen.choice.extra_s;
    bound_s += chosen.choice.lower_bound_extra_s;
    for (int o = 0; o < 4; ++o) layers_by_option[o] += chosen.choice.layers_by_option[o];
  }

  void AppendNotes(std::string& notes) const {
    if (hurried_replicas > 0) {
      notes += fmt::format("{}budget spent: {} replica(s) that do not fit planned without search",
                           notes.empty() ? "" : "; ", hurried_replicas);
    }
    if (skipped_replicas > 0) {
      notes += fmt::format("{}memory options not tried on {} replica(s) (budget spent; their "
                           "no-recompute plans fit)",
                           notes.empty() ? "" : "; ", skipped_replicas);
    }
    if (uniform_replicas > 0) {
      notes += fmt::format("{}uniform recompute on {} replica(s) (faster than per-layer options)",
                           notes.empty() ? "" : "; ", uniform_replicas);
    }
    if (memory_replicas > 0) {
      notes += fmt::format(
          "{}per-layer memory options on {} replica(s): layer-stages none {} / selective {} / "
          "full {} / offload {}, +{:.3f} s over ranks (lower bound +{:.3f} s; CBC improved {} "
          "rank(s))",
          notes.empty() ? "" : "; ", memory_replicas, layers_by_option[0], layers_by_option[1],
          layers_by_option[2], layers_by_option[3], extra_s, bound_s, milp_ranks);
    }
  }
};

// The rounds SelectFitting made for one replica, by (method, schedule order, reserve): a
// round is deterministic in these (Optimize, Simulate), so a repeated one is looked up.
class FitMemo {
 public:
  const FittedChoice* Find(algo::LiveSelectionMethod method, const sched::Schedule& schedule,
                           const std::vector<int64_t>& reserve) const {
    const std::vector<int64_t> key = Normalized(reserve);
    for (const Entry& e : entries_) {
      if (e.method == method && e.reserve == key && e.order == schedule.order) return &e.fitted;
    }
    return nullptr;
  }
  void Add(algo::LiveSelectionMethod method, const sched::Schedule& schedule,
           const std::vector<int64_t>& reserve, const FittedChoice& fitted) {
    entries_.push_back({method, schedule.order, Normalized(reserve), fitted});
  }

 private:
  struct Entry {
    algo::LiveSelectionMethod method;
    std::vector<std::vector<graph::StageId>> order;
    std::vector<int64_t> reserve;
    FittedChoice fitted;
  };
  // Missing groups reserve nothing: trailing zeros do not matter.
  static std::vector<int64_t> Normalized(const std::vector<int64_t>& reserve) {
    std::vector<int64_t> out = reserve;
    while (!out.empty() && out.back() == 0) out.pop_back();
    return out;
  }
  std::vector<Entry> entries_;
};

// The per-rank selection caps activations only; the simulation also counts the compiled plan's
// P2P buffers (exactly: docs/simulator.md). `reserve` (per group, grown here) lowers the caps;
// while a group peaks above the capacity, raise its reserve to its simulated buffer peak and
// select again (at most `rounds` times). `memo` (optional): rounds already made, and where the
// new ones are kept.
StatusOr<FittedChoice> SelectFitting(const Job& job, const MemoryOptimizer& memory,
                                     const sched::Schedule& schedule,
                                     algo::LiveSelectionMethod method, int rounds,
                                     std::vector<int64_t>& reserve, FitMemo* memo = nullptr) {
  const sim::SimOptions options{.record_transfers = false,
                                .record_memory_curves = false,
                                .validate_schedule = false};
  for (int round = 0;; ++round) {
    FittedChoice fitted;
    if (const FittedChoice* hit = memo != nullptr ? memo->Find(method, schedule, reserve) : nullptr) {
      fitted = *hit;
    } else {
      WEFT_ASSIGN_OR_RETURN(fitted.choice, memory.Optimize(schedule, method, reserve));
      auto t = sim::Simulate(fitted.choice.graph, schedule, job.cluster, options);
      if (!t.ok()) return fitted;
      fitted.score = ScoreOf(*t);
      for (const sim::OutOfMemory& o : t->oom) {
        if (o.host_node >= 0) continue;  // host memory: no GPU reserve helps
        fitted.oom_buffers.emplace_back(o.group, t->groups[o.group].peak_buffer_bytes);
      }
      if (memo != nullptr) memo->Add(method, schedule, reserve, fitted);
    }
    bool grew = false;
    if (round < rounds) {
      reserve.resize(fitted.choice.graph.num_groups(), 0);
      for (const auto& [group, buffers] : fitted.oom_buffers) {
        grew = grew || buffers > reserve[group];
        reserve[group] = std::max(reserve[group], buffers);
      }
    }
    if (!grew) return fitted;
  }
}

class DipStrategy final : public Strategy {
 public:
  DipStrategy(DipVariant variant, DipOptions options) : variant_(variant), options_(options) {
    switch (variant_) {
      case DipVariant::kPartitionOnly:
        name_ = "dip-partition-only";
        description_ =
            "DIP modality-aware partition (separated chunks, sub-microbatches), 1F1B order "
            "(interleaved 1F1B where chunks share a rank; the dual-queue FIFO order where no "
            "1F1B rule is deadlock-free on the graph, said in the iteration's notes)";
        break;
      case DipVariant::kInterleave:
        name_ = "dip-interleave";
        description_ = "DIP partition + dual-queue F/B interleaving (microbatch priorities)";
        break;
      case DipVariant::kReorder:
        name_ = "dip-reorder";
        description_ = "DIP partition + MCTS segment reordering + dual-queue interleaving";
        break;
      case DipVariant::kFull:
        name_ = "dip";
        description_ = "DIP: partition, MCTS reordering, dual-queue interleaving, per-layer "
                       "memory optimization (recompute / offload)";
        break;
    }
  }
  std::string_view Name() const override { return name_; }
  std::string_view Description() const override { return description_; }
  StrategyTraits Traits() const override { return {.manages_memory = true}; }

  StatusOr<StaticPlan> Prepare(const Job& job) const override;
  StatusOr<IterationPlan> PlanIteration(const Job& job, const StaticPlan& plan,
                                        const IterationInput& input) const override;

 private:
  // dip-partition-only, dip-interleave, dip-reorder: one uniform recompute level per replica.
  StatusOr<IterationPlan> PlanUniformLevels(const Job& job, const StaticPlan& plan,
                                            const spec::Batch& batch,
                                            const Assignment& assignment, const PlanBudget& budget,
                                            double share, int workers) const;
  // dip, step 1: every replica's graph without recomputation, searched (MCTS + polish) unless
  // `hurry()` says so when the replica starts. `rules[r]`: the 1F1B rules' answer for the shape
  // of replica r's step-2 graphs (filled here when the fast graph has that shape).
  // `after_search(r, hurried, step1_s, variants, schedule)` follows every replica's search
  // (step1_s: the wall time of step 1 outside the search and the graph build). variants[0] is
  // the fast graph, `schedule` its order; when the fast graph comes from the same draft as the
  // step-2 graphs, the other variants are the levels of RecomputeVariants after none (else
  // there are none). It may replace variants[0] and `schedule` (the replica's plan). Then the
  // variants are dropped: a replica whose step 2 waits builds them again (cheaper than holding
  // them: 128 VLM-XL-16k replicas hold ~540 MB of graphs, and first touching that much memory
  // costs more than the builds).
  using AfterSearch = std::function<Status(int replica, bool hurried, double step1_s,
                                           std::vector<graph::StageGraph>& variants,
                                           sched::Schedule& schedule)>;
  StatusOr<IterationPlan> PlanFastGraphs(const Job& job, const StaticPlan& plan,
                                         const spec::Batch& batch, const Assignment& assignment,
                                         const PlanBudget& budget,
                                         double share, int workers, std::vector<Score>& scores,
                                         std::vector<RuleAttempt>& rules,
                                         const std::function<bool()>& hurry,
                                         const AfterSearch& after_search) const;
  // dip, step 2: the best memory candidate of one replica (per-layer §5.3 options or a uniform
  // level), searched unless `hurry`; nullopt when none could be made. `variants`: the replica's
  // graphs at every level RecomputeVariants builds (none first); built here (from
  // `microbatches`) when empty. `rule` (optional): the rules' answer for their shape.
  StatusOr<std::optional<MemoryCandidate>> ChooseReplicaMemory(
      const Job& job, const StaticPlan& plan, const spec::Batch& batch,
      const Microbatches& microbatches, const PlanBudget& budget, double share, bool hurry,
      const std::shared_ptr<PairCandidateCache>& candidate_cache,
      std::span<const graph::StageGraph> variants, RuleAttempt* rule) const;

  DipVariant variant_;
  DipOptions options_;
  std::string name_, description_;
};

StatusOr<StaticPlan> DipStrategy::Prepare(const Job& job) const {
  WEFT_RETURN_IF_ERROR(job.Validate());
  const int p = job.PipelineSize();
  const int num_modules = static_cast<int>(job.model.modules.size());
  const auto parallel = ModuleParallels(job);
  // Profile: tokens per instance and the largest instance count of a microbatch, per module.
  std::vector<double> tokens(num_modules, 0), instances(num_modules, 0);
  std::vector<int> max_instances(num_modules, 0);
  const int dp = job.DataParallelSize();
  for (const auto& batch : job.profile_batches) {
    auto split = SplitBatch(batch, dp, std::max(1, job.parallel.num_microbatches));
    if (!split.ok()) continue;
    for (const auto& mb : split->replicas[0]) {
      for (int i = 0; i < num_modules; ++i) {
        WEFT_ASSIGN_OR_RETURN(auto w, data::DeriveModuleWorkload(job.model, i, batch, mb,
                                                                 job.workload));
        if (w.NumInstances() == 0) continue;
        tokens[i] += static_cast<double>(w.TotalTokens());
        instances[i] += w.NumInstances();
        max_instances[i] = std::max(max_instances[i], w.NumInstances());
      }
    }
  }
  std::vector<int> sub_size(num_modules, 0);
  std::vector<double> latency_s(num_modules, 0);
  std::vector<int> max_segments(num_modules, 1);
  std::vector<std::vector<LayerUnit>> units(num_modules);
  for (int i = 0; i < num_modules; ++i) {
    units[i] = ChainUnits(job.model, {i});
    const int layers = static_cast<int>(units[i].size());
    max_segments[i] = std::max(1, std::min(options_.max_segments, layers / std::max(1, p)));
    if (instances[i] <= 0 || layers == 0) continue;
    const int64_t per_instance = std::max<int64_t>(1, std::llround(tokens[i] / instances[i]));
    std::vector<int> sizes;
    for (int b = 1; b <= std::max(1, std::min(max_instances[i], options_.max_sub_microbatch_size));
         b *= 2) {
      sizes.push_back(b);
    }
    std::vector<double> efficiency, step_s;
    for (int b : sizes) {
      WEFT_ASSIGN_OR_RETURN(auto c, job.cost_model->Chunk(job.model, i, 0, job.model.modules[i].num_layers > 0 ? job.model.modules[i].num_layers : 1,
                                                           cost::TokenShape::Uniform(per_instance, b),
                                                           parallel[i]));
      const double t = c.forward_s + c.BackwardS();
      step_s.push_back(t);
      efficiency.push_back(t > 0 ? static_cast<double>(per_instance) * b / t : 0.0);
    }
    WEFT_ASSIGN_OR_RETURN(int j, SmallestEfficientSize(sizes, efficiency,
                                                       options_.efficiency_threshold));
    sub_size[i] = sizes[j];
    latency_s[i] = step_s[j];
    if (i < static_cast<int>(options_.sub_microbatch_size_override.size()) &&
        options_.sub_microbatch_size_override[i] > 0) {
      sub_size[i] = options_.sub_microbatch_size_override[i];
      WEFT_ASSIGN_OR_RETURN(
          auto c, job.cost_model->Chunk(job.model, i, 0, std::max(1, job.model.modules[i].num_layers),
                                        cost::TokenShape::Uniform(per_instance, sub_size[i]),
                                        parallel[i]));
      latency_s[i] = c.forward_s + c.BackwardS();
    }
  }
  // T_1 over modules that can span the pipeline (a one-layer projector is not a segment unit).
  std::vector<double> segment_latency(num_modules, 0);
  for (int i = 0; i < num_modules; ++i) {
    if (static_cast<int>(units[i].size()) >= p) segment_latency[i] = latency_s[i];
  }
  const std::vector<int> k = SegmentCounts(segment_latency, max_segments);

  Placement placement;
  placement.parallel = parallel;
  const auto& llm = placement.parallel[std::max(0, data::FirstLlmModule(job.model))];
  placement.groups = MakePipelineGroups(p, llm.tp, llm.cp, dp);
  std::vector<int> next_slot(p, 0);
  std::string shape;
  for (int i : job.model.TopologicalOrder()) {
    const int layers = static_cast<int>(units[i].size());
    if (layers == 0) continue;
    const int parts = layers >= p ? std::min(layers, p * k[i]) : layers;
    WEFT_ASSIGN_OR_RETURN(auto weights, UnitWeights(job, units[i], UnitWeight::kStepLatency));
    WEFT_ASSIGN_OR_RETURN(auto partition, sched::PartitionMinMax(weights, parts));
    for (int c = 0; c < parts; ++c) {
      Chunk chunk;
      chunk.module = i;
      const int b = partition.boundaries[c], e = partition.boundaries[c + 1];
      chunk.first_layer = units[i][b].first_layer;
      chunk.num_layers = 0;
      for (int u = b; u < e; ++u) chunk.num_layers += units[i][u].num_layers;
      chunk.group = c % p;
      chunk.chunk = next_slot[chunk.group]++;
      placement.chunks.push_back(chunk);
    }
    shape += (shape.empty() ? "" : ", ") + job.model.modules[i].name +
             " B=" + std::to_string(sub_size[i]) + " K=" + std::to_string(k[i]) +
             " chunks=" + std::to_string(parts);
  }
  WEFT_RETURN_IF_ERROR(FillGroupStateBytes(job.model, *job.cost_model, placement));
  StaticPlan plan;
  plan.placement = std::move(placement);
  plan.sub_microbatch_size = sub_size;
  plan.description = description_ + " [" + shape + "]: " + plan.placement.Describe(job.model);
  return plan;
}

StatusOr<IterationPlan> DipStrategy::PlanIteration(const Job& job, const StaticPlan& plan,
                                                   const IterationInput& input) const {
  const spec::Batch& batch = input.batch;
  const PlanBudget& budget = input.budget;
  // Replicas are independent: with budget.threads > 1 they are planned concurrently (the plan
  // does not depend on how replicas are spread over threads). Under a work budget each search
  // runs on one thread (MCTS is deterministic only there); under a wall-clock budget on
  // threads / workers threads.
  const int dp = std::max(1, job.DataParallelSize());
  const int workers = std::clamp(budget.threads, 1, dp);
  PlanBudget replica_budget = budget;
  replica_budget.threads =
      budget.work_budget > 0 ? 1 : std::max(1, budget.threads / workers);
  // A work budget is per iteration like a time budget: the DP replicas share it (at least one
  // unit each), so 128 replicas do not take 128 times the work of one.
  if (budget.work_budget > 0) {
    replica_budget.work_budget = std::max<int64_t>(1, budget.work_budget / dp);
  }
  // Search time per DP replica; `dip` keeps a fifth of the budget for graph builds, the per-rank
  // selections and the buffer check around its searches, the variants a twentieth for their
  // graph builds and simulations.
  const double share = (variant_ == DipVariant::kFull ? 0.8 : 0.95) * workers / dp;
  if (variant_ != DipVariant::kFull) {
    return PlanUniformLevels(job, plan, batch, input.assignment, replica_budget, share, workers);
  }
  // dip: reorder on the fastest graph (no recomputation); reorder again scoring each schedule
  // after the per-rank §5.3 selection (greedy inside the search, CBC on the final schedule);
  // reorder on the uniform selective and full graphs; keep the fastest that fits.
  const auto start = std::chrono::steady_clock::now();
  const bool time_mode = budget.work_budget <= 0 && budget.time_budget_s > 0;
  auto budget_spent = [&] {
    return time_mode && std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                                .count() > budget.time_budget_s;
  };
  // Under a time budget, the work every replica needs whatever the budget (its step 1 without
  // search; when it does not fit, a hurried step 2) can overrun the budget alone: VLM-XL-16k,
  // 128 replicas of ~40 ms on 2 threads. Once that is certain, searching only adds to the
  // overrun, so every replica from then on is hurried, as after the budget is spent (and takes
  // step 2 at once, on the variants built with its fast graph). Certain: the elapsed time plus
  // a lower bound on the work left exceeds the budget. The bound counts, per replica, what the
  // finished ones measured outside their searches (not their graph builds): a step 1, and for
  // every replica not yet known to fit a hurried step 2 (until one is measured, twice a step 1:
  // it evaluates the start orders of two graphs where step 1 evaluates one, and selects too).
  struct Progress {
    std::mutex mu;
    int step1_done = 0, step2_done = 0;
    int waiting = 0;  // step 1 done, does not fit, step 2 not yet done
    double step1_s = 0, step2_s = 0;  // outside searches; step 2: hurried ones
  } progress;
  auto overrun_certain = [&] {
    if (!time_mode) return false;
    std::lock_guard<std::mutex> lock(progress.mu);
    if (progress.step1_done == 0) return false;
    const double step1_s = progress.step1_s / progress.step1_done;
    const double step2_s =
        progress.step2_done > 0 ? progress.step2_s / progress.step2_done : 2 * step1_s;
    const double left_s =
        ((dp - progress.step1_done) * (step1_s + step2_s) + progress.waiting * step2_s) /
        workers;
    const double elapsed_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return elapsed_s + left_s > budget.time_budget_s;
  };
  auto hurry = [&] { return budget_spent() || overrun_certain(); };
  std::vector<Score> scores(dp);
  enum class Outcome { kPending, kSkipped, kHurried, kSearched };
  std::vector<Outcome> outcome(dp, Outcome::kPending);
  // The memory candidate that replaced a replica's fast plan (its graph and schedule moved
  // into the plan; the rest is tallied).
  std::vector<std::optional<MemoryCandidate>> chosen(dp);
  const auto candidate_cache = std::make_shared<PairCandidateCache>();
  std::vector<RuleAttempt> rules(dp);
  // Step 2 of replica r. Also when the fastest graph fits (a memory-capped schedule without
  // recomputation can be slower than one with per-layer options or a uniform level) — unless the
  // time budget is spent (many DP replicas): then only replicas that do not fit go on, without
  // search or CBC (rule orders and the greedy selection only). The best candidate replaces
  // `graph` and `schedule` (the fast plan) at once when it is better, so the fast graph is not
  // held until every replica is done.
  auto step2 = [&](int r, bool hurry, const Microbatches& microbatches,
                   std::span<const graph::StageGraph> variants, graph::StageGraph& graph,
                   sched::Schedule& schedule) -> Status {
    if (!scores[r].oom && hurry) {
      outcome[r] = Outcome::kSkipped;
      return OkStatus();
    }
    const auto step2_start = std::chrono::steady_clock::now();
    outcome[r] = hurry ? Outcome::kHurried : Outcome::kSearched;
    WEFT_ASSIGN_OR_RETURN(std::optional<MemoryCandidate> best,
                          ChooseReplicaMemory(job, plan, batch, microbatches, replica_budget,
                                              share, hurry, candidate_cache, variants, &rules[r]));
    if (best && BetterChoice(best->score, scores[r])) {
      graph = std::move(best->graph);
      schedule = std::move(best->schedule);
      schedule.name = "dip";
      chosen[r] = std::move(best);
    }
    std::lock_guard<std::mutex> lock(progress.mu);
    if (scores[r].oom) --progress.waiting;
    if (hurry) {
      ++progress.step2_done;
      progress.step2_s +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - step2_start).count();
    }
    return OkStatus();
  };
  // A replica hurried in step 1 is hurried in step 2 as well, and so is one whose step 1 ends
  // after the budget is spent (the elapsed time only grows): it takes step 2 at once, on the
  // variants built with its fast graph.
  WEFT_ASSIGN_OR_RETURN(
      IterationPlan out,
      PlanFastGraphs(job, plan, batch, input.assignment, replica_budget, share, workers, scores,
                     rules, hurry,
                     [&](int r, bool hurried, double step1_s,
                         std::vector<graph::StageGraph>& variants,
                         sched::Schedule& schedule) -> Status {
                       {
                         std::lock_guard<std::mutex> lock(progress.mu);
                         ++progress.step1_done;
                         progress.step1_s += step1_s;
                         if (scores[r].oom) ++progress.waiting;
                       }
                       if (variants.size() < 2 || !(hurried || hurry())) return OkStatus();
                       return step2(r, true, {}, variants, variants[0], schedule);
                     }));
  const int replicas = static_cast<int>(std::min(out.replicas.size(), scores.size()));
  WEFT_RETURN_IF_ERROR(ParallelFor(replicas, workers, [&](int r) -> Status {
    if (outcome[r] != Outcome::kPending) return OkStatus();
    ReplicaPlan& replica = out.replicas[r];
    return step2(r, hurry(), replica.microbatches, {}, replica.graph, replica.schedule);
  }));
  MemoryTally tally;
  for (int r = 0; r < replicas; ++r) {
    tally.skipped_replicas += outcome[r] == Outcome::kSkipped;
    tally.hurried_replicas += outcome[r] == Outcome::kHurried;
    if (chosen[r]) tally.Add(*chosen[r]);
  }
  tally.AppendNotes(out.notes);
  out.plan_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

// The uniform recompute levels the memory optimizer reads, after none: selective, full[,
// offload].
std::vector<std::vector<spec::Recompute>> MemoryLevels(const Job& job, bool offload) {
  std::vector<std::vector<spec::Recompute>> levels;
  for (auto level : spec::kAllRecompute) {
    if (level == spec::Recompute::kNone) continue;
    if (level == spec::Recompute::kOffload && !offload) continue;
    levels.emplace_back(job.model.modules.size(), level);
  }
  return levels;
}

StatusOr<IterationPlan> DipStrategy::PlanFastGraphs(const Job& job, const StaticPlan& plan,
                                                    const spec::Batch& batch,
                                                    const Assignment& assignment,
                                                    const PlanBudget& budget, double share,
                                                    int workers, std::vector<Score>& scores,
                                                    std::vector<RuleAttempt>& rules,
                                                    const std::function<bool()>& hurry,
                                                    const AfterSearch& after_search) const {
  StaticPlan fast = plan;
  fast.recompute.assign(job.model.modules.size(), spec::Recompute::kNone);
  // The step-2 variants come from the same draft when they would be built with the same options
  // (RecomputeVariants sets the sub-microbatch sizes only; one replica per graph).
  const bool share_draft =
      !plan.split_backward && !plan.keep_empty_stages && !plan.placement.unfolded;
  return PlanReplicaVariants(
      job, fast, {.batch = batch, .assignment = assignment},
      share_draft ? MemoryLevels(job, options_.memory_offload)
                  : std::vector<std::vector<spec::Recompute>>{},
      [&](int r, std::vector<graph::StageGraph>& variants) -> StatusOr<sched::Schedule> {
        const auto step1_start = std::chrono::steady_clock::now();
        // With the variants the fast graph has the step-2 graphs' shape (one draft).
        const bool shared = variants.size() > 1 && r < static_cast<int>(rules.size());
        const bool hurried = hurry();
        WEFT_ASSIGN_OR_RETURN(auto result,
                              SearchSchedule(job, variants[0], !hurried, budget, share / 3,
                                             options_, nullptr, nullptr,
                                             shared ? &rules[r] : nullptr));
        scores[r] = result.score;
        const double step1_s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - step1_start)
                .count() -
            result.search_s;
        WEFT_RETURN_IF_ERROR(after_search(r, hurried, step1_s, variants, result.schedule));
        return std::move(result.schedule);
      },
      workers);
}

// The replica graph at every uniform recompute level the memory optimizer reads (none,
// selective, full[, offload]), built from one draft (BuildStageGraphVariants).
StatusOr<std::vector<graph::StageGraph>> RecomputeVariants(const Job& job, const StaticPlan& plan,
                                                           const spec::Batch& batch,
                                                           const Microbatches& microbatches,
                                                           bool offload) {
  std::vector<std::vector<spec::Recompute>> levels;
  for (auto level : spec::kAllRecompute) {
    if (level == spec::Recompute::kOffload && !offload) continue;
    levels.emplace_back(job.model.modules.size(), level);
  }
  GraphBuildOptions o;
  o.sub_microbatch_size = plan.sub_microbatch_size;
  return BuildStageGraphVariants(job.model, plan.placement, batch, microbatches, *job.cost_model,
                                 job.workload, o, levels);
}

// Per stage of `g`: the layer count of its chunk (1 when the placement does not say).
std::vector<int> LayersPerStage(const graph::StageGraph& g, const Placement& placement) {
  std::map<std::pair<int, int>, int> layers_of;  // (group, local chunk) -> layers
  for (const auto& c : placement.chunks) layers_of[{c.group, c.chunk}] = c.num_layers;
  std::vector<int> layers(g.num_stages(), 1);
  for (int s = 0; s < g.num_stages(); ++s) {
    const auto& st = g.stage(s);
    if (auto it = layers_of.find({st.group, st.chunk}); it != layers_of.end()) {
      layers[s] = it->second;
    }
  }
  return layers;
}

StatusOr<std::optional<MemoryCandidate>> DipStrategy::ChooseReplicaMemory(
    const Job& job, const StaticPlan& plan, const spec::Batch& batch,
    const Microbatches& microbatches, const PlanBudget& budget, double share, bool hurry,
    const std::shared_ptr<PairCandidateCache>& candidate_cache,
    std::span<const graph::StageGraph> variants, RuleAttempt* rule) const {
  std::vector<graph::StageGraph> built;
  if (variants.empty()) {
    WEFT_ASSIGN_OR_RETURN(built, RecomputeVariants(job, plan, batch, microbatches,
                                                   options_.memory_offload));
    variants = built;
  }
  // A work budget is deterministic: CBC stops on its node limit only. Under a time budget CBC
  // gets at most 0.02 s a rank, and none once the replica's share of the budget is spent (the
  // searches take two thirds of it): CBC's root alone can take 0.1-0.5 s on a VLM-XL rank.
  algo::LiveSelectionOptions selection{.time_limit_s = budget.work_budget > 0 ? 0.0 : 0.02};
  if (budget.work_budget <= 0 && budget.time_budget_s > 0) {
    selection.deadline = std::chrono::steady_clock::now() +
                         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                             std::chrono::duration<double>(budget.time_budget_s * share));
  }
  WEFT_ASSIGN_OR_RETURN(
      MemoryOptimizer memory,
      MemoryOptimizer::Create(variants, LayersPerStage(variants[0], plan.placement), job.cluster,
                              {.num_candidates = options_.memory_candidates,
                               .selection = selection,
                               .candidate_cache = candidate_cache}));
  // Inside the search one selection per schedule (its P2P buffers count; the candidates below
  // are fitted). Across the candidates the reserves carry over.
  // Without search (hurry) the search evaluates only its start orders: their selections are
  // kept (`memo`) for the candidates below that repeat them instead of being made again.
  FitMemo memo;
  Evaluator evaluate = [&](const sched::Schedule& s) -> Score {
    std::vector<int64_t> no_reserve;
    auto fitted = SelectFitting(job, memory, s, algo::LiveSelectionMethod::kGreedy, 0, no_reserve,
                                hurry ? &memo : nullptr);
    if (!fitted.ok()) return {};
    return fitted->score;
  };
  std::vector<int64_t> reserve;
  // Candidates: (a) the search scored after the per-rank selection (the dual-queue's memory caps
  // count uniform full-recompute activations: with the lightest candidates — offload holds ~0
  // bytes — it would run every forward first and leave the selection nothing to upgrade);
  // (b) dip-reorder's answers — the searches on the uniform selective and full levels (hurried:
  // selective only, below) — as it is and after the per-rank selection. The best simulated one
  // wins.
  std::optional<MemoryCandidate> best;
  auto consider = [&](const sched::Schedule& schedule, const graph::StageGraph* plain,
                      Score plain_score) -> Status {
    if (plain != nullptr && (!best || BetterChoice(plain_score, best->score))) {
      best = MemoryCandidate{*plain, schedule, plain_score, {}, false};
    }
    WEFT_ASSIGN_OR_RETURN(FittedChoice fitted,
                          SelectFitting(job, memory, schedule, algo::LiveSelectionMethod::kGreedy,
                                        3, reserve, &memo));
    if (!best || BetterChoice(fitted.score, best->score)) {
      graph::StageGraph g = std::move(fitted.choice.graph);
      best = MemoryCandidate{std::move(g), schedule, fitted.score, std::move(fitted.choice), true};
    }
    return OkStatus();
  };
  StartOrders full_start;  // variants[2] is searched twice (unless hurried): with the selection,
                           // then as it is
  WEFT_ASSIGN_OR_RETURN(auto searched, SearchSchedule(job, variants[2], !hurry, budget, share / 3,
                                                      options_, evaluate, &full_start, rule));
  WEFT_RETURN_IF_ERROR(consider(searched.schedule, nullptr, {}));
  // Hurried (no search), the full level is taken once: its start orders are the ones the first
  // search scored after the selection. Scoring them again as they are, and fitting the better
  // one with the reserve grown since, adds a candidate that seldom wins (VLM-XL-16k: 1 replica
  // of 128, by 0.013%) for a tenth of a hurried replica's work: skipped.
  for (int level = 1; level <= (hurry ? 1 : 2); ++level) {  // selective[, full]
    WEFT_ASSIGN_OR_RETURN(auto uniform,
                          SearchSchedule(job, variants[level], !hurry, budget, share / 6, options_,
                                         nullptr, level == 2 ? &full_start : nullptr, rule));
    WEFT_RETURN_IF_ERROR(consider(uniform.schedule, &variants[level], uniform.score));
  }
  if (best && best->per_layer && !hurry) {
    // CBC on the winner's selection (warm-started by the greedy one); kept if the span is not
    // longer (its objective is the summed extra time, not the span).
    WEFT_ASSIGN_OR_RETURN(FittedChoice exact,
                          SelectFitting(job, memory, best->schedule,
                                        algo::LiveSelectionMethod::kMilp, 3, reserve));
    if (!BetterChoice(best->score, exact.score)) {
      best->graph = std::move(exact.choice.graph);
      best->choice = std::move(exact.choice);
      best->score = exact.score;
    }
  }
  return best;
}

StatusOr<IterationPlan> DipStrategy::PlanUniformLevels(const Job& job, const StaticPlan& plan,
                                                       const spec::Batch& batch,
                                                       const Assignment& assignment,
                                                       const PlanBudget& budget,
                                                       double share, int workers) const {
  // Without §5.3 the variants use one uniform recompute level per replica: the StaticPlan's
  // when it names one (non-empty), else the fastest of none / selective / full whose plan fits (a
  // memory-capped schedule without recomputation can be slower than one with it).
  const int num_modules = static_cast<int>(job.model.modules.size());
  std::vector<std::vector<spec::Recompute>> levels;
  if (!plan.recompute.empty()) {
    levels.push_back(plan.recompute);
  } else {
    for (auto level :
         {spec::Recompute::kNone, spec::Recompute::kSelective, spec::Recompute::kFull}) {
      levels.emplace_back(num_modules, level);
    }
  }
  const double level_share = share / static_cast<double>(levels.size());
  std::optional<IterationPlan> out;
  std::vector<Score> best_scores;
  std::vector<int> best_level;
  double plan_time_s = 0;
  std::vector<std::vector<bool>> dual_queue_fallback;  // [level][replica]
  for (size_t l = 0; l < levels.size(); ++l) {
    StaticPlan p = plan;
    p.recompute = levels[l];
    const int dp = std::max(1, job.DataParallelSize());
    std::vector<Score> scores(dp);
    std::vector<char> fell_back_by_replica(dp, 0);
    WEFT_ASSIGN_OR_RETURN(
        IterationPlan planned,
        PlanReplicas(
            job, p, {.batch = batch, .assignment = assignment},
            [&](int r, const graph::StageGraph& g) -> StatusOr<sched::Schedule> {
              if (variant_ == DipVariant::kPartitionOnly) {
                bool fell_back = false;
                WEFT_ASSIGN_OR_RETURN(sched::Schedule s, RuleSchedule(g, &fell_back));
                fell_back_by_replica[r] = fell_back;
                scores[r] = Evaluate(g, s, job.cluster);
                return s;
              }
              WEFT_ASSIGN_OR_RETURN(auto result,
                                    SearchSchedule(job, g, variant_ == DipVariant::kReorder,
                                                   budget, level_share, options_));
              scores[r] = result.score;
              return std::move(result.schedule);
            },
            workers));
    scores.resize(planned.replicas.size());
    dual_queue_fallback.emplace_back(fell_back_by_replica.begin(),
                                     fell_back_by_replica.begin() + planned.replicas.size());
    plan_time_s += planned.plan_time_s;
    if (!out) {
      out = std::move(planned);
      best_scores = scores;
      best_level.assign(scores.size(), 0);
      continue;
    }
    for (size_t r = 0; r < out->replicas.size() && r < scores.size(); ++r) {
      if (BetterChoice(scores[r], best_scores[r])) {
        out->replicas[r] = std::move(planned.replicas[r]);
        best_scores[r] = scores[r];
        best_level[r] = static_cast<int>(l);
      }
    }
  }
  out->plan_time_s = plan_time_s;
  if (variant_ == DipVariant::kPartitionOnly) {
    int fell_back = 0;
    for (size_t r = 0; r < best_level.size(); ++r) {
      const auto& flags = dual_queue_fallback[best_level[r]];
      if (r < flags.size() && flags[r]) ++fell_back;
    }
    if (fell_back > 0) {
      out->notes += fmt::format(
          "{}no 1F1B rule is deadlock-free on {} of {} replica graph(s): dual-queue FIFO order "
          "there",
          out->notes.empty() ? "" : "; ", fell_back, best_level.size());
    }
  }
  if (levels.size() > 1) {
    std::string chosen;
    for (int l : best_level) {
      chosen += std::string(chosen.empty() ? "" : ", ") +
                std::string(
                    spec::RecomputeName(levels[l].empty() ? spec::Recompute::kNone : levels[l][0]));
    }
    int still_oom = 0;
    for (const Score& score : best_scores) still_oom += score.oom ? 1 : 0;
    out->notes += std::string(out->notes.empty() ? "" : "; ") +
                  "recompute per replica (fastest that fits): " + chosen;
    if (still_oom > 0) {
      out->notes += fmt::format(
          " (no level fits {} of {} replica(s): the level that overflows least kept)", still_oom,
          best_scores.size());
    }
  }
  return std::move(*out);
}

}  // namespace
}  // namespace internal

Status DipOptions::Validate() const {
  auto bad = [](std::string_view field, auto value, std::string_view rule) {
    return InvalidArgumentError(fmt::format("{} = {}; {}", field, value, rule));
  };
  if (!(efficiency_threshold > 0 && efficiency_threshold <= 1)) {
    return bad("efficiency_threshold", efficiency_threshold, "must be in (0, 1]");
  }
  if (max_sub_microbatch_size < 1) {
    return bad("max_sub_microbatch_size", max_sub_microbatch_size, "must be >= 1");
  }
  if (max_segments < 1) return bad("max_segments", max_segments, "must be >= 1");
  if (!(mcts_alpha > 0) || std::isinf(mcts_alpha)) {
    return bad("mcts_alpha", mcts_alpha, "must be finite and > 0");
  }
  if (!(mcts_beta >= 0) || std::isinf(mcts_beta)) {
    return bad("mcts_beta", mcts_beta, "must be finite and >= 0");
  }
  if (mcts_rollouts < 1) return bad("mcts_rollouts", mcts_rollouts, "must be >= 1");
  if (!(mcts_incumbent_rollouts >= 0 && mcts_incumbent_rollouts <= 1)) {
    return bad("mcts_incumbent_rollouts", mcts_incumbent_rollouts, "must be in [0, 1]");
  }
  if (memory_candidates < 1) return bad("memory_candidates", memory_candidates, "must be >= 1");
  for (size_t i = 0; i < sub_microbatch_size_override.size(); ++i) {
    if (sub_microbatch_size_override[i] < 0) {
      return bad(fmt::format("sub_microbatch_size_override[{}]", i),
                 sub_microbatch_size_override[i], "must be >= 0 (0 = the partitioner's choice)");
    }
  }
  return OkStatus();
}

StatusOr<std::unique_ptr<Strategy>> MakeDipStrategy(DipVariant variant, DipOptions options) {
  WEFT_RETURN_IF_ERROR(options.Validate());
  return std::unique_ptr<Strategy>(std::make_unique<internal::DipStrategy>(variant, options));
}

StatusOr<SegmentOrderSearch> MakeSegmentOrderSearch(const Job& job, const graph::StageGraph& graph) {
  auto dq = std::make_shared<DualQueueOptions>();
  dq->activation_cap_bytes = internal::ActivationCaps(graph, job.cluster);
  dq->cluster = &job.cluster;
  auto seg = std::make_shared<const internal::Segments>(
      internal::MakeSegments(graph, internal::TopoRank(job.model)));
  SegmentOrderSearch out;
  out.num_segments = static_cast<int>(seg->microbatch.size());
  WEFT_ASSIGN_OR_RETURN(sched::Schedule base, DualQueueSchedule(graph, *dq));
  const internal::Score base_score = internal::Evaluate(graph, base, job.cluster);
  out.default_cost_s = base_score.Cost();
  out.default_oom = base_score.oom;
  const spec::ClusterSpec* cluster = &job.cluster;
  const graph::StageGraph* g = &graph;
  out.problem = internal::SegmentOrderProblem(
      seg, dq, g, [g, cluster](const sched::Schedule& s) { return internal::Evaluate(*g, s, *cluster); });
  return out;
}

}  // namespace weft::strategy::dip
