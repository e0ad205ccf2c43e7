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
//  - PipelineSweep_SimulatorReuse: the sweep with one sim::Simulator reused across calls (its
//    scratch memory stays allocated; a search loop's way to call the simulator).
//  - VlmS16/*: 16 iterations of a VLM-S-sized job (ViT + LLM, PP 4 × TP 4 = 16 GPUs, 16
//    microbatches of 1–3 image sub-microbatches drawn per iteration, 2 LLM segments per rank,
//    interleaved 1F1B; 384–640 stages per iteration): Simulate called 16 times (baseline) vs one
//    16-iteration SimulateWindow over the same graphs (the window must cost less than 16
//    single simulations), and a window whose encoder stages stream into a bounded buffer.
//  - VlmXl16kHeteroDp/*: the same job with encoder DP != LLM DP from a placement file
//    (presets/placements/vlm-xl-16k-hetero-dp.yaml: ViT at TP8·PP2·DP256, GPT at TP8·PP12·DP128),
//    built by the planner from real batches: replicas hold different data, so nothing is folded
//    (one unfolded graph of 2,048 groups); issue 12's target is < 100 ms.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "weft/graph/stage_graph.h"
#include "weft/sched/generators.h"
#include "weft/sim/simulator.h"
#include "weft/planning/planner.h"
#include "weft/sim/window.h"
#include "weft/strategy/compare.h"

namespace weft {
namespace {

using graph::StageGraph;
using graph::StageId;
using spec::Pass;

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

void BM_PipelineSweep_SimulatorReuse(benchmark::State& state) {
  const StageGraph graph =
      Unwrap(sched::BuildPipelineGraph(Shape4096(static_cast<int>(state.range(0)))));
  const sched::Schedule schedule =
      Unwrap(sched::MakeSchedule(sched::ScheduleKind::kInterleavedOneFOneB, graph));
  const spec::ClusterSpec cluster = H100Cluster(32);
  sim::Simulator simulator;
  for (auto _ : state) {
    auto timeline = simulator.Simulate(graph, schedule, cluster);
    Check(timeline.status());
    benchmark::DoNotOptimize(timeline);
  }
  state.counters["stages"] = graph.num_stages();
  state.SetItemsProcessed(state.iterations() * graph.num_stages());
}
BENCHMARK(BM_PipelineSweep_SimulatorReuse)
    ->Arg(16)
    ->Arg(64)
    ->Arg(256)
    ->Arg(512)
    ->Unit(benchmark::kMicrosecond);

// ---- VLM-XL-16k -----------------------------------------------------------------------------

// A ViT feeding an LLM on the same pipeline ranks (TP ranks and DP replicas folded): per
// microbatch the ViT runs `images(mb)` sub-microbatches through one segment on every rank, the
// LLM `llm_segments` segments (interleaved chunks 1..); F then B.
struct VlmShape {
  int pp, tp, dp, microbatches, llm_segments;
  double llm_chunk_fwd_s, vit_stage_fwd_s, llm_chunk_flops, vit_stage_flops;
  int64_t llm_send_bytes, vit_send_bytes, static_bytes, grad_sync_bytes, optimizer_bytes;
  int64_t llm_activation_bytes, vit_activation_bytes;
};

template <typename Images>
StageGraph BuildVlm(const VlmShape& shape, Images images) {
  const int kPp = shape.pp;
  StageGraph g;
  g.SetModuleNames({"vit", "gpt"});
  for (int r = 0; r < kPp; ++r) {
    g.AddGroup({.first_gpu = r * shape.tp,
                .num_gpus = shape.tp,
                .dp = shape.dp,
                .dp_stride_gpus = kPp * shape.tp,
                .static_bytes = shape.static_bytes,
                .grad_sync_bytes = shape.grad_sync_bytes,
                .optimizer_bytes = shape.optimizer_bytes,
                .label = "pp" + std::to_string(r)});
  }
  const int llm_virtual = kPp * shape.llm_segments;
  std::vector<StageId> llm_f(llm_virtual), llm_b(llm_virtual), vit_b(kPp);
  std::vector<std::vector<StageId>> vit_f;
  for (int mb = 0; mb < shape.microbatches; ++mb) {
    const int num_images = images(mb);
    vit_f.assign(num_images, std::vector<StageId>(kPp));
    // LLM chain: chunk 1 + k / P on group k % P.
    for (int k = 0; k < llm_virtual; ++k) {
      llm_f[k] = g.AddStage({.group = k % kPp, .module = 1, .chunk = 1 + k / kPp,
                             .microbatch = mb, .pass = Pass::kForward,
                             .latency_s = shape.llm_chunk_fwd_s, .flops = shape.llm_chunk_flops,
                             .activation_alloc_bytes = shape.llm_activation_bytes});
      if (k > 0) g.AddEdge(llm_f[k - 1], llm_f[k], shape.llm_send_bytes);
    }
    for (int sub = 0; sub < num_images; ++sub) {
      for (int r = 0; r < kPp; ++r) {
        vit_f[sub][r] = g.AddStage({.group = r, .module = 0, .chunk = 0, .microbatch = mb,
                                    .sub_microbatch = sub, .pass = Pass::kForward,
                                    .latency_s = shape.vit_stage_fwd_s,
                                    .flops = shape.vit_stage_flops,
                                    .activation_alloc_bytes = shape.vit_activation_bytes});
        if (r > 0) g.AddEdge(vit_f[sub][r - 1], vit_f[sub][r], shape.vit_send_bytes);
      }
      g.AddEdge(vit_f[sub][kPp - 1], llm_f[0], shape.vit_send_bytes);  // image tokens in
    }
    for (int k = llm_virtual - 1; k >= 0; --k) {
      llm_b[k] = g.AddStage({.group = k % kPp, .module = 1, .chunk = 1 + k / kPp,
                             .microbatch = mb, .pass = Pass::kBackward,
                             .latency_s = 2 * shape.llm_chunk_fwd_s,
                             .flops = 2 * shape.llm_chunk_flops,
                             .activation_free_bytes = shape.llm_activation_bytes});
      g.AddEdge(llm_f[k], llm_b[k]);
      if (k + 1 < llm_virtual) g.AddEdge(llm_b[k + 1], llm_b[k], shape.llm_send_bytes);
    }
    for (int sub = 0; sub < num_images; ++sub) {
      for (int r = kPp - 1; r >= 0; --r) {
        vit_b[r] = g.AddStage({.group = r, .module = 0, .chunk = 0, .microbatch = mb,
                               .sub_microbatch = sub, .pass = Pass::kBackward,
                               .latency_s = 2 * shape.vit_stage_fwd_s,
                               .flops = 2 * shape.vit_stage_flops,
                               .activation_free_bytes = shape.vit_activation_bytes});
        g.AddEdge(vit_f[sub][r], vit_b[r]);
        if (r == kPp - 1) {
          g.AddEdge(llm_b[0], vit_b[r], shape.vit_send_bytes);
        } else {
          g.AddEdge(vit_b[r + 1], vit_b[r], shape.vit_send_bytes);
        }
      }
    }
  }
  Check(g.Finalize());
  return g;
}

StageGraph BuildVlmXl16k() {
  constexpr int kPp = 16, kTp = 8;
  // Per rank, one replica of TP 8 GPUs: GPT-175B (96 layers, h = 12288) on 8k tokens at
  // ~50% of peak ≈ 7.5 ms forward per layer; ViT-22B (48 layers) ≈ 1.3 ms per layer per image
  // sub-microbatch.
  const int64_t params_per_gpu = (175'000'000'000LL + 22'000'000'000LL) / (kPp * kTp);
  const VlmShape shape{.pp = kPp,
                       .tp = kTp,
                       .dp = 128,
                       .microbatches = 64,
                       .llm_segments = 3,
                       .llm_chunk_fwd_s = 2 * 7.5e-3,
                       .vit_stage_fwd_s = 3 * 1.3e-3,
                       .llm_chunk_flops = 2 * 2.97e13,
                       .vit_stage_flops = 3 * 5.1e12,
                       .llm_send_bytes = int64_t{8192} * 12288 * 2 / kTp,
                       .vit_send_bytes = int64_t{4096} * 6144 * 2 / kTp,
                       .static_bytes = params_per_gpu * 18,  // bf16 weights+grads, fp32 Adam
                       .grad_sync_bytes = params_per_gpu * 2,
                       .optimizer_bytes = params_per_gpu * 16 * 2,
                       .llm_activation_bytes = int64_t{1} << 30,
                       .vit_activation_bytes = int64_t{1} << 28};
  return BuildVlm(shape, [](int) { return 2; });
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

// ---- VLM-S: 16 iterations, Simulate × 16 vs one window --------------------------------------

struct VlmSWindow {
  std::vector<StageGraph> graphs;
  std::vector<sched::Schedule> schedules;
  std::vector<sim::WindowIteration> iterations;
  spec::ClusterSpec cluster;
};

// VLM-S (ViT 5B + Llama3 8B, TP 4 PP 4 on 16 H800-class GPUs, dp 1): 16 microbatches per
// iteration, each with 1–3 images drawn from a fixed seed, so every iteration has its own graph.
const VlmSWindow& VlmS16() {
  static const VlmSWindow window = [] {
    constexpr int kPp = 4, kTp = 4, kIterations = 16;
    const int64_t params_per_gpu = 12'400'000'000LL / (kPp * kTp);
    const VlmShape shape{.pp = kPp,
                         .tp = kTp,
                         .dp = 1,
                         .microbatches = 16,
                         .llm_segments = 2,
                         .llm_chunk_fwd_s = 4 * 1.1e-3,
                         .vit_stage_fwd_s = 10 * 0.45e-3,
                         .llm_chunk_flops = 4 * 1.6e12,
                         .vit_stage_flops = 10 * 0.6e12,
                         .llm_send_bytes = int64_t{8192} * 4096 * 2 / kTp,
                         .vit_send_bytes = int64_t{2048} * 1792 * 2 / kTp,
                         .static_bytes = params_per_gpu * 18,
                         .grad_sync_bytes = params_per_gpu * 2,
                         .optimizer_bytes = params_per_gpu * 16 * 2,
                         .llm_activation_bytes = int64_t{3} << 30,
                         .vit_activation_bytes = int64_t{1} << 29};
    VlmSWindow w;
    w.cluster = H100Cluster(2);
    std::mt19937 rng(16);
    for (int k = 0; k < kIterations; ++k) {
      w.graphs.push_back(BuildVlm(shape, [&](int) { return 1 + static_cast<int>(rng() % 3); }));
    }
    for (const StageGraph& g : w.graphs) {
      w.schedules.push_back(
          Unwrap(sched::MakeSchedule(sched::ScheduleKind::kInterleavedOneFOneB, g)));
    }
    for (int k = 0; k < kIterations; ++k) {
      w.iterations.push_back({.graph = &w.graphs[k], .schedule = &w.schedules[k],
                              .samples = 16, .tokens = 16 * 8192});
    }
    return w;
  }();
  return window;
}

int WindowStages(const VlmSWindow& w) {
  int stages = 0;
  for (const StageGraph& g : w.graphs) stages += g.num_stages();
  return stages;
}

// The baseline keeps its 16 timelines, as the window does.
void BM_VlmS16_Simulate16Times(benchmark::State& state) {
  const VlmSWindow& w = VlmS16();
  for (auto _ : state) {
    std::vector<sim::Timeline> timelines;
    timelines.reserve(w.iterations.size());
    for (const sim::WindowIteration& it : w.iterations) {
      auto timeline = sim::Simulate(*it.graph, *it.schedule, w.cluster);
      Check(timeline.status());
      timelines.push_back(*std::move(timeline));
    }
    benchmark::DoNotOptimize(timelines);
  }
  state.counters["stages"] = WindowStages(w);
  state.SetItemsProcessed(state.iterations() * WindowStages(w));
}
BENCHMARK(BM_VlmS16_Simulate16Times)->Unit(benchmark::kMicrosecond);

void BM_VlmS16_Window(benchmark::State& state) {
  const VlmSWindow& w = VlmS16();
  double steady_s = 0;
  for (auto _ : state) {
    auto window = sim::SimulateWindow(w.iterations, w.cluster, {.warmup_iterations = 2});
    Check(window.status());
    steady_s = window->steady.iteration_time_s;
    benchmark::DoNotOptimize(window);
  }
  state.counters["stages"] = WindowStages(w);
  state.counters["steady_iteration_ms"] = steady_s * 1e3;
  state.SetItemsProcessed(state.iterations() * WindowStages(w));
}
BENCHMARK(BM_VlmS16_Window)->Unit(benchmark::kMicrosecond);

// Search-loop settings (no transfer lists or memory curves), both ways.
constexpr sim::SimOptions kSearchOptions{.record_transfers = false,
                                         .record_memory_curves = false};

void BM_VlmS16_Simulate16TimesNoRecording(benchmark::State& state) {
  const VlmSWindow& w = VlmS16();
  for (auto _ : state) {
    std::vector<sim::Timeline> timelines;
    timelines.reserve(w.iterations.size());
    for (const sim::WindowIteration& it : w.iterations) {
      auto timeline = sim::Simulate(*it.graph, *it.schedule, w.cluster, kSearchOptions);
      Check(timeline.status());
      timelines.push_back(*std::move(timeline));
    }
    benchmark::DoNotOptimize(timelines);
  }
  state.SetItemsProcessed(state.iterations() * WindowStages(w));
}
BENCHMARK(BM_VlmS16_Simulate16TimesNoRecording)->Unit(benchmark::kMicrosecond);

void BM_VlmS16_WindowNoRecording(benchmark::State& state) {
  const VlmSWindow& w = VlmS16();
  for (auto _ : state) {
    auto window = sim::SimulateWindow(w.iterations, w.cluster,
                                      {.sim = kSearchOptions, .warmup_iterations = 2});
    Check(window.status());
    benchmark::DoNotOptimize(window);
  }
  state.SetItemsProcessed(state.iterations() * WindowStages(w));
}
BENCHMARK(BM_VlmS16_WindowNoRecording)->Unit(benchmark::kMicrosecond);

// The same window with the encoder's last forward of every image putting its tokens into a
// pool of 8 images that the LLM's first forward of the microbatch gets from (FlowTrain-style).
void BM_VlmS16_WindowWithBuffer(benchmark::State& state) {
  const VlmSWindow& w = VlmS16();
  std::vector<sim::WindowIteration> iterations = w.iterations;
  constexpr int64_t kImageBytes = 2048 * 1792 * 2;
  for (sim::WindowIteration& it : iterations) {
    const StageGraph& g = *it.graph;
    std::vector<int> images(16, 0);
    for (StageId s = 0; s < g.num_stages(); ++s) {
      const graph::Stage& st = g.stage(s);
      if (st.module == 0 && st.pass == Pass::kForward && st.group == g.num_groups() - 1) {
        it.buffer_uses.push_back({.stage = s, .buffer = 0, .action = sim::BufferAction::kPut,
                                  .bytes = kImageBytes});
        ++images[st.microbatch];
      }
    }
    for (StageId s = 0; s < g.num_stages(); ++s) {
      const graph::Stage& st = g.stage(s);
      if (st.module == 1 && st.pass == Pass::kForward && st.group == 0 && st.chunk == 1) {
        it.buffer_uses.push_back({.stage = s, .buffer = 0, .action = sim::BufferAction::kGet,
                                  .bytes = images[st.microbatch] * kImageBytes});
      }
    }
  }
  const sim::WindowOptions options{.buffers = {{.name = "image-tokens",
                                                .capacity_bytes = 8 * kImageBytes}},
                                   .warmup_iterations = 2};
  double stall_s = 0;
  for (auto _ : state) {
    auto window = sim::SimulateWindow(iterations, w.cluster, options);
    Check(window.status());
    stall_s = window->buffers[0].producer_stall_s;
    benchmark::DoNotOptimize(window);
  }
  state.counters["stages"] = WindowStages(w);
  state.counters["producer_stall_ms"] = stall_s * 1e3;
  state.SetItemsProcessed(state.iterations() * WindowStages(w));
}
BENCHMARK(BM_VlmS16_WindowWithBuffer)->Unit(benchmark::kMicrosecond);

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
