#include "weft/strategy/flowtrain/packer.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>

#include "weft/algo/packing.h"

namespace weft::strategy::flowtrain {
namespace {

// One pack of sub-sequence lengths and its reference time (seconds, one layer, fwd + bwd).
using ReferenceFn = std::function<StatusOr<double>(std::span<const int64_t>)>;

double SumSquares(std::span<const int64_t> lengths) {
  double s = 0;
  for (int64_t l : lengths) s += static_cast<double>(l) * static_cast<double>(l);
  return s;
}

int64_t Sum(std::span<const int64_t> lengths) {
  return std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
}

// The fitting grid: per fill fraction f (T = f · C tokens), k equal segments for k = 1, 2, 4, ...
// while T / k >= min_length, and one segment of T / 2 with the rest in min_length pieces.
std::vector<std::vector<int64_t>> FitGrid(const PackCostFitOptions& o) {
  std::vector<std::vector<int64_t>> grid;
  const int64_t c = o.capacity_tokens;
  for (double f : o.fill_fractions) {
    const int64_t total = std::max<int64_t>(1, std::llround(f * static_cast<double>(c)));
    for (int64_t k = 1; total / k >= std::min(o.min_length_tokens, total); k *= 2) {
      std::vector<int64_t> pack(k, total / k);
      pack.back() += total - (total / k) * k;
      grid.push_back(std::move(pack));
      if (total / k < 2) break;
    }
    if (total / 2 >= o.min_length_tokens) {
      std::vector<int64_t> pack = {total / 2};
      int64_t rest = total - total / 2;
      while (rest >= o.min_length_tokens) {
        pack.push_back(o.min_length_tokens);
        rest -= o.min_length_tokens;
      }
      if (rest > 0) pack.push_back(rest);
      grid.push_back(std::move(pack));
    }
  }
  return grid;
}

// Held-out packs: fill target uniform in [0.1, 1] · C, lengths log-uniform in [min_length, C],
// drawn until the target is met or three draws in a row do not fit.
std::vector<std::vector<int64_t>> RandomPacks(const PackCostFitOptions& o) {
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double log_lo = std::log(static_cast<double>(o.min_length_tokens));
  const double log_hi = std::log(static_cast<double>(o.capacity_tokens));
  std::vector<std::vector<int64_t>> packs;
  for (int p = 0; p < o.held_out_packs; ++p) {
    const double target = (0.1 + 0.9 * unit(rng)) * static_cast<double>(o.capacity_tokens);
    std::vector<int64_t> pack;
    int64_t used = 0;
    for (int misses = 0; misses < 3 && static_cast<double>(used) < target;) {
      const auto len =
          static_cast<int64_t>(std::llround(std::exp(log_lo + (log_hi - log_lo) * unit(rng))));
      if (used + len > o.capacity_tokens) {
        ++misses;
        continue;
      }
      pack.push_back(len);
      used += len;
    }
    if (pack.empty()) pack.push_back(o.min_length_tokens);
    packs.push_back(std::move(pack));
  }
  return packs;
}

// Least squares on relative residuals with non-negative coefficients: minimize
// Σ_i ((Σ_k c_k f_k(i) − t_i) / t_i)² over c >= 0, features f = (tokens / C, Σ len² / C², 1 when
// the fixed term is fitted). Exact for so few features: the unconstrained least squares of every
// non-empty feature subset (normal equations, Gaussian elimination), the best whose coefficients
// are all >= 0 (the others pinned at 0).
PackCost SolveFit(const std::vector<std::vector<int64_t>>& packs,
                  const std::vector<double>& reference_s,
                  int64_t capacity,
                  bool fixed_term) {
  const double c = static_cast<double>(capacity);
  const int k = fixed_term ? 3 : 2;
  std::vector<std::array<double, 3>> rows;  // features / t
  for (size_t i = 0; i < packs.size(); ++i) {
    const double w = 1.0 / reference_s[i];
    rows.push_back(
        {static_cast<double>(Sum(packs[i])) / c * w, SumSquares(packs[i]) / (c * c) * w, w});
  }
  std::array<double, 3> best{};
  double best_error = std::numeric_limits<double>::infinity();
  for (int mask = 1; mask < (1 << k); ++mask) {
    std::vector<int> f;
    for (int j = 0; j < k; ++j) {
      if (mask & (1 << j)) f.push_back(j);
    }
    const int m = static_cast<int>(f.size());
    // Normal equations A c = b, A = Σ x xᵀ, b = Σ x (the target is 1 after weighting).
    std::vector<std::vector<double>> a(m, std::vector<double>(m + 1, 0.0));
    for (const auto& r : rows) {
      for (int p = 0; p < m; ++p) {
        for (int q = 0; q < m; ++q) a[p][q] += r[f[p]] * r[f[q]];
        a[p][m] += r[f[p]];
      }
    }
    bool singular = false;
    for (int p = 0; p < m && !singular; ++p) {
      int pivot = p;
      for (int q = p + 1; q < m; ++q) {
        if (std::abs(a[q][p]) > std::abs(a[pivot][p])) pivot = q;
      }
      std::swap(a[p], a[pivot]);
      if (std::abs(a[p][p]) < 1e-300) {
        singular = true;
        break;
      }
      for (int q = 0; q < m; ++q) {
        if (q == p) continue;
        const double factor = a[q][p] / a[p][p];
        for (int col = p; col <= m; ++col) a[q][col] -= factor * a[p][col];
      }
    }
    if (singular) continue;
    std::array<double, 3> coef{};
    bool negative = false;
    for (int p = 0; p < m; ++p) {
      coef[f[p]] = a[p][m] / a[p][p];
      negative |= coef[f[p]] < 0;
    }
    if (negative) continue;
    double error = 0;
    for (const auto& r : rows) {
      const double e = coef[0] * r[0] + coef[1] * r[1] + coef[2] * r[2] - 1.0;
      error += e * e;
    }
    if (error < best_error) best_error = error, best = coef;
  }
  return {
      .capacity_tokens = capacity, .linear_s = best[0], .quadratic_s = best[1], .fixed_s = best[2]};
}

StatusOr<PackCostFit> Fit(const ReferenceFn& reference,
                          int module,
                          int tp,
                          std::string reference_name,
                          const PackCostFitOptions& options) {
  const auto grid = FitGrid(options);
  std::vector<double> grid_s;
  for (const auto& pack : grid) {
    WEFT_ASSIGN_OR_RETURN(double t, reference(pack));
    if (!(t > 0)) {
      return FailedPreconditionError(
          fmt::format("FitPackCost: the reference prices a pack of {} tokens at {} s; must be > 0",
                      Sum(pack), t));
    }
    grid_s.push_back(t);
  }
  PackCostFit fit{.cost = SolveFit(grid, grid_s, options.capacity_tokens, options.fixed_term),
                  .module = module,
                  .tp = tp,
                  .fit_points = static_cast<int>(grid.size()),
                  .reference = std::move(reference_name)};
  std::vector<double> errors;
  for (const auto& pack : RandomPacks(options)) {
    WEFT_ASSIGN_OR_RETURN(double t, reference(pack));
    errors.push_back(std::abs(fit.cost.CostS(pack) - t) / t);
  }
  fit.held_out_packs = static_cast<int>(errors.size());
  if (!errors.empty()) {
    std::sort(errors.begin(), errors.end());
    fit.max_relative_error = errors.back();
    const size_t n = errors.size();
    fit.median_relative_error = n % 2 ? errors[n / 2] : 0.5 * (errors[n / 2 - 1] + errors[n / 2]);
  }
  return fit;
}

Status CheckLlm(const spec::ModelSpec& model, int module) {
  if (module < 0 || module >= static_cast<int>(model.modules.size())) {
    return InvalidArgumentError(
        fmt::format("FitPackCost: module = {}; must be a module index in [0, {})", module,
                    model.modules.size()));
  }
  if (model.modules[module].kind != spec::ModuleKind::kLlm) {
    return InvalidArgumentError(fmt::format("FitPackCost: module {} ('{}') must be an LLM", module,
                                            model.modules[module].name));
  }
  return OkStatus();
}

// Splits microbatch `b` in two: its items longest first (ties: lower index), each to the half
// with fewer tokens (ties: the first). The second half is appended.
void Split(std::span<const int64_t> lengths,
           std::vector<std::vector<int>>& bins,
           std::vector<int64_t>& tokens,
           int b) {
  std::vector<int> items = bins[b];
  std::stable_sort(items.begin(), items.end(),
                   [&](int x, int y) { return lengths[x] > lengths[y]; });
  std::vector<int> halves[2];
  int64_t half_tokens[2] = {0, 0};
  for (int i : items) {
    const int h = half_tokens[1] < half_tokens[0] ? 1 : 0;
    halves[h].push_back(i);
    half_tokens[h] += lengths[i];
  }
  for (auto& h : halves) std::sort(h.begin(), h.end());
  bins[b] = std::move(halves[0]);
  tokens[b] = half_tokens[0];
  bins.push_back(std::move(halves[1]));
  tokens.push_back(half_tokens[1]);
}

}  // namespace

double PackCost::CostS(double tokens, double sum_squared_tokens) const {
  const double c = static_cast<double>(capacity_tokens);
  return linear_s * tokens / c + quadratic_s * sum_squared_tokens / (c * c) + fixed_s;
}

double PackCost::CostS(std::span<const int64_t> lengths) const {
  return CostS(static_cast<double>(Sum(lengths)), SumSquares(lengths));
}

Status PackCost::Validate() const {
  if (capacity_tokens < 1) {
    return InvalidArgumentError(
        fmt::format("pack_cost.capacity_tokens = {}; must be >= 1", capacity_tokens));
  }
  if (!std::isfinite(linear_s) || linear_s < 0) {
    return InvalidArgumentError(
        fmt::format("pack_cost.linear_s = {}; must be finite and >= 0", linear_s));
  }
  if (!std::isfinite(quadratic_s) || quadratic_s < 0) {
    return InvalidArgumentError(
        fmt::format("pack_cost.quadratic_s = {}; must be finite and >= 0", quadratic_s));
  }
  if (!std::isfinite(fixed_s) || fixed_s < 0) {
    return InvalidArgumentError(
        fmt::format("pack_cost.fixed_s = {}; must be finite and >= 0", fixed_s));
  }
  if (linear_s + quadratic_s <= 0) {
    return InvalidArgumentError(
        "pack_cost.linear_s + quadratic_s = 0; must be > 0 (fit them with FitPackCost)");
  }
  return OkStatus();
}

Status PackCostFitOptions::Validate() const {
  if (capacity_tokens < 2 || capacity_tokens > algo::kMaxSegmentTreeCapacity) {
    return InvalidArgumentError(
        fmt::format("pack_cost_fit.capacity_tokens = {}; must be in [2, {}]", capacity_tokens,
                    algo::kMaxSegmentTreeCapacity));
  }
  if (min_length_tokens < 1 || min_length_tokens > capacity_tokens) {
    return InvalidArgumentError(
        fmt::format("pack_cost_fit.min_length_tokens = {}; must be in [1, capacity_tokens = {}]",
                    min_length_tokens, capacity_tokens));
  }
  if (fill_fractions.empty()) {
    return InvalidArgumentError("pack_cost_fit.fill_fractions is empty; must hold at least one");
  }
  for (size_t i = 0; i < fill_fractions.size(); ++i) {
    if (!(fill_fractions[i] > 0 && fill_fractions[i] <= 1)) {
      return InvalidArgumentError(fmt::format(
          "pack_cost_fit.fill_fractions[{}] = {}; must be in (0, 1]", i, fill_fractions[i]));
    }
  }
  if (held_out_packs < 0) {
    return InvalidArgumentError(
        fmt::format("pack_cost_fit.held_out_packs = {}; must be >= 0", held_out_packs));
  }
  return OkStatus();
}

std::string PackCostFit::BriefReport() const {
  return fmt::format(
      "module {} tp {}, C {}: linear {:.4g} ms + quadratic {:.4g} ms + fixed {:.4g} ms per layer "
      "({} fit points, {}); held-out error median {:.2f}%, max {:.2f}% over {} packs",
      module, tp, cost.capacity_tokens, cost.linear_s * 1e3, cost.quadratic_s * 1e3,
      cost.fixed_s * 1e3, fit_points, reference, 100 * median_relative_error,
      100 * max_relative_error, held_out_packs);
}

StatusOr<PackCostFit> FitPackCost(const spec::ModelSpec& model,
                                  int module,
                                  int tp,
                                  const cost::CostModel& cost_model,
                                  const PackCostFitOptions& options) {
  WEFT_RETURN_IF_ERROR(options.Validate());
  WEFT_RETURN_IF_ERROR(CheckLlm(model, module));
  if (tp < 1) return InvalidArgumentError(fmt::format("FitPackCost: tp = {}; must be >= 1", tp));
  const spec::ModuleSpec& llm = model.modules[module];
  const int layer = llm.num_layers >= 3 ? llm.num_layers / 2 : 0;  // no input / output extras
  const spec::ModuleParallel parallel{.module = llm.name, .tp = tp};
  auto reference = [&](std::span<const int64_t> pack) -> StatusOr<double> {
    WEFT_ASSIGN_OR_RETURN(
        cost::LayerCost c,
        cost_model.Layer(model, module, layer, cost::TokenShape::FromSegments(pack), parallel));
    return c.forward_s + c.backward_input_s + c.backward_weight_s;
  };
  return Fit(reference, module, tp, "cost model", options);
}

StatusOr<PackCostFit> FitPackCost(const cost::ThroughputTable& table,
                                  int module,
                                  int tp,
                                  const PackCostFitOptions& options) {
  WEFT_RETURN_IF_ERROR(options.Validate());
  const cost::ModuleTable* t = table.Find(module);
  if (t == nullptr || t->role != cost::ProfileRole::kLlm) {
    return InvalidArgumentError(fmt::format(
        "FitPackCost: module = {}; the throughput table has no LLM table for it", module));
  }
  auto reference = [&](std::span<const int64_t> pack) -> StatusOr<double> {
    WEFT_ASSIGN_OR_RETURN(cost::LayerTime linear,
                          table.LlmLinearTime(module, tp, static_cast<double>(Sum(pack))));
    double s = linear.forward_s + linear.backward_s;
    for (int64_t len : pack) {
      WEFT_ASSIGN_OR_RETURN(cost::LayerTime attention,
                            table.LlmAttentionTime(module, tp, static_cast<double>(len)));
      s += attention.forward_s + attention.backward_s;
    }
    return s;
  };
  return Fit(reference, module, tp, fmt::format("throughput table ({})", table.source()), options);
}

std::string_view PackPolicyName(PackPolicy policy) {
  switch (policy) {
    case PackPolicy::kFlowTrain:
      return "flowtrain-pack";
    case PackPolicy::kFirstFitRoundRobin:
      return "first-fit-round-robin";
  }
  return "flowtrain-pack";
}

Status PackOptions::Validate() const {
  if (capacity_tokens < 1 || capacity_tokens > algo::kMaxSegmentTreeCapacity) {
    return InvalidArgumentError(fmt::format("pack.capacity_tokens = {}; must be in [1, {}]",
                                            capacity_tokens, algo::kMaxSegmentTreeCapacity));
  }
  if (dp < 1) return InvalidArgumentError(fmt::format("pack.dp = {}; must be >= 1", dp));
  if (microbatches_per_rank < 0) {
    return InvalidArgumentError(
        fmt::format("pack.microbatches_per_rank = {}; must be >= 0 (0 = as packing gives)",
                    microbatches_per_rank));
  }
  if (num_cost_buckets < 1) {
    return InvalidArgumentError(
        fmt::format("pack.num_cost_buckets = {}; must be >= 1", num_cost_buckets));
  }
  WEFT_RETURN_IF_ERROR(cost.Validate());
  if (cost.capacity_tokens != capacity_tokens) {
    return InvalidArgumentError(
        fmt::format("pack.cost.capacity_tokens = {}; must equal pack.capacity_tokens = {} (eq. 3 "
                    "normalizes by the microbatch capacity)",
                    cost.capacity_tokens, capacity_tokens));
  }
  return OkStatus();
}

std::string PackResult::BriefReport() const {
  return fmt::format(
      "{} items in {} microbatches of {} over {} ranks ({}): padding {:.1f}%, DP imbalance {:.3f}",
      std::accumulate(microbatches.begin(), microbatches.end(), size_t{0},
                      [](size_t n, const PackedMicrobatch& m) { return n + m.items.size(); }),
      microbatches.size(), capacity_tokens, ranks.size(), PackPolicyName(policy),
      100 * padding_fraction, dp_imbalance);
}

StatusOr<PackResult> PackAndDispatch(std::span<const int64_t> lengths, const PackOptions& options) {
  WEFT_RETURN_IF_ERROR(options.Validate());
  const int64_t capacity = options.capacity_tokens;
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 1 || lengths[i] > capacity) {
      return InvalidArgumentError(fmt::format(
          "lengths[{}] = {}; must be in [1, capacity_tokens = {}] (a sequence must fit one "
          "microbatch)",
          i, lengths[i], capacity));
    }
  }
  // 1. Packing.
  StatusOr<algo::BinPacking> packing =
      options.policy == PackPolicy::kFlowTrain
          ? algo::BestFit(
                lengths, capacity,
                {.sort_decreasing = options.sort_decreasing, .close_below_pending_min = true})
          : algo::FirstFitDecreasing(lengths, capacity);
  WEFT_RETURN_IF_ERROR(packing.status());
  std::vector<std::vector<int>> bins = packing->ItemsOfBins();
  std::vector<int64_t> tokens = packing->bin_used;
  PackResult r;
  r.policy = options.policy;
  r.capacity_tokens = capacity;
  r.max_open_bins = packing->max_open_bins;
  const int d = options.dp;
  const int given = static_cast<int>(bins.size());
  const int64_t wanted = static_cast<int64_t>(d) * std::max(1, options.microbatches_per_rank);
  int64_t target = wanted;
  if (options.policy == PackPolicy::kFlowTrain && options.equal_microbatches_per_rank) {
    target = std::max<int64_t>(target, (given + d - 1) / d * static_cast<int64_t>(d));
  }
  while (static_cast<int64_t>(bins.size()) < target) {
    int b = -1;
    for (int k = 0; k < static_cast<int>(bins.size()); ++k) {
      if (bins[k].size() >= 2 && (b < 0 || tokens[k] > tokens[b])) b = k;
    }
    if (b < 0) break;
    Split(lengths, bins, tokens, b);
    ++r.splits;
  }
  const int n = static_cast<int>(bins.size());
  if (n < d) {
    return FailedPreconditionError(fmt::format(
        "pack: {} items make {} microbatches (after {} splits); the {} DP ranks need one each",
        lengths.size(), n, r.splits, d));
  }
  std::vector<std::string> notes;
  if (options.microbatches_per_rank > 0 && n != wanted) {
    notes.push_back(fmt::format("asked {} microbatches per rank ({} in all), used {}",
                                options.microbatches_per_rank, wanted, n));
  }
  if (r.splits > 0) {
    notes.push_back(fmt::format("packing gave {}, {} split in two", given, r.splits));
  }
  if (n % d != 0) {
    notes.push_back(fmt::format("ranks run {} or {} microbatches", n / d, n / d + 1));
  }
  for (const auto& note : notes) r.notes += (r.notes.empty() ? "" : "; ") + note;
  // 2. Eq. 3 cost per microbatch.
  r.microbatches.resize(n);
  for (int b = 0; b < n; ++b) {
    auto& m = r.microbatches[b];
    m.items = std::move(bins[b]);
    m.tokens = tokens[b];
    double sum_sq = 0;
    for (int i : m.items)
      sum_sq += static_cast<double>(lengths[i]) * static_cast<double>(lengths[i]);
    m.cost_s = options.cost.CostS(static_cast<double>(m.tokens), sum_sq);
    r.total_tokens += m.tokens;
  }
  // 3-4. Dispatch order and ranks.
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  r.ranks.assign(d, {});
  if (options.policy == PackPolicy::kFlowTrain) {
    double lo = r.microbatches[0].cost_s, hi = lo;
    for (const auto& m : r.microbatches) lo = std::min(lo, m.cost_s), hi = std::max(hi, m.cost_s);
    const int k = options.num_cost_buckets;
    const double width = (hi - lo) / k;
    for (auto& m : r.microbatches) {
      m.bucket = width > 0 ? std::min(k - 1, static_cast<int>((hi - m.cost_s) / width)) : 0;
    }
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
      const auto& a = r.microbatches[x];
      const auto& b = r.microbatches[y];
      if (a.bucket != b.bucket) return a.bucket < b.bucket;
      return a.cost_s > b.cost_s;
    });
    for (int p = 0; p < n; ++p) {
      const int round = p / d, offset = p % d;
      r.ranks[round % 2 == 0 ? offset : d - 1 - offset].push_back(order[p]);
    }
  } else {
    for (int b = 0; b < n; ++b) r.ranks[b % d].push_back(b);
  }
  r.rank_cost_s.assign(d, 0);
  r.rank_tokens.assign(d, 0);
  for (int rank = 0; rank < d; ++rank) {
    for (int b : r.ranks[rank]) {
      r.rank_cost_s[rank] += r.microbatches[b].cost_s;
      r.rank_tokens[rank] += r.microbatches[b].tokens;
    }
  }
  r.padding_tokens = static_cast<int64_t>(n) * capacity - r.total_tokens;
  r.padding_fraction = static_cast<double>(r.padding_tokens) /
                       (static_cast<double>(n) * static_cast<double>(capacity));
  const double total_cost = std::accumulate(r.rank_cost_s.begin(), r.rank_cost_s.end(), 0.0);
  const double max_cost = *std::max_element(r.rank_cost_s.begin(), r.rank_cost_s.end());
  r.dp_imbalance = total_cost > 0 ? max_cost / (total_cost / d) : 1.0;
  return r;
}

StatusOr<std::vector<int64_t>> SampleLengths(const spec::ModelSpec& model,
                                             const spec::Batch& batch,
                                             int llm_module,
                                             const data::WorkloadOptions& workload) {
  const int llm = llm_module >= 0 ? llm_module : data::FirstLlmModule(model);
  if (llm < 0) return FailedPreconditionError("flowtrain pack: the model has no LLM module");
  WEFT_ASSIGN_OR_RETURN(auto counter, data::LlmTokenCounter::Create(model, llm));
  std::vector<int64_t> lengths;
  lengths.reserve(batch.samples.size());
  for (const auto& sample : batch.samples) {
    WEFT_ASSIGN_OR_RETURN(int64_t t, counter.Tokens(sample, workload));
    lengths.push_back(t);
  }
  return lengths;
}

StatusOr<BatchPacking> PackBatch(const spec::ModelSpec& model,
                                 const spec::Batch& batch,
                                 const PackOptions& options,
                                 int llm_module,
                                 const data::WorkloadOptions& workload) {
  WEFT_RETURN_IF_ERROR(options.Validate());
  WEFT_ASSIGN_OR_RETURN(std::vector<int64_t> lengths,
                        SampleLengths(model, batch, llm_module, workload));
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 1 || lengths[i] > options.capacity_tokens) {
      return InvalidArgumentError(fmt::format(
          "batch.samples[{}] (id {}) has {} LLM tokens; must be in [1, capacity_tokens = {}] (a "
          "sample must fit one microbatch)",
          i, batch.samples[i].id, lengths[i], options.capacity_tokens));
    }
  }
  BatchPacking out;
  WEFT_ASSIGN_OR_RETURN(out.packing, PackAndDispatch(lengths, options));
  auto& a = out.assignment;
  a.policy = options.policy == PackPolicy::kFlowTrain ? "flowtrain-pack" : "flowtrain-no-scheduler";
  for (const auto& m : out.packing.microbatches) {
    a.sequences.push_back({.sample_indices = m.items, .llm_tokens = m.tokens});
  }
  a.replicas.resize(out.packing.ranks.size());
  for (size_t r = 0; r < out.packing.ranks.size(); ++r) {
    for (int b : out.packing.ranks[r]) a.replicas[r].push_back({b});
  }
  a.notes = out.packing.notes;
  a.notes += fmt::format("{}{} sequences of {}: padding {:.1f}%, DP imbalance {:.3f}",
                         a.notes.empty() ? "" : "; ", out.packing.microbatches.size(),
                         options.capacity_tokens, 100 * out.packing.padding_fraction,
                         out.packing.dp_imbalance);
  return out;
}

StatusOr<BatchPacking> FirstFitRoundRobin(const spec::ModelSpec& model,
                                          const spec::Batch& batch,
                                          PackOptions options,
                                          int llm_module,
                                          const data::WorkloadOptions& workload) {
  options.policy = PackPolicy::kFirstFitRoundRobin;
  return PackBatch(model, batch, options, llm_module, workload);
}

}  // namespace weft::strategy::flowtrain
