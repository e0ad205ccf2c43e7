// Benchmarks of weft::cp (Cornstarch §4.3.2: "distributing 1 million tokens with 128 block size
// can be done within 1 ms"). Targets: LPT of 8,192 blocks to 8 ranks < 1 ms on one core;
// per-block workloads of a 1M-token EE layout with 100 modality segments < 50 ms. The other
// distributions are measured in the same program as baselines.
#include <benchmark/benchmark.h>

#include <vector>

#include "weft/cp/distribution.h"
#include "weft/cp/mask.h"

namespace {

weft::cp::Layout EeLayout(int64_t tokens, int segments) {
  return *weft::cp::MakeLayout(weft::cp::MaskKind::kEe,
                               {.tokens = tokens, .modality_segments = segments, .seed = 1});
}

// Per-block workloads of `range(0)` tokens of an EE layout with 100 modality segments.
void BM_BlockWorkloadsEe100(benchmark::State& state) {
  const weft::cp::Layout layout = EeLayout(state.range(0), 100);
  int64_t blocks = 0;
  for (auto _ : state) {
    auto w = weft::cp::ComputeBlockWorkloads(layout);
    blocks = w->Blocks();
    benchmark::DoNotOptimize(w->key_blocks.data());
  }
  state.counters["blocks"] = static_cast<double>(blocks);
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_BlockWorkloadsEe100)->Unit(benchmark::kMillisecond)
    ->Arg(1 << 16)->Arg(1 << 18)->Arg(1 << 20);

// Distribution of the blocks of a 1M-token EE layout (8,192 blocks) to 8 ranks.
template <weft::cp::Method kMethod>
void BM_Distribute(benchmark::State& state) {
  const weft::cp::Layout layout = EeLayout(state.range(0), 100);
  const auto w = *weft::cp::ComputeBlockWorkloads(layout);
  double imbalance = 0;
  for (auto _ : state) {
    auto d = weft::cp::Distribute(w.key_blocks, {.ranks = 8, .method = kMethod, .seed = 1});
    imbalance = d->Imbalance();
    benchmark::DoNotOptimize(d->rank_of_block.data());
  }
  state.counters["blocks"] = static_cast<double>(w.Blocks());
  state.counters["imbalance"] = imbalance;
}
BENCHMARK(BM_Distribute<weft::cp::Method::kLpt>)->Unit(benchmark::kMicrosecond)
    ->Arg(1 << 17)->Arg(1 << 20);
BENCHMARK(BM_Distribute<weft::cp::Method::kZigzag>)->Unit(benchmark::kMicrosecond)->Arg(1 << 20);
BENCHMARK(BM_Distribute<weft::cp::Method::kRing>)->Unit(benchmark::kMicrosecond)->Arg(1 << 20);
BENCHMARK(BM_Distribute<weft::cp::Method::kRandom>)->Unit(benchmark::kMicrosecond)->Arg(1 << 20);

}  // namespace
