#include "weft/algo/live_selection.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "weft/algo/milp.h"

namespace weft::algo {

namespace {

// Item i has options, each with a finite cost and a finite weight >= 0.
Status ValidateItem(const LiveSelectionProblem& p, size_t i) {
  const std::vector<LiveOption>& item = p.items[i];
  if (item.empty()) {
    return InvalidArgumentError(fmt::format("items[{}] has no options; must have >= 1", i));
  }
  for (size_t o = 0; o < item.size(); ++o) {
    const LiveOption& opt = item[o];
    if (!std::isfinite(opt.cost) || !std::isfinite(opt.weight) || opt.weight < 0) {
      return InvalidArgumentError(fmt::format(
          "items[{}][{}] = (cost {}, weight {}); cost must be finite, weight finite and >= 0", i,
          o, opt.cost, opt.weight));
    }
  }
  return OkStatus();
}

// The live intervals and the checkpoints (Validate after the items).
Status ValidateCheckpoints(const LiveSelectionProblem& p) {
  if (!p.live.empty()) {
    if (p.live.size() != p.items.size()) {
      return InvalidArgumentError(fmt::format("live has {} intervals for {} items; must be one each",
                                              p.live.size(), p.items.size()));
    }
    const int num_checkpoints = static_cast<int>(p.checkpoints.size());
    for (size_t i = 0; i < p.live.size(); ++i) {
      const LiveInterval& r = p.live[i];
      if (r.last >= r.first && (r.first < 0 || r.last >= num_checkpoints)) {
        return InvalidArgumentError(fmt::format(
            "live[{}] = [{}, {}]; must lie in [0, {}) (or be empty: last < first)", i, r.first,
            r.last, num_checkpoints));
      }
    }
    for (size_t k = 0; k < p.checkpoints.size(); ++k) {
      if (!p.checkpoints[k].items.empty()) {
        return InvalidArgumentError(fmt::format(
            "checkpoints[{}] names items and live intervals are given; use one form", k));
      }
      if (!std::isfinite(p.checkpoints[k].budget)) {
        return InvalidArgumentError(fmt::format("checkpoints[{}].budget = {}; must be finite", k,
                                                p.checkpoints[k].budget));
      }
    }
    return OkStatus();
  }
  // Fast path: a stamp per item finds out-of-range and repeated items in one pass; only a
  // checkpoint that has one is sorted (below) to name the smallest offender.
  std::vector<size_t> seen_at(p.items.size(), 0);
  for (size_t k = 0; k < p.checkpoints.size(); ++k) {
    bool bad = !std::isfinite(p.checkpoints[k].budget);
    for (int i : p.checkpoints[k].items) {
      if (bad) break;
      if (i < 0 || i >= static_cast<int>(p.items.size()) || seen_at[i] == k + 1) {
        bad = true;
      } else {
        seen_at[i] = k + 1;
      }
    }
    if (!bad) continue;
    if (!std::isfinite(p.checkpoints[k].budget)) {
      return InvalidArgumentError(fmt::format("checkpoints[{}].budget = {}; must be finite", k,
                                              p.checkpoints[k].budget));
    }
    std::vector<int> sorted = p.checkpoints[k].items;
    std::sort(sorted.begin(), sorted.end());
    for (size_t j = 0; j < sorted.size(); ++j) {
      if (sorted[j] < 0 || sorted[j] >= static_cast<int>(p.items.size())) {
        return InvalidArgumentError(fmt::format("checkpoints[{}] names item {}; there are {}", k,
                                                sorted[j], p.items.size()));
      }
      if (j > 0 && sorted[j] == sorted[j - 1]) {
        return InvalidArgumentError(
            fmt::format("checkpoints[{}] names item {} twice; items must be distinct", k, sorted[j]));
      }
    }
  }
  return OkStatus();
}

}  // namespace

Status LiveSelectionProblem::Validate() const {
  for (size_t i = 0; i < items.size(); ++i) WEFT_RETURN_IF_ERROR(ValidateItem(*this, i));
  return ValidateCheckpoints(*this);
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

// What the greedy starts from and what decides its path, per item. Items with equal option
// lists, bit for bit (a rank's pairs of one shape), are one kind: each kind's list is read once,
// and the greedy lists its improving moves once per option.
struct ItemScan {
  std::vector<int> kind;         // per item: the first item with its option list
  std::vector<int> lightest;     // per item: the lightest option (the cheapest of equal ones)
  std::vector<double> min_cost;  // per item: its cheapest option's cost
  double cheapest_sum = 0;       // Σ min_cost, in item order
  // Every weight a whole number in [0, 2^50] and the items' heaviest weights summing to <= 2^50.
  bool whole_weights = true;
  // Every option has a finite cost and a finite weight >= 0 (as ValidateItem; when false, the
  // scan stopped at the first kind with one that does not).
  bool valid_options = true;
};

constexpr double kExactLimit = 1125899906842624.0;  // 2^50

bool SameOptions(const std::vector<LiveOption>& x, const std::vector<LiveOption>& y) {
  return x.size() == y.size() &&
         std::equal(x.begin(), x.end(), y.begin(), [](const LiveOption& u, const LiveOption& v) {
           return std::bit_cast<uint64_t>(u.cost) == std::bit_cast<uint64_t>(v.cost) &&
                  std::bit_cast<uint64_t>(u.weight) == std::bit_cast<uint64_t>(v.weight);
         });
}

// Requires items with options; checks the options of each kind once (valid_options).
ItemScan ScanItems(const LiveSelectionProblem& p) {
  const int n = static_cast<int>(p.items.size());
  ItemScan scan;
  scan.kind.resize(n);
  scan.lightest.resize(n);
  scan.min_cost.resize(n);
  // Per kind, at its first item: its heaviest weight.
  std::vector<double> heaviest(n);
  // Kinds by a hash of the option bits: open addressing over a power-of-two table at most half
  // full (slot -> the kind's first item); equal hashes are compared option by option.
  const size_t mask = std::bit_ceil(2 * static_cast<size_t>(std::max(n, 1))) - 1;
  std::vector<int> first(mask + 1, -1);
  std::vector<uint64_t> first_hash(mask + 1);
  double total_heaviest = 0;
  for (int i = 0; i < n; ++i) {
    const std::vector<LiveOption>& opts = p.items[i];
    uint64_t hash = opts.size();
    for (const LiveOption& x : opts) {
      const uint64_t word =
          std::bit_cast<uint64_t>(x.cost) ^ std::rotl(std::bit_cast<uint64_t>(x.weight), 32);
      hash = (hash ^ word) * 0x100000001b3ULL;  // FNV-1a style, a word per option
    }
    uint64_t mixed = hash;  // the slot comes from the low bits: mix the high ones in
    mixed ^= mixed >> 33;
    mixed *= 0xff51afd7ed558ccdULL;
    mixed ^= mixed >> 33;
    size_t slot = mixed & mask;
    while (first[slot] >= 0 &&
           !(first_hash[slot] == hash && SameOptions(p.items[first[slot]], opts))) {
      slot = (slot + 1) & mask;
    }
    if (first[slot] < 0) {
      // A new kind: its facts, once its options are valid.
      bool finite = true;  // NaN fails every <=
      for (const LiveOption& x : opts) {
        constexpr double kMax = std::numeric_limits<double>::max();
        finite &= (std::abs(x.cost) <= kMax) & (x.weight >= 0) & (x.weight <= kMax);
      }
      if (!finite) {
        scan.valid_options = false;
        return scan;
      }
      first[slot] = i;
      first_hash[slot] = hash;
      int best = 0;
      double min_cost = opts[0].cost, heaviest_weight = 0;
      bool whole = true;
      for (int o = 0; o < static_cast<int>(opts.size()); ++o) {
        const LiveOption& x = opts[o];
        min_cost = std::min(min_cost, x.cost);
        if (x.weight < opts[best].weight ||
            (x.weight == opts[best].weight && x.cost < opts[best].cost)) {
          best = o;
        }
        heaviest_weight = std::max(heaviest_weight, x.weight);
        // Weights are finite and >= 0 (checked above): the clamped cast is defined.
        const double clamped = std::min(x.weight, kExactLimit);
        whole &= (x.weight <= kExactLimit) &
                 (static_cast<double>(static_cast<int64_t>(clamped)) == clamped);
      }
      scan.lightest[i] = best;
      scan.min_cost[i] = min_cost;
      heaviest[i] = heaviest_weight;
      scan.whole_weights = scan.whole_weights && whole;
    }
    const int k = first[slot];
    scan.kind[i] = k;
    scan.lightest[i] = scan.lightest[k];
    scan.min_cost[i] = scan.min_cost[k];
    scan.cheapest_sum += scan.min_cost[i];
    total_heaviest += heaviest[k];
  }
  scan.whole_weights = scan.whole_weights && total_heaviest <= kExactLimit;
  return scan;
}

// Whether the greedy's slack arithmetic on an interval-form problem is exact in any order:
// integer weights in [0, 2^50], |budgets| <= 2^50 (so every slack value, budget + Slack minus
// whole bytes in [0, budget + Slack], and every sum of weights is a representable double).
bool ExactOnIntervals(const LiveSelectionProblem& p, const ItemScan& scan) {
  if (!scan.whole_weights) return false;
  for (const auto& ck : p.checkpoints) {
    if (std::abs(ck.budget) > kExactLimit) return false;
  }
  return true;
}

// Range subtract / range min over checkpoint slacks: a bottom-up segment tree without lazy
// pushes (no recursion, no pending values moved between nodes). An internal node keeps the
// total subtracted on its whole range (`sub_`) and the least slack below it counting only the
// subtractions at or below it (`min_`). Each item's extras land on the same nodes every time,
// so every value held or computed is a checkpoint's starting slack less the extras of a subset
// of its live items: between its true slack (>= 0, every take fits) and its starting slack
// (extras of the lightest start are >= 0), and a whole number of bytes from the starting
// slack. Under ExactOnIntervals every such value is a representable double, so every
// operation below is exact and the minima are the per-checkpoint scan's.
class SlackTree {
 public:
  explicit SlackTree(const std::vector<double>& slack) {
    const int n = static_cast<int>(slack.size());
    while (leaves_ < n) leaves_ *= 2;
    // Padding leaves hold +infinity (never a minimum, never subtracted from).
    min_.assign(2 * leaves_, kInfinity);
    sub_.assign(2 * leaves_, 0.0);
    std::copy(slack.begin(), slack.end(), min_.begin() + leaves_);
    for (int p = leaves_ - 1; p >= 1; --p) min_[p] = std::min(min_[2 * p], min_[2 * p + 1]);
  }

  // The least slack over checkpoints l..r (infinity when l > r).
  double Min(int l, int r) const {
    if (l > r) return kInfinity;
    double left = kInfinity, right = kInfinity;
    // Half-open [l, r) over the leaves. After each step up, the nodes taken into `left` lie
    // under node l - 1 and those taken into `right` under node r (when any were taken; an
    // empty side stays infinite whatever is subtracted from it).
    for (l += leaves_, r += leaves_ + 1; l < r;) {
      if (l & 1) left = std::min(left, min_[l++]);
      if (r & 1) right = std::min(right, min_[--r]);
      l >>= 1;
      r >>= 1;
      left -= sub_[l - 1];
      right -= sub_[r];
    }
    // The subtractions above the last nodes reached.
    for (int p = l - 1; p > 1;) left -= sub_[p >>= 1];
    for (int p = r; p > 1;) right -= sub_[p >>= 1];
    return std::min(left, right);
  }

  // Subtracts x from the slacks of checkpoints l..r (nothing when l > r).
  void Subtract(int l, int r, double x) {
    if (l > r) return;
    const int first_leaf = l + leaves_, last_leaf = r + leaves_;
    for (l = first_leaf, r = last_leaf + 1; l < r; l >>= 1, r >>= 1) {
      if (l & 1) Apply(l++, x);
      if (r & 1) Apply(--r, x);
    }
    // The minima above the changed nodes: the two leaves' paths, one path from where they meet.
    for (int a = first_leaf >> 1, b = last_leaf >> 1; a >= 1; a >>= 1, b >>= 1) {
      Pull(a);
      if (b != a) Pull(b);
    }
  }

 private:
  static constexpr double kInfinity = std::numeric_limits<double>::infinity();

  void Apply(int node, double x) {
    min_[node] -= x;
    if (node < leaves_) sub_[node] += x;
  }
  // Recomputes an internal node's minimum from its children's.
  void Pull(int node) { min_[node] = std::min(min_[2 * node], min_[2 * node + 1]) - sub_[node]; }

  int leaves_ = 1;
  std::vector<double> min_;  // per node, 1-based heap order; leaves at [leaves_, 2 leaves_)
  // Per internal node: the total subtracted on its whole range (0 at index 0 and the leaves,
  // which Min may name on a side that took no node).
  std::vector<double> sub_;
};

// Greedy upgrades: the move with the most cost saved per extra byte that keeps every checkpoint
// of its item within budget; ties by item, then option index (deterministic). Lazy evaluation
// of the same rule: each item offers one move, the best of its current option's improving moves
// (sorted in the rule's order) at its cursor, and a tournament tree over the items finds the best
// offer. An offer that does not fit now moves the item's cursor past its moves that do not fit
// the room just measured: slack only shrinks while extras are >= 0, so they cannot fit before a
// move that frees bytes, which moves every cursor back to the start of its list (the moves
// before a cursor are exactly those found not to fit since the item last changed). So the chosen
// sequence of moves is the one of a full scan per step, in O(moves · log) time. An item's sorted
// moves from an option are made once per kind (ScanItems) and shared by the items of that kind.
// `room_of(i)`: the least slack over item i's checkpoints; `take(i, extra)`: subtract it there.
// `scan`: ScanItems.
template <typename Room, typename Take>
void GreedyUpgrades(const LiveSelectionProblem& problem, const ItemScan& scan,
                    Room room_of, Take take, std::vector<int>& choice) {
  const std::vector<int>& kind = scan.kind;
  // An improving move of an option kind (the item comes from the one that makes it).
  struct KindMove {
    double ratio;
    double extra;
    int option;
  };
  const int n = static_cast<int>(problem.items.size());
  // Per (kind, current option) at begin[kind] + option: its improving moves, best first (the
  // rule's order within one item), as [list_begin, list_end) in `kind_moves` (-1: not made yet).
  std::vector<int> begin(n + 1, 0);
  for (int i = 0; i < n; ++i) begin[i + 1] = begin[i] + static_cast<int>(problem.items[i].size());
  std::vector<int> list_begin(begin[n], -1), list_end(begin[n], -1);
  std::vector<KindMove> kind_moves;
  // Per item: its cursor into its current list, the list's start and end, and its offer's ratio
  // (-infinity: none left).
  std::vector<int> next_move(n, 0), first_move(n, 0), end(n, 0);
  constexpr double kNone = -std::numeric_limits<double>::infinity();
  std::vector<double> offer(n, kNone);
  // Tournament tree over the items: node v holds the item with the best offer below it (the
  // larger ratio, then the smaller item) and that offer; leaves at [leaves, 2 leaves), padding
  // leaves offer none.
  int leaves = 1;
  while (leaves < n) leaves *= 2;
  std::vector<int> best(2 * leaves);
  std::vector<double> best_ratio(2 * leaves, kNone);
  const auto pull = [&](int v) {
    const int a = best[2 * v], b = best[2 * v + 1];
    const double ra = best_ratio[2 * v], rb = best_ratio[2 * v + 1];
    const bool left = ra > rb || (ra == rb && a < b);
    best[v] = left ? a : b;
    best_ratio[v] = left ? ra : rb;
  };
  for (int v = 0; v < leaves; ++v) best[leaves + v] = v;
  // Item i's offer changed: the path above its leaf, up to the first node that keeps its winner.
  const auto update = [&](int i) {
    best_ratio[leaves + i] = offer[i];
    for (int v = (leaves + i) >> 1; v >= 1; v >>= 1) {
      const int item = best[v];
      const double ratio = best_ratio[v];
      pull(v);
      if (best[v] == item && best_ratio[v] == ratio) break;
    }
  };
  // Moves item i's cursor to its first move from the cursor on that may fit `room`.
  const auto advance = [&](int i, double room) {
    while (next_move[i] < end[i] && kind_moves[next_move[i]].extra > room) ++next_move[i];
    offer[i] = next_move[i] < end[i] ? kind_moves[next_move[i]].ratio : kNone;
  };
  // The sorted improving moves from option `from` of kind k's options, made once.
  const auto list_of = [&](int k, int from) {
    const int slot = begin[k] + from;
    if (list_begin[slot] >= 0) return slot;
    const auto& opts = problem.items[k];
    const LiveOption& cur = opts[from];
    list_begin[slot] = static_cast<int>(kind_moves.size());
    for (int o = 0; o < static_cast<int>(opts.size()); ++o) {
      const double saved = cur.cost - opts[o].cost;
      if (saved <= 0) continue;
      const double extra = opts[o].weight - cur.weight;
      kind_moves.push_back({saved / std::max(extra, 1e-9), extra, o});
    }
    list_end[slot] = static_cast<int>(kind_moves.size());
    std::sort(kind_moves.begin() + list_begin[slot], kind_moves.end(),
              [](const KindMove& a, const KindMove& b) {
                if (a.ratio != b.ratio) return a.ratio > b.ratio;
                return a.option < b.option;
              });
    return slot;
  };
  // Item i's list from its current option, its cursor at the first move that may fit
  // `room_now()` (called only when it has an improving move).
  const auto make_moves = [&](int i, const auto& room_now) {
    const int slot = list_of(kind[i], choice[i]);
    first_move[i] = next_move[i] = list_begin[slot];
    end[i] = list_end[slot];
    if (next_move[i] == end[i]) {
      offer[i] = kNone;
    } else {
      advance(i, room_now());
    }
  };
  for (int i = 0; i < n; ++i) make_moves(i, [&] { return room_of(i); });
  std::copy(offer.begin(), offer.end(), best_ratio.begin() + leaves);
  for (int v = leaves - 1; v >= 1; --v) pull(v);
  while (best_ratio[1] != kNone) {
    const int i = best[1];
    const KindMove& move = kind_moves[next_move[i]];
    const int option = move.option;
    const double extra = move.extra;
    const double room = room_of(i);
    if (extra > room) {
      advance(i, room);
      update(i);
      continue;
    }
    take(i, extra);
    choice[i] = option;
    // The item's room now, without measuring it again: every slack of the item dropped by
    // `extra`, and rounding is monotone, so the least of the rounded differences is the
    // rounded difference of the least (the same double room_of would return).
    make_moves(i, [&] { return room - extra; });
    update(i);
    if (extra < 0) {
      // Slack grew: every move found not to fit may fit again.
      for (int j = 0; j < n; ++j) {
        if (next_move[j] == first_move[j]) continue;
        next_move[j] = first_move[j];
        offer[j] = kind_moves[next_move[j]].ratio;
        update(j);
      }
    }
  }
}

}  // namespace

StatusOr<LiveSelection> SolveLiveSelection(const LiveSelectionProblem& problem,
                                           const LiveSelectionOptions& options) {
  // Validate's checks, with the options of each kind (ScanItems) checked once.
  const bool has_options =
      std::none_of(problem.items.begin(), problem.items.end(),
                   [](const std::vector<LiveOption>& item) { return item.empty(); });
  const ItemScan scan = has_options ? ScanItems(problem) : ItemScan{};
  WEFT_RETURN_IF_ERROR(has_options && scan.valid_options ? ValidateCheckpoints(problem)
                                                         : problem.Validate());
  const bool intervals = !problem.live.empty();
  if (intervals && !ExactOnIntervals(problem, scan)) {
    return SolveLiveSelection(ListForm(problem), options);
  }
  const int n = static_cast<int>(problem.items.size());
  LiveSelection out;
  out.method = "greedy";
  // Start: the lightest option of each item (the cheapest among equally light ones).
  out.choice = scan.lightest;
  const double cheapest_sum = scan.cheapest_sum;
  bool all_cheapest = true;
  const std::vector<double>& min_cost = scan.min_cost;
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
        problem, scan,
        [&](int i) { return tree.Min(problem.live[i].first, problem.live[i].last); },
        [&](int i, double extra) {
          tree.Subtract(problem.live[i].first, problem.live[i].last, extra);
        },
        out.choice);
  } else {
    GreedyUpgrades(
        problem, scan,
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
  if (std::chrono::steady_clock::now() >= options.deadline) return out;

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
  if (options.deadline != std::chrono::steady_clock::time_point::max()) {
    const double left_s =
        std::chrono::duration<double>(options.deadline - std::chrono::steady_clock::now()).count();
    if (left_s <= 0) return out;  // (a limit of 0 would mean none)
    mo.time_limit_s = mo.time_limit_s > 0 ? std::min(mo.time_limit_s, left_s) : left_s;
  }
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
