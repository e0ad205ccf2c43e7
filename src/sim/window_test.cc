#include "weft/sim/window.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "weft/sched/generators.h"

namespace weft::sim {
namespace {

using graph::StageGraph;
using graph::StageId;
using sched::ScheduleKind;
using spec::Pass;
using ::testing::HasSubstr;

constexpr int64_t kGiB = int64_t{1} << 30;

spec::ClusterSpec TestCluster(double link_latency_s = 0) {
  spec::ClusterSpec c;
  c.name = "test";
  c.num_nodes = 4;
  c.gpus_per_node = 8;
  c.gpu.peak_bf16_flops_per_s = 1e15;
  c.gpu.hbm_bandwidth_bytes_per_s = 2e12;
  c.gpu.memory_capacity_bytes = 80 * kGiB;
  c.intra_node = {.bandwidth_bytes_per_s = 200e9, .latency_s = link_latency_s};
  c.inter_node = {.bandwidth_bytes_per_s = 25e9, .latency_s = link_latency_s};
  c.efficiency = {.compute = 1, .memory = 1, .network = 1};
  c.host_link_bandwidth_bytes_per_s = 50e9;
  c.host_bandwidth_bytes_per_s_per_node = 100e9;
  c.host_memory_bytes_per_node = 64 * kGiB;
  return c;
}

// Every field of two timelines, doubles compared exactly.
void ExpectSameTimeline(const Timeline& a, const Timeline& b, const std::string& what) {
  ASSERT_EQ(a.stages.size(), b.stages.size()) << what;
  for (size_t s = 0; s < a.stages.size(); ++s) {
    EXPECT_EQ(a.stages[s].start_s, b.stages[s].start_s) << what << " stage " << s;
    EXPECT_EQ(a.stages[s].end_s, b.stages[s].end_s) << what << " stage " << s;
  }
  ASSERT_EQ(a.transfers.size(), b.transfers.size()) << what;
  for (size_t i = 0; i < a.transfers.size(); ++i) {
    const Transfer &x = a.transfers[i], &y = b.transfers[i];
    EXPECT_EQ(x.edge, y.edge) << what;
    EXPECT_EQ(x.from, y.from) << what;
    EXPECT_EQ(x.to, y.to) << what;
    EXPECT_EQ(x.src_group, y.src_group) << what;
    EXPECT_EQ(x.dst_group, y.dst_group) << what;
    EXPECT_EQ(x.start_s, y.start_s) << what;
    EXPECT_EQ(x.end_s, y.end_s) << what;
    EXPECT_EQ(x.bytes, y.bytes) << what;
    EXPECT_EQ(x.link, y.link) << what;
  }
  ASSERT_EQ(a.groups.size(), b.groups.size()) << what;
  for (size_t g = 0; g < a.groups.size(); ++g) {
    const GroupTimeline &x = a.groups[g], &y = b.groups[g];
    const std::string where = fmt::format("{} group {}", what, g);
    EXPECT_EQ(x.busy_s, y.busy_s) << where;
    EXPECT_EQ(x.first_start_s, y.first_start_s) << where;
    EXPECT_EQ(x.last_end_s, y.last_end_s) << where;
    EXPECT_EQ(x.grad_sync_start_s, y.grad_sync_start_s) << where;
    EXPECT_EQ(x.grad_sync_s, y.grad_sync_s) << where;
    EXPECT_EQ(x.optimizer_s, y.optimizer_s) << where;
    EXPECT_EQ(x.end_s, y.end_s) << where;
    EXPECT_EQ(x.static_bytes, y.static_bytes) << where;
    EXPECT_EQ(x.peak_bytes, y.peak_bytes) << where;
    EXPECT_EQ(x.peak_buffer_bytes, y.peak_buffer_bytes) << where;
    EXPECT_EQ(x.offload_bytes, y.offload_bytes) << where;
    EXPECT_EQ(x.offload_wait_s, y.offload_wait_s) << where;
    ASSERT_EQ(x.memory.size(), y.memory.size()) << where;
    for (size_t i = 0; i < x.memory.size(); ++i) {
      EXPECT_EQ(x.memory[i].time_s, y.memory[i].time_s) << where;
      EXPECT_EQ(x.memory[i].bytes, y.memory[i].bytes) << where;
    }
  }
  EXPECT_EQ(a.iteration_time_s, b.iteration_time_s) << what;
  EXPECT_EQ(a.pipeline_span_s, b.pipeline_span_s) << what;
  EXPECT_EQ(a.bubble_ratio, b.bubble_ratio) << what;
  EXPECT_EQ(a.busiest_group_work_s, b.busiest_group_work_s) << what;
  EXPECT_EQ(a.critical_path_s, b.critical_path_s) << what;
  EXPECT_EQ(a.lower_bound_s, b.lower_bound_s) << what;
  EXPECT_EQ(a.model_flops, b.model_flops) << what;
  EXPECT_EQ(a.num_gpus, b.num_gpus) << what;
  EXPECT_EQ(a.peak_flops_per_s, b.peak_flops_per_s) << what;
  EXPECT_EQ(a.mfu, b.mfu) << what;
  EXPECT_EQ(a.samples_per_iteration, b.samples_per_iteration) << what;
  EXPECT_EQ(a.tokens_per_iteration, b.tokens_per_iteration) << what;
  EXPECT_EQ(a.samples_per_s, b.samples_per_s) << what;
  EXPECT_EQ(a.tokens_per_s, b.tokens_per_s) << what;
  EXPECT_EQ(a.capacity_bytes, b.capacity_bytes) << what;
  EXPECT_EQ(a.host_peak_bytes_per_node, b.host_peak_bytes_per_node) << what;
  EXPECT_EQ(a.host_capacity_bytes_per_node, b.host_capacity_bytes_per_node) << what;
  EXPECT_EQ(a.offload_wait_s, b.offload_wait_s) << what;
  ASSERT_EQ(a.oom.size(), b.oom.size()) << what;
  for (size_t i = 0; i < a.oom.size(); ++i) {
    EXPECT_EQ(a.oom[i].group, b.oom[i].group) << what;
    EXPECT_EQ(a.oom[i].peak_bytes, b.oom[i].peak_bytes) << what;
    EXPECT_EQ(a.oom[i].capacity_bytes, b.oom[i].capacity_bytes) << what;
    EXPECT_EQ(a.oom[i].host_node, b.oom[i].host_node) << what;
  }
  EXPECT_EQ(a.BriefReport(), b.BriefReport()) << what;
}

struct Case {
  std::string name;
  StageGraph graph;
  sched::Schedule schedule;
};

sched::PipelineShape Shape(int p, int v, int m, bool split) {
  sched::VirtualStageCost cost{.forward_s = 1e-3,
                               .backward_input_s = 1.5e-3,
                               .backward_weight_s = 0.7e-3,
                               .forward_flops = 1e12,
                               .activation_bytes = kGiB / 4,
                               .weight_grad_activation_bytes = kGiB / 8,
                               .send_bytes = 30'000'001};
  return {.num_groups = p,
          .chunks_per_group = v,
          .num_microbatches = m,
          .split_backward = split,
          .costs = {cost},
          .gpus_per_group = 4,
          .dp = 2,
          .static_bytes_per_group = 10 * kGiB,
          .grad_sync_bytes_per_group = kGiB / 2,
          .optimizer_bytes_per_group = 4 * kGiB};
}

// The generated pipelines under every rule, random DAGs with random orders (fan-in, offload,
// grad sync sets), and an offloading group.
std::vector<Case> TestCases() {
  std::vector<Case> cases;
  const std::vector<std::tuple<int, int, int, bool, ScheduleKind>> pipelines = {
      {4, 1, 8, false, ScheduleKind::kOneFOneB},
      {4, 1, 8, false, ScheduleKind::kGPipe},
      {4, 2, 8, false, ScheduleKind::kInterleavedOneFOneB},
      {4, 1, 8, true, ScheduleKind::kZeroBubbleH1},
      {8, 4, 16, false, ScheduleKind::kInterleavedOneFOneB},
      {1, 1, 3, false, ScheduleKind::kOneFOneB}};
  for (const auto& [p, v, m, split, kind] : pipelines) {
    auto g = sched::BuildPipelineGraph(Shape(p, v, m, split));
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    auto s = sched::MakeSchedule(kind, *g);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    cases.push_back({fmt::format("{} p={} v={} m={}", sched::ScheduleKindName(kind), p, v, m),
                     *std::move(g), *std::move(s)});
  }
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(seed);
    auto u = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    Case c{fmt::format("random {}", seed), {}, {}};
    const int num_groups = u(2, 5), n = u(2, 40);
    const bool sets = u(0, 1) == 1;
    for (int i = 0; i < num_groups; ++i) {
      c.graph.AddGroup({.first_gpu = u(0, 24), .num_gpus = u(1, 4), .dp = sets ? 1 : u(1, 3),
                        .static_bytes = int64_t{u(0, 3)} << 28,
                        .grad_sync_bytes = u(0, 3) * 10'000'000,
                        .optimizer_bytes = u(0, 2) * 1'000'000'000});
    }
    if (sets) c.graph.AddGradSync({.module = 0, .groups = {0, 1}, .bytes = 300'000'000});
    for (int i = 0; i < n; ++i) {
      c.graph.AddStage({.group = u(0, num_groups - 1), .microbatch = i,
                        .pass = u(0, 1) ? Pass::kForward : Pass::kBackward,
                        .latency_s = u(0, 100) * 1e-4, .flops = 1e12,
                        .activation_alloc_bytes = int64_t{u(0, 3)} << 27,
                        .activation_free_bytes = int64_t{u(0, 2)} << 26,
                        .offload_bytes = u(0, 5) == 0 ? int64_t{u(1, 4)} << 30 : 0});
    }
    for (int j = 1; j < n; ++j) {
      for (int e = u(0, 3); e > 0; --e) c.graph.AddEdge(u(0, j - 1), j, int64_t{u(0, 50)} << 20);
    }
    EXPECT_TRUE(c.graph.Finalize().ok());
    // A random linear extension: repeatedly a random ready stage.
    std::vector<int> indegree(n);
    for (int s = 0; s < n; ++s) indegree[s] = static_cast<int>(c.graph.in_edges(s).size());
    std::vector<StageId> ready;
    for (int s = 0; s < n; ++s) {
      if (indegree[s] == 0) ready.push_back(s);
    }
    c.schedule.order.resize(num_groups);
    while (!ready.empty()) {
      const int pick = u(0, static_cast<int>(ready.size()) - 1);
      const StageId s = ready[pick];
      ready.erase(ready.begin() + pick);
      c.schedule.order[c.graph.stage(s).group].push_back(s);
      for (auto e : c.graph.out_edges(s)) {
        if (--indegree[c.graph.edge(e).to] == 0) ready.push_back(c.graph.edge(e).to);
      }
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

TEST(SimulateWindow, OneIterationWithoutBuffersIsSimulate) {
  const spec::ClusterSpec cluster = TestCluster(1e-5);
  const std::vector<SimOptions> options = {
      {},
      {.record_transfers = false, .record_memory_curves = false, .validate_schedule = false},
      {.include_grad_sync = false, .capacity_bytes = 11 * kGiB, .buffer_element_bytes = 3}};
  Simulator reused;
  for (const Case& c : TestCases()) {
    for (size_t o = 0; o < options.size(); ++o) {
      SimOptions sim = options[o];
      sim.samples_per_iteration = 8;
      sim.tokens_per_iteration = 8192;
      const std::string what = fmt::format("{} options {}", c.name, o);
      auto single = Simulate(c.graph, c.schedule, cluster, sim);
      ASSERT_TRUE(single.ok()) << what << ": " << single.status().ToString();
      const WindowIteration it{.graph = &c.graph, .schedule = &c.schedule, .samples = 8,
                               .tokens = 8192};
      auto window = SimulateWindow({&it, 1}, cluster, {.sim = sim});
      ASSERT_TRUE(window.ok()) << what << ": " << window.status().ToString();
      ASSERT_EQ(window->iterations.size(), 1u);
      ExpectSameTimeline(window->iterations[0], *single, what);
      EXPECT_EQ(window->iteration_origin_s[0], 0.0);
      EXPECT_EQ(window->iteration_end_s[0], single->iteration_time_s) << what;
      // A reused Simulator gives the same results (its scratch holds earlier graphs).
      auto again = reused.Simulate(c.graph, c.schedule, cluster, sim);
      ASSERT_TRUE(again.ok()) << what;
      ExpectSameTimeline(*again, *single, what + " (reused)");
    }
  }
}

// An owned Simulator keeps its scratch between calls: after larger graphs, and after a call that
// failed midway (a deadlock: its iteration's scratch goes back unfinished), it gives what a
// fresh one gives.
TEST(Simulator, ReusedAfterLargerGraphsAndAFailedCallGivesWhatAFreshOneGives) {
  const spec::ClusterSpec cluster = TestCluster(1e-5);
  StageGraph deadlocked;
  deadlocked.AddGroup({});
  deadlocked.AddGroup({.first_gpu = 1});
  const StageId a0 = deadlocked.AddStage({.group = 0, .latency_s = 1e-3});
  const StageId a1 = deadlocked.AddStage({.group = 0, .microbatch = 1, .latency_s = 1e-3});
  const StageId b0 = deadlocked.AddStage({.group = 1, .latency_s = 1e-3});
  const StageId b1 = deadlocked.AddStage({.group = 1, .microbatch = 1, .latency_s = 1e-3});
  deadlocked.AddEdge(a0, b1);
  deadlocked.AddEdge(b0, a1);
  ASSERT_TRUE(deadlocked.Finalize().ok());
  const sched::Schedule contradicting{.order = {{a1, a0}, {b1, b0}}};
  const std::vector<Case> cases = TestCases();
  // Largest first, so that the later, smaller graphs run on scratch holding larger ones' entries.
  std::vector<const Case*> by_size;
  for (const Case& c : cases) by_size.push_back(&c);
  std::stable_sort(by_size.begin(), by_size.end(), [](const Case* a, const Case* b) {
    return a->graph.num_stages() > b->graph.num_stages();
  });
  Simulator reused;
  for (const Case* c : by_size) {
    const auto failed = reused.Simulate(deadlocked, contradicting, cluster);
    ASSERT_FALSE(failed.ok());
    EXPECT_THAT(failed.status().message(), ::testing::HasSubstr("deadlock"));
    auto again = reused.Simulate(c->graph, c->schedule, cluster);
    ASSERT_TRUE(again.ok()) << c->name << ": " << again.status().ToString();
    Simulator fresh;
    auto expected = fresh.Simulate(c->graph, c->schedule, cluster);
    ASSERT_TRUE(expected.ok()) << c->name;
    ExpectSameTimeline(*again, *expected, c->name);
  }
}

TEST(SimulateWindow, AGroupStartsItsNextIterationAfterItsOwnTailNotAtABarrier) {
  // Two groups in a pipeline (1F1B, p = 2, m = 4); group 1's optimizer step takes 10 ms, group
  // 0's 1 ms: group 0 starts iteration 1 right after its own tail, long before group 1's ends.
  auto graph = std::make_optional<StageGraph>();
  graph->AddGroup({.first_gpu = 0, .num_gpus = 1, .optimizer_bytes = 2'000'000'000});  // 1 ms
  graph->AddGroup({.first_gpu = 1, .num_gpus = 1, .optimizer_bytes = 20'000'000'000});  // 10 ms
  for (int mb = 0; mb < 4; ++mb) {
    const StageId f0 = graph->AddStage({.group = 0, .microbatch = mb, .latency_s = 1e-3});
    const StageId f1 = graph->AddStage({.group = 1, .microbatch = mb, .latency_s = 1e-3});
    const StageId b1 = graph->AddStage(
        {.group = 1, .microbatch = mb, .pass = Pass::kBackward, .latency_s = 2e-3});
    const StageId b0 = graph->AddStage(
        {.group = 0, .microbatch = mb, .pass = Pass::kBackward, .latency_s = 2e-3});
    graph->AddEdge(f0, f1, 1'000'000);
    graph->AddEdge(f1, b1);
    graph->AddEdge(b1, b0, 1'000'000);
    graph->AddEdge(f0, b0);
  }
  ASSERT_TRUE(graph->Finalize().ok());
  auto schedule = sched::MakeSchedule(ScheduleKind::kOneFOneB, *graph);
  ASSERT_TRUE(schedule.ok()) << schedule.status().ToString();
  const std::vector<WindowIteration> window(3, {.graph = &*graph, .schedule = &*schedule});
  auto result = SimulateWindow(window, TestCluster());
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  auto single = Simulate(*graph, *schedule, TestCluster());
  ASSERT_TRUE(single.ok());
  // Iteration 0 is the single iteration.
  ExpectSameTimeline(result->iterations[0], *single, "iteration 0");
  for (int k = 1; k < 3; ++k) {
    const double origin_s = result->iteration_origin_s[k];
    const Timeline& prev = result->iterations[k - 1];
    const double prev_origin_s = result->iteration_origin_s[k - 1];
    for (int g = 0; g < 2; ++g) {
      // The first stage starts no earlier than the group's own end of the iteration before.
      const double release_s = prev_origin_s + prev.groups[g].end_s;
      EXPECT_GE(origin_s + result->iterations[k].groups[g].first_start_s, release_s - 1e-15);
    }
    // Group 0 has no input at its first forward: it starts exactly at its release, before
    // group 1 has finished the iteration before (no barrier).
    EXPECT_DOUBLE_EQ(origin_s + result->iterations[k].groups[0].first_start_s,
                     prev_origin_s + prev.groups[0].end_s);
    EXPECT_LT(origin_s + result->iterations[k].groups[0].first_start_s,
              result->iteration_end_s[k - 1]);
    EXPECT_DOUBLE_EQ(origin_s, prev_origin_s + prev.groups[0].end_s);
  }
  // The carry: each group's end of the last iteration.
  for (int g = 0; g < 2; ++g) {
    EXPECT_DOUBLE_EQ(result->carry.group_free_s[g],
                     result->iteration_origin_s[2] + result->iterations[2].groups[g].end_s);
  }
}

TEST(SimulateWindow, AWindowContinuedFromItsCarryIsTheLongerWindow) {
  auto graph = sched::BuildPipelineGraph(Shape(4, 2, 8, false));
  ASSERT_TRUE(graph.ok());
  auto schedule = sched::MakeSchedule(ScheduleKind::kInterleavedOneFOneB, *graph);
  ASSERT_TRUE(schedule.ok());
  const std::vector<WindowIteration> four(4, {.graph = &*graph, .schedule = &*schedule});
  const std::span<const WindowIteration> two(four.data(), 2);
  auto whole = SimulateWindow(four, TestCluster());
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  auto first = SimulateWindow(two, TestCluster());
  ASSERT_TRUE(first.ok());
  auto second = SimulateWindow(two, TestCluster(), {}, first->carry);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  for (int k = 0; k < 4; ++k) {
    const WindowResult& part = k < 2 ? *first : *second;
    const int j = k % 2;
    EXPECT_DOUBLE_EQ(part.iteration_origin_s[j], whole->iteration_origin_s[k]) << k;
    EXPECT_DOUBLE_EQ(part.iteration_end_s[j], whole->iteration_end_s[k]) << k;
    for (size_t s = 0; s < graph->num_stages(); ++s) {
      ASSERT_DOUBLE_EQ(part.iterations[j].stages[s].start_s, whole->iterations[k].stages[s].start_s)
          << "iteration " << k << " stage " << s;
    }
  }
  EXPECT_EQ(second->carry.group_free_s, whole->carry.group_free_s);
}

TEST(SimulateWindow, SteadyStateOfOneGroupIsItsWorkPerIteration) {
  // One group: 3 stages of 2 ms, grad sync over dp = 4 on NVLink and a 1 ms optimizer step;
  // every iteration takes the same time, nothing idles.
  StageGraph g;
  g.AddGroup({.first_gpu = 0, .num_gpus = 2, .dp = 4, .dp_stride_gpus = 2,
              .grad_sync_bytes = 400'000'000, .optimizer_bytes = 2'000'000'000});
  for (int i = 0; i < 3; ++i) g.AddStage({.group = 0, .microbatch = i, .latency_s = 2e-3,
                                          .flops = 1e12});
  g.AddEdge(0, 1);
  g.AddEdge(1, 2);
  ASSERT_TRUE(g.Finalize().ok());
  const sched::Schedule s{.order = {{0, 1, 2}}};
  const std::vector<WindowIteration> window(5, {.graph = &g, .schedule = &s, .samples = 16,
                                                .tokens = 16384});
  auto result = SimulateWindow(window, TestCluster(), {.warmup_iterations = 2});
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  // 2·3/4 · 400 MB / 200 GB/s = 3 ms; 2 GB / 2 TB/s = 1 ms.
  const double per_iteration_s = 6e-3 + 3e-3 + 1e-3;
  const WindowSteadyState& steady = result->steady;
  EXPECT_EQ(steady.iterations, 3);
  EXPECT_NEAR(steady.begin_s, 2 * per_iteration_s, 1e-12);
  EXPECT_NEAR(steady.end_s, 5 * per_iteration_s, 1e-12);
  EXPECT_NEAR(steady.iteration_time_s, per_iteration_s, 1e-12);
  EXPECT_NEAR(steady.samples_per_s, 16 / per_iteration_s, 1e-6);
  EXPECT_NEAR(steady.tokens_per_s, 16384 / per_iteration_s, 1e-3);
  // 3 · 3 TFLOP · dp 4 over 8 GPUs at 1 PFLOP/s for 3 iterations.
  EXPECT_NEAR(steady.mfu, 3 * 3e12 * 4 / (8 * 1e15 * 3 * per_iteration_s), 1e-12);
  ASSERT_EQ(steady.group_idle_s.size(), 1u);
  EXPECT_NEAR(steady.group_idle_s[0], 0.0, 1e-12);
  for (int k = 0; k < 5; ++k) {
    EXPECT_NEAR(result->iteration_origin_s[k], k * per_iteration_s, 1e-12);
    EXPECT_NEAR(result->iterations[k].iteration_time_s, per_iteration_s, 1e-12);
    EXPECT_NEAR(result->iterations[k].stages[0].start_s, 0.0, 1e-12);
  }
  EXPECT_THAT(result->BriefReport(), HasSubstr("10.000 ms per iteration over 3 iterations"));
}

TEST(SimulateWindow, GradSyncSetMembersAreReleasedTogether) {
  StageGraph g;
  g.AddGroup({.first_gpu = 0, .num_gpus = 1, .optimizer_bytes = 2'000'000'000});
  g.AddGroup({.first_gpu = 1, .num_gpus = 1, .optimizer_bytes = 2'000'000'000});
  g.AddStage({.group = 0, .latency_s = 1e-3});
  g.AddStage({.group = 1, .latency_s = 5e-3});
  g.AddGradSync({.module = 0, .groups = {0, 1}, .bytes = 400'000'000});
  ASSERT_TRUE(g.Finalize().ok());
  const sched::Schedule s{.order = {{0}, {1}}};
  const std::vector<WindowIteration> window(2, {.graph = &g, .schedule = &s});
  auto result = SimulateWindow(window, TestCluster());
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  // Iteration 0: the set starts at 5 ms (the slower member), 2 ms ring, 1 ms optimizer: both
  // groups start iteration 1 at 8 ms.
  EXPECT_NEAR(result->iteration_origin_s[1], 8e-3, 1e-12);
  EXPECT_NEAR(result->iterations[1].stages[0].start_s, 0.0, 1e-12);
  EXPECT_NEAR(result->iterations[1].stages[1].start_s, 0.0, 1e-12);
  EXPECT_NEAR(result->iteration_end_s[1], 16e-3, 1e-12);
}

// ---- bounded buffers: closed forms ------------------------------------------------------------

// A producer group running `n` stages of `produce_s` that each put one item of `item_bytes`
// into a buffer of `capacity_items`, and a consumer group running `n` stages of `consume_s`
// that each get one item; no edges between them (the buffer is their only link).
struct ProducerConsumer {
  StageGraph graph;
  sched::Schedule schedule;
  std::vector<BufferUse> uses;
};

ProducerConsumer MakeProducerConsumer(int n, double produce_s, double consume_s,
                                      int64_t item_bytes) {
  ProducerConsumer pc;
  pc.graph.AddGroup({.first_gpu = 0, .num_gpus = 1, .label = "encoder"});
  pc.graph.AddGroup({.first_gpu = 1, .num_gpus = 1, .label = "llm"});
  pc.schedule.order.resize(2);
  for (int i = 0; i < n; ++i) {
    const StageId p = pc.graph.AddStage({.group = 0, .microbatch = i, .latency_s = produce_s});
    pc.schedule.order[0].push_back(p);
    pc.uses.push_back({.stage = p, .buffer = 0, .action = BufferAction::kPut, .bytes = item_bytes});
  }
  for (int i = 0; i < n; ++i) {
    const StageId c = pc.graph.AddStage({.group = 1, .microbatch = i, .latency_s = consume_s});
    pc.schedule.order[1].push_back(c);
    pc.uses.push_back({.stage = c, .buffer = 0, .action = BufferAction::kGet, .bytes = item_bytes});
  }
  EXPECT_TRUE(pc.graph.Finalize().ok());
  return pc;
}

// The model by hand, per item i (1-based), capacity k items: the producer computes item i from
// its put of item i − 1, E_i = P_{i−1} + a; it puts when item i − k has been taken,
// P_i = max(E_i, G_{i−k}); the consumer takes item j when its previous stage ended and the
// item is in, G_j = max(G_{j−1} + d, P_j) (G_0 + d = 0). Stall_i = P_i − E_i; starvation_j =
// G_j − (G_{j−1} + d).
struct HandModel {
  std::vector<double> stall_s, starvation_s, put_s, get_s;
};

HandModel ByHand(int n, double a, double d, int k) {
  HandModel m;
  m.put_s.assign(n + 1, 0.0);
  m.get_s.assign(n + 1, 0.0);
  m.stall_s.assign(n + 1, 0.0);
  m.starvation_s.assign(n + 1, 0.0);
  double consumer_free_s = 0;
  for (int i = 1; i <= n; ++i) {
    // Items are put and taken in order, so P_i needs only G_{i−k} (computed for i − k < i).
    const double e = m.put_s[i - 1] + a;
    m.put_s[i] = i - k >= 1 ? std::max(e, m.get_s[i - k]) : e;
    m.stall_s[i] = m.put_s[i] - e;
    m.get_s[i] = std::max(consumer_free_s, m.put_s[i]);
    m.starvation_s[i] = m.get_s[i] - consumer_free_s;
    consumer_free_s = m.get_s[i] + d;
  }
  return m;
}

void CheckAgainstHand(int n, double a, double d, int k) {
  const std::string what = fmt::format("n={} produce={} consume={} capacity={} items", n, a, d, k);
  const int64_t item = 1000;
  ProducerConsumer pc = MakeProducerConsumer(n, a, d, item);
  const WindowIteration it{.graph = &pc.graph, .schedule = &pc.schedule, .buffer_uses = pc.uses};
  auto result = SimulateWindow(
      {&it, 1}, TestCluster(), {.buffers = {{.name = "pool", .capacity_bytes = k * item}}});
  ASSERT_TRUE(result.ok()) << what << ": " << result.status().ToString();
  const HandModel hand = ByHand(n, a, d, k);
  const Timeline& t = result->iterations[0];
  double stall_s = 0, starvation_s = 0;
  for (int i = 1; i <= n; ++i) {
    const StageTiming& p = t.stages[pc.schedule.order[0][i - 1]];
    const StageTiming& c = t.stages[pc.schedule.order[1][i - 1]];
    EXPECT_NEAR(p.end_s, hand.put_s[i], 1e-12) << what << " put " << i;
    EXPECT_NEAR(p.end_s - (p.start_s + a), hand.stall_s[i], 1e-12) << what << " stall " << i;
    EXPECT_NEAR(c.start_s, hand.get_s[i], 1e-12) << what << " get " << i;
    stall_s += hand.stall_s[i];
    starvation_s += hand.starvation_s[i];
  }
  const BufferTimeline& b = result->buffers[0];
  EXPECT_NEAR(b.producer_stall_s, stall_s, 1e-12) << what;
  EXPECT_NEAR(b.consumer_starvation_s, starvation_s, 1e-12) << what;
  EXPECT_EQ(b.puts, n);
  EXPECT_EQ(b.gets, n);
  EXPECT_EQ(b.final_bytes, 0);
  EXPECT_LE(b.peak_bytes, k * item) << what;
  // The curve never leaves [0, capacity] and is in time order.
  for (size_t i = 1; i < b.occupancy.size(); ++i) {
    EXPECT_GE(b.occupancy[i].time_s, b.occupancy[i - 1].time_s) << what;
    EXPECT_GE(b.occupancy[i].bytes, 0) << what;
    EXPECT_LE(b.occupancy[i].bytes, k * item) << what;
  }
}

TEST(BoundedBuffer, AProducerAheadByMoreThanTheCapacityStalls) {
  // Producer 1 ms per item, consumer 2.5 ms, 2 items of room, 6 items. By hand: puts at 1, 2,
  // 3, 4, then 6 and 8.5 (the 5th and 6th wait for the 3rd and 4th gets): stalls 1 + 1.5 ms;
  // the consumer waits only for the first item (1 ms).
  const HandModel hand = ByHand(6, 1e-3, 2.5e-3, 2);
  EXPECT_NEAR(hand.put_s[5], 6e-3, 1e-15);
  EXPECT_NEAR(hand.put_s[6], 8.5e-3, 1e-15);
  EXPECT_NEAR(hand.stall_s[1] + hand.stall_s[2] + hand.stall_s[3] + hand.stall_s[4], 0, 1e-15);
  EXPECT_NEAR(hand.stall_s[5] + hand.stall_s[6], 2.5e-3, 1e-15);
  EXPECT_NEAR(hand.starvation_s[1], 1e-3, 1e-15);
  CheckAgainstHand(6, 1e-3, 2.5e-3, 2);
  // The producer is at most (capacity + 1) items ahead of the consumer's gets: with room for
  // all items it never stalls.
  for (int k : {1, 2, 3, 5}) CheckAgainstHand(12, 1e-3, 2.5e-3, k);
  const HandModel roomy = ByHand(12, 1e-3, 2.5e-3, 12);
  for (int i = 1; i <= 12; ++i) EXPECT_EQ(roomy.stall_s[i], 0.0);
  CheckAgainstHand(12, 1e-3, 2.5e-3, 12);
}

TEST(BoundedBuffer, AConsumerAheadOfTheProducerStarves) {
  // Producer 3 ms per item, consumer 1 ms: the consumer waits 3 ms for the first item and
  // 2 ms (3 − 1) for each later one; the producer never stalls, whatever the capacity.
  for (int k : {1, 2, 4}) {
    const HandModel hand = ByHand(5, 3e-3, 1e-3, k);
    EXPECT_NEAR(hand.starvation_s[1], 3e-3, 1e-15);
    for (int i = 2; i <= 5; ++i) EXPECT_NEAR(hand.starvation_s[i], 2e-3, 1e-15);
    for (int i = 1; i <= 5; ++i) EXPECT_EQ(hand.stall_s[i], 0.0);
    CheckAgainstHand(5, 3e-3, 1e-3, k);
  }
  // Equal rates: only the first item is waited for.
  CheckAgainstHand(6, 2e-3, 2e-3, 1);
}

TEST(BoundedBuffer, ItemsCarryAcrossIterationsAndWindows) {
  // Iteration k's producer fills the buffer the consumer of iteration k drains; with 3 items
  // in the carry the consumer of the first iteration does not wait for the first item.
  ProducerConsumer pc = MakeProducerConsumer(3, 1e-3, 1e-3, 1000);
  const std::vector<WindowIteration> window(
      2, {.graph = &pc.graph, .schedule = &pc.schedule, .buffer_uses = pc.uses});
  const WindowOptions options{.buffers = {{.name = "pool", .capacity_bytes = 6000}}};
  auto cold = SimulateWindow(window, TestCluster(), options);
  ASSERT_TRUE(cold.ok()) << cold.status().ToString();
  EXPECT_NEAR(cold->buffers[0].consumer_starvation_s, 1e-3, 1e-15);
  auto warm = SimulateWindow(window, TestCluster(), options, {.buffer_bytes = {3000}});
  ASSERT_TRUE(warm.ok()) << warm.status().ToString();
  EXPECT_EQ(warm->buffers[0].consumer_starvation_s, 0.0);
  EXPECT_EQ(warm->buffers[0].initial_bytes, 3000);
  EXPECT_EQ(warm->buffers[0].final_bytes, 3000);
  EXPECT_EQ(warm->carry.buffer_bytes, std::vector<int64_t>{3000});
  EXPECT_EQ(warm->buffers[0].occupancy.front().bytes, 3000);
  // Equal rates: each put (at the end of a 1 ms stage) meets a get at the same instant, so
  // the buffer holds 2 or 3 items.
  EXPECT_EQ(warm->buffers[0].peak_bytes, 3000);
  EXPECT_THAT(warm->BriefReport(), HasSubstr("buffer 'pool'"));
}

TEST(BoundedBuffer, AGetThatCanNeverBeServedIsADeadlock) {
  ProducerConsumer pc = MakeProducerConsumer(2, 1e-3, 1e-3, 1000);
  pc.uses.back().bytes = 2000;  // the last consumer wants 2 items; only 1 is left
  const WindowIteration it{.graph = &pc.graph, .schedule = &pc.schedule, .buffer_uses = pc.uses};
  auto result = SimulateWindow(
      {&it, 1}, TestCluster(), {.buffers = {{.name = "pool", .capacity_bytes = 4000}}});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(),
              HasSubstr("to get 2000 bytes from buffer 'pool' (holds 1000 bytes)"));
  // A put that never fits: 3 items into room for 1, and nothing takes them.
  ProducerConsumer only = MakeProducerConsumer(3, 1e-3, 1e-3, 1000);
  only.uses.resize(3);
  const WindowIteration put{.graph = &only.graph, .schedule = &only.schedule,
                            .buffer_uses = only.uses};
  auto full = SimulateWindow(
      {&put, 1}, TestCluster(), {.buffers = {{.name = "pool", .capacity_bytes = 1000}}});
  ASSERT_FALSE(full.ok());
  EXPECT_THAT(full.status().message(),
              HasSubstr("to put 1000 bytes into buffer 'pool' (holds 1000 of 1000 bytes)"));
}

TEST(SimulateWindow, RejectsInconsistentWindows) {
  auto a = sched::BuildPipelineGraph(Shape(2, 1, 2, false));
  auto b = sched::BuildPipelineGraph(Shape(3, 1, 2, false));
  ASSERT_TRUE(a.ok() && b.ok());
  auto sa = sched::MakeSchedule(ScheduleKind::kOneFOneB, *a);
  auto sb = sched::MakeSchedule(ScheduleKind::kOneFOneB, *b);
  ASSERT_TRUE(sa.ok() && sb.ok());
  const std::vector<WindowIteration> mixed = {{.graph = &*a, .schedule = &*sa},
                                              {.graph = &*b, .schedule = &*sb}};
  EXPECT_THAT(SimulateWindow(mixed, TestCluster()).status().message(),
              HasSubstr("iterations[1].graph has 3 groups"));
  const std::vector<WindowIteration> one = {{.graph = &*a, .schedule = &*sa}};
  EXPECT_THAT(SimulateWindow(one, TestCluster(), {.warmup_iterations = 1}).status().message(),
              HasSubstr("options.warmup_iterations = 1; must be < the number of iterations (1)"));
  EXPECT_THAT(SimulateWindow({}, TestCluster()).status().message(), HasSubstr("empty"));
  std::vector<WindowIteration> uses = one;
  uses[0].buffer_uses = {{.stage = 0, .buffer = 0, .action = BufferAction::kPut, .bytes = 10}};
  EXPECT_THAT(SimulateWindow(uses, TestCluster(), {.buffers = {{.name = "x", .capacity_bytes = 5}}})
                  .status()
                  .message(),
              HasSubstr("iterations[0].buffer_uses[0].bytes = 10; must be in (0, 5]"));
  EXPECT_THAT(SimulateWindow(uses, TestCluster()).status().message(),
              HasSubstr("iterations[0].buffer_uses[0].buffer = 0; must be in [0, 0)"));
  EXPECT_THAT(SimulateWindow(one, TestCluster(), {}, {.group_free_s = {1.0}}).status().message(),
              HasSubstr("carry.group_free_s has 1 entries; the graphs have 2 groups"));
  EXPECT_THAT(SimulateWindow(one, TestCluster(), {.buffers = {{.name = "x", .capacity_bytes = 0}}})
                  .status()
                  .message(),
              HasSubstr("options.buffers[0].capacity_bytes = 0; must be > 0"));
}

TEST(SimulateWindow, ADeadlockNamesTheIteration) {
  StageGraph g;
  g.AddGroup({.first_gpu = 0, .num_gpus = 1});
  g.AddGroup({.first_gpu = 1, .num_gpus = 1});
  const StageId a0 = g.AddStage({.group = 0, .latency_s = 1e-3});
  const StageId b0 = g.AddStage({.group = 1, .latency_s = 1e-3});
  const StageId a1 = g.AddStage({.group = 0, .latency_s = 1e-3});
  const StageId b1 = g.AddStage({.group = 1, .latency_s = 1e-3});
  g.AddEdge(a0, b1);
  g.AddEdge(b0, a1);
  ASSERT_TRUE(g.Finalize().ok());
  const sched::Schedule good{.order = {{a0, a1}, {b0, b1}}};
  const sched::Schedule bad{.order = {{a1, a0}, {b1, b0}}};
  const std::vector<WindowIteration> window = {{.graph = &g, .schedule = &good},
                                               {.graph = &g, .schedule = &bad}};
  auto result = SimulateWindow(window, TestCluster(), {.sim = {.validate_schedule = false}});
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("deadlock: iteration 1: group 0 waits at"));
}

// MSER: closed cases, and the suffix-sum form against the definition computed directly on
// 500 random series (a transient of random length and height on noise).
TEST(MserTruncation, FindsTheTransientAndFlagsADrift) {
  EXPECT_EQ(MserTruncation(std::vector<double>{}).warmup, 0);
  EXPECT_EQ(MserTruncation(std::vector<double>{5, 5, 5, 5, 5, 5}).warmup, 0);
  const auto two = MserTruncation(std::vector<double>{10, 9, 1, 1, 1, 1, 1, 1, 1, 1});
  EXPECT_EQ(two.warmup, 2);
  EXPECT_FALSE(two.at_cap);
  std::vector<double> drift;
  for (int i = 0; i < 10; ++i) drift.push_back(10.0 - i);  // never settles
  const auto d = MserTruncation(drift);
  EXPECT_EQ(d.warmup, 5);
  EXPECT_TRUE(d.at_cap);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  for (int trial = 0; trial < 500; ++trial) {
    const int n = 2 + static_cast<int>(u(rng) * 30);
    const int transient = static_cast<int>(u(rng) * n / 2);
    std::vector<double> x;
    for (int i = 0; i < n; ++i) x.push_back(1 + 0.1 * u(rng) + (i < transient ? 3 * u(rng) : 0));
    int best_d = 0;
    double best = std::numeric_limits<double>::infinity();
    for (int k = 0; k <= n / 2; ++k) {
      double mean = 0;
      for (int i = k; i < n; ++i) mean += x[i];
      mean /= n - k;
      double sq = 0;
      for (int i = k; i < n; ++i) sq += (x[i] - mean) * (x[i] - mean);
      const double se = sq / ((n - k) * static_cast<double>(n - k));
      if (se < best * (1 - 1e-9)) {
        best = se;
        best_d = k;
      }
    }
    EXPECT_EQ(MserTruncation(x).warmup, best_d) << "trial " << trial;
  }
}

}  // namespace
}  // namespace weft::sim
