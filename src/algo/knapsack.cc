#include "weft/algo/knapsack.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <fmt/format.h>

namespace weft::algo {
namespace {

Status CheckGroups(std::span<const KnapsackGroup> groups) {
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].empty()) {
      return InvalidArgumentError(fmt::format("groups[{}] is empty; must have >= 1 option", g));
    }
    for (size_t o = 0; o < groups[g].size(); ++o) {
      const KnapsackOption& opt = groups[g][o];
      if (!std::isfinite(opt.cost)) {
        return InvalidArgumentError(
            fmt::format("groups[{}][{}].cost = {}; must be finite", g, o, opt.cost));
      }
      if (!std::isfinite(opt.weight) || opt.weight < 0) {
        return InvalidArgumentError(fmt::format(
            "groups[{}][{}].weight = {}; must be finite and >= 0", g, o, opt.weight));
      }
    }
  }
  return OkStatus();
}

KnapsackSelection Evaluate(std::span<const KnapsackGroup> groups, std::vector<int> choice) {
  KnapsackSelection s;
  s.choice = std::move(choice);
  for (size_t g = 0; g < groups.size(); ++g) {
    s.total_cost += groups[g][s.choice[g]].cost;
    s.total_weight += groups[g][s.choice[g]].weight;
  }
  return s;
}

bool IsInteger(double x) { return std::floor(x) == x; }

}  // namespace

Status KnapsackOptions::Validate() const {
  if (!std::isfinite(weight_quantum) || weight_quantum < 0) {
    return InvalidArgumentError(fmt::format(
        "knapsack_options.weight_quantum = {}; must be finite and >= 0", weight_quantum));
  }
  if (max_weight_cells < 1) {
    return InvalidArgumentError(
        fmt::format("knapsack_options.max_weight_cells = {}; must be >= 1", max_weight_cells));
  }
  return OkStatus();
}

StatusOr<KnapsackSelection> SolveMultipleChoiceKnapsack(std::span<const KnapsackGroup> groups,
                                                        double capacity,
                                                        const KnapsackOptions& options) {
  WEFT_RETURN_IF_ERROR(options.Validate());
  WEFT_RETURN_IF_ERROR(CheckGroups(groups));
  if (!std::isfinite(capacity) || capacity < 0) {
    return InvalidArgumentError(fmt::format("capacity = {}; must be finite and >= 0", capacity));
  }
  double quantum = options.weight_quantum;
  if (quantum == 0) {
    bool integral = IsInteger(capacity) && capacity <= options.max_weight_cells - 1;
    for (const auto& group : groups) {
      for (const auto& opt : group) integral = integral && IsInteger(opt.weight);
    }
    quantum = integral || capacity == 0 ? 1.0 : capacity / (options.max_weight_cells - 1);
  }
  const double cells_needed = std::floor(capacity / quantum) + 1;
  if (cells_needed > options.max_weight_cells) {
    return InvalidArgumentError(fmt::format(
        "knapsack_options.weight_quantum = {} gives {} weight cells; must be <= max_weight_cells "
        "({})",
        quantum, cells_needed, options.max_weight_cells));
  }
  const int cells = static_cast<int>(cells_needed);
  bool exact = true;
  auto units = [&](double weight) {
    const double q = weight / quantum;
    const double up = std::ceil(q - 1e-12 * std::max(1.0, q));  // tolerate representation error
    if (std::fabs(q - std::round(q)) > 1e-9 * std::max(1.0, q)) exact = false;
    return up;
  };

  const int num_groups = static_cast<int>(groups.size());
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // cost_at[w] = min cost of the groups so far with rounded weight exactly w.
  std::vector<double> cost_at(cells, kInf), next(cells);
  cost_at[0] = 0.0;
  std::vector<int32_t> pick(static_cast<size_t>(num_groups) * cells, -1);
  for (int g = 0; g < num_groups; ++g) {
    std::fill(next.begin(), next.end(), kInf);
    int32_t* row = &pick[static_cast<size_t>(g) * cells];
    for (int o = 0; o < static_cast<int>(groups[g].size()); ++o) {
      const double u = units(groups[g][o].weight);
      if (u >= cells) continue;
      const int du = static_cast<int>(u);
      const double c = groups[g][o].cost;
      for (int w = 0; w + du < cells; ++w) {
        if (cost_at[w] == kInf) continue;
        if (cost_at[w] + c < next[w + du]) {  // strict: lowest option index among ties
          next[w + du] = cost_at[w] + c;
          row[w + du] = o;
        }
      }
    }
    std::swap(cost_at, next);
  }
  int best_w = -1;
  for (int w = 0; w < cells; ++w) {
    if (cost_at[w] < kInf && (best_w < 0 || cost_at[w] < cost_at[best_w])) best_w = w;
  }
  if (best_w < 0) {
    return ResourceExhaustedError(fmt::format(
        "no selection of one option per group fits capacity {} (weight quantum {})", capacity,
        quantum));
  }
  std::vector<int> choice(num_groups, 0);
  int w = best_w;
  for (int g = num_groups - 1; g >= 0; --g) {
    const int o = pick[static_cast<size_t>(g) * cells + w];
    choice[g] = o;
    w -= static_cast<int>(units(groups[g][o].weight));
  }
  KnapsackSelection result = Evaluate(groups, std::move(choice));
  result.exact = exact;
  return result;
}

StatusOr<ParetoFrontier> MultipleChoiceParetoFrontier(std::span<const KnapsackGroup> groups,
                                                      const ParetoOptions& options) {
  WEFT_RETURN_IF_ERROR(CheckGroups(groups));
  if (options.max_points < 0 || options.max_points == 1) {
    return InvalidArgumentError(fmt::format(
        "pareto_options.max_points = {}; must be 0 (unlimited) or >= 2", options.max_points));
  }
  if (std::isnan(options.max_total_weight) || options.max_total_weight < 0) {
    return InvalidArgumentError(fmt::format("pareto_options.max_total_weight = {}; must be >= 0",
                                            options.max_total_weight));
  }
  struct Point {
    double weight;
    double cost;
    int parent;  // index into the previous level
    int option;  // option of this level's group
  };
  ParetoFrontier result;
  std::vector<std::vector<Point>> levels;
  levels.push_back({{0.0, 0.0, -1, -1}});
  std::vector<Point> candidates;
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::vector<Point>& prev = levels.back();
    candidates.clear();
    for (int p = 0; p < static_cast<int>(prev.size()); ++p) {
      for (int o = 0; o < static_cast<int>(groups[g].size()); ++o) {
        const double w = prev[p].weight + groups[g][o].weight;
        if (w > options.max_total_weight) continue;
        candidates.push_back({w, prev[p].cost + groups[g][o].cost, p, o});
      }
    }
    if (candidates.empty()) return ParetoFrontier{{}, result.exact};
    // Stable: among equal (weight, cost), the lowest (parent, option) comes first.
    std::stable_sort(candidates.begin(), candidates.end(), [](const Point& a, const Point& b) {
      return a.weight != b.weight ? a.weight < b.weight : a.cost < b.cost;
    });
    std::vector<Point> frontier;
    for (const Point& c : candidates) {
      if (frontier.empty() || c.cost < frontier.back().cost) frontier.push_back(c);
    }
    if (options.max_points > 0 && static_cast<int>(frontier.size()) > options.max_points) {
      std::vector<Point> thinned;
      const int m = options.max_points;
      const double step = static_cast<double>(frontier.size() - 1) / (m - 1);
      for (int k = 0; k < m; ++k) {
        thinned.push_back(frontier[static_cast<size_t>(std::llround(k * step))]);
      }
      frontier = std::move(thinned);
      result.exact = false;
    }
    levels.push_back(std::move(frontier));
  }
  const int num_groups = static_cast<int>(groups.size());
  for (int p = 0; p < static_cast<int>(levels.back().size()); ++p) {
    std::vector<int> choice(num_groups, 0);
    int index = p;
    for (int g = num_groups; g >= 1; --g) {
      choice[g - 1] = levels[g][index].option;
      index = levels[g][index].parent;
    }
    KnapsackSelection s = Evaluate(groups, std::move(choice));
    s.exact = result.exact;
    result.points.push_back(std::move(s));
  }
  return result;
}

StatusOr<std::vector<KnapsackSelection>> SelectMemoryBucketCandidates(
    std::span<const KnapsackGroup> groups,
    int num_candidates,
    const ParetoOptions& options) {
  if (num_candidates < 2) {
    return InvalidArgumentError(
        fmt::format("num_candidates = {}; must be >= 2", num_candidates));
  }
  WEFT_ASSIGN_OR_RETURN(ParetoFrontier frontier, MultipleChoiceParetoFrontier(groups, options));
  const auto& pts = frontier.points;
  if (pts.empty()) {
    return ResourceExhaustedError(fmt::format(
        "no selection of one option per group fits max_total_weight {}", options.max_total_weight));
  }
  // pts[0] is the most memory-efficient, pts.back() the fastest.
  std::vector<size_t> picked = {0};
  const double lo = pts.front().total_weight;
  const double hi = pts.back().total_weight;
  const int buckets = num_candidates - 2;
  for (int b = 0; b < buckets && hi > lo; ++b) {
    const double bucket_lo = lo + (hi - lo) * b / buckets;
    const bool last = b + 1 == buckets;
    const double bucket_hi = last ? hi : lo + (hi - lo) * (b + 1) / buckets;
    // Cheapest selection with weight <= bucket_hi (< hi for the last bucket: the fastest is a
    // candidate anyway) = the heaviest frontier point under it.
    size_t best = 0;
    for (size_t p = 0; p < pts.size() && (last ? pts[p].total_weight < bucket_hi
                                               : pts[p].total_weight <= bucket_hi);
         ++p) {
      best = p;
    }
    if (pts[best].total_weight > bucket_lo) picked.push_back(best);
  }
  picked.push_back(pts.size() - 1);
  std::sort(picked.begin(), picked.end());
  picked.erase(std::unique(picked.begin(), picked.end()), picked.end());
  std::vector<KnapsackSelection> out;
  for (size_t p : picked) out.push_back(pts[p]);
  return out;
}

}  // namespace weft::algo
