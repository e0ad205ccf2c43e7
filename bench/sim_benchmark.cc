// Speed of the event simulator, with graph building and schedule generation measured in the same
// program as baselines (the simulator should cost about as much as building the graph it reads).
//
//   build/<dir>/sim_benchmark --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// Cases:
//  - Pipeline4096/*: PP 8, 64 microbatches, 4 segments (chunks) per flow, F+B = 4,096 stages,
//    interleaved 1F1B; target < 1 ms to simulate on one core.
//  - PipelineSweep: the same shape with 16 … 512 microbatches (1k … 32k stages).
//  - VlmXl16k/*: one iteration of VLM-XL-16k (ViT 22B + GPT 175B; DP 128 × PP 16 × TP 8 =
//    16,384 GPUs): TP ranks and the 128 identical DP replicas are folded, leaving 16 groups of
//    8 GPUs with dp = 128; per microbatch the ViT runs 2 image sub-microbatches through one
//    segment (3 layers per rank) and the LLM 3 segments (2 layers per chunk); 64 microbatches →
//    10,240 stages; interleaved 1F1B with DP all-reduce and optimizer step; target < 100 ms.
//  - VlmXl16kHeteroDp/*: the same job with encoder DP != LLM DP from a placement file
//    (presets/placements/vlm-xl-16k-hetero-dp.yaml: ViT at TP8·DP256, GPT at TP8·PP14·DP128),
//    built by the planner from real batches: replicas hold different data, so nothing is folded
//    (one unfolded graph of 2,048 groups); issue 12's target is < 100 ms.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>

#include "weft/graph/stage_graph.h"
#include "weft/sched/generators.h"
#include "weft/sim/simulator.h"
#include "weft/planning/planner.h"
#include "weft/strategy/compare.h"

namespace weft {
namespace {

using graph::Pass;
using graph::StageGraph;
using graph::StageId;

spec::ClusterSpec H100Cluster(int num_nodes) {
  spec::ClusterSpec c;
  c.name = "h100-bench";
  c.num_nodes = num_nodes;
  c.gpus_per_node = 8;
  c.gpu = {.name = "H100-SXM",
           .peak_bf16_flops_per_s = 989e12,
           .hbm_bandwidth_bytes_per_s = 3.35e12,
           .memory_capacity_bytes = int64_t{80} << 30};
  c.intra_node = {.bandwidth_bytes_per_s = 450e9, .latency_s = 5e-6};
  c.inter_node = {.bandwidth_bytes_per_s = 50e9, .latency_s = 1e-5};
  return c;
}

sched::PipelineShape Shape4096(int num_microbatches) {
  sched::VirtualStageCost cost{.forward_s = 2e-3,
                               .backward_input_s = 2e-3,
                               .backward_weight_s = 2e-3,
                               .forward_flops = 1e12,
                               .activation_bytes = int64_t{1} << 28,
                               .send_bytes = 16 << 20};
  return {.num_groups = 8,
          .chunks_per_group = 4,
          .num_microbatches = num_microbatches,
          .costs = {cost},
          .gpus_per_group = 8,
          .dp = 4,
          .static_bytes_per_group = int64_t{20} << 30,
          .grad_sync_bytes_per_group = int64_t{1} << 30,
          .optimizer_bytes_per_group = int64_t{8} << 30};
}

void Check(const Status& status) {
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    std::abort();
  }
}

template <typename T>
T Unwrap(StatusOr<T> value) {
  Check(value.status());
  return *std::move(value);
}

// ---- PP 8 × v 4 × 64 microbatches -----------------------------------------------------------

void BM_Pipeline4096_BuildGraph(benchmark::State& state) {
  const auto shape = Shape4096(64);
  for (auto _ : state) {
    auto graph = sched::BuildPipelineGraph(shape);
    benchmark::DoNotOptimize(graph);
  }
  state.counters["stages"] = Unwrap(sched::BuildPipelineGraph(shape)).num_stages();
}
BENCHMARK(BM_Pipeline4096_BuildGraph)->Unit(benchmark::kMicrosecond);

void BM_Pipeline4096_MakeSchedule(benchmark::State& state) {
  const StageGraph graph = Unwrap(sched::BuildPipelineGraph(Shape4096(64)));
  for (auto _ : state) {
    auto schedule = sched::MakeSchedule(sched::ScheduleKind::kInterleavedOneFOneB, graph);
    benchmark::DoNotOptimize(schedule);
  }
}
BENCHMARK(BM_Pipeline4096_MakeSchedule)->Unit(benchmark::kMicrosecond);

void SimulatePipeline(benchmark::State& state, int num_microbatches, bool record) {
  const StageGraph graph = Unwrap(sched::BuildPipelineGraph(Shape4096(num_microbatches)));
  const sched::Schedule schedule =
      Unwrap(sched::MakeSchedule(sched::ScheduleKind::kInterleavedOneFOneB, graph));
  const spec::ClusterSpec cluster = H100Cluster(32);
  const sim::SimOptions options{.record_transfers = record, .record_memory_curves = record};
  double iteration_s = 0;
  for (auto _ : state) {
    auto timeline = sim::Simulate(graph, schedule, cluster, options);
    Check(timeline.status());
    iteration_s = timeline->iteration_time_s;
    benchmark::DoNotOptimize(timeline);
  }
  state.counters["stages"] = graph.num_stages();
  state.counters["sim_iteration_ms"] = iteration_s * 1e3;
  state.SetItemsProcessed(state.iterations() * graph.num_stages());
}

void BM_Pipeline4096_Simulate(benchmark::State& state) { SimulatePipeline(state, 64, true); }
BENCHMARK(BM_Pipeline4096_Simulate)->Unit(benchmark::kMicrosecond);

void BM_Pipeline4096_SimulateNoRecording(benchmark::State& state) {
  SimulatePipeline(state, 64, false);
}
BENCHMARK(BM_Pipeline4096_SimulateNoRecording)->Unit(benchmark::kMicrosecond);

void BM_PipelineSweep_Simulate(benchmark::State& state) {
  SimulatePipeline(state, static_cast<int>(state.range(0)), true);
}
BENCHMARK(BM_PipelineSweep_Simulate)
    ->Arg(16)
    ->Arg(64)
    ->Arg(256)
    ->Arg(512)
    ->Unit(benchmark::kMicrosecond);

// ---- VLM-XL-16k -----------------------------------------------------------------------------

StageGraph BuildVlmXl16k() {
  constexpr int kPp = 16, kTp = 8, kDp = 128, kMicrobatches = 64, kLlmSegments = 3,
                kImageSubMicrobatches = 2;
  // Per rank, one replica of TP 8 GPUs: GPT-175B (96 layers, h = 12288) on 8k tokens at
  // ~50% of peak ≈ 7.5 ms forward per layer; ViT-22B (48 layers) ≈ 1.3 ms per layer per image
  // sub-microbatch.
  constexpr double kLlmChunkFwdS = 2 * 7.5e-3, kVitStageFwdS = 3 * 1.3e-3;
  constexpr double kLlmChunkFlops = 2 * 2.97e13, kVitStageFlops = 3 * 5.1e12;
  constexpr int64_t kLlmSendBytes = int64_t{8192} * 12288 * 2 / kTp;
  constexpr int64_t kVitSendBytes = int64_t{4096} * 6144 * 2 / kTp;
  StageGraph g;
  g.SetModuleNames({"vit", "gpt"});
  const int64_t params_per_gpu = (175'000'000'000LL + 22'000'000'000LL) / (kPp * kTp);
  for (int r = 0; r < kPp; ++r) {
    g.AddGroup({.first_gpu = r * kTp,
                .num_gpus = kTp,
                .dp = kDp,
                .dp_stride_gpus = kPp * kTp,
                .static_bytes = params_per_gpu * 18,  // bf16 weights+grads, fp32 master+Adam
                .grad_sync_bytes = params_per_gpu * 2,
                .optimizer_bytes = params_per_gpu * 16 * 2,
                .label = "pp" + std::to_string(r)});
  }
  const int llm_virtual = kPp * kLlmSegments;
  std::vector<StageId> llm_f(llm_virtual), llm_b(llm_virtual), vit_b(kPp);
  std::vector<std::vector<StageId>> vit_f(kImageSubMicrobatches, std::vector<StageId>(kPp));
  for (int mb = 0; mb < kMicrobatches; ++mb) {
    // LLM chain: chunk 1 + k / P on group k % P.
    for (int k = 0; k < llm_virtual; ++k) {
      llm_f[k] = g.AddStage({.group = k % kPp, .module = 1, .chunk = 1 + k / kPp,
                             .microbatch = mb, .pass = Pass::kForward,
                             .latency_s = kLlmChunkFwdS, .flops = kLlmChunkFlops,
                             .activation_alloc_bytes = int64_t{1} << 30});
      if (k > 0) g.AddEdge(llm_f[k - 1], llm_f[k], kLlmSendBytes);
    }
    for (int sub = 0; sub < kImageSubMicrobatches; ++sub) {
      for (int r = 0; r < kPp; ++r) {
        vit_f[sub][r] = g.AddStage({.group = r, .module = 0, .chunk = 0, .microbatch = mb,
                               .sub_microbatch = sub, .pass = Pass::kForward,
                               .latency_s = kVitStageFwdS, .flops = kVitStageFlops,
                               .activation_alloc_bytes = int64_t{1} << 28});
        if (r > 0) g.AddEdge(vit_f[sub][r - 1], vit_f[sub][r], kVitSendBytes);
      }
      g.AddEdge(vit_f[sub][kPp - 1], llm_f[0], kVitSendBytes);  // image tokens into the LLM
    }
    for (int k = llm_virtual - 1; k >= 0; --k) {
      llm_b[k] = g.AddStage({.group = k % kPp, .module = 1, .chunk = 1 + k / kPp,
                             .microbatch = mb, .pass = Pass::kBackward,
                             .latency_s = 2 * kLlmChunkFwdS, .flops = 2 * kLlmChunkFlops,
                             .activation_free_bytes = int64_t{1} << 30});
      g.AddEdge(llm_f[k], llm_b[k]);
      if (k + 1 < llm_virtual) g.AddEdge(llm_b[k + 1], llm_b[k], kLlmSendBytes);
    }
    for (int sub = 0; sub < kImageSubMicrobatches; ++sub) {
      for (int r = kPp - 1; r >= 0; --r) {
        vit_b[r] = g.AddStage({.group = r, .module = 0, .chunk = 0, .microbatch = mb,
                               .sub_microbatch = sub, .pass = Pass::kBackward,
                               .latency_s = 2 * kVitStageFwdS, .flops = 2 * kVitStageFlops,
                               .activation_free_bytes = int64_t{1} << 28});
        g.AddEdge(vit_f[sub][r], vit_b[r]);
        if (r == kPp - 1) {
          g.AddEdge(llm_b[0], vit_b[r], kVitSendBytes);
        } else {
          g.AddEdge(vit_b[r + 1], vit_b[r], kVitSendBytes);
        }
      }
    }
  }
  Check(g.Finalize());
  return g;
}

void BM_VlmXl16k_BuildGraph(benchmark::State& state) {
  for (auto _ : state) {
    StageGraph g = BuildVlmXl16k();
    benchmark::DoNotOptimize(g);
  }
}
BENCHMARK(BM_VlmXl16k_BuildGraph)->Unit(benchmark::kMillisecond);

void BM_VlmXl16k_Simulate(benchmark::State& state) {
  const StageGraph graph = BuildVlmXl16k();
  const sched::Schedule schedule =
      Unwrap(sched::MakeSchedule(sched::ScheduleKind::kInterleavedOneFOneB, graph));
  const spec::ClusterSpec cluster = H100Cluster(2048);
  sim::Timeline last;
  for (auto _ : state) {
    auto timeline = sim::Simulate(graph, schedule, cluster);
    Check(timeline.status());
    benchmark::DoNotOptimize(timeline);
    last = *std::move(timeline);
  }
  state.counters["stages"] = graph.num_stages();
  state.counters["gpus"] = last.num_gpus;
  state.counters["sim_iteration_s"] = last.iteration_time_s;
  state.counters["mfu"] = last.mfu;
  state.counters["bubble"] = last.bubble_ratio;
}
BENCHMARK(BM_VlmXl16k_Simulate)->Unit(benchmark::kMillisecond);

// ---- VLM-XL-16k with encoder DP != LLM DP (a user placement, unfolded) -------------------------

struct PlannedGraph {
  graph::StageGraph graph;
  sched::Schedule schedule;
  spec::ClusterSpec cluster;
};

const PlannedGraph& HeteroDpGraph() {
  static const PlannedGraph planned = [] {
    auto planner = strategy::MakePlanner(
        planning::JobOptions{.model = "vlm-xl",
                             .gpus = 16384,
                             .pipeline_size = 16,
                             .placement = std::string(WEFT_SOURCE_DIR) +
                                          "/presets/placements/vlm-xl-16k-hetero-dp.yaml"},
        "manual");
    Check(planner.status());
    auto batches = (*planner)->Batches(0, 1);
    Check(batches.status());
    auto plan = (*planner)->strategy().PlanBatch((*planner)->job(),
                                                     (*planner)->static_plan(), batches->front());
    Check(plan.status());
    return PlannedGraph{std::move(plan->replicas[0].graph), std::move(plan->replicas[0].schedule),
                        (*planner)->job().cluster};
  }();
  return planned;
}

void BM_VlmXl16kHeteroDp_Simulate(benchmark::State& state) {
  const PlannedGraph& p = HeteroDpGraph();
  sim::Timeline last;
  for (auto _ : state) {
    auto timeline = sim::Simulate(p.graph, p.schedule, p.cluster);
    Check(timeline.status());
    benchmark::DoNotOptimize(timeline);
    last = *std::move(timeline);
  }
  state.counters["stages"] = p.graph.num_stages();
  state.counters["groups"] = p.graph.num_groups();
  state.counters["gpus"] = last.num_gpus;
  state.counters["sim_iteration_s"] = last.iteration_time_s;
}
BENCHMARK(BM_VlmXl16kHeteroDp_Simulate)->Unit(benchmark::kMillisecond);

void BM_VlmXl16kHeteroDp_SimulateSearchOptions(benchmark::State& state) {
  const PlannedGraph& p = HeteroDpGraph();
  const sim::SimOptions options{.record_transfers = false, .record_memory_curves = false,
                                .validate_schedule = false};
  for (auto _ : state) {
    auto timeline = sim::Simulate(p.graph, p.schedule, p.cluster, options);
    Check(timeline.status());
    benchmark::DoNotOptimize(timeline);
  }
  state.counters["stages"] = p.graph.num_stages();
}
BENCHMARK(BM_VlmXl16kHeteroDp_SimulateSearchOptions)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace weft
