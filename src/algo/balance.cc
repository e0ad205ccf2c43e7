#include "weft/algo/balance.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <queue>

#include <fmt/format.h>

namespace weft::algo {
namespace {

Status CheckInput(std::span<const double> sizes, int bins) {
  if (bins < 1) return InvalidArgumentError(fmt::format("bins = {}; must be >= 1", bins));
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (!std::isfinite(sizes[i]) || sizes[i] < 0) {
      return InvalidArgumentError(
          fmt::format("sizes[{}] = {}; must be finite and >= 0", i, sizes[i]));
    }
  }
  return OkStatus();
}

// Fills loads, makespan, bound and gap from bin_of_item.
BalanceResult Finish(std::span<const double> sizes, int bins, std::vector<int> bin_of_item) {
  BalanceResult r;
  r.bin_of_item = std::move(bin_of_item);
  r.bin_load.assign(bins, 0.0);
  double total = 0.0, largest = 0.0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    r.bin_load[r.bin_of_item[i]] += sizes[i];
    total += sizes[i];
    largest = std::max(largest, sizes[i]);
  }
  r.makespan = *std::max_element(r.bin_load.begin(), r.bin_load.end());
  r.lower_bound = std::max(largest, total / bins);
  r.gap_to_lower_bound = r.lower_bound > 0 ? r.makespan / r.lower_bound - 1.0 : 0.0;
  // Relative tolerance: sum / bins is computed in floating point.
  r.proven_optimal = r.makespan <= r.lower_bound * (1 + 1e-12) + 1e-300;
  return r;
}

std::vector<int> DecreasingOrder(std::span<const double> sizes) {
  std::vector<int> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return sizes[a] > sizes[b]; });
  return order;
}

}  // namespace

std::string BalanceResult::BriefReport() const {
  return fmt::format("{} items on {} bins: makespan {:g} (lower bound {:g}, gap {:.1f}%{})",
                     bin_of_item.size(), bin_load.size(), makespan, lower_bound,
                     100.0 * gap_to_lower_bound, proven_optimal ? ", optimal" : "");
}

StatusOr<BalanceResult> LongestProcessingTimeFirst(std::span<const double> sizes, int bins) {
  WEFT_RETURN_IF_ERROR(CheckInput(sizes, bins));
  using Entry = std::pair<double, int>;  // (load, bin); smallest load, then lowest bin on top
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  for (int b = 0; b < bins; ++b) heap.push({0.0, b});
  std::vector<int> bin_of_item(sizes.size(), 0);
  for (int i : DecreasingOrder(sizes)) {
    auto [load, b] = heap.top();
    heap.pop();
    bin_of_item[i] = b;
    heap.push({load + sizes[i], b});
  }
  return Finish(sizes, bins, std::move(bin_of_item));
}

StatusOr<BalanceResult> LongestProcessingTimeFirstEligible(
    std::span<const double> sizes, int bins, std::span<const std::vector<int>> eligible,
    std::span<const double> initial_loads) {
  WEFT_RETURN_IF_ERROR(CheckInput(sizes, bins));
  if (eligible.size() != sizes.size()) {
    return InvalidArgumentError(fmt::format("eligible has {} lists; must have one per item ({})",
                                            eligible.size(), sizes.size()));
  }
  for (size_t i = 0; i < eligible.size(); ++i) {
    for (int b : eligible[i]) {
      if (b < 0 || b >= bins) {
        return InvalidArgumentError(
            fmt::format("eligible[{}] names bin {}; must be in [0, {})", i, b, bins));
      }
    }
  }
  if (!initial_loads.empty()) {
    if (static_cast<int>(initial_loads.size()) != bins) {
      return InvalidArgumentError(fmt::format("initial_loads has {} values; must have one per bin "
                                              "({})", initial_loads.size(), bins));
    }
    WEFT_RETURN_IF_ERROR(CheckInput(initial_loads, bins));
  }
  std::vector<double> load(bins, 0.0);
  if (!initial_loads.empty()) load.assign(initial_loads.begin(), initial_loads.end());
  std::vector<int> bin_of_item(sizes.size(), 0);
  for (int i : DecreasingOrder(sizes)) {
    int best = -1;
    auto consider = [&](int b) {
      if (best < 0 || load[b] < load[best] || (load[b] == load[best] && b < best)) best = b;
    };
    if (eligible[i].empty()) {
      for (int b = 0; b < bins; ++b) consider(b);
    } else {
      for (int b : eligible[i]) consider(b);
    }
    bin_of_item[i] = best;
    load[best] += sizes[i];
  }
  return Finish(sizes, bins, std::move(bin_of_item));
}

StatusOr<BalanceResult> KarmarkarKarp(std::span<const double> sizes, int bins) {
  WEFT_RETURN_IF_ERROR(CheckInput(sizes, bins));
  const int n = static_cast<int>(sizes.size());
  if (n == 0) return Finish(sizes, bins, {});
  struct Subset {
    double load = 0.0;
    std::vector<int> items;
  };
  // A partial solution: `bins` subsets sorted by decreasing load.
  struct Tuple {
    std::vector<Subset> subsets;
    double spread() const { return subsets.front().load - subsets.back().load; }
  };
  std::vector<Tuple> tuples;
  tuples.reserve(n);
  for (int i = 0; i < n; ++i) {
    Tuple t;
    t.subsets.resize(bins);
    t.subsets[0].load = sizes[i];
    t.subsets[0].items.push_back(i);
    tuples.push_back(std::move(t));
  }
  // Max-heap on (spread, -id): the largest spread first, the oldest tuple among ties.
  using Key = std::pair<double, int>;
  auto cmp = [](const Key& a, const Key& b) {
    return a.first != b.first ? a.first < b.first : a.second > b.second;
  };
  std::priority_queue<Key, std::vector<Key>, decltype(cmp)> heap(cmp);
  for (int i = 0; i < n; ++i) heap.push({tuples[i].spread(), i});
  while (heap.size() > 1) {
    const int a = heap.top().second;
    heap.pop();
    const int b = heap.top().second;
    heap.pop();
    Tuple& ta = tuples[a];
    Tuple& tb = tuples[b];
    // Heaviest of a with lightest of b.
    for (int s = 0; s < bins; ++s) {
      Subset& dst = ta.subsets[s];
      Subset& src = tb.subsets[bins - 1 - s];
      dst.load += src.load;
      if (dst.items.size() < src.items.size()) std::swap(dst.items, src.items);
      dst.items.insert(dst.items.end(), src.items.begin(), src.items.end());
    }
    std::stable_sort(ta.subsets.begin(), ta.subsets.end(),
                     [](const Subset& x, const Subset& y) { return x.load > y.load; });
    tb.subsets.clear();
    Tuple merged = std::move(ta);  // ta is invalidated by the push_back below
    tuples.push_back(std::move(merged));
    const int id = static_cast<int>(tuples.size()) - 1;
    heap.push({tuples[id].spread(), id});
  }
  const Tuple& last = tuples[heap.top().second];
  std::vector<int> bin_of_item(n, 0);
  for (int s = 0; s < bins; ++s) {
    for (int i : last.subsets[s].items) bin_of_item[i] = s;
  }
  return Finish(sizes, bins, std::move(bin_of_item));
}

StatusOr<BalanceResult> ExactBalance(std::span<const double> sizes,
                                     int bins,
                                     const ExactBalanceOptions& options) {
  WEFT_RETURN_IF_ERROR(CheckInput(sizes, bins));
  const int n = static_cast<int>(sizes.size());
  if (static_cast<long long>(n) * bins > options.max_variables) {
    return FailedPreconditionError(fmt::format(
        "ExactBalance: {} items x {} bins = {} variables; exceeds "
        "exact_balance_options.max_variables ({})",
        n, bins, static_cast<long long>(n) * bins, options.max_variables));
  }
  WEFT_ASSIGN_OR_RETURN(BalanceResult lpt, LongestProcessingTimeFirst(sizes, bins));
  WEFT_ASSIGN_OR_RETURN(BalanceResult kk, KarmarkarKarp(sizes, bins));
  BalanceResult incumbent = kk.makespan < lpt.makespan ? kk : lpt;
  if (incumbent.proven_optimal || n == 0) return incumbent;

  // Relabel bins by first use so that item i sits in a bin <= i (matches the symmetry breaking).
  std::vector<int> relabel(bins, -1);
  int next_label = 0;
  std::vector<int> start_bin(n);
  for (int i = 0; i < n; ++i) {
    int& label = relabel[incumbent.bin_of_item[i]];
    if (label < 0) label = next_label++;
    start_bin[i] = label;
  }

  MilpModel model;
  // x[i][b] for b <= min(i, bins - 1).
  std::vector<std::vector<int>> x(n);
  std::vector<std::vector<LinearTerm>> load_terms(bins);
  for (int i = 0; i < n; ++i) {
    std::vector<LinearTerm> one;
    for (int b = 0; b <= std::min(i, bins - 1); ++b) {
      const int v = model.AddBinary(fmt::format("x_{}_{}", i, b));
      x[i].push_back(v);
      one.push_back({v, 1.0});
      load_terms[b].push_back({v, sizes[i]});
    }
    model.AddEqual(std::move(one), 1.0, fmt::format("assign_{}", i));
  }
  const int makespan = model.AddContinuous(incumbent.lower_bound, incumbent.makespan, "makespan");
  for (int b = 0; b < bins; ++b) {
    std::vector<LinearTerm> terms = std::move(load_terms[b]);
    terms.push_back({makespan, -1.0});
    model.AddLessEqual(std::move(terms), 0.0, fmt::format("load_{}", b));
  }
  model.SetObjective({{makespan, 1.0}}, ObjectiveSense::kMinimize);
  MilpOptions milp_options = options.milp;
  milp_options.warm_start.assign(model.num_variables(), 0.0);
  for (int i = 0; i < n; ++i) milp_options.warm_start[x[i][start_bin[i]]] = 1.0;
  milp_options.warm_start[makespan] = incumbent.makespan;

  WEFT_ASSIGN_OR_RETURN(MilpResult solved, SolveMilp(model, milp_options));
  if (!solved.has_solution()) {
    incumbent.proven_optimal = false;
    return incumbent;
  }
  std::vector<int> bin_of_item(n, 0);
  for (int i = 0; i < n; ++i) {
    for (size_t b = 0; b < x[i].size(); ++b) {
      if (solved.values[x[i][b]] > 0.5) bin_of_item[i] = static_cast<int>(b);
    }
  }
  BalanceResult result = Finish(sizes, bins, std::move(bin_of_item));
  if (result.makespan > incumbent.makespan) {
    incumbent.proven_optimal = false;
    return incumbent;  // numerical noise in the MILP; keep the heuristic
  }
  result.proven_optimal = result.proven_optimal || solved.status == MilpStatus::kOptimal;
  return result;
}

}  // namespace weft::algo
