// FlowTrain's heterogeneous parallel allocator (strategy/flowtrain/allocator.h): the CBC MILP
// (throughput, then imbalance, then the runner-up) on flowtrain-vlm-6b / 32b / 72b on npu-64gb,
// infovqa data, at 64, 128 and 256 devices; the workload summary of the profile batches and the
// analytical tables are built once outside the timed loop. Exhaustive search is timed beside it
// for the same candidates (the oracle the tests compare against).
//   ./build/default/flowtrain_alloc_benchmark --benchmark_repetitions=5
//   --benchmark_report_aggregates_only=true
// Goal (issue 30): < 50 ms at 256 devices.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "weft/strategy/compare.h"
#include "weft/strategy/flowtrain/allocator.h"

namespace {

namespace ft = weft::strategy::flowtrain;

struct Fixture {
  std::unique_ptr<weft::planning::Planner> planner;
  std::unique_ptr<weft::cost::ThroughputTable> tables;
  ft::Roles roles;
};

const char* kModels[] = {"flowtrain-vlm-6b", "flowtrain-vlm-32b", "flowtrain-vlm-72b"};

Fixture& Get(int model, int gpus) {
  static std::map<std::pair<int, int>, Fixture> fixtures;
  auto it = fixtures.find({model, gpus});
  if (it != fixtures.end()) return it->second;
  auto planner = weft::strategy::MakePlanner(
      weft::planning::JobOptions{.model = kModels[model], .gpus = gpus, .data = "infovqa"},
      "megatron-1f1b");
  if (!planner.ok()) {
    std::fprintf(stderr, "%s\n", planner.status().ToString().c_str());
    std::abort();
  }
  const auto& job = (*planner)->job();
  auto tables = weft::cost::ThroughputTable::Analytical(job.model, *job.cost_model);
  auto roles = ft::FindRoles(job.model);
  if (!tables.ok() || !roles.ok()) std::abort();
  Fixture f{std::move(*planner), std::make_unique<weft::cost::ThroughputTable>(*tables), *roles};
  return fixtures.emplace(std::pair{model, gpus}, std::move(f)).first->second;
}

void Run(benchmark::State& state, bool exhaustive) {
  Fixture& f = Get(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  const auto& job = f.planner->job();
  ft::AllocationResult last;
  for (auto _ : state) {
    auto r = exhaustive ? ft::AllocateExhaustive(job, f.roles, *f.tables)
                        : ft::AllocateMilp(job, f.roles, *f.tables);
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      return;
    }
    last = std::move(*r);
  }
  state.SetLabel(kModels[state.range(0)]);
  state.counters["candidates"] = static_cast<double>(last.candidates);
  state.counters["T_samples_per_s"] = last.throughput_samples_per_s;
  state.counters["gpus_used"] = last.gpus;
}

void BM_FlowTrainAllocateMilp(benchmark::State& state) { Run(state, false); }
void BM_FlowTrainAllocateExhaustive(benchmark::State& state) { Run(state, true); }

BENCHMARK(BM_FlowTrainAllocateMilp)
    ->ArgNames({"model", "gpus"})
    ->ArgsProduct({{0, 1, 2}, {64, 128, 256}})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FlowTrainAllocateExhaustive)
    ->ArgNames({"model", "gpus"})
    ->ArgsProduct({{0, 1, 2}, {64, 256}})
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
