// Benchmarks of weft::algo. The segment-tree best fit (FlowTrain §3.4) is measured against the
// linear-scan best fit on the same streams (both return identical packings).
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <span>
#include <vector>

#include "weft/algo/balance.h"
#include "weft/algo/bucket_balance.h"
#include "weft/algo/live_selection.h"
#include "weft/algo/packing.h"
#include "weft/algo/partition.h"

namespace {

constexpr int64_t kCapacityTokens = 8192;

// Sequence lengths with a long tail: most short, some near the capacity (LLaVA-like).
std::vector<int64_t> SequenceLengths(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> length(6.5, 1.0);
  std::vector<int64_t> sizes(n);
  for (auto& s : sizes) {
    s = std::clamp<int64_t>(static_cast<int64_t>(length(rng)), 16, kCapacityTokens);
  }
  return sizes;
}

void BM_BestFitSegmentTree(benchmark::State& state) {
  const auto sizes = SequenceLengths(static_cast<int>(state.range(0)), 1);
  int bins = 0;
  for (auto _ : state) {
    auto p = weft::algo::BestFit(sizes, kCapacityTokens, {.close_below_residual = 16});
    bins = p->num_bins();
    benchmark::DoNotOptimize(bins);
  }
  state.counters["bins"] = bins;
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_BestFitSegmentTree)->RangeMultiplier(4)->Range(1 << 10, 1 << 16);

void BM_BestFitLinearScan(benchmark::State& state) {
  const auto sizes = SequenceLengths(static_cast<int>(state.range(0)), 1);
  int bins = 0;
  for (auto _ : state) {
    auto p = weft::algo::BestFitLinearScan(sizes, kCapacityTokens, {.close_below_residual = 16});
    bins = p->num_bins();
    benchmark::DoNotOptimize(bins);
  }
  state.counters["bins"] = bins;
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_BestFitLinearScan)->RangeMultiplier(4)->Range(1 << 10, 1 << 16);

void BM_FirstFitDecreasing(benchmark::State& state) {
  const auto sizes = SequenceLengths(static_cast<int>(state.range(0)), 1);
  for (auto _ : state) {
    auto p = weft::algo::FirstFitDecreasing(sizes, kCapacityTokens);
    benchmark::DoNotOptimize(p->num_bins());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_FirstFitDecreasing)->RangeMultiplier(4)->Range(1 << 10, 1 << 16);

// Layers x 16 stages, random per-layer latencies.
void BM_MinMaxContiguousPartition(benchmark::State& state) {
  std::mt19937_64 rng(2);
  std::vector<double> latency_s(state.range(0));
  for (double& x : latency_s) x = std::uniform_real_distribution<double>(0.005, 0.011)(rng);
  for (auto _ : state) {
    auto r = weft::algo::MinMaxContiguousPartition(latency_s, 16);
    benchmark::DoNotOptimize(r->max_part_sum);
  }
}
BENCHMARK(BM_MinMaxContiguousPartition)->RangeMultiplier(4)->Range(64, 4096);

void BM_KarmarkarKarp(benchmark::State& state) {
  std::mt19937_64 rng(3);
  std::vector<double> sizes(state.range(0));
  for (double& x : sizes) x = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  for (auto _ : state) {
    auto r = weft::algo::KarmarkarKarp(sizes, 8);
    benchmark::DoNotOptimize(r->makespan);
  }
}
BENCHMARK(BM_KarmarkarKarp)->RangeMultiplier(8)->Range(64, 1 << 15);


// DIP §5.3 per-rank selection: `n` (F, B) pairs in a 1F1B-like order (a window of 8 pairs live at
// each forward start), 4 candidates each (fastest .. most memory-efficient), budget = 55% of
// the window's fastest bytes. The target is < 10 ms per rank instance.
weft::algo::LiveSelectionProblem RankInstance(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.5, 1.5);
  weft::algo::LiveSelectionProblem p;
  const int window = 8;
  double heavy = 0;
  for (int i = 0; i < n; ++i) {
    const double bytes = 1e9 * u(rng), time = 0.1 * u(rng);
    heavy += bytes;
    p.items.push_back({{time * 0.33, bytes * 0.1}, {time * 0.15, bytes * 0.35},
                       {time * 0.04, bytes * 0.7}, {0.0, bytes}});
  }
  for (int k = 0; k < n; ++k) {
    weft::algo::LiveCheckpoint ck;
    for (int i = std::max(0, k - window + 1); i <= k; ++i) ck.items.push_back(i);
    ck.budget = 0.55 * window * heavy / n;
    p.checkpoints.push_back(std::move(ck));
  }
  return p;
}

void BM_LiveSelection(benchmark::State& state, weft::algo::LiveSelectionMethod method) {
  const auto problem = RankInstance(static_cast<int>(state.range(0)), 3);
  for (auto _ : state) {
    auto r = weft::algo::SolveLiveSelection(problem, {.method = method});
    if (!r.ok() || !r->feasible) state.SkipWithError("selection failed");
    benchmark::DoNotOptimize(r);
  }
  // Quality, outside the timed loop: this method's extra time vs CBC's proven optimum (gap 0,
  // no node limit, 2 s; "exact" only where exact_bound_gap_pct = 0), in percent.
  auto mine = weft::algo::SolveLiveSelection(problem, {.method = method});
  auto exact = weft::algo::SolveLiveSelection(
      problem, {.method = weft::algo::LiveSelectionMethod::kMilp, .relative_gap = 0,
                .time_limit_s = 2, .max_nodes = 0, .lightweight_milp = false});
  if (mine.ok() && exact.ok() && exact->total_cost > 0) {
    state.counters["gap_to_exact_pct"] =
        100 * (mine->total_cost - exact->total_cost) / exact->total_cost;
    state.counters["exact_bound_gap_pct"] =
        100 * (exact->total_cost - exact->lower_bound) / exact->total_cost;
  }
}
BENCHMARK_CAPTURE(BM_LiveSelection, greedy, weft::algo::LiveSelectionMethod::kGreedy)
    ->RangeMultiplier(4)->Range(16, 1024)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_LiveSelection, greedy_then_cbc, weft::algo::LiveSelectionMethod::kMilp)
    ->RangeMultiplier(4)->Range(16, 1024)->Unit(benchmark::kMillisecond);

// DFLOP §3.4 online microbatch scheduling: a global batch of N items into m buckets, each item with
// an encoder time and an LLM time. Mixed batch: 25% text-only (encoder 0), 50% single-image, 17%
// multi-image (2-6 images), 8% video (8-15 frames); text tokens lognormal, 729 tokens per image;
// LLM time linear + quadratic (attention) in tokens. Encoder and LLM totals are of the same order
// (DFLOP's optimizer balances the two stages). Counter gap_to_lb_pct: C_max over the lower bound.
std::vector<weft::algo::TwoResourceItem> MixedMultimodalBatch(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::lognormal_distribution<double> text_tokens(6.0, 0.8);
  std::vector<weft::algo::TwoResourceItem> items(n);
  for (auto& it : items) {
    const double kind = u(rng);
    const double images = kind < 0.25   ? 0
                          : kind < 0.75 ? 1
                          : kind < 0.92 ? std::floor(2 + 5 * u(rng))
                                        : std::floor(8 + 8 * u(rng));
    const double tokens = text_tokens(rng) + 729 * images;
    it.first_s = 0.0022 * images * (0.8 + 0.4 * u(rng));
    it.second_s = 1.5e-6 * tokens + 1e-10 * tokens * tokens;
  }
  return items;
}

using BucketBalanceFn = weft::StatusOr<weft::algo::BucketBalanceResult> (*)(
    std::span<const weft::algo::TwoResourceItem>, const weft::algo::BucketBalanceOptions&);

void BM_BucketBalance(benchmark::State& state, BucketBalanceFn fn) {
  const auto items = MixedMultimodalBatch(static_cast<int>(state.range(0)), 5);
  const weft::algo::BucketBalanceOptions options{.num_buckets = static_cast<int>(state.range(1))};
  for (auto _ : state) {
    auto r = fn(items, options);
    if (!r.ok()) state.SkipWithError(r.status().ToString().c_str());
    benchmark::DoNotOptimize(r);
  }
  // Quality, outside the timed loop (the heuristic is deterministic; the hybrid's MILP is not).
  auto r = fn(items, options);
  if (r.ok()) state.counters["gap_to_lb_pct"] = 100 * r->gap_to_lower_bound;
}
BENCHMARK_CAPTURE(BM_BucketBalance, lpt, &weft::algo::TwoResourceLpt)
    ->Args({2048, 128})->Args({2048, 32})->Args({64, 8})->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_BucketBalance, heuristic, &weft::algo::BalanceBucketsHeuristic)
    ->Args({2048, 128})->Args({2048, 32})->Args({64, 8})->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_BucketBalance, hybrid, &weft::algo::BalanceBuckets)
    ->Args({2048, 128})->Args({2048, 32})->Args({64, 8})->Unit(benchmark::kMicrosecond);

// Few items per bucket, no dominating item (first, second uniform in [0, 1)): the lower bound is
// rarely attained, so the hybrid's MILP (50 ms) has work to do.
void BM_BucketBalanceFewPerBucket(benchmark::State& state, BucketBalanceFn fn) {
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<weft::algo::TwoResourceItem> items(state.range(0));
  for (auto& it : items) it = {u(rng), u(rng)};
  const weft::algo::BucketBalanceOptions options{.num_buckets = static_cast<int>(state.range(1))};
  for (auto _ : state) {
    auto r = fn(items, options);
    if (!r.ok()) state.SkipWithError(r.status().ToString().c_str());
    benchmark::DoNotOptimize(r);
  }
  auto r = fn(items, options);
  if (r.ok()) {
    state.counters["gap_to_lb_pct"] = 100 * r->gap_to_lower_bound;
    state.counters["proven_optimal"] = r->proven_optimal;
  }
}
BENCHMARK_CAPTURE(BM_BucketBalanceFewPerBucket, lpt, &weft::algo::TwoResourceLpt)
    ->Args({24, 6})->Args({40, 10})->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_BucketBalanceFewPerBucket, heuristic, &weft::algo::BalanceBucketsHeuristic)
    ->Args({24, 6})->Args({40, 10})->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_BucketBalanceFewPerBucket, hybrid, &weft::algo::BalanceBuckets)
    ->Args({24, 6})->Args({40, 10})->Unit(benchmark::kMicrosecond);

}  // namespace
