// Planning overhead of `dip` outside its search, per VLM-XL DP replica: graph build, schedule
// decode, the §5.3 memory selection and plan compilation. Uses only the public Planner API, so the
// same file builds against older code for an old-vs-new comparison in the same session
// (docs/strategies_dip.md, "Planning speed").
//
//   build/<dir>/dip_planning_benchmark --benchmark_repetitions=3
//       --benchmark_report_aggregates_only=true   (one command line)
//
// Cases (VLM-XL on 1,024 GPUs: TP 8 × PP <arg> × DP 1024/(8·PP); laion data, seed 1; the
// per-replica numbers do not depend on the DP size, which only multiplies the work):
//  - DipNoSearch/pp:<pp>/threads:<t>: Planner::Plan with a 1 µs budget on t threads: every replica takes dip's hurried path
//    (fast graph + dual-queue / rule decode, the recompute variants, the greedy per-rank
//    selection with its buffer check, no search, no CBC), plus the evaluation of every replica.
//    Counter per_replica_ms = wall time / DP replicas.
//  - BuildStageGraph/<pp>: the no-recompute graph of replica 0.
//  - Compile/<pp>: Planner::Compile of replica 0 of a planned iteration (plan + validation).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "weft/common/allocator.h"
#include "weft/strategy/compare.h"
#include "weft/planning/graph_builder.h"
#include "weft/planning/planner.h"

namespace weft::strategy {
namespace {

constexpr double kNoSearchBudgetS = 1e-6;

std::unique_ptr<Planner> MakeVlmXl(int pipeline_size) {
  KeepFreedMemoryForReuse();  // as the weft CLI runs
  JobOptions job;
  job.model = "vlm-xl";
  job.gpus = 1024;
  job.pipeline_size = pipeline_size;
  job.data = "laion";
  auto planner = strategy::MakePlanner(job, "dip");
  if (!planner.ok()) {
    std::fprintf(stderr, "%s\n", planner.status().ToString().c_str());
    std::abort();
  }
  return std::move(*planner);
}

spec::Batch FirstBatch(const Planner& planner) {
  auto batches = planner.Batches(0, 1);
  if (!batches.ok()) std::abort();
  return (*batches)[0];
}

PlanBudget NoSearch(int threads = 1) {
  PlanBudget budget;
  budget.time_budget_s = kNoSearchBudgetS;
  budget.threads = threads;
  return budget;
}

void BM_DipNoSearch(benchmark::State& state) {
  auto planner = MakeVlmXl(static_cast<int>(state.range(0)));
  const spec::Batch batch = FirstBatch(*planner);
  const int replicas = planner->job().DataParallelSize();
  for (auto _ : state) {
    auto planned = planner->Plan(batch, NoSearch(static_cast<int>(state.range(1))));
    if (!planned.ok()) state.SkipWithError(planned.status().ToString().c_str());
    benchmark::DoNotOptimize(planned);
  }
  state.counters["replicas"] = replicas;
  state.counters["per_replica_ms"] = benchmark::Counter(
      replicas / 1e3, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_DipNoSearch)
    ->ArgNames({"pp", "threads"})
    ->Args({8, 1})
    ->Args({8, 2})
    ->Args({16, 1})
    ->Args({16, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_BuildStageGraph(benchmark::State& state) {
  auto planner = MakeVlmXl(static_cast<int>(state.range(0)));
  const spec::Batch batch = FirstBatch(*planner);
  const Job& job = planner->job();
  auto split = SplitBatch(batch, job.DataParallelSize(), job.parallel.num_microbatches);
  if (!split.ok()) std::abort();
  const StaticPlan& plan = planner->static_plan();
  GraphBuildOptions options;
  options.sub_microbatch_size = plan.sub_microbatch_size;
  for (auto _ : state) {
    auto g = BuildStageGraph(job.model, plan.placement, batch, split->replicas[0],
                             *job.cost_model, job.workload, options);
    if (!g.ok()) state.SkipWithError(g.status().ToString().c_str());
    benchmark::DoNotOptimize(g);
  }
}
BENCHMARK(BM_BuildStageGraph)->Arg(8)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Compile(benchmark::State& state) {
  auto planner = MakeVlmXl(static_cast<int>(state.range(0)));
  const spec::Batch batch = FirstBatch(*planner);
  auto planned = planner->Plan(batch, NoSearch());
  if (!planned.ok()) std::abort();
  for (auto _ : state) {
    auto plan = planner->Compile(*planned, 0);
    if (!plan.ok()) state.SkipWithError(plan.status().ToString().c_str());
    benchmark::DoNotOptimize(plan);
  }
}
BENCHMARK(BM_Compile)->Arg(8)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace weft::strategy
