#include "weft/algo/live_selection.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "weft/algo/milp.h"

namespace weft::algo {

Status LiveSelectionProblem::Validate() const {
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].empty()) {
      return InvalidArgumentError(fmt::format("items[{}] has no options; must have >= 1", i));
    }
    for (size_t o = 0; o < items[i].size(); ++o) {
      const LiveOption& opt = items[i][o];
      if (!std::isfinite(opt.cost) || !std::isfinite(opt.weight) || opt.weight < 0) {
        return InvalidArgumentError(fmt::format(
            "items[{}][{}] = (cost {}, weight {}); cost must be finite, weight finite and >= 0",
            i, o, opt.cost, opt.weight));
      }
    }
  }
  if (!live.empty()) {
    if (live.size() != items.size()) {
      return InvalidArgumentError(fmt::format("live has {} intervals for {} items; must be one each",
                                              live.size(), items.size()));
    }
    const int num_checkpoints = static_cast<int>(checkpoints.size());
    for (size_t i = 0; i < live.size(); ++i) {
      const LiveInterval& r = live[i];
      if (r.last >= r.first && (r.first < 0 || r.last >= num_checkpoints)) {
        return InvalidArgumentError(fmt::format(
            "live[{}] = [{}, {}]; must lie in [0, {}) (or be empty: last < first)", i, r.first,
            r.last, num_checkpoints));
      }
    }
    for (size_t k = 0; k < checkpoints.size(); ++k) {
      if (!checkpoints[k].items.empty()) {
        return InvalidArgumentError(fmt::format(
            "checkpoints[{}] names items and live intervals are given; use one form", k));
      }
      if (!std::isfinite(checkpoints[k].budget)) {
        return InvalidArgumentError(fmt::format("checkpoints[{}].budget = {}; must be finite", k,
                                                checkpoints[k].budget));
      }
    }
    return OkStatus();
  }
  // Fast path: a stamp per item finds out-of-range and repeated items in one pass; only a
  // checkpoint that has one is sorted (below) to name the smallest offender.
  std::vector<size_t> seen_at(items.size(), 0);
  for (size_t k = 0; k < checkpoints.size(); ++k) {
    bool bad = !std::isfinite(checkpoints[k].budget);
    for (int i : checkpoints[k].items) {
      if (bad) break;
      if (i < 0 || i >= static_cast<int>(items.size()) || seen_at[i] == k + 1) {
        bad = true;
      } else {
        seen_at[i] = k + 1;
      }
    }
    if (!bad) continue;
    if (!std::isfinite(checkpoints[k].budget)) {
      return InvalidArgumentError(fmt::format("checkpoints[{}].budget = {}; must be finite", k,
                                              checkpoints[k].budget));
    }
    std::vector<int> sorted = checkpoints[k].items;
    std::sort(sorted.begin(), sorted.end());
    for (size_t j = 0; j < sorted.size(); ++j) {
      if (sorted[j] < 0 || sorted[j] >= static_cast<int>(items.size())) {
        return InvalidArgumentError(fmt::format("checkpoints[{}] names item {}; there are {}", k,
                                                sorted[j], items.size()));
      }
      if (j > 0 && sorted[j] == sorted[j - 1]) {
        return InvalidArgumentError(
            fmt::format("checkpoints[{}] names item {} twice; items must be distinct", k, sorted[j]));
      }
    }
  }
  return OkStatus();
}

namespace {

// Relative tolerance on budgets (byte counts as doubles).
double Slack(double budget) { return 1e-9 * std::max(1.0, std::abs(budget)); }

bool Fits(const LiveSelectionProblem& p, const std::vector<int>& choice) {
  for (const auto& ck : p.checkpoints) {
    double used = 0;
    for (int i : ck.items) used += p.items[i][choice[i]].weight;
    if (used > ck.budget + Slack(ck.budget)) return false;
  }
  return true;
}

double TotalCost(const LiveSelectionProblem& p, const std::vector<int>& choice) {
  double c = 0;
  for (size_t i = 0; i < choice.size(); ++i) c += p.items[i][choice[i]].cost;
  return c;
}

// The list form of an interval-form problem (checkpoints name their live items, increasing).
LiveSelectionProblem ListForm(const LiveSelectionProblem& p) {
  LiveSelectionProblem out;
  out.items = p.items;
  out.checkpoints = p.checkpoints;
  for (int i = 0; i < static_cast<int>(p.live.size()); ++i) {
    for (int k = p.live[i].first; k <= p.live[i].last; ++k) out.checkpoints[k].items.push_back(i);
  }
  return out;
}

// Whether the greedy's slack arithmetic on an interval-form problem is exact in any order:
// integer weights in [0, 2^50], |budgets| <= 2^50 (so every slack value, budget + Slack minus
// whole bytes in [0, budget + Slack], and every sum of weights is a representable double).
bool ExactOnIntervals(const LiveSelectionProblem& p) {
  constexpr double kLimit = 1125899906842624.0;  // 2^50
  double total = 0;
  for (const auto& item : p.items) {
    double heaviest = 0;
    for (const LiveOption& o : item) {
      if (o.weight > kLimit || std::floor(o.weight) != o.weight) return false;
      heaviest = std::max(heaviest, o.weight);
    }
    total += heaviest;
  }
  if (total > kLimit) return false;
  for (const auto& ck : p.checkpoints) {
    if (std::abs(ck.budget) > kLimit) return false;
  }
  return true;
}

// Range add / range min over checkpoint slacks (lazy segment tree). Exact when every value and
// every pending sum is a representable double (ExactOnIntervals), so it returns the same minima
// as the per-checkpoint scan.
class SlackTree {
 public:
  explicit SlackTree(const std::vector<double>& slack)
      : n_(static_cast<int>(slack.size())), min_(4 * std::max(1, n_)), add_(4 * std::max(1, n_), 0) {
    if (n_ > 0) Build(1, 0, n_ - 1, slack);
  }
  double Min(int l, int r) {
    if (l > r) return std::numeric_limits<double>::infinity();
    return Min(1, 0, n_ - 1, l, r);
  }
  void Subtract(int l, int r, double x) {
    if (l <= r) Subtract(1, 0, n_ - 1, l, r, x);
  }

 private:
  void Build(int node, int lo, int hi, const std::vector<double>& slack) {
    if (lo == hi) {
      min_[node] = slack[lo];
      return;
    }
    const int mid = (lo + hi) / 2;
    Build(2 * node, lo, mid, slack);
    Build(2 * node + 1, mid + 1, hi, slack);
    min_[node] = std::min(min_[2 * node], min_[2 * node + 1]);
  }
  void Push(int node) {
    if (add_[node] != 0) {
      for (int c : {2 * node, 2 * node + 1}) {
        min_[c] -= add_[node];
        add_[c] += add_[node];
      }
      add_[node] = 0;
    }
  }
  double Min(int node, int lo, int hi, int l, int r) {
    if (l <= lo && hi <= r) return min_[node];
    Push(node);
    const int mid = (lo + hi) / 2;
    double m = std::numeric_limits<double>::infinity();
    if (l <= mid) m = std::min(m, Min(2 * node, lo, mid, l, r));
    if (r > mid) m = std::min(m, Min(2 * node + 1, mid + 1, hi, l, r));
    return m;
  }
  void Subtract(int node, int lo, int hi, int l, int r, double x) {
    if (l <= lo && hi <= r) {
      min_[node] -= x;
      add_[node] += x;
      return;
    }
    Push(node);
    const int mid = (lo + hi) / 2;
    if (l <= mid) Subtract(2 * node, lo, mid, l, r, x);
    if (r > mid) Subtract(2 * node + 1, mid + 1, hi, l, r, x);
    min_[node] = std::min(min_[2 * node], min_[2 * node + 1]);
  }

  int n_;
  std::vector<double> min_, add_;
};

// Greedy upgrades: the move with the most cost saved per extra byte that keeps every checkpoint
// of its item within budget; ties by item, then option index (deterministic). Lazy evaluation
// of the same rule: a popped move whose item has changed since is dropped, one that does not fit
// now is parked (slack only shrinks while extras are >= 0; a move that frees bytes re-queues the
// parked ones). The heap holds, per item, only the best of its not yet popped improving moves
// (a cursor into the item's moves sorted in heap order), plus the re-queued parked moves: the
// next live move popped is the one of a heap holding every move. Moving the cursor parks the
// item's moves that do not fit the room just measured (they could not fit before the next
// re-queue either, which would bring them back). So the chosen sequence of moves is the one of
// a full scan per step, in O(moves · log) time.
// `room_of(i)`: the least slack over item i's checkpoints; `take(i, extra)`: subtract it there.
template <typename Room, typename Take>
void GreedyUpgrades(const LiveSelectionProblem& problem, Room room_of, Take take,
                    std::vector<int>& choice) {
  struct Move {
    double ratio;
    double extra;  // bytes over the item's option when the move was made
    int item;
    int option;
    int version;
    bool cursor;  // the item's cursor (popping it queues the item's next move)
  };
  // Heap top: the largest ratio, then the smallest item, then the smallest option.
  const auto lower = [](const Move& a, const Move& b) {
    if (a.ratio != b.ratio) return a.ratio < b.ratio;
    if (a.item != b.item) return a.item > b.item;
    return a.option > b.option;
  };
  const int n = static_cast<int>(problem.items.size());
  std::vector<int> version(n, 0);
  // Per item: its improving moves from the current option, best first, in one flat array
  // (item i owns [begin[i], begin[i] + its option count)); end[i] and next_move[i] (the cursor)
  // index into it.
  std::vector<int> begin(n + 1, 0), end(n, 0), next_move(n, 0);
  for (int i = 0; i < n; ++i) begin[i + 1] = begin[i] + static_cast<int>(problem.items[i].size());
  std::vector<Move> moves(begin[n]);
  std::vector<Move> heap, parked;
  heap.reserve(n);
  const auto push = [&](const Move& m) {
    heap.push_back(m);
    std::push_heap(heap.begin(), heap.end(), lower);
  };
  // Queues item i's next move that may fit `room`, parking the ones before it that do not.
  const auto queue_next = [&](int i, double room) {
    while (next_move[i] < end[i]) {
      const Move& m = moves[next_move[i]++];
      if (m.extra > room) {
        parked.push_back(m);
        parked.back().cursor = false;
      } else {
        push(m);
        return;
      }
    }
  };
  const auto make_moves = [&](int i) {
    const auto& opts = problem.items[i];
    const LiveOption& cur = opts[choice[i]];
    int k = begin[i];
    for (int o = 0; o < static_cast<int>(opts.size()); ++o) {
      const double saved = cur.cost - opts[o].cost;
      if (saved <= 0) continue;
      const double extra = opts[o].weight - cur.weight;
      moves[k++] = {saved / std::max(extra, 1e-9), extra, i, o, version[i], true};
    }
    next_move[i] = begin[i];
    end[i] = k;
    if (k == begin[i]) return;
    std::sort(moves.begin() + begin[i], moves.begin() + k,
              [&](const Move& a, const Move& b) { return lower(b, a); });
    queue_next(i, room_of(i));
  };
  for (int i = 0; i < n; ++i) make_moves(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), lower);
    const Move m = heap.back();
    heap.pop_back();
    if (m.version != version[m.item]) continue;
    const double room = room_of(m.item);
    if (m.extra > room) {
      parked.push_back(m);
      parked.back().cursor = false;
      if (m.cursor) queue_next(m.item, room);
      continue;
    }
    take(m.item, m.extra);
    choice[m.item] = m.option;
    ++version[m.item];
    make_moves(m.item);
    if (m.extra < 0) {
      for (const Move& p : parked) push(p);
      parked.clear();
    }
  }
}

}  // namespace

StatusOr<LiveSelection> SolveLiveSelection(const LiveSelectionProblem& problem,
                                           const LiveSelectionOptions& options) {
  WEFT_RETURN_IF_ERROR(problem.Validate());
  const bool intervals = !problem.live.empty();
  if (intervals && !ExactOnIntervals(problem)) return SolveLiveSelection(ListForm(problem), options);
  const int n = static_cast<int>(problem.items.size());
  LiveSelection out;
  out.method = "greedy";
  // Start: the lightest option of each item (the cheapest among equally light ones).
  out.choice.assign(n, 0);
  double cheapest_sum = 0;
  bool all_cheapest = true;
  std::vector<double> min_cost(n);
  for (int i = 0; i < n; ++i) {
    const auto& opts = problem.items[i];
    int best = 0;
    min_cost[i] = opts[0].cost;
    for (int o = 1; o < static_cast<int>(opts.size()); ++o) {
      min_cost[i] = std::min(min_cost[i], opts[o].cost);
      if (opts[o].weight < opts[best].weight ||
          (opts[o].weight == opts[best].weight && opts[o].cost < opts[best].cost)) {
        best = o;
      }
    }
    out.choice[i] = best;
    cheapest_sum += min_cost[i];
  }
  const int num_checkpoints = static_cast<int>(problem.checkpoints.size());
  std::vector<double> slack(num_checkpoints);
  for (int k = 0; k < num_checkpoints; ++k) {
    const double budget = problem.checkpoints[k].budget;
    slack[k] = budget + Slack(budget);
  }
  if (intervals) {
    // Live lightest bytes per checkpoint by a difference array (exact integers).
    std::vector<int64_t> delta(num_checkpoints + 1, 0);
    for (int i = 0; i < n; ++i) {
      const LiveInterval& r = problem.live[i];
      if (r.last < r.first) continue;
      const auto bytes = static_cast<int64_t>(problem.items[i][out.choice[i]].weight);
      delta[r.first] += bytes;
      delta[r.last + 1] -= bytes;
    }
    int64_t live_bytes = 0;
    for (int k = 0; k < num_checkpoints; ++k) {
      live_bytes += delta[k];
      slack[k] -= static_cast<double>(live_bytes);
    }
  }
  std::vector<std::vector<int>> checkpoints_of(intervals ? 0 : n);
  if (!intervals) {
    for (int k = 0; k < num_checkpoints; ++k) {
      for (int i : problem.checkpoints[k].items) {
        slack[k] -= problem.items[i][out.choice[i]].weight;
        checkpoints_of[i].push_back(k);
      }
    }
  }
  out.feasible = std::all_of(slack.begin(), slack.end(), [](double s) { return s >= 0; });
  if (!out.feasible) {
    out.total_cost = TotalCost(problem, out.choice);
    out.lower_bound = cheapest_sum;
    return out;
  }
  if (intervals) {
    SlackTree tree(slack);
    GreedyUpgrades(
        problem,
        [&](int i) { return tree.Min(problem.live[i].first, problem.live[i].last); },
        [&](int i, double extra) {
          tree.Subtract(problem.live[i].first, problem.live[i].last, extra);
        },
        out.choice);
  } else {
    GreedyUpgrades(
        problem,
        [&](int i) {
          double room = std::numeric_limits<double>::infinity();
          for (int k : checkpoints_of[i]) room = std::min(room, slack[k]);
          return room;
        },
        [&](int i, double extra) {
          for (int k : checkpoints_of[i]) slack[k] -= extra;
        },
        out.choice);
  }
  out.total_cost = TotalCost(problem, out.choice);
  for (int i = 0; i < n; ++i) {
    if (problem.items[i][out.choice[i]].cost > min_cost[i]) all_cheapest = false;
  }
  out.lower_bound = all_cheapest ? out.total_cost : cheapest_sum;
  if (options.method == LiveSelectionMethod::kGreedy || all_cheapest) return out;

  // CBC: x[i][o] binary, one option per item, live weight per checkpoint <= budget. Weights are
  // scaled so the largest budget is ~1 (byte counts would hurt CBC's tolerances).
  LiveSelectionProblem listed;
  if (intervals) listed = ListForm(problem);
  const LiveSelectionProblem& lp = intervals ? listed : problem;
  double scale = 1;
  for (const auto& ck : lp.checkpoints) scale = std::max(scale, std::abs(ck.budget));
  MilpModel model;
  std::vector<std::vector<int>> var(n);
  std::vector<LinearTerm> objective;
  std::vector<double> warm;
  for (int i = 0; i < n; ++i) {
    std::vector<LinearTerm> one;
    for (int o = 0; o < static_cast<int>(problem.items[i].size()); ++o) {
      const int v = model.AddBinary();
      var[i].push_back(v);
      one.push_back({v, 1.0});
      // Relative to the item's cheapest option: CBC's relative gap then applies to the extra cost.
      objective.push_back({v, problem.items[i][o].cost - min_cost[i]});
      warm.push_back(o == out.choice[i] ? 1.0 : 0.0);
    }
    model.AddEqual(std::move(one), 1.0);
  }
  for (const auto& ck : lp.checkpoints) {
    std::vector<LinearTerm> terms;
    for (int i : ck.items) {
      for (int o = 0; o < static_cast<int>(problem.items[i].size()); ++o) {
        if (problem.items[i][o].weight > 0) {
          terms.push_back({var[i][o], problem.items[i][o].weight / scale});
        }
      }
    }
    if (!terms.empty()) model.AddLessEqual(std::move(terms), ck.budget / scale);
  }
  model.SetObjective(std::move(objective), ObjectiveSense::kMinimize, cheapest_sum);
  MilpOptions mo;
  mo.relative_gap = options.relative_gap;
  mo.time_limit_s = options.time_limit_s;
  mo.max_nodes = options.max_nodes;
  mo.warm_start = std::move(warm);
  mo.lightweight = options.lightweight_milp;
  WEFT_ASSIGN_OR_RETURN(MilpResult r, SolveMilp(model, mo));
  if (std::isfinite(r.best_bound)) out.lower_bound = std::max(cheapest_sum, r.best_bound);
  if (!r.has_solution()) return out;
  std::vector<int> choice(n, 0);
  for (int i = 0; i < n; ++i) {
    for (int o = 0; o < static_cast<int>(var[i].size()); ++o) {
      if (r.values[var[i][o]] > 0.5) choice[i] = o;
    }
  }
  const double cost = TotalCost(problem, choice);
  // Keep CBC's answer only when it truly fits (unscaled) and is cheaper.
  if (cost < out.total_cost - 1e-12 * std::max(1.0, std::abs(out.total_cost)) &&
      Fits(lp, choice)) {
    out.choice = std::move(choice);
    out.total_cost = cost;
    out.method = "milp";
  } else {
    out.method = "greedy (milp no better)";
  }
  out.lower_bound = std::min(out.lower_bound, out.total_cost);
  return out;
}

}  // namespace weft::algo
